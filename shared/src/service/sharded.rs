//! The handler bodies every write-sharded kind shares (products, employees, departments): read one
//! item by its id on its computed shard, and list a page over all shards. A kind supplies its key
//! function and its view; the routes differ only in those.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;

use crate::identity::cursor::Key;
use crate::identity::ids::{EntityId, TenantId};
use crate::service::app::App;
use crate::service::error::ApiError;
use crate::service::http::{
    json_response, list_order, page_limit_up_to, page_response, path_entity_id, query_param,
    ListOrder, PageCursor, MAX_PAGE_BYTES, MAX_SHARDED_LIMIT,
};
use crate::store::items::get_item;
use crate::store::query::Item;
use crate::store::scatter::{gather, walk, Fanout, ShardedList};

/// `GET /<kind>/{param}`: 200 with the item's view, or 404 with `not_found`. One GetItem.
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
    let shards = app.directory.shard_count(&db).await?;
    let item = get_item(&db, key(&caller.tenant, &id, shards))
        .await?
        .ok_or_else(|| ApiError::NotFound(not_found.to_owned()))?;
    Ok(json_response(StatusCode::OK, &view(item)?))
}

/// `GET /<kind>?limit=&cursor=&order=`: one page of `list` as `{items, nextCursor}`: in id order
/// (scatter-gather over every shard), or with `order=unordered` shard after shard (a walk). Pages
/// of up to [`MAX_SHARDED_LIMIT`] items.
pub async fn list_page<V: Serialize>(
    app: &App,
    req: &Request,
    list: ShardedList<'_>,
    view: impl Fn(Item) -> Result<V, ApiError>,
    fanout: Fanout,
) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(req)?;
    let limit = page_limit_up_to(req, MAX_SHARDED_LIMIT)?;
    let order = list_order(req)?;
    let cursor = query_param(req, "cursor");
    let db = app.db(&caller.tenant).await?;
    let shards = app.directory.shard_count(&db).await?;
    let mut listing = list.over(&caller.tenant, shards);
    let keys = &app.settings.cursor_keys;
    let page = match order {
        ListOrder::ById => gather(&db, &listing, keys, limit, cursor.as_deref(), fanout).await?,
        ListOrder::Unordered => {
            listing.route = format!("{}?order=unordered", listing.route);
            walk(
                &db,
                &listing,
                keys,
                limit,
                MAX_PAGE_BYTES,
                cursor.as_deref(),
            )
            .await?
        }
    };
    let cursor = PageCursor {
        keys,
        tenant: &caller.tenant,
        route: &listing.route,
    };
    page_response(page.items, page.next_cursor, view, cursor)
}
