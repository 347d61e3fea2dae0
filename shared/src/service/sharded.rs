//! The handler bodies every write-sharded kind shares (products, employees, departments): read one
//! item by its id on its computed shard, and list a page over all shards, in whichever layout the
//! tenant's items are (a re-sharding moves them). A kind supplies its key function and its view;
//! the routes differ only in those.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;

use crate::identity::cursor::{self, Key};
use crate::identity::ids::{EntityId, TenantId};
use crate::service::app::App;
use crate::service::error::ApiError;
use crate::service::http::{
    json_response, list_order, page_limit_up_to, page_response, path_entity_id, query_param,
    ListOrder, PageCursor, MAX_PAGE_BYTES, MAX_SHARDED_LIMIT,
};
use crate::store::layout::{self, Keys, Layout};
use crate::store::query::Item;
use crate::store::scatter::{gather, gather_across, walk, Fanout, ShardedList};

/// `GET /<kind>/{param}`: 200 with the item's view, or 404 with `not_found`. One GetItem (two at
/// once while the tenant is being re-sharded: [`crate::store::layout`]), or none when the
/// container's read cache holds the item ([`crate::store::read_cache`], off by default).
pub async fn get_by_id<V: Serialize>(
    app: &App,
    req: &Request,
    param: &str,
    key: impl Fn(&TenantId, &EntityId, u32) -> Key,
    view: impl Fn(Item) -> Result<V, ApiError>,
    not_found: &str,
) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(req)?;
    let id = path_entity_id(req, param)?;
    let db = app.db(&caller.tenant).await?;
    let layout = app.directory.layout(&db).await?;
    let keys = Keys::of(layout, |n| key(&caller.tenant, &id, n));
    let now = app.clock.now_millis();
    if let Some(item) = app.read_cache.get(&caller.tenant, &keys.write, now) {
        return Ok(json_response(StatusCode::OK, &view(item)?));
    }
    let item = layout::get(&db, layout, &keys)
        .await?
        .ok_or_else(|| ApiError::NotFound(not_found.to_owned()))?;
    app.read_cache.put(&caller.tenant, &keys.write, &item, now);
    Ok(json_response(StatusCode::OK, &view(item)?))
}

/// `GET /<kind>?limit=&cursor=&order=`: one page of `list` as `{items, nextCursor}`: in id order
/// (scatter-gather over every shard), or with `order=unordered` shard after shard (a walk). Pages
/// of up to [`MAX_SHARDED_LIMIT`] items.
///
/// While the tenant is being re-sharded both orders read both layouts ([`gather_across`]), in id
/// order: a walk's position in one layout's partitions means nothing in the other's. A walk begun
/// then goes on in id order after the migration ends (its cursors are bound to `&by=id`). A walk's
/// cursor is bound to its shard count: one over the new count, made by a container that saw the
/// migration end, is honoured by one that still has it cached; one from before a re-sharding is
/// refused (400), so the client starts again instead of silently missing moved items.
pub async fn list_page<V: Serialize>(
    app: &App,
    req: &Request,
    list: ShardedList<'_>,
    view: impl Fn(Item) -> Result<V, ApiError>,
    fanout: Fanout,
) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(req)?;
    let t = &caller.tenant;
    let limit = page_limit_up_to(req, MAX_SHARDED_LIMIT)?;
    let order = list_order(req)?;
    let cursor = query_param(req, "cursor");
    let cursor = cursor.as_deref();
    let db = app.db(t).await?;
    let (layout, generation) = app.directory.layout_generation(&db).await?;
    let keys = &app.settings.cursor_keys;
    let over = |shards: u32, route: &str| {
        let mut listing = list.over(t, shards);
        listing.route = route.to_owned();
        listing
    };
    let bound_to = |route: &str| {
        cursor.is_some_and(|c| cursor::decode(keys, t, route, c, |_, _| true).is_ok())
    };
    let walk_by_id = format!("{}?order=unordered&by=id", list.route);
    // A walk's position is a partition of one layout: its cursor names the shard count and the
    // layout's generation (a count can come back: 4 → 16 → 4).
    let walk_over = |n: u32, generation: u32| {
        format!(
            "{}?order=unordered&shards={n}&generation={generation}",
            list.route
        )
    };
    let plan = match (order, layout) {
        (ListOrder::ById, _) => PageRead::ById(list.route.to_owned()),
        (ListOrder::Unordered, _) if bound_to(&walk_by_id) => PageRead::ById(walk_by_id),
        (ListOrder::Unordered, Layout::Stable(n)) => {
            // A walk cursor made before walks were bound to the layout is this layout's if the
            // tenant was never re-sharded (re-sharding came with that binding).
            let legacy = format!("{}?order=unordered", list.route);
            let route = if generation == 0 && bound_to(&legacy) {
                legacy
            } else {
                walk_over(n, generation)
            };
            PageRead::Walk(n, route)
        }
        // A walk of the layout after this migration: a container that saw the migration end made
        // this cursor, while this one still has the migration cached.
        (ListOrder::Unordered, Layout::Migrating { to, .. })
            if bound_to(&walk_over(to, generation + 1)) =>
        {
            PageRead::Walk(to, walk_over(to, generation + 1))
        }
        (ListOrder::Unordered, Layout::Migrating { .. }) => PageRead::ById(walk_by_id),
    };
    let (page, route) = match (plan, layout) {
        (PageRead::ById(route), Layout::Stable(n)) => {
            let listing = over(n, &route);
            let page = gather(&db, &listing, keys, limit, cursor, fanout).await?;
            (page, route)
        }
        (PageRead::ById(route), Layout::Migrating { from, to, .. }) => {
            let (old, new) = (over(from, &route), over(to, &route));
            let page = gather_across(&db, (&old, from), (&new, to), keys, limit, cursor).await?;
            (page, route)
        }
        (PageRead::Walk(shards, route), _) => {
            let listing = over(shards, &route);
            let page = walk(&db, &listing, keys, limit, MAX_PAGE_BYTES, cursor).await?;
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

/// How a list page is read: in id order, bound to a route; or as a walk over a shard count.
enum PageRead {
    ById(String),
    Walk(u32, String),
}
