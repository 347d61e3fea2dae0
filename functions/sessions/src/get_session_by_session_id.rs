//! getSessionBySessionId: `GET /sessions/{sessionId}` → 200 or 404.
//!
//! One Query of the session's item collection for its root item (`SK` begins with the tenant's
//! customer prefix); GetItem is not possible because the root's `SK` holds the customer id. An item
//! past `expiresAt` counts as absent, since TTL deletion lags. Another tenant's session id builds a
//! key under the caller's own prefix, so it simply is not found.

use lambda_http::{Body, Request, Response};
use shared::identity::ids::TenantId;
use shared::service::http::path_session_id;
use shared::{ApiError, App};

use crate::get_live_session;
use crate::model::session_from_item;
use crate::store::Lookup;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let lookup = |req: &Request| Ok(Lookup::Root(path_session_id(req, "sessionId")?));
    let view = |_: &TenantId, item| session_from_item(item);
    get_live_session(app, &req, lookup, view, "No such session.").await
}
