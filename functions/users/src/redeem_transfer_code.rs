//! redeemTransferCode: `POST /transfer-codes/{code}/redeem` → 200 `{userId}`, or 404.
//!
//! One consistent GetItem of `TENANT#t#TRANSFER#<sha256(code)>` (its user), then one
//! TransactWriteItems: an update that marks it redeemed by this invocation (`SET redeemedBy =
//! :nonce`, a random nonce per request) on condition `attribute_exists(PK) AND expiresAt > :now AND
//! (attribute_not_exists(redeemedBy) OR redeemedBy = :nonce)`, and a ConditionCheck that its user's
//! profile is there and no erasure of it has begun. Of any number of concurrent redeems exactly one
//! commits. The nonce is part of the request, so when the SDK retries an attempt whose answer was
//! lost, the retry passes the condition again: the code is handed out exactly once, and never lost.
//! Unknown, already redeemed and expired codes, and codes whose user was erased (or is being
//! erased) since they were made, all answer 404 and write nothing; TTL removes the item at its
//! expiry (at most 15 minutes). The key is built under the caller's tenant prefix, so another
//! tenant's code is simply not found. The path parameter must be 32 lowercase hex digits (400
//! otherwise). The code is never logged and never echoed in an error.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;
use shared::service::http::{json_response, path_param};
use shared::service::idempotent::{self, Recorder};
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

use crate::{store, Error, TransferCode};

pub const ROUTE: &str = "redeem-transfer-code";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Redeemed {
    user_id: String,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| {
        TransferCode::parse(&path_param(req, "code")?)
            .map_err(|rule| ApiError::bad_request("code", rule))
    };
    let (code, db) = app.tenant_request(&req, parse).await?;
    let now = app.clock.now_seconds();
    idempotent::run(&req, &db, &db.tenant, ROUTE, now, |recorder| {
        redeem(&db, &code, now, recorder)
    })
    .await
}

/// Reads the code's user, then marks the code redeemed by this request, on condition its user is
/// still there, with the key's record when one was sent (`crate::store::redeem_transfer_code`).
async fn redeem(
    db: &TenantDb,
    code: &TransferCode,
    now: u64,
    recorder: Option<Recorder<'_>>,
) -> Result<Response<Body>, ApiError> {
    let user_id = store::redeemable_transfer_code_user(db, code, now)
        .await?
        .ok_or(Error::CodeNotRedeemable)?;
    let answer = Redeemed { user_id };
    let record = recorder
        .map(|recorder| recorder.record(StatusCode::OK, &answer))
        .transpose()?;
    store::redeem_transfer_code(db, code, &answer.user_id, now, record).await?;
    Ok(json_response(StatusCode::OK, &answer))
}
