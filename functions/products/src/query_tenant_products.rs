//! queryTenantProducts: `GET /products?limit=&cursor=` → `{items, nextCursor}` in productId order.
//!
//! One Query per open shard per page, all concurrent; each follows its own `LastEvaluatedKey`.

use lambda_http::{Body, Request, Response};
use shared::identity::entities::PRODUCT;
use shared::service::sharded::list_page;
use shared::store::scatter::{Fanout, ShardedList};
use shared::{ApiError, App};

use crate::product_from_item;

pub const LIST: ShardedList = ShardedList::new(PRODUCT, "query-tenant-products");

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    handle_with(app, req, Fanout::Parallel).await
}

/// The handler with a chosen fan-out; the benchmark runs it sequentially for reference.
pub async fn handle_with(
    app: &App,
    req: Request,
    fanout: Fanout,
) -> Result<Response<Body>, ApiError> {
    list_page(app, &req, LIST, |item| product_from_item(&item), fanout).await
}
