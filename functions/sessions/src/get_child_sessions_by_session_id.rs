//! getChildSessionsBySessionId: `GET /sessions/{sessionId}/children?limit=&cursor=` → `{items, nextCursor}`.
//!
//! One Query of the parent's item collection: `PK` = the session, `SK` begins with the tenant's
//! child prefix. An unknown or foreign session id yields an empty list, since the key is built under
//! the caller's own prefix.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::cursor;
use shared::http::{json_response, page_limit, path_session_id, query_param};
use shared::keys::{child_sk_prefix, parse_child_sk, session_pk};
use shared::query::live_page;
use shared::{ApiError, App};

use crate::model::{session_from_item, PageBody};

pub const ROUTE: &str = "get-child-sessions-by-session-id";

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let parent = path_session_id(&req, "sessionId")?;
    let limit = page_limit(&req)?;
    let partition = session_pk(t, &parent);
    let start = query_param(&req, "cursor")
        .map(|raw| {
            cursor::decode_single(t, ROUTE, &raw, |pk, sk| {
                pk == partition && parse_child_sk(t, sk).is_ok()
            })
        })
        .transpose()?;
    let db = app.db(t).await?;
    let query = db
        .client
        .query()
        .table_name(&*db.table)
        .key_condition_expression("PK = :pk AND begins_with(SK, :children)")
        .expression_attribute_values(":pk", AttributeValue::S(partition.clone()))
        .expression_attribute_values(":children", AttributeValue::S(child_sk_prefix(t)));
    let page = live_page(query, limit, start, app.clock.now_seconds()).await?;
    let items = page
        .items
        .into_iter()
        .map(session_from_item)
        .collect::<Result<Vec<_>, _>>()?;
    let next_cursor = page.next.map(|k| cursor::encode_single(t, ROUTE, &k));
    Ok(json_response(
        StatusCode::OK,
        &PageBody { items, next_cursor },
    ))
}
