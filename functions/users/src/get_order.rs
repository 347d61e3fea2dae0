//! getOrder: `GET /orders/{orderId}` → 200 the order with its line items, or 404. No user id needed.
//!
//! One Query (`crate::store::order`) of the order's partition (`PK = TENANT#t#ORDER#<o>`): the header (`SK` = the same key)
//! sorts first, then the line items (`SK` = `TENANT#t#ORDER#<o>#ITEM#<itemId>`) in itemId order. An
//! order is at most 97 small items (the request body is capped at 64 KB), well inside one 1 MB Query
//! page; `LastEvaluatedKey` is followed anyway.

use lambda_http::{Body, Request, Response};
use shared::identity::ids::EntityId;
use shared::service::http::path_entity_id;
use shared::service::single::get_one;
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

use crate::store;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let read = |db: TenantDb, id: EntityId| async move { Ok(store::order(&db, &id).await?) };
    let of = |req: &Request| path_entity_id(req, "orderId");
    get_one(app, &req, of, read, "No such order.").await
}
