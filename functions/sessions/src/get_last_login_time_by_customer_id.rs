//! getLastLoginTimeByCustomerId: `GET /customers/{customerId}/last-login` → 200 or 404.
//!
//! One Query on GSI1, newest first, Limit 1. GSI1 sorts a customer's sessions by the session's `PK`,
//! and session ids are UUIDv7, so the first item really is the latest login, unlike the reference
//! design, whose random UUIDs made "Limit 1" return an arbitrary session. Expired sessions are
//! skipped by paging on, never by returning nothing.

use lambda_http::{Body, Request, Response};
use serde::Serialize;
use shared::identity::ids::TenantId;
use shared::service::http::path_entity_id;
use shared::store::client::query::Item;
use shared::{ApiError, App};

use crate::get_live_session;
use crate::model::session_from_item;
use crate::store::Lookup;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LastLogin {
    customer_id: String,
    session_id: String,
    last_login_time: String,
}

/// The last login a customer's newest session tells.
fn last_login(_: &TenantId, item: Item) -> Result<LastLogin, ApiError> {
    let session = session_from_item(item)?;
    Ok(LastLogin {
        customer_id: session.customer_id,
        session_id: session.session_id,
        last_login_time: session.last_login_time,
    })
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let lookup = |req: &Request| Ok(Lookup::Newest(path_entity_id(req, "customerId")?));
    let not_found = "This customer has no live session.";
    get_live_session(app, &req, lookup, last_login, not_found).await
}
