//! getProduct: `GET /products/{productId}` → 200 or 404. Exactly one GetItem: the shard is computed
//! from the id (the shard count is cached per container).

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, path_entity_id};
use shared::{ApiError, App};

use crate::{product_from_item, product_key};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let id = path_entity_id(&req, "productId")?;
    let db = app.db(&caller.tenant).await?;
    let shards = app.shards.shard_count(&db).await?;
    let out = db
        .client
        .get_item()
        .table_name(&*db.table)
        .set_key(Some(
            product_key(&caller.tenant, &id, shards)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        ))
        .send()
        .await
        .map_err(ApiError::from_dynamodb)?;
    let item = out
        .item
        .ok_or_else(|| ApiError::NotFound("No such product.".into()))?;
    Ok(json_response(StatusCode::OK, &product_from_item(&item)?))
}
