//! getSessionByChildSessionId: `GET /child-sessions/{childSessionId}/parent` → 200 or 404.
//!
//! One Query on GSI1: the child's `SK` is the partition there, and its sort key is the parent's `PK`.
//! The child item carries the parent's id and customer, so no second read is needed.

use lambda_http::{Body, Request, Response};
use serde::Serialize;
use shared::identity::ids::TenantId;
use shared::identity::keys::{parse_session_pk, PK};
use shared::service::http::path_session_id;
use shared::store::client::query::{string_attr, Item};
use shared::{ApiError, App};

use crate::get_live_session;
use crate::model::session_from_item;
use crate::store::Lookup;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ParentOfChild {
    session_id: String,
    customer_id: String,
    child_session_id: String,
}

/// The parent of the child session `item`: the child item's `PK` is its parent's.
fn parent_of(t: &TenantId, item: Item) -> Result<ParentOfChild, ApiError> {
    let parent = string_attr(&item, PK)
        .and_then(|pk| parse_session_pk(t, &pk).ok())
        .ok_or_else(|| ApiError::Internal("child item has a malformed PK".into()))?;
    let child_session = session_from_item(item)?;
    Ok(ParentOfChild {
        session_id: parent.to_string(),
        customer_id: child_session.customer_id,
        child_session_id: child_session.session_id,
    })
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let lookup = |req: &Request| Ok(Lookup::Child(path_session_id(req, "childSessionId")?));
    get_live_session(app, &req, lookup, parent_of, "No such child session.").await
}
