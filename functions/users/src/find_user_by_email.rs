//! findUserByEmail: `GET /users?email=` → 200 `{userId, name, email}`, 404, or 400 (`email`).
//!
//! One GetItem (`crate::store::find_user_by_email`) of the email uniqueness item (`PK` = `SK` = `TENANT#t#EMAIL#<lowercased email>`),
//! which carries the owner's userId and name, so no second read is needed. Lookup is
//! case-insensitive, like uniqueness.

use lambda_http::{Body, Request, Response};
use shared::service::http::query_param;
use shared::service::single::get_one;
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

use crate::{store, Email};

/// `?email=`, required and well-formed.
fn email_of(req: &Request) -> Result<Email, ApiError> {
    let raw = query_param(req, "email")?
        .ok_or_else(|| ApiError::bad_request("email", "query parameter email is required"))?;
    Email::parse(&raw).map_err(|rule| ApiError::bad_request("email", rule))
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let read = |db: TenantDb, email: Email| async move {
        Ok(store::find_user_by_email(&db, &email).await?)
    };
    get_one(app, &req, email_of, read, "No user has this email.").await
}
