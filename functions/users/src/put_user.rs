//! putUser: `PUT /users/{userId}` `{name, email}` → 201 (created) or 200 (updated).
//!
//! An email belongs to at most one user of a tenant. That is enforced by a uniqueness item
//! (`PK` = `SK` = `TENANT#t#EMAIL#<lowercased email>`, holding the owner's userId and name) that
//! changes in the same transaction as the profile.
//!
//! Requests (`crate::store::save_user`): one consistent GetItem of the profile (its current email),
//! then one TransactWriteItems:
//! - Put the profile, on condition it does not exist (new user) or its email is still the one read;
//! - Put the email item, on condition it does not exist or is already this user's;
//! - when the email changes: Delete the old email item, on condition it is this user's.
//!
//! A taken email cancels the transaction on the email item → 409, nothing written. A concurrent
//! change of the same profile (or a transaction conflict) is retried on a fresh read, a few times,
//! then 409.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::identity::clock::rfc3339;
use shared::service::http::{json_body, json_response, path_entity_id};
use shared::{ApiError, App};

use crate::store::{self, Saved};
use crate::{Email, Text, User};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Input {
    name: Text,
    email: Email,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| Ok((path_entity_id(req, "userId")?, json_body::<Input>(req)?));
    let ((id, input), db) = app.tenant_request(&req, parse).await?;
    let user = User {
        user_id: id.to_string(),
        name: input.name.0,
        email: input.email.as_str().to_owned(),
        updated_at: rfc3339(app.clock.now_millis()),
    };
    let status = match store::save_user(&db, &id, &input.email, &user).await? {
        Saved::Created => StatusCode::CREATED,
        Saved::Updated => StatusCode::OK,
    };
    Ok(json_response(status, &user))
}
