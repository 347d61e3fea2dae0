//! putDepartment: `PUT /departments/{departmentId}` `{name}` → 201 created or 200 replaced. One PutItem.

use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::identity::clock::rfc3339;
use shared::identity::keys::kind;
use shared::service::http::{json_body, path_entity_id, put_response};
use shared::store::items::put_replacing;
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
    let shards = app.directory.shard_count(&db).await?;
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
    let replaced = put_replacing(&db, item).await?;
    Ok(put_response(replaced, &dept))
}
