//! expireSession: `DELETE /sessions/{sessionId}` → 204 or 404.
//!
//! Reads the session's item collection (one Query; it holds at most 100 items), then removes the root
//! and every child in one TransactWriteItems, so no state ever has the parent gone and a child left.
//! More than 100 cannot happen: `create-session` refuses a 100th child (see `MAX_CHILDREN`). The
//! root's delete is conditioned on the child count read, so a child created concurrently cancels the
//! transaction instead of being orphaned; it is then retried on a fresh read.

use lambda_http::{Body, Request, Response};
use shared::identity::keys::{parse_customer_sk, SK};
use shared::service::http::{no_content, path_session_id};
use shared::store::client::query::{is_live, string_attr};
use shared::{ApiError, App};

use crate::store;

const ATTEMPTS: usize = 3;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let (id, db) = app
        .tenant_request(&req, |req| path_session_id(req, "sessionId"))
        .await?;
    for _ in 0..ATTEMPTS {
        let collection = store::session_collection(&db, &id).await?;
        let root = collection
            .iter()
            .find(|i| {
                string_attr(i, SK).is_some_and(|sk| parse_customer_sk(&db.tenant, &sk).is_ok())
            })
            .filter(|root| is_live(root, app.clock.now_seconds()))
            .ok_or_else(|| ApiError::NotFound("No such session.".into()))?;
        if store::delete_collection(&db, root, &collection).await? {
            return Ok(no_content());
        }
    }
    Err(ApiError::Conflict(
        "The session changed while it was being expired; retry.".into(),
    ))
}
