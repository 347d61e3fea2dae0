//! getLastLoginTimeByCustomerId: `GET /customers/{customerId}/last-login` → 200 or 404.
//!
//! One Query on GSI1, newest first, Limit 1. GSI1 sorts a customer's sessions by the session's `PK`,
//! and session ids are UUIDv7, so the first item really is the latest login, unlike the reference
//! design, whose random UUIDs made "Limit 1" return an arbitrary session. Expired sessions are
//! skipped by paging on, never by returning nothing.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;
use shared::service::http::{json_response, path_entity_id};
use shared::{ApiError, App};

use crate::model::session_from_item;
use crate::store;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LastLogin {
    customer_id: String,
    session_id: String,
    last_login_time: String,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let customer = path_entity_id(&req, "customerId")?;
    let db = app.db(&caller.tenant).await?;
    let item = store::newest_session(&db, &customer, app.clock.now_seconds())
        .await?
        .ok_or_else(|| ApiError::NotFound("This customer has no live session.".into()))?;
    let session = session_from_item(item)?;
    Ok(json_response(
        StatusCode::OK,
        &LastLogin {
            customer_id: session.customer_id,
            session_id: session.session_id,
            last_login_time: session.last_login_time,
        },
    ))
}
