//! putIntegrationToken: `PUT /integrations/{service}/token` `{token, expiresAt}` → 200
//! `{service, expiresAt}` (the token is not echoed).
//!
//! One PutItem (`crate::store::save_integration_token`) of `PK` = `SK` = `TENANT#t#INTEGRATION#<service>` (replacing any previous token).
//! `expiresAt` (epoch seconds, in the future and at most a year ahead) is also the table's TTL
//! attribute, so DynamoDB deletes the item some time after it expires; reads compare it too, since
//! that deletion lags. `service` is an id (`[A-Za-z0-9_-]{1,128}`); the token is 1 to 4,096
//! characters. Tokens are never logged.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use shared::service::http::{json_body, json_response, path_entity_id};
use shared::{ApiError, App};

use crate::model::IntegrationToken;
use crate::store;

pub const MAX_TOKEN_CHARS: usize = 4096;
pub const MAX_TOKEN_SECONDS: u64 = 366 * 24 * 3600;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Input {
    token: String,
    #[serde(deserialize_with = "shared::service::http::whole_number")]
    expires_at: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    service: String,
    expires_at: u64,
}

/// `input` with its token's length and its expiry checked against the clock; with the time read.
fn checked(input: Input, now_ms: impl FnOnce() -> u64) -> Result<(Input, u64), ApiError> {
    let chars = input.token.chars().count();
    if chars == 0 || chars > MAX_TOKEN_CHARS {
        return Err(ApiError::bad_request(
            "token",
            format!("token must be 1 to {MAX_TOKEN_CHARS} characters"),
        ));
    }
    let now_ms = now_ms();
    let now = now_ms / 1000;
    if input.expires_at <= now || input.expires_at > now + MAX_TOKEN_SECONDS {
        return Err(ApiError::bad_request(
            "expiresAt",
            "expiresAt must be epoch seconds in the future, at most one year ahead",
        ));
    }
    Ok((input, now_ms))
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| {
        let service = path_entity_id(req, "service")?;
        let input = checked(json_body(req)?, || app.clock.now_millis())?;
        Ok((service, input))
    };
    let ((service, (input, now_ms)), db) = app.tenant_request(&req, parse).await?;
    let token = IntegrationToken {
        service: service.to_string(),
        token: input.token,
        expires_at: input.expires_at,
    };
    store::save_integration_token(&db, &service, &token, now_ms).await?;
    Ok(json_response(
        StatusCode::OK,
        &Stored {
            service: token.service,
            expires_at: token.expires_at,
        },
    ))
}
