//! putDepartment: `PUT /departments/{departmentId}` `{name}` → 201 created or 200 replaced. One PutItem.

use aws_sdk_dynamodb::types::ReturnValue;
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::identity::clock::rfc3339;
use shared::identity::keys::kind;
use shared::service::http::{json_body, json_response, path_entity_id};
use shared::{ApiError, App};

use crate::{hr_key, item_with_keys, Department, Text};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    name: Text,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let id = path_entity_id(&req, "departmentId")?;
    let input: Input = json_body(&req)?;
    let db = app.db(&caller.tenant).await?;
    let shards = app.shards.shard_count(&db).await?;
    let dept = Department {
        department_id: id.to_string(),
        name: input.name.0,
        updated_at: rfc3339(app.clock.now_millis()),
    };
    let item = item_with_keys(
        &dept,
        hr_key(&caller.tenant, kind::DEPARTMENT, &id, shards),
        kind::DEPARTMENT,
        &caller.tenant,
    )?;
    let out = db
        .client
        .put_item()
        .table_name(&*db.table)
        .set_item(Some(item))
        .return_values(ReturnValue::AllOld)
        .send()
        .await
        .map_err(ApiError::from_dynamodb)?;
    let status = if out.attributes.is_some() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok(json_response(status, &dept))
}
