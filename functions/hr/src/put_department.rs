//! putDepartment: `PUT /departments/{departmentId}` `{name}` → 201 created or 200 replaced. One PutItem
//! (`crate::store::store_department`, which imports use too).

use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::service::http::{json_body, path_entity_id, put_response};
use shared::store::tenancy::layout::Put;
use shared::{ApiError, App};

use crate::store::{store_department, WrittenAt};
use crate::Text;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    name: Text,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| {
        Ok((
            path_entity_id(req, "departmentId")?,
            json_body::<Input>(req)?,
        ))
    };
    let ((id, input), db) = app.tenant_request(&req, parse).await?;
    let t = &db.tenant;
    let layout = app.directory.layout(&db).await?;
    let at = WrittenAt::now(app.clock.now_millis());
    let stored = store_department(&db, layout, t, (&id, &input.name.0), at, Vec::new()).await?;
    app.read_cache.forget(t, &stored.cached_as);
    match stored.put {
        Put::Written { replaced } => Ok(put_response(replaced.unwrap_or(false), &stored.view)),
        // Nothing came along and the write is of now, so nothing can refuse it.
        Put::Refused { .. } | Put::Superseded => Err(ApiError::Internal(
            "a department's write of now was refused".into(),
        )),
    }
}
