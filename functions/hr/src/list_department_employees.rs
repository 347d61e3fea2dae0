//! listDepartmentEmployees: `GET /departments/{departmentId}/employees?limit=&cursor=` →
//! `{items, nextCursor}`. One Query of the department's membership partition per page.

use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use shared::identity::cursor;
use shared::identity::keys::{department_members_pk, kind, parse_entity_sk};
use shared::service::http::{page_limit, page_response, path_entity_id, query_param, PageCursor};
use shared::{ApiError, App};

use crate::view_from_item;

pub const ROUTE: &str = "list-department-employees";

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Member {
    employee_id: String,
    name: String,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let department = path_entity_id(&req, "departmentId")?;
    let limit = page_limit(&req)?;
    let partition = department_members_pk(t, &department);
    let keys = app.cursor_keys()?;
    let start = query_param(&req, "cursor")
        .map(|raw| {
            cursor::decode(&keys, t, ROUTE, &raw, |pk, sk| {
                pk == partition && parse_entity_sk(t, kind::EMPLOYEE, sk).is_ok()
            })
        })
        .transpose()?;
    let db = app.db(t).await?;
    let out = db
        .query_partition(&partition)
        .limit(limit as i32)
        .set_exclusive_start_key(start)
        .send()
        .await
        .map_err(ApiError::from_dynamodb)?;
    let keys = &*keys;
    let next_cursor = out
        .last_evaluated_key
        .filter(|k| !k.is_empty())
        .map(|k| cursor::encode(keys, t, ROUTE, &k));
    let view = |item| Ok(view_from_item::<Member>(item)?);
    let cursor = PageCursor {
        keys,
        tenant: t,
        route: ROUTE,
    };
    page_response(out.items.unwrap_or_default(), next_cursor, view, cursor)
}
