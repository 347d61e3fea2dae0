//! getDepartment: `GET /departments/{departmentId}` → 200 or 404. Exactly one GetItem on the computed shard.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::identity::keys::kind;
use shared::service::http::{json_response, path_entity_id};
use shared::{ApiError, App};

use crate::{hr_key, view_from_item, Department};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let id = path_entity_id(&req, "departmentId")?;
    let db = app.db(&caller.tenant).await?;
    let shards = app.shards.shard_count(&db).await?;
    let out = db
        .client
        .get_item()
        .table_name(&*db.table)
        .set_key(Some(hr_key(&caller.tenant, kind::DEPARTMENT, &id, shards)))
        .send()
        .await
        .map_err(ApiError::from_dynamodb)?;
    let item = out
        .item
        .ok_or_else(|| ApiError::NotFound("No such department.".into()))?;
    Ok(json_response(
        StatusCode::OK,
        &view_from_item::<Department>(item)?,
    ))
}
