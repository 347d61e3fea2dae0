//! getSessionIdByCustomerId: `GET /customers/{customerId}/sessions/{sessionId}` → 200 or 404.
//!
//! One Query on GSI1 with both keys: partition = the customer (`SK`), sort = the session (`PK`).
//! It answers "does this customer own this live session?".

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, path_entity_id, path_session_id};
use shared::{ApiError, App};

use crate::model::session_from_item;
use crate::store;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let customer = path_entity_id(&req, "customerId")?;
    let id = path_session_id(&req, "sessionId")?;
    let db = app.db(&caller.tenant).await?;
    let item = store::customer_session(&db, &customer, &id, app.clock.now_seconds())
        .await?
        .ok_or_else(|| ApiError::NotFound("No such session for this customer.".into()))?;
    Ok(json_response(StatusCode::OK, &session_from_item(item)?))
}
