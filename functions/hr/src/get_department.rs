//! getDepartment: `GET /departments/{departmentId}` → 200 or 404. Exactly one GetItem on the computed shard.

use lambda_http::{Body, Request, Response};
use shared::identity::keys::kind;
use shared::service::sharded::get_by_id;
use shared::{ApiError, App};

use crate::{hr_key, view_from_item, Department};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let key = |t: &_, id: &_, shards| hr_key(t, kind::DEPARTMENT, id, shards);
    let view = |item| Ok(view_from_item::<Department>(item)?);
    get_by_id(app, &req, "departmentId", key, view, "No such department.").await
}
