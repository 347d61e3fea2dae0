//! findUserByEmail: `GET /users?email=` → 200 `{userId, name, email}`, 404, or 400 (`email`).
//!
//! One GetItem (`crate::store::find_user_by_email`) of the email uniqueness item (`PK` = `SK` = `TENANT#t#EMAIL#<lowercased email>`),
//! which carries the owner's userId and name, so no second read is needed. Lookup is
//! case-insensitive, like uniqueness.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, query_param};
use shared::{ApiError, App};

use crate::{store, Email};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let raw = query_param(&req, "email")
        .ok_or_else(|| ApiError::bad_request("email", "query parameter email is required"))?;
    let email = Email::parse(&raw).map_err(|rule| ApiError::bad_request("email", rule))?;
    let db = app.db(t).await?;
    let owner = store::find_user_by_email(&db, &email)
        .await?
        .ok_or_else(|| ApiError::NotFound("No user has this email.".into()))?;
    Ok(json_response(StatusCode::OK, &owner))
}
