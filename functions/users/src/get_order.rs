//! getOrder: `GET /orders/{orderId}` → 200 the order with its line items, or 404. No user id needed.
//!
//! One Query of the order's partition (`PK = TENANT#t#ORDER#<o>`): the header (`SK` = the same key)
//! sorts first, then the line items (`SK` = `TENANT#t#ORDER#<o>#ITEM#<itemId>`) in itemId order. An
//! order is at most 97 small items (the request body is capped at 64 KB), well inside one 1 MB Query
//! page; `LastEvaluatedKey` is followed anyway.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::identity::keys::SK;
use shared::service::http::{json_response, path_entity_id};
use shared::store::client::query::{all_pages, string_attr};
use shared::{ApiError, App};

use crate::create_order::Order;
use crate::{order_key, view_from_item, LineItem, OrderSummary};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let id = path_entity_id(&req, "orderId")?;
    let db = app.db(t).await?;
    let partition = order_key(t, &id);
    let mut header = None;
    let mut items = Vec::new();
    for item in all_pages(db.query_partition(&partition)).await? {
        if string_attr(&item, SK).as_deref() == Some(partition.as_str()) {
            header = Some(view_from_item::<OrderSummary>(item)?);
        } else {
            items.push(view_from_item::<LineItem>(item)?);
        }
    }
    let summary = header.ok_or_else(|| ApiError::NotFound("No such order.".into()))?;
    Ok(json_response(StatusCode::OK, &Order { summary, items }))
}
