//! A list page of a sharded kind: the plan for each cursor format (id order, a walk over one
//! layout, a walk continued in id order from its frontier) and the reads that answer it.

use lambda_http::{Body, Request, Response};
use serde::Serialize;

use crate::identity::cursor;
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{entity_sk_prefix, parse_entity_sk, PK, SK};
use crate::identity::shard::shard_for;
use crate::service::app::App;
use crate::service::error::ApiError;
use crate::service::http::{
    list_order, page_limit_up_to, page_response, query_param, ListOrder, PageCursor,
    MAX_PAGE_BYTES, MAX_SHARDED_LIMIT,
};
use crate::store::client::query::{string_attr, Item};
use crate::store::keys::open_item;
use crate::store::scatter::{
    approximate_bytes, gather, gather_across, walk, Fanout, GatheredPage, PageAsk, ShardedList,
};
use crate::store::tenancy::layout::Layout;

/// `GET /<kind>?limit=&cursor=&order=`: one page of `list` as `{items, nextCursor}`: in id order
/// (scatter-gather over every shard), or with `order=unordered` shard after shard (a walk). Pages
/// of up to [`MAX_SHARDED_LIMIT`] items.
///
/// While the tenant is being re-sharded both orders read both layouts ([`gather_across`]), in id
/// order: a walk's position in one layout's partitions means nothing in the other's. A walk begun
/// then goes on in id order after the migration ends (its cursors are bound to `&by=id`). A walk's
/// cursor is bound to its shard count and the layout's generation. One over the new count, made by a
/// container that saw the migration end, is honoured by one that still has it cached. Any other
/// walk cursor (made by a container that did not yet know of a migration, before a re-sharding, or
/// before walks were bound to the layout) is continued in id order from its [`Frontier`]: the items
/// a walk over N shards has returned are exactly those whose home shard among N comes before its
/// position, which the id alone decides, so the rest of the walk is every other item, each once, in
/// whichever layout it now is. Only [`plan_walk`] and [`Frontier::of_cursor`] read a cursor's format.
pub async fn list_page<V: Serialize>(
    app: &App,
    req: &Request,
    list: ShardedList,
    view: impl Fn(Item) -> Result<V, ApiError>,
    fanout: Fanout,
) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| {
        let limit = page_limit_up_to(req, MAX_SHARDED_LIMIT)?;
        Ok((limit, list_order(req)?, query_param(req, "cursor")?))
    };
    let ((limit, order, cursor), db) = app.tenant_request(req, parse).await?;
    let t = &db.tenant;
    let cursor = cursor.as_deref();
    let (layout, generation) = app.directory.layout_generation(&db).await?;
    let keys = &*app.cursor_keys()?;
    let plan = match order {
        // Id order: one route, whatever the layout or the cursor.
        ListOrder::ById => by_id(list.route().to_owned()),
        ListOrder::Unordered => {
            let at = Position {
                keys,
                tenant: t,
                cursor,
                list: &list,
            };
            plan_walk(&at, layout, generation)?
        }
    };
    let read = PageReader {
        db: &db,
        layout,
        list: &list,
        keys,
        fanout,
    };
    let (page, route) = read.read(plan, limit, cursor).await?;
    let cursor = PageCursor {
        keys,
        tenant: t,
        route: &route,
    };
    let key = db.key.as_deref();
    let items = page
        .items
        .into_iter()
        .map(|item| open_item(key, item))
        .collect::<Result<Vec<_>, _>>()?;
    page_response(items, page.next_cursor, view, cursor)
}

/// Where an unordered page starts: the tenant, its cursor (if any), and the list.
struct Position<'a> {
    keys: &'a cursor::CursorKeys,
    tenant: &'a TenantId,
    cursor: Option<&'a str>,
    list: &'a ShardedList,
}

impl Position<'_> {
    /// Whether the cursor was signed for `route`.
    fn bound_to(&self, route: &str) -> bool {
        self.cursor
            .is_some_and(|c| cursor::decode(self.keys, self.tenant, route, c, |_, _| true).is_ok())
    }
}

fn by_id(route: String) -> PageRead {
    PageRead::ById {
        route,
        frontier: None,
        from_start: false,
    }
}

/// How an unordered page of the list is read, from its cursor and the tenant's layout: every
/// cursor format a walk was ever given is read here, the current ones by the arms below and every
/// older one by [`Frontier::of_cursor`], which continues it in id order (never in its own format,
/// so an old format is not issued again).
fn plan_walk(at: &Position<'_>, layout: Layout, generation: u32) -> Result<PageRead, ApiError> {
    let list = at.list;
    let walk_by_id = format!("{}?order=unordered&by=id", list.route());
    Ok(match layout {
        _ if at.bound_to(&walk_by_id) => by_id(walk_by_id),
        Layout::Stable(n)
            if at.cursor.is_none() || at.bound_to(&walk_over(list, n, generation)) =>
        {
            PageRead::Walk(n, walk_over(list, n, generation))
        }
        // A walk of the layout after this migration: a container that saw the migration end made
        // this cursor, while this one still has the migration cached.
        Layout::Migrating { to, .. } if at.bound_to(&walk_over(list, to, generation + 1)) => {
            PageRead::Walk(to, walk_over(list, to, generation + 1))
        }
        Layout::Migrating { .. } if at.cursor.is_none() => by_id(walk_by_id),
        _ => {
            let raw = at.cursor.ok_or(cursor::InvalidCursor)?;
            let (frontier, from_start) = Frontier::of_cursor(
                at.keys,
                at.tenant,
                raw,
                list,
                &walk_by_id,
                layout,
                generation,
            )
            .ok_or(cursor::InvalidCursor)?;
            PageRead::ById {
                route: frontier.route(&walk_by_id),
                frontier: Some(frontier),
                from_start,
            }
        }
    })
}

/// What every read of one list page shares: the tenant's client and layout, the list, the cursor
/// keys and the fan-out budget.
struct PageReader<'a> {
    db: &'a crate::store::client::scoped::TenantDb,
    layout: Layout,
    list: &'a ShardedList,
    keys: &'a cursor::CursorKeys,
    fanout: Fanout,
}

impl PageReader<'_> {
    /// Reads the page `plan` says, and answers it with the route its next cursor is bound to.
    async fn read(
        &self,
        plan: PageRead,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<(GatheredPage, String), ApiError> {
        match plan {
            PageRead::ById {
                route,
                frontier,
                from_start,
            } => {
                let cursor = if from_start { None } else { cursor };
                let read = ByIdRead {
                    reader: self,
                    route: &route,
                };
                let page = match &frontier {
                    None => read.page(limit, cursor).await?,
                    Some(frontier) => read.page_after(frontier, limit, cursor).await?,
                };
                Ok((page, route))
            }
            PageRead::Walk(shards, route) => {
                let mut listing = self.list.over(&self.db.tenant, shards);
                listing.route = route.clone();
                let ask = PageAsk::new(self.keys, limit, cursor).within_bytes(MAX_PAGE_BYTES);
                let page = walk(self.db, &listing, ask).await?;
                Ok((page, route))
            }
        }
    }
}

/// A walk's route: its position is a partition of one layout, so its cursor names the shard count
/// and the layout's generation (a count can come back: 4 → 16 → 4).
fn walk_over(list: &ShardedList, shards: u32, generation: u32) -> String {
    format!(
        "{}?order=unordered&shards={shards}&generation={generation}",
        list.route()
    )
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
    /// The tenant, its layout, the list, the cursor keys and the fan-out: the page's reader's.
    reader: &'a PageReader<'a>,
    route: &'a str,
}

impl ByIdRead<'_> {
    async fn page(&self, limit: u32, cursor: Option<&str>) -> Result<GatheredPage, ApiError> {
        self.page_within(limit, cursor, MAX_PAGE_BYTES).await
    }

    /// [`ByIdRead::page`] within `byte_budget` bytes of items.
    async fn page_within(
        &self,
        limit: u32,
        cursor: Option<&str>,
        byte_budget: usize,
    ) -> Result<GatheredPage, ApiError> {
        let t = &self.reader.db.tenant;
        let over = |shards: u32| {
            let mut listing = self.reader.list.over(t, shards);
            listing.route = self.route.to_owned();
            listing
        };
        // Within the answer's bytes: a page of large items stops before it, never reading (and
        // holding) a thousand of them.
        let ask = PageAsk::new(self.reader.keys, limit, cursor)
            .with_fanout(self.reader.fanout)
            .within_bytes(byte_budget);
        Ok(match self.reader.layout {
            Layout::Stable(n) => gather(self.reader.db, &over(n), ask).await?,
            Layout::Migrating { from, to, .. } => {
                let (old, new) = (over(from), over(to));
                gather_across(self.reader.db, (&old, from), (&new, to), ask).await?
            }
        })
    }

    /// [`ByIdRead::page`] without the items `frontier`'s walk has returned: reads on until the page
    /// is full (in items or bytes: each read within what the page still holds), the list ends, or
    /// [`FRONTIER_READS_PER_PAGE`] reads were made.
    async fn page_after(
        &self,
        frontier: &Frontier,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<GatheredPage, ApiError> {
        let t = &self.reader.db.tenant;
        let mut items: Vec<Item> = Vec::new();
        let mut bytes = 0usize;
        let mut next = cursor.map(str::to_owned);
        for _ in 0..FRONTIER_READS_PER_PAGE {
            let want = limit - items.len() as u32;
            let room = MAX_PAGE_BYTES - bytes;
            let page = Box::pin(self.page_within(want, next.as_deref(), room)).await?;
            for item in page.items {
                if !frontier.walked(t, self.reader.list.kind(), &item) {
                    bytes += approximate_bytes(&item);
                    items.push(item);
                }
            }
            next = page.next_cursor;
            if next.is_none() || items.len() as u32 >= limit || bytes >= MAX_PAGE_BYTES {
                break;
            }
        }
        Ok(GatheredPage {
            items,
            next_cursor: next,
        })
    }
}
