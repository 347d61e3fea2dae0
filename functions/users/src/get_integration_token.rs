//! getIntegrationToken: `GET /integrations/{service}/token` → 200 `{service, token, expiresAt}`, or
//! 404 when there is none or it has expired.
//!
//! One GetItem of `TENANT#t#INTEGRATION#<service>` (`crate::store::integration_token`). TTL deletion lags expiry by up to 48 hours, so
//! the item's `expiresAt` is compared with the clock and an expired token is not found. Tokens are
//! never logged.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, path_entity_id};
use shared::{ApiError, App};

use crate::store;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let service = path_entity_id(&req, "service")?;
    let db = app.db(t).await?;
    let token = store::integration_token(&db, &service, app.clock.now_seconds())
        .await?
        .ok_or_else(|| ApiError::NotFound("No live token for this service.".into()))?;
    Ok(json_response(StatusCode::OK, &token))
}
