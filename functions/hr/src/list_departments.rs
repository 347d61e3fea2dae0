//! listDepartments: `GET /departments?limit=&cursor=` → `{items, nextCursor}` in id order: a parallel
//! scatter-gather over the tenant's HR shards, `begins_with(SK, TENANT#t#DEPARTMENT#)`.

use lambda_http::{Body, Request, Response};
use shared::service::sharded::list_page;
use shared::store::scatter::Fanout;
use shared::{ApiError, App};

use crate::{view_from_item, Department, DEPARTMENTS};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let view = |item| Ok(view_from_item::<Department>(item)?);
    list_page(app, &req, DEPARTMENTS, view, Fanout::Parallel).await
}
