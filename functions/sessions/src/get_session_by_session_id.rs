//! getSessionBySessionId: `GET /sessions/{sessionId}` → 200 or 404.
//!
//! One Query of the session's item collection for its root item (`SK` begins with the tenant's
//! customer prefix); GetItem is not possible because the root's `SK` holds the customer id. An item
//! past `expiresAt` counts as absent, since TTL deletion lags. Another tenant's session id builds a
//! key under the caller's own prefix, so it simply is not found.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, path_session_id};
use shared::{ApiError, App};

use crate::model::session_from_item;
use crate::store;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let id = path_session_id(&req, "sessionId")?;
    let db = app.db(&caller.tenant).await?;
    let item = store::root_session(&db, &id, app.clock.now_seconds())
        .await?
        .ok_or_else(|| ApiError::NotFound("No such session.".into()))?;
    Ok(json_response(StatusCode::OK, &session_from_item(item)?))
}
