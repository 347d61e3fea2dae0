//! queryTenantProducts: `GET /products?limit=&cursor=` → `{items, nextCursor}` in productId order.
//!
//! One Query per open shard per page, all concurrent; each follows its own `LastEvaluatedKey`.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::identity::keys::kind;
use shared::service::http::{json_response, page_limit, query_param};
use shared::store::scatter::{gather, Fanout, ShardedList};
use shared::{ApiError, App};

use crate::product_from_item;

pub const LIST: ShardedList<'static> = ShardedList {
    partition: kind::PRODUCT,
    kind: kind::PRODUCT,
    route: "query-tenant-products",
};

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Page {
    items: Vec<crate::ProductView>,
    next_cursor: Option<String>,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    handle_with(app, req, Fanout::Parallel).await
}

/// The handler with a chosen fan-out; the benchmark runs it sequentially for reference.
pub async fn handle_with(
    app: &App,
    req: Request,
    fanout: Fanout,
) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let limit = page_limit(&req)?;
    let cursor = query_param(&req, "cursor");
    let db = app.db(&caller.tenant).await?;
    let shards = app.shards.shard_count(&db).await?;
    let page = gather(&db, LIST, shards, limit, cursor.as_deref(), fanout).await?;
    let items = page
        .items
        .iter()
        .map(product_from_item)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json_response(
        StatusCode::OK,
        &Page {
            items,
            next_cursor: page.next_cursor,
        },
    ))
}
