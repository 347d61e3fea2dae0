//! getUser: `GET /users/{userId}` → 200 `{userId, name, email, updatedAt, orders}` or 404.
//!
//! One Query of the user's item collection (`crate::store::user_with_recent_orders`): `PK = TENANT#t#USER#<u>`, descending, `Limit` 11. The
//! profile's SK (`TENANT#t#USER#<u>`) sorts after every order summary's (`TENANT#t#ORDER#<o>`), so it
//! comes first, followed by the 10 newest orders (by orderId; default ids are UUIDv7, time-ordered).

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, path_entity_id};
use shared::{ApiError, App};

use crate::store;

/// Orders returned with the profile.
pub const RECENT_ORDERS: usize = 10;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let id = path_entity_id(&req, "userId")?;
    let db = app.db(t).await?;
    let user = store::user_with_recent_orders(&db, &id, RECENT_ORDERS)
        .await?
        .ok_or_else(|| ApiError::NotFound("No such user.".into()))?;
    Ok(json_response(StatusCode::OK, &user))
}
