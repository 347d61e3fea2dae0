//! redeemTransferCode: `POST /transfer-codes/{code}/redeem` → 200 `{userId}`, or 404.
//!
//! One UpdateItem of `TENANT#t#TRANSFER#<code>` that marks it redeemed by this invocation
//! (`SET redeemedBy = :nonce`, a random nonce per request) on condition
//! `attribute_exists(PK) AND expiresAt > :now AND (attribute_not_exists(redeemedBy) OR redeemedBy =
//! :nonce)`, returning the item (`ALL_NEW`): the read and the consumption are one atomic step, so of
//! any number of concurrent redeems exactly one succeeds. The nonce is part of the request, so when
//! the SDK retries an attempt whose answer was lost, the retry passes the condition again and returns
//! the same userId: the code is handed out exactly once, and never lost. Unknown, already redeemed
//! and expired codes all answer 404; TTL removes the item at its expiry (at most 15 minutes). The key is built under the caller's tenant prefix, so another tenant's code is
//! simply not found. The path parameter must be 32 lowercase hex digits (400 otherwise). The code is
//! never logged and never echoed in an error.

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, TransactWriteItem, Update};
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;
use shared::identity::keys::EXPIRES_AT;
use shared::service::http::{json_response, path_param};
use shared::service::idempotent::{self, Recorder};
use shared::store::client::items::get_item_consistent;
use shared::store::client::query::{string_attr, u64_attr};
use shared::store::client::scoped::TenantDb;
use shared::store::client::transact::transact;
use shared::{ApiError, App};

use crate::{same_key, transfer_key, TransferCode};

pub const ROUTE: &str = "redeem-transfer-code";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Redeemed {
    user_id: String,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let code = TransferCode::parse(&path_param(&req, "code")?)
        .map_err(|rule| ApiError::bad_request("code", rule))?;
    let db = app.db(t).await?;
    let now = app.clock.now_seconds();
    idempotent::run(&req, &db, t, ROUTE, now, |recorder| {
        redeem(&db, &code, now, recorder)
    })
    .await
}

fn not_found() -> ApiError {
    ApiError::NotFound("No such transfer code, or it was used or has expired.".into())
}

/// Marks the code redeemed by this request and answers its user. Without a recorder: one UpdateItem
/// returning the item. With one: a consistent GetItem for the user, then one transaction (the same
/// conditional update, and the key's record).
async fn redeem(
    db: &TenantDb,
    code: &TransferCode,
    now: u64,
    recorder: Option<Recorder<'_>>,
) -> Result<Response<Body>, ApiError> {
    let t = &db.tenant;
    let key = same_key(transfer_key(t, code));
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    // The one conditional update both paths send: mark the code redeemed by this request.
    let update = Update::builder()
        .table_name(&*db.table)
        .set_key(Some(key.clone()))
        .update_expression("SET #by = :nonce")
        .condition_expression(
            "attribute_exists(PK) AND #exp > :now AND (attribute_not_exists(#by) OR #by = :nonce)",
        )
        .expression_attribute_names("#exp", EXPIRES_AT)
        .expression_attribute_names("#by", "redeemedBy")
        .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
        .expression_attribute_values(":nonce", AttributeValue::S(nonce))
        .build()
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let Some(recorder) = recorder else {
        let out = db
            .client
            .update_item()
            .table_name(update.table_name())
            .set_key(Some(update.key().clone()))
            .update_expression(update.update_expression())
            .set_condition_expression(update.condition_expression().map(str::to_owned))
            .set_expression_attribute_names(update.expression_attribute_names().cloned())
            .set_expression_attribute_values(update.expression_attribute_values().cloned())
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| {
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception())
                {
                    not_found()
                } else {
                    ApiError::from_dynamodb(e)
                }
            })?;
        let user_id = out
            .attributes
            .as_ref()
            .and_then(|old| string_attr(old, "userId"))
            .ok_or_else(|| ApiError::Internal("redeemed transfer code had no userId".into()))?;
        return Ok(json_response(StatusCode::OK, &Redeemed { user_id }));
    };
    let current = get_item_consistent(db, key).await?.ok_or_else(not_found)?;
    let redeemable = u64_attr(&current, EXPIRES_AT).is_some_and(|e| e > now)
        && !current.contains_key("redeemedBy");
    let user_id = string_attr(&current, "userId")
        .filter(|_| redeemable)
        .ok_or_else(not_found)?;
    let answer = Redeemed { user_id };
    let request = db
        .client
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().update(update).build())
        .transact_items(recorder.record(StatusCode::OK, &answer)?);
    transact(request).await.map_err(|e| match e {
        e if e.failed_at(0) => not_found(),
        other => other.into(),
    })?;
    Ok(json_response(StatusCode::OK, &answer))
}
