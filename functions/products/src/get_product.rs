//! getProduct: `GET /products/{productId}` → 200 or 404. Exactly one GetItem: the shard is computed
//! from the id (the shard count is cached per container).

use lambda_http::{Body, Request, Response};
use shared::service::sharded::get_by_id;
use shared::{ApiError, App};

use crate::{product_from_item, product_key};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let view = |item| product_from_item(&item);
    get_by_id(
        app,
        &req,
        "productId",
        product_key,
        view,
        "No such product.",
    )
    .await
}
