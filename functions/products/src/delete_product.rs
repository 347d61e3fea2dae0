//! deleteProduct: `DELETE /products/{productId}` → 204 or 404. One conditional DeleteItem.

use lambda_http::{Body, Request, Response};
use shared::service::http::{no_content, path_entity_id};
use shared::{ApiError, App};

use crate::product_key;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let id = path_entity_id(&req, "productId")?;
    let db = app.db(&caller.tenant).await?;
    let shards = app.shards.shard_count(&db).await?;
    db.client
        .delete_item()
        .table_name(&*db.table)
        .set_key(Some(product_key(&caller.tenant, &id, shards)))
        .condition_expression("attribute_exists(PK)")
        .send()
        .await
        .map_err(|e| {
            if e.as_service_error()
                .is_some_and(|s| s.is_conditional_check_failed_exception())
            {
                ApiError::NotFound("No such product.".into())
            } else {
                ApiError::from_dynamodb(e)
            }
        })?;
    Ok(no_content())
}
