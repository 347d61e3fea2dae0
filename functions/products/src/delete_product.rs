//! deleteProduct: `DELETE /products/{productId}` → 204 or 404. One conditional DeleteItem.

use lambda_http::{Body, Request, Response};
use shared::service::http::{no_content, path_entity_id};
use shared::store::items::delete_existing;
use shared::{ApiError, App};

use crate::product_key;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let id = path_entity_id(&req, "productId")?;
    let db = app.db(&caller.tenant).await?;
    let shards = app.directory.shard_count(&db).await?;
    let deleted = delete_existing(&db, product_key(&caller.tenant, &id, shards)).await?;
    if !deleted {
        return Err(ApiError::NotFound("No such product.".into()));
    }
    Ok(no_content())
}
