//! getEmployee: `GET /employees/{employeeId}` → 200 or 404. Exactly one GetItem on the computed shard.

use lambda_http::{Body, Request, Response};
use shared::identity::keys::kind;
use shared::service::sharded::get_by_id;
use shared::{ApiError, App};

use crate::{hr_key, view_from_item, Employee};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let key = |t: &_, id: &_, shards| hr_key(t, kind::EMPLOYEE, id, shards);
    let view = |item| Ok(view_from_item::<Employee>(item)?);
    get_by_id(app, &req, "employeeId", key, view, "No such employee.").await
}
