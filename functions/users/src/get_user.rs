//! getUser: `GET /users/{userId}` → 200 `{userId, name, email, updatedAt, orders}` or 404.
//!
//! One Query of the user's item collection: `PK = TENANT#t#USER#<u>`, descending, `Limit` 11. The
//! profile's SK (`TENANT#t#USER#<u>`) sorts after every order summary's (`TENANT#t#ORDER#<o>`), so it
//! comes first, followed by the 10 newest orders (by orderId; default ids are UUIDv7, time-ordered).

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;
use shared::identity::keys::SK;
use shared::service::http::{json_response, path_entity_id};
use shared::store::client::query::string_attr;
use shared::{ApiError, App};

use crate::{user_key, view_from_item, OrderSummary, User};

/// Orders returned with the profile.
pub const RECENT_ORDERS: usize = 10;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UserWithOrders {
    #[serde(flatten)]
    user: User,
    orders: Vec<OrderSummary>,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let id = path_entity_id(&req, "userId")?;
    let db = app.db(t).await?;
    let partition = user_key(t, &id);
    let out = db
        .query_partition(&partition)
        .scan_index_forward(false)
        .limit(RECENT_ORDERS as i32 + 1)
        .send()
        .await
        .map_err(ApiError::from_dynamodb)?;
    let mut items = out.items.unwrap_or_default().into_iter();
    let profile = items
        .next()
        .filter(|i| string_attr(i, SK).as_deref() == Some(partition.as_str()))
        .ok_or_else(|| ApiError::NotFound("No such user.".into()))?;
    let orders = items
        .take(RECENT_ORDERS)
        .map(view_from_item::<OrderSummary>)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json_response(
        StatusCode::OK,
        &UserWithOrders {
            user: view_from_item(profile)?,
            orders,
        },
    ))
}
