//! getSessionByChildSessionId: `GET /child-sessions/{childSessionId}/parent` → 200 or 404.
//!
//! One Query on GSI1: the child's `SK` is the partition there, and its sort key is the parent's `PK`.
//! The child item carries the parent's id and customer, so no second read is needed.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;
use shared::identity::keys::{parse_session_pk, PK};
use shared::service::http::{json_response, path_session_id};
use shared::store::client::query::string_attr;
use shared::{ApiError, App};

use crate::model::session_from_item;
use crate::store;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ParentOfChild {
    session_id: String,
    customer_id: String,
    child_session_id: String,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let child = path_session_id(&req, "childSessionId")?;
    let db = app.db(&caller.tenant).await?;
    let t = &caller.tenant;
    let item = store::child_session(&db, &child, app.clock.now_seconds())
        .await?
        .ok_or_else(|| ApiError::NotFound("No such child session.".into()))?;
    let parent = string_attr(&item, PK)
        .and_then(|pk| parse_session_pk(t, &pk).ok())
        .ok_or_else(|| ApiError::Internal("child item has a malformed PK".into()))?;
    let child_session = session_from_item(item)?;
    Ok(json_response(
        StatusCode::OK,
        &ParentOfChild {
            session_id: parent.to_string(),
            customer_id: child_session.customer_id,
            child_session_id: child_session.session_id,
        },
    ))
}
