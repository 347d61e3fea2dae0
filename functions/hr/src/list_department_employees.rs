//! listDepartmentEmployees: `GET /departments/{departmentId}/employees?limit=&cursor=` →
//! `{items, nextCursor}`. One Query of the department's membership partition per page.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use shared::identity::cursor;
use shared::identity::keys::{department_members_pk, kind, parse_entity_sk};
use shared::service::http::{json_response, page_limit, path_entity_id, query_param};
use shared::{ApiError, App};

use crate::{view_from_item, PageBody};

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
    let start = query_param(&req, "cursor")
        .map(|raw| {
            cursor::decode(&app.settings.cursor_keys, t, ROUTE, &raw, |pk, sk| {
                pk == partition && parse_entity_sk(t, kind::EMPLOYEE, sk).is_ok()
            })
        })
        .transpose()?;
    let db = app.db(t).await?;
    let out = db
        .client
        .query()
        .table_name(&*db.table)
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(partition))
        .limit(limit as i32)
        .set_exclusive_start_key(start)
        .send()
        .await
        .map_err(ApiError::from_dynamodb)?;
    let items = out
        .items
        .unwrap_or_default()
        .into_iter()
        .map(view_from_item::<Member>)
        .collect::<Result<Vec<_>, _>>()?;
    let next_cursor = out
        .last_evaluated_key
        .filter(|k| !k.is_empty())
        .map(|k| cursor::encode(&app.settings.cursor_keys, t, ROUTE, &k));
    Ok(json_response(
        StatusCode::OK,
        &PageBody { items, next_cursor },
    ))
}
