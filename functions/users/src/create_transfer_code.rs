//! createTransferCode: `POST /users/{userId}/transfer-code` → 201 `{code, expiresAt}`, or 404.
//!
//! A random one-time code (a UUIDv4: 122 random bits, 32 hex digits) valid for
//! [`TRANSFER_CODE_SECONDS`], stored as `PK` = `SK` = `TENANT#t#TRANSFER#<code>` with the userId and
//! `expiresAt` (epoch seconds, also the TTL attribute). One TransactWriteItems: ConditionCheck that
//! the user's profile exists (404 otherwise), Put the code (`attribute_not_exists(PK)`). The code is
//! in the response body only: it is never logged, and it is absent from every error. With an
//! `Idempotency-Key`, the answer (code included) is also kept in the key's record for 24 hours, so a
//! retry of the same request gets the same code.

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;
use shared::identity::clock::rfc3339;
use shared::identity::ids::EntityId;
use shared::identity::keys::EXPIRES_AT;
use shared::service::http::{json_response, path_entity_id};
use shared::service::idempotent::{self, Recorder};
use shared::store::client::scoped::TenantDb;
use shared::store::client::transact::{transact, TransactError};
use shared::{ApiError, App};

use crate::{internal, kind, same_key, transfer_key, user_exists_check, TransferCode};

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
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let user = path_entity_id(&req, "userId")?;
    let db = app.db(t).await?;
    let now = app.clock.now_seconds();
    idempotent::run(&req, &db, t, ROUTE, now, |recorder| {
        create(app, &db, &user, recorder)
    })
    .await
}

/// Stores a new code; with a recorder, its answer is recorded in the same transaction.
async fn create(
    app: &App,
    db: &TenantDb,
    user: &EntityId,
    recorder: Option<Recorder<'_>>,
) -> Result<Response<Body>, ApiError> {
    let t = &db.tenant;
    let now_ms = app.clock.now_millis();
    let expires_at = now_ms / 1000 + TRANSFER_CODE_SECONDS;
    let code = TransferCode::random();
    let mut item = same_key(transfer_key(t, &code));
    item.insert("kind".into(), AttributeValue::S(kind::TRANSFER.into()));
    item.insert("tenantId".into(), AttributeValue::S(t.to_string()));
    item.insert("userId".into(), AttributeValue::S(user.to_string()));
    item.insert("createdAt".into(), AttributeValue::S(rfc3339(now_ms)));
    item.insert(EXPIRES_AT.into(), AttributeValue::N(expires_at.to_string()));
    shared::store::client::items::enlist(t, &mut item);
    let put = Put::builder()
        .table_name(&*db.table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .map_err(internal)?;
    let created = Created {
        code: code.reveal(),
        expires_at,
    };
    let mut request = db
        .client
        .transact_write_items()
        .transact_items(user_exists_check(db, t, user)?)
        .transact_items(TransactWriteItem::builder().put(put).build());
    if let Some(recorder) = &recorder {
        request = request.transact_items(recorder.record(StatusCode::CREATED, &created)?);
    }
    // DynamoDB's errors carry no key values, so logging them never logs the code.
    transact(request).await.map_err(|e| match e {
        e if e.failed_at(0) => ApiError::NotFound("No such user.".into()),
        TransactError::ConditionFailed { .. } => {
            ApiError::Conflict("The transfer code could not be stored; retry.".into())
        }
        other => other.into(),
    })?;
    Ok(json_response(StatusCode::CREATED, &created))
}
