//! createTransferCode: `POST /users/{userId}/transfer-code` → 201 `{code, expiresAt}`, or 404.
//!
//! A random one-time code (a UUIDv4: 122 random bits, 32 hex digits) valid for
//! [`TRANSFER_CODE_SECONDS`], stored as `PK` = `SK` = `TENANT#t#TRANSFER#<sha256(code)>` (the code's
//! digest: no copy of the table holds a code in a key) with the userId and
//! `expiresAt` (epoch seconds, also the TTL attribute). One TransactWriteItems: ConditionCheck that
//! the user's profile exists (404 otherwise), Put the code (`attribute_not_exists(PK)`). The code is
//! in the response body only: it is never logged, and it is absent from every error. With an
//! `Idempotency-Key`, the answer (code included) is also kept in the key's record for 24 hours, so a
//! retry of the same request gets the same code.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;
use shared::service::http::{json_response, path_entity_id};
use shared::service::idempotent;
use shared::{ApiError, App};

use crate::model::NewTransferCode;
use crate::{store, TransferCode};

pub const ROUTE: &str = "create-transfer-code";

/// How long a transfer code can be redeemed.
pub const TRANSFER_CODE_SECONDS: u64 = 900;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Created<'a> {
    code: &'a str,
    expires_at: u64,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let (user, db) = app
        .tenant_request(&req, |req| path_entity_id(req, "userId"))
        .await?;
    let db = &db;
    let now = app.clock.now_seconds();
    // A new code (`crate::store::store_transfer_code`); with a recorder, its answer is recorded in
    // the same transaction.
    idempotent::run(&req, db, &db.tenant, ROUTE, now, |recorder| async move {
        let now_ms = app.clock.now_millis();
        let code = NewTransferCode {
            code: TransferCode::random(),
            user,
            created_ms: now_ms,
            expires_at: now_ms / 1000 + TRANSFER_CODE_SECONDS,
        };
        let created = Created {
            code: code.code.reveal(),
            expires_at: code.expires_at,
        };
        let record = recorder
            .as_ref()
            .map(|r| r.record(StatusCode::CREATED, &created))
            .transpose()?;
        store::store_transfer_code(db, &code, record).await?;
        Ok(json_response(StatusCode::CREATED, &created))
    })
    .await
}
