//! getSessionBySessionId: `GET /sessions/{sessionId}` → 200 or 404.
//!
//! One Query of the session's item collection for its root item (`SK` begins with the tenant's
//! customer prefix); GetItem is not possible because the root's `SK` holds the customer id. An item
//! past `expiresAt` counts as absent, since TTL deletion lags. Another tenant's session id builds a
//! key under the caller's own prefix, so it simply is not found.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::identity::keys::{customer_sk_prefix, session_pk};
use shared::service::http::{json_response, path_session_id};
use shared::store::query::first_live;
use shared::{ApiError, App};

use crate::model::session_from_item;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let id = path_session_id(&req, "sessionId")?;
    let db = app.db(&caller.tenant).await?;
    let t = &caller.tenant;
    let query = db
        .query()
        .key_condition_expression("PK = :pk AND begins_with(SK, :root)")
        .expression_attribute_values(":pk", AttributeValue::S(session_pk(t, &id)))
        .expression_attribute_values(":root", AttributeValue::S(customer_sk_prefix(t)));
    let item = first_live(query, app.clock.now_seconds())
        .await?
        .ok_or_else(|| ApiError::NotFound("No such session.".into()))?;
    Ok(json_response(StatusCode::OK, &session_from_item(item)?))
}
