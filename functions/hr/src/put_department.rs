//! putDepartment: `PUT /departments/{departmentId}` `{name}` → 201 created or 200 replaced. One PutItem.

use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::identity::clock::rfc3339;
use shared::identity::keys::kind;
use shared::service::http::{json_body, path_entity_id, put_response};
use shared::store::layout::{self, Keys};
use shared::store::query::Item;
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
    let layout = app.directory.layout(&db).await?;
    let dept = Department {
        department_id: id.to_string(),
        name: input.name.0,
        updated_at: rfc3339(app.clock.now_millis()),
    };
    let keys = Keys::of(layout, |n| hr_key(&caller.tenant, kind::DEPARTMENT, &id, n));
    let fields = item_with_keys(&dept, Item::new(), kind::DEPARTMENT, &caller.tenant)?;
    let replaced = layout::put(&db, layout, &keys, fields).await?;
    app.read_cache.forget(&caller.tenant, &keys.write);
    Ok(put_response(replaced, &dept))
}
