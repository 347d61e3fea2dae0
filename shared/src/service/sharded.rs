//! The handler bodies every write-sharded kind shares (products, employees, departments): read one
//! item by its id on its computed shard, and list a page over all shards, in whichever layout the
//! tenant's items are (a re-sharding moves them). A kind supplies its key function and its view;
//! the routes differ only in those.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;

use crate::identity::clock::rfc3339;
use crate::identity::cursor::{self, Key};
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{entity_sk_prefix, parse_entity_sk, CATALOG, GSI1, PK, SK};
use crate::identity::shard::shard_for;
use crate::service::app::App;
use crate::service::error::ApiError;
use crate::service::http::{
    json_body, json_response, list_order, page_limit_up_to, page_response, path_entity_id,
    query_param, ListOrder, PageCursor, MAX_PAGE_BYTES, MAX_SHARDED_LIMIT,
};
use crate::store::client::items::view_from_item;
use crate::store::client::query::{string_attr, u64_attr, Item};
use crate::store::client::scoped::TenantDb;
use crate::store::scatter::{
    gather, gather_across, walk, Fanout, GatheredPage, PageAsk, ShardedList,
};
use crate::store::tenancy::layout::{self, Keys, Layout, UPDATED_AT_MS};

/// One item of a write-sharded kind as a request names it, read in the order every such route
/// answers ([`App::tenant_request`]: the path's id `param`, then what `parse` takes from the request,
/// then the caller's scoped client), with the tenant's layout and the item's keys in it.
pub struct ItemRequest<P> {
    pub id: EntityId,
    pub input: P,
    pub db: TenantDb,
    pub layout: Layout,
    pub keys: Keys,
}

impl<P> ItemRequest<P> {
    /// The item of the path's `param`, at `key(tenant, id, shards)`.
    pub async fn read(
        app: &App,
        req: &Request,
        param: &str,
        parse: impl FnOnce(&Request) -> Result<P, ApiError>,
        key: impl Fn(&TenantId, &EntityId, u32) -> Key,
    ) -> Result<Self, ApiError> {
        let parse = |req: &Request| Ok((path_entity_id(req, param)?, parse(req)?));
        let ((id, input), db) = app.tenant_request(req, parse).await?;
        let layout = app.directory.layout(&db).await?;
        let keys = Keys::of(layout, |n| key(&db.tenant, &id, n));
        Ok(Self {
            id,
            input,
            db,
            layout,
            keys,
        })
    }
}

/// `GET /<kind>/{param}`: 200 with the item's view, or 404 with `not_found`. One GetItem (two at
/// once while the tenant is being re-sharded: [`crate::store::tenancy::layout`]), or none when the
/// container's read cache holds the item ([`crate::store::tenancy::read_cache`], off by default).
pub async fn get_by_id<V: Serialize>(
    app: &App,
    req: &Request,
    param: &str,
    key: impl Fn(&TenantId, &EntityId, u32) -> Key,
    view: impl Fn(Item) -> Result<V, ApiError>,
    not_found: &str,
) -> Result<Response<Body>, ApiError> {
    let ItemRequest {
        db, layout, keys, ..
    } = ItemRequest::read(app, req, param, |_| Ok(()), key).await?;
    let t = &db.tenant;
    let now = app.clock.now_millis();
    if let Some(item) = app.read_cache.get(t, &keys.write, now) {
        return Ok(json_response(StatusCode::OK, &view(item)?));
    }
    let item = layout::get(&db, layout, &keys)
        .await?
        .ok_or_else(|| ApiError::NotFound(not_found.to_owned()))?;
    app.read_cache.put(t, &keys.write, &item, now);
    Ok(json_response(StatusCode::OK, &view(item)?))
}

/// The attributes of a stored item that are no field of its view: its keys and bookkeeping.
const BOOKKEEPING: [&str; 7] = [PK, SK, GSI1, CATALOG, "kind", "tenantId", UPDATED_AT_MS];

/// An item as a route answers it when it has no view type of its own (a route `pooltable new route`
/// scaffolded): its attributes as JSON, without keys and bookkeeping.
pub fn stored_view(mut item: Item) -> Result<serde_json::Value, ApiError> {
    item.retain(|name, _| !BOOKKEEPING.contains(&name.as_str()));
    Ok(view_from_item(item)?)
}

/// Reads of an item that [`set_fields`] makes before its write is refused as a conflict (409).
const SET_ATTEMPTS: usize = 4;

/// `PUT /<kind>/{param}/…` `{field: value, …}`: sets the body's fields on the item, keeping its
/// other attributes; 200 with [`stored_view`], or 404 when there is no item. A consistent read of
/// the item wherever the layout has it ([`layout::locate`]), then its write through the layout
/// ([`layout::put_along`]: the new shard while the tenant is being re-sharded, the copy at the
/// other key deleted in the same transaction), on condition that nothing wrote it since the read
/// (its `updatedAtMs`); otherwise it reads again, up to [`SET_ATTEMPTS`] times, then 409. In a stable
/// layout: one consistent GetItem and one TransactWriteItems. A delete between the read and the
/// write is not seen: the item is written back.
pub async fn set_fields(
    app: &App,
    req: &Request,
    param: &str,
    key: impl Fn(&TenantId, &EntityId, u32) -> Key,
    not_found: &str,
) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| settable_fields(req, param);
    let ItemRequest {
        input: fields,
        db,
        layout,
        keys,
        ..
    } = ItemRequest::read(app, req, param, parse, key).await?;
    let t = &db.tenant;
    for _ in 0..SET_ATTEMPTS {
        let (_, mut item) = layout::locate(&db, layout, &keys)
            .await?
            .ok_or_else(|| ApiError::NotFound(not_found.to_owned()))?;
        let read_at = u64_attr(&item, UPDATED_AT_MS).unwrap_or(0);
        let now = app.clock.now_millis();
        item.retain(|name, _| name != PK && name != SK);
        item.extend(fields.clone());
        item.insert("updatedAt".into(), AttributeValue::S(rfc3339(now)));
        item.insert(UPDATED_AT_MS.into(), AttributeValue::N(now.to_string()));
        let written =
            layout::put_along(&db, layout, &keys, item.clone(), Vec::new(), Some(read_at)).await?;
        match written {
            layout::Put::Written { .. } => {
                app.read_cache.forget(t, &keys.write);
                return Ok(json_response(StatusCode::OK, &stored_view(item)?));
            }
            // Written since it was read: read it again.
            layout::Put::Superseded => continue,
            layout::Put::Refused { .. } => {
                return Err(ApiError::Internal(
                    "a write with nothing along was refused".into(),
                ))
            }
        }
    }
    Err(ApiError::Conflict(
        "The item changed while it was being written; retry.".into(),
    ))
}

/// The body of a [`set_fields`] request as attributes: 400 when it sets what the store keeps (keys,
/// bookkeeping, the id `param`, `updatedAt`) or what DynamoDB cannot store.
fn settable_fields(req: &Request, param: &str) -> Result<Item, ApiError> {
    let body: serde_json::Map<String, serde_json::Value> = json_body(req)?;
    if let Some(name) = body
        .keys()
        .find(|k| BOOKKEEPING.contains(&k.as_str()) || *k == param || *k == "updatedAt")
    {
        return Err(ApiError::bad_request(
            name,
            format!("{name} is kept by the store, not set by a request"),
        ));
    }
    serde_dynamo::to_item(&body)
        .map_err(|e| ApiError::bad_request("body", format!("not storable: {e}")))
}

/// `GET /<kind>?limit=&cursor=&order=`: one page of `list` as `{items, nextCursor}`: in id order
/// (scatter-gather over every shard), or with `order=unordered` shard after shard (a walk). Pages
/// of up to [`MAX_SHARDED_LIMIT`] items.
///
/// While the tenant is being re-sharded both orders read both layouts ([`gather_across`]), in id
/// order: a walk's position in one layout's partitions means nothing in the other's. A walk begun
/// then goes on in id order after the migration ends (its cursors are bound to `&by=id`). A walk's
/// cursor is bound to its shard count and the layout's generation. One over the new count, made by a
/// container that saw the migration end, is honoured by one that still has it cached. Any other
/// walk cursor (made by a container that did not yet know of a migration, or before a re-sharding)
/// is continued in id order from its [`Frontier`]: the items a walk over N shards has returned are
/// exactly those whose home shard among N comes before its position, which the id alone decides, so
/// the rest of the walk is every other item, each once, in whichever layout it now is.
pub async fn list_page<V: Serialize>(
    app: &App,
    req: &Request,
    list: ShardedList,
    view: impl Fn(Item) -> Result<V, ApiError>,
    fanout: Fanout,
) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| {
        let limit = page_limit_up_to(req, MAX_SHARDED_LIMIT)?;
        Ok((limit, list_order(req)?, query_param(req, "cursor")))
    };
    let ((limit, order, cursor), db) = app.tenant_request(req, parse).await?;
    let t = &db.tenant;
    let cursor = cursor.as_deref();
    let (layout, generation) = app.directory.layout_generation(&db).await?;
    let keys = &*app.cursor_keys()?;
    let bound_to = |route: &str| {
        cursor.is_some_and(|c| cursor::decode(keys, t, route, c, |_, _| true).is_ok())
    };
    let walk_by_id = format!("{}?order=unordered&by=id", list.route());
    let by_id = |route: String| PageRead::ById {
        route,
        frontier: None,
        from_start: false,
    };
    let plan = match (order, layout) {
        (ListOrder::ById, _) => by_id(list.route().to_owned()),
        (ListOrder::Unordered, _) if bound_to(&walk_by_id) => by_id(walk_by_id),
        (ListOrder::Unordered, Layout::Stable(n))
            if cursor.is_none() || bound_to(&walk_over(&list, n, generation)) =>
        {
            PageRead::Walk(n, walk_over(&list, n, generation))
        }
        // A walk cursor made before walks were bound to the layout is this layout's if the tenant
        // was never re-sharded (re-sharding came with that binding).
        (ListOrder::Unordered, Layout::Stable(n))
            if generation == 0 && bound_to(&legacy_walk(&list)) =>
        {
            PageRead::Walk(n, legacy_walk(&list))
        }
        // A walk of the layout after this migration: a container that saw the migration end made
        // this cursor, while this one still has the migration cached.
        (ListOrder::Unordered, Layout::Migrating { to, .. })
            if bound_to(&walk_over(&list, to, generation + 1)) =>
        {
            PageRead::Walk(to, walk_over(&list, to, generation + 1))
        }
        (ListOrder::Unordered, Layout::Migrating { .. }) if cursor.is_none() => by_id(walk_by_id),
        (ListOrder::Unordered, _) => {
            let raw = cursor.ok_or(cursor::InvalidCursor)?;
            let (frontier, from_start) =
                Frontier::of_cursor(keys, t, raw, &list, &walk_by_id, layout, generation)
                    .ok_or(cursor::InvalidCursor)?;
            PageRead::ById {
                route: frontier.route(&walk_by_id),
                frontier: Some(frontier),
                from_start,
            }
        }
    };
    let (page, route) = match plan {
        PageRead::ById {
            route,
            frontier,
            from_start,
        } => {
            let cursor = if from_start { None } else { cursor };
            let read = ByIdRead {
                db: &db,
                layout,
                list: &list,
                route: &route,
                keys,
                fanout,
            };
            let page = match &frontier {
                None => read.page(limit, cursor).await?,
                Some(frontier) => read.page_after(frontier, limit, cursor).await?,
            };
            (page, route)
        }
        PageRead::Walk(shards, route) => {
            let mut listing = list.over(t, shards);
            listing.route = route.clone();
            let ask = PageAsk::new(keys, limit, cursor).within_bytes(MAX_PAGE_BYTES);
            let page = walk(&db, &listing, ask).await?;
            (page, route)
        }
    };
    let cursor = PageCursor {
        keys,
        tenant: t,
        route: &route,
    };
    page_response(page.items, page.next_cursor, view, cursor)
}

/// A walk's route: its position is a partition of one layout, so its cursor names the shard count
/// and the layout's generation (a count can come back: 4 → 16 → 4).
fn walk_over(list: &ShardedList, shards: u32, generation: u32) -> String {
    format!(
        "{}?order=unordered&shards={shards}&generation={generation}",
        list.route()
    )
}

/// The route walks were bound to before they were bound to the layout.
fn legacy_walk(list: &ShardedList) -> String {
    format!("{}?order=unordered", list.route())
}

/// How a list page is read: in id order, bound to a route (after a walk's [`Frontier`], and then
/// from the start of the id order when the cursor was the walk's own); or as a walk over a shard
/// count.
enum PageRead {
    ById {
        route: String,
        frontier: Option<Frontier>,
        from_start: bool,
    },
    Walk(u32, String),
}

/// How far a walk over `shards` shards had come: every item whose home shard among `shards` is
/// before `shard`, or is `shard` with an id up to `after`, has been returned; no other item has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontier {
    shards: u32,
    shard: u32,
    after: Option<String>,
}

/// Id-order reads that skip a frontier's items go on for at most this many reads per page (then the
/// page is short, with a cursor), so a page costs a bounded number of reads.
const FRONTIER_READS_PER_PAGE: usize = 8;

impl Frontier {
    /// The route of the walk's id-order continuation, which carries the frontier (the route is
    /// signed with the cursor).
    fn route(&self, walk_by_id: &str) -> String {
        format!(
            "{walk_by_id}&walked={}:{}:{}",
            self.shards,
            self.shard,
            self.after.as_deref().unwrap_or("")
        )
    }

    /// The frontier `raw` carries, and whether the id order starts from its beginning (`raw` was a
    /// walk's own cursor) or from `raw`'s position (it is already a continuation's). A walk cursor
    /// of a later generation than this container knows is refused: it was made after items moved
    /// to a layout this container does not read.
    fn of_cursor(
        keys: &cursor::CursorKeys,
        t: &TenantId,
        raw: &str,
        list: &ShardedList,
        walk_by_id: &str,
        layout: Layout,
        generation: u32,
    ) -> Option<(Self, bool)> {
        let route = cursor::signed_route(keys, t, raw).ok()?;
        if let Some(rest) = route.strip_prefix(&format!("{walk_by_id}&walked=")) {
            let mut parts = rest.splitn(3, ':');
            let shards: u32 = parts.next()?.parse().ok()?;
            let shard: u32 = parts.next()?.parse().ok()?;
            let after = match parts.next()? {
                "" => None,
                id => Some(EntityId::parse(id).ok()?.to_string()),
            };
            (shard < shards).then_some((
                Self {
                    shards,
                    shard,
                    after,
                },
                false,
            ))
        } else {
            let shards = match route.strip_prefix(&format!("{}?order=unordered", list.route()))? {
                "" if generation == 0 => match layout {
                    Layout::Stable(n) => n,
                    Layout::Migrating { from, .. } => from,
                },
                rest => {
                    let (shards, made_at) =
                        rest.strip_prefix("&shards=")?.split_once("&generation=")?;
                    if made_at.parse::<u32>().ok()? > generation {
                        return None;
                    }
                    shards.parse().ok()?
                }
            };
            let listing = list.over(t, shards);
            let partitions = &listing.groups[0];
            let start_marker = entity_sk_prefix(t, list.kind());
            let key = cursor::decode(keys, t, &route, raw, |pk, sk| {
                partitions.iter().any(|p| p == pk) && sk.starts_with(&start_marker)
            })
            .ok()?;
            let (pk, sk) = (key.get(PK)?.as_s().ok()?, key.get(SK)?.as_s().ok()?);
            let shard = partitions.iter().position(|p| p == pk)? as u32;
            let after = match sk == &start_marker {
                true => None,
                false => Some(parse_entity_sk(t, list.kind(), sk).ok()?.to_string()),
            };
            Some((
                Self {
                    shards,
                    shard,
                    after,
                },
                true,
            ))
        }
    }

    /// Whether the walk has returned `item` (of the listed kind).
    fn walked(&self, t: &TenantId, kind: &str, item: &Item) -> bool {
        let Some(sk) = string_attr(item, SK) else {
            return false;
        };
        let Ok(id) = parse_entity_sk(t, kind, &sk) else {
            return false;
        };
        let home = shard_for(id.as_str(), self.shards);
        home < self.shard
            || (home == self.shard && self.after.as_deref().is_some_and(|a| id.as_str() <= a))
    }
}

/// An id-order page of a sharded list in the tenant's layout, one or both.
struct ByIdRead<'a> {
    db: &'a crate::store::client::scoped::TenantDb,
    layout: Layout,
    list: &'a ShardedList,
    route: &'a str,
    keys: &'a cursor::CursorKeys,
    fanout: Fanout,
}

impl ByIdRead<'_> {
    async fn page(&self, limit: u32, cursor: Option<&str>) -> Result<GatheredPage, ApiError> {
        let t = &self.db.tenant;
        let over = |shards: u32| {
            let mut listing = self.list.over(t, shards);
            listing.route = self.route.to_owned();
            listing
        };
        let ask = PageAsk::new(self.keys, limit, cursor).with_fanout(self.fanout);
        Ok(match self.layout {
            Layout::Stable(n) => gather(self.db, &over(n), ask).await?,
            Layout::Migrating { from, to, .. } => {
                let (old, new) = (over(from), over(to));
                gather_across(self.db, (&old, from), (&new, to), ask).await?
            }
        })
    }

    /// [`ByIdRead::page`] without the items `frontier`'s walk has returned: reads on until the page
    /// is full, the list ends, or [`FRONTIER_READS_PER_PAGE`] reads were made.
    async fn page_after(
        &self,
        frontier: &Frontier,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<GatheredPage, ApiError> {
        let t = &self.db.tenant;
        let mut items: Vec<Item> = Vec::new();
        let mut next = cursor.map(str::to_owned);
        for _ in 0..FRONTIER_READS_PER_PAGE {
            let want = limit - items.len() as u32;
            let page = Box::pin(self.page(want, next.as_deref())).await?;
            items.extend(
                page.items
                    .into_iter()
                    .filter(|i| !frontier.walked(t, self.list.kind(), i)),
            );
            next = page.next_cursor;
            if next.is_none() || items.len() as u32 >= limit {
                break;
            }
        }
        Ok(GatheredPage {
            items,
            next_cursor: next,
        })
    }
}
