//! putUser: `PUT /users/{userId}` `{name, email}` → 201 (created) or 200 (updated).
//!
//! An email belongs to at most one user of a tenant. That is enforced by a uniqueness item
//! (`PK` = `SK` = `TENANT#t#EMAIL#<lowercased email>`, holding the owner's userId and name) that
//! changes in the same transaction as the profile.
//!
//! Requests: one consistent GetItem of the profile (its current email), then one TransactWriteItems:
//! - Put the profile, on condition it does not exist (new user) or its email is still the one read;
//! - Put the email item, on condition it does not exist or is already this user's;
//! - when the email changes: Delete the old email item, on condition it is this user's.
//!
//! A taken email cancels the transaction on the email item → 409, nothing written. A concurrent
//! change of the same profile (or a transaction conflict) is retried on a fresh read, a few times,
//! then 409.

use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::identity::clock::rfc3339;
use shared::service::http::{json_body, json_response, path_entity_id};
use shared::store::client::query::string_attr;
use shared::store::client::transact::{transact, TransactError};
use shared::{ApiError, App};

use crate::{email_key, internal, item_with_keys, kind, same_key, user_key, Email, Text, User};

const ATTEMPTS: u32 = 5;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Input {
    name: Text,
    email: Email,
}

enum Outcome {
    Written,
    EmailTaken,
    Retry,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let id = path_entity_id(&req, "userId")?;
    let input: Input = json_body(&req)?;
    let db = app.db(t).await?;
    let profile_key = same_key(user_key(t, &id));
    let new_email_key = email_key(t, &input.email);
    let user = User {
        user_id: id.to_string(),
        name: input.name.0.clone(),
        email: input.email.as_str().to_owned(),
        updated_at: rfc3339(app.clock.now_millis()),
    };
    let profile = item_with_keys(&user, profile_key.clone(), kind::USER, t)?;
    let email_item = item_with_keys(
        &serde_json::json!({"userId": user.user_id, "name": user.name, "email": user.email}),
        same_key(new_email_key.clone()),
        kind::EMAIL,
        t,
    )?;
    let me = AttributeValue::S(id.to_string());

    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            // Jittered backoff so racing writers do not collide again in lockstep.
            let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0]) % 20;
            tokio::time::sleep(Duration::from_millis(10 * u64::from(attempt) + jitter)).await;
        }
        let current = db
            .client
            .get_item()
            .table_name(&*db.table)
            .set_key(Some(profile_key.clone()))
            .consistent_read(true)
            .projection_expression("#email")
            .expression_attribute_names("#email", "email")
            .send()
            .await
            .map_err(ApiError::from_dynamodb)?
            .item;
        let old_email = current.as_ref().and_then(|i| string_attr(i, "email"));

        let mut put_profile = Put::builder()
            .table_name(&*db.table)
            .set_item(Some(profile.clone()));
        put_profile = match (&current, &old_email) {
            (None, _) => put_profile.condition_expression("attribute_not_exists(PK)"),
            (Some(_), Some(old)) => put_profile
                .condition_expression("#email = :old")
                .expression_attribute_names("#email", "email")
                .expression_attribute_values(":old", AttributeValue::S(old.clone())),
            (Some(_), None) => {
                return Err(internal("stored profile has no email"));
            }
        };
        let put_email = Put::builder()
            .table_name(&*db.table)
            .set_item(Some(email_item.clone()))
            .condition_expression("attribute_not_exists(PK) OR userId = :me")
            .expression_attribute_values(":me", me.clone())
            .build()
            .map_err(internal)?;
        let mut request = db
            .client
            .transact_write_items()
            .transact_items(
                TransactWriteItem::builder()
                    .put(put_profile.build().map_err(internal)?)
                    .build(),
            )
            .transact_items(TransactWriteItem::builder().put(put_email).build());
        if let Some(old) = old_email.as_deref() {
            let old = Email::parse(old).map_err(internal)?;
            let old_key = email_key(t, &old);
            if old_key != new_email_key {
                request = request.transact_items(
                    TransactWriteItem::builder()
                        .delete(
                            Delete::builder()
                                .table_name(&*db.table)
                                .set_key(Some(same_key(old_key)))
                                .condition_expression("userId = :me")
                                .expression_attribute_values(":me", me.clone())
                                .build()
                                .map_err(internal)?,
                        )
                        .build(),
                );
            }
        }
        let outcome = match transact(request).await {
            Ok(()) => Outcome::Written,
            Err(e) if e.failed_at(1) => Outcome::EmailTaken,
            // The profile or the old email item changed since the read: read again.
            Err(TransactError::ConditionFailed { .. }) => Outcome::Retry,
            Err(e) => return Err(e.into()),
        };
        match outcome {
            Outcome::Written => {
                let status = if current.is_some() {
                    StatusCode::OK
                } else {
                    StatusCode::CREATED
                };
                return Ok(json_response(status, &user));
            }
            Outcome::EmailTaken => {
                return Err(ApiError::Conflict(
                    "This email already belongs to another user of the tenant.".into(),
                ))
            }
            Outcome::Retry => continue,
        }
    }
    Err(ApiError::Conflict(
        "The user or the email changed concurrently; retry.".into(),
    ))
}
