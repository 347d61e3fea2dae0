//! getUser: `GET /users/{userId}` → 200 `{userId, name, email, updatedAt, orders}` or 404.
//!
//! One Query of the user's item collection (`crate::store::user_with_recent_orders`): `PK = TENANT#t#USER#<u>`, descending, `Limit` 11. The
//! profile's SK (`TENANT#t#USER#<u>`) sorts after every order summary's (`TENANT#t#ORDER#<o>`), so it
//! comes first, followed by the 10 newest orders (by orderId; default ids are UUIDv7, time-ordered).

use lambda_http::{Body, Request, Response};
use shared::identity::ids::EntityId;
use shared::service::http::path_entity_id;
use shared::service::single::get_one;
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

use crate::store;

/// Orders returned with the profile.
pub const RECENT_ORDERS: usize = 10;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let read = |db: TenantDb, id: EntityId| async move {
        Ok(store::user_with_recent_orders(&db, &id, RECENT_ORDERS).await?)
    };
    let of = |req: &Request| path_entity_id(req, "userId");
    get_one(app, &req, of, read, "No such user.").await
}
