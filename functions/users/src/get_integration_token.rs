//! getIntegrationToken: `GET /integrations/{service}/token` → 200 `{service, token, expiresAt}`, or
//! 404 when there is none or it has expired.
//!
//! One GetItem of `TENANT#t#INTEGRATION#<service>`. TTL deletion lags expiry by up to 48 hours, so
//! the item's `expiresAt` is compared with the clock and an expired token is not found. Tokens are
//! never logged.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;
use shared::identity::keys::EXPIRES_AT;
use shared::service::http::{json_response, path_entity_id};
use shared::store::client::query::{is_live, string_attr, u64_attr};
use shared::{ApiError, App};

use crate::{integration_key, same_key};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Token {
    service: String,
    token: String,
    expires_at: u64,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let service = path_entity_id(&req, "service")?;
    let db = app.db(t).await?;
    let item = db
        .client
        .get_item()
        .table_name(&*db.table)
        .set_key(Some(same_key(integration_key(t, &service))))
        .send()
        .await
        .map_err(ApiError::from_dynamodb)?
        .item
        .filter(|i| is_live(i, app.clock.now_seconds()))
        .ok_or_else(|| ApiError::NotFound("No live token for this service.".into()))?;
    let (Some(token), Some(expires_at)) =
        (string_attr(&item, "token"), u64_attr(&item, EXPIRES_AT))
    else {
        return Err(ApiError::Internal("stored token is incomplete".into()));
    };
    Ok(json_response(
        StatusCode::OK,
        &Token {
            service: service.to_string(),
            token,
            expires_at,
        },
    ))
}
