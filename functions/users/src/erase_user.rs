//! eraseUser: `DELETE /users/{userId}` → 200 with what was deleted, or 404.
//!
//! The user and every item of its own are deleted (profile, email item, order summaries, and each
//! order's header, line items and date index entry), and the erasure is recorded for good
//! (`TENANT#t#ERASED#USER#<u>`, one record per order): a later restore of the tenant, from any
//! point in time or copy, never brings any of it back, and the id is not used again (`put-user`
//! answers 409). A retry answers what the first call answered (the report is kept in the record).
//!
//! Requests (`crate::erasure::erase_user`): one consistent GetItem of the erasure record, one
//! UpdateItem of the fence, one Query of the user's partition (and per order two more, 16 orders at
//! a time), then one TransactWriteItems of the records and the deletes; past 100 actions, phases of
//! them (the records, the email and the profile, the orders' items, the summaries), each whole
//! before the next.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::identity::clock::rfc3339;
use shared::identity::ids::EntityId;
use shared::service::http::path_entity_id;
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

use crate::erasure::erase_user;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| path_entity_id(req, "userId");
    let (id, db) = app.tenant_request(&req, parse).await?;
    erasure_response(app, &db, &id).await
}

/// Erases user `id` of `db`'s tenant now: 200 with the report (the first one, on a retry), or 404.
/// The answer of `erase-user` and of the operator's `erase-tenant-user`.
pub(crate) async fn erasure_response(
    app: &App,
    db: &TenantDb,
    id: &EntityId,
) -> Result<Response<Body>, ApiError> {
    let erased_at = rfc3339(app.clock.now_millis());
    let report = erase_user(db, id, &erased_at)
        .await?
        .ok_or_else(|| ApiError::NotFound("No such user.".into()))?;
    let mut response = Response::new(Body::Text(report));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        lambda_http::http::header::CONTENT_TYPE,
        lambda_http::http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
