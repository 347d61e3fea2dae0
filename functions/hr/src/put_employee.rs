//! putEmployee: `PUT /employees/{employeeId}` `{name, departmentId, email?}` → 201 or 200.
//!
//! One consistent read of the current department, then one transaction moving the employee and its
//! membership together (`crate::store::store_employee`, which imports use too); 400 when the
//! department does not exist, 409 when the employee kept changing.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::identity::ids::EntityId;
use shared::service::http::{json_body, json_response, path_entity_id};
use shared::store::tenancy::layout::Put;
use shared::{ApiError, App};

use crate::store::{store_employee, EmployeeFields, WrittenAt};
use crate::Text;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Input {
    name: Text,
    department_id: EntityId,
    #[serde(default)]
    email: Option<Text>,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| Ok((path_entity_id(req, "employeeId")?, json_body::<Input>(req)?));
    let ((id, input), db) = app.tenant_request(&req, parse).await?;
    let t = &db.tenant;
    let layout = app.directory.layout(&db).await?;
    let fields = EmployeeFields {
        name: &input.name.0,
        department: &input.department_id,
        email: input.email.as_ref().map(|e| e.0.as_str()),
    };
    let at = WrittenAt::now(app.clock.now_millis());
    let stored = store_employee(&db, layout, t, (&id, fields), at, Vec::new()).await?;
    app.read_cache.forget(t, &stored.cached_as);
    match stored.put {
        Put::Written {
            replaced: Some(true),
        } => Ok(json_response(StatusCode::OK, &stored.view)),
        Put::Written { .. } => Ok(json_response(StatusCode::CREATED, &stored.view)),
        // Nothing came along and the write is of now, so nothing can refuse it.
        Put::Refused { .. } | Put::Superseded => Err(ApiError::Internal(
            "an employee's write of now was refused".into(),
        )),
    }
}
