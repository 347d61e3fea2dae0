//! getOrder: `GET /orders/{orderId}` → 200 the order with its line items, or 404. No user id needed.
//!
//! One Query (`crate::store::order`) of the order's partition (`PK = TENANT#t#ORDER#<o>`): the header (`SK` = the same key)
//! sorts first, then the line items (`SK` = `TENANT#t#ORDER#<o>#ITEM#<itemId>`) in itemId order. An
//! order is at most 97 small items (the request body is capped at 64 KB), well inside one 1 MB Query
//! page; `LastEvaluatedKey` is followed anyway.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, path_entity_id};
use shared::{ApiError, App};

use crate::store;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let id = path_entity_id(&req, "orderId")?;
    let db = app.db(t).await?;
    let order = store::order(&db, &id)
        .await?
        .ok_or_else(|| ApiError::NotFound("No such order.".into()))?;
    Ok(json_response(StatusCode::OK, &order))
}
