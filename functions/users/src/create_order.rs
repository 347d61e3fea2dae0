//! createOrder: `POST /users/{userId}/orders` `{orderId?, date, amount, items: [{itemId, sku, qty,
//! price}]}` → 201 with the order.
//!
//! One TransactWriteItems (`crate::store::place_order`), so an order is written whole or not at all:
//! - ConditionCheck: the user's profile exists (404 otherwise);
//! - Put the order header, `PK` = `SK` = `TENANT#t#ORDER#<o>`, on condition it does not exist (409);
//! - Put the order summary in the user's collection (`PK` = `TENANT#t#USER#<u>`, `SK` = the order's
//!   key), which getUser reads with the profile;
//! - Put the date index item (`PK` = `TENANT#t#ORDERDATE#<date>#<o>`,
//!   `SK` = `TENANT#t#ORDERS#<YYYY-MM>#<fnv(o) mod N>`), which listTenantOrders reads through GSI1;
//! - with an `orderId` the client chose, ConditionCheck: no erasure record of that order
//!   (`TENANT#t#ERASED#ORDER#<o>`), or 409: an erased order's id is never used again, or a restore
//!   would drop the new order as the erased one;
//! - one Put per line item (`PK` = the order's key, `SK` = `TENANT#t#ORDER#<o>#ITEM#<itemId>`).
//!
//! A transaction holds at most 100 actions, so an order has at most [`MAX_LINE_ITEMS`] (94) line
//! items (one action is kept for the erased-id check, one for the `Idempotency-Key` record, written
//! in the same transaction); more answer 400 (`items`) before anything is sent. The tenant's shard count N comes from its
//! record (cached per container), so the tenant must be onboarded (403 otherwise).

use std::collections::HashSet;

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::identity::clock::rfc3339;
use shared::identity::ids::{EntityId, SessionId};
use shared::service::http::{json_body, json_response, path_entity_id};
use shared::service::idempotent::{self, Recorder};
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

use crate::error::internal;
use crate::model::NewOrder;
use crate::{store, Date, LineItem, OrderSummary, Text};

pub use crate::model::Order;

/// TransactWriteItems' limit (100) minus the user check, the header, the summary, the date index, the
/// erased-id check and an idempotency record.
pub const MAX_LINE_ITEMS: usize = 94;

pub const ROUTE: &str = "create-order";
/// The largest amount or price accepted (DynamoDB numbers have 38 significant digits; money needs
/// far fewer).
pub const MAX_MONEY: f64 = 1e12;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Input {
    #[serde(default)]
    order_id: Option<EntityId>,
    date: Date,
    amount: f64,
    items: Vec<LineInput>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LineInput {
    item_id: EntityId,
    sku: Text,
    #[serde(deserialize_with = "shared::service::http::whole_number")]
    qty: u32,
    price: f64,
}

fn money_ok(x: f64) -> bool {
    x.is_finite() && (x == 0.0 || (1e-6..=MAX_MONEY).contains(&x))
}

const MONEY_RULE: &str = "must be 0, or a number from 0.000001 to 1000000000000";

fn validate(input: &Input) -> Result<(), ApiError> {
    if !money_ok(input.amount) {
        return Err(ApiError::bad_request(
            "amount",
            format!("amount {MONEY_RULE}"),
        ));
    }
    if input.items.is_empty() || input.items.len() > MAX_LINE_ITEMS {
        return Err(ApiError::bad_request(
            "items",
            format!("an order has 1 to {MAX_LINE_ITEMS} line items"),
        ));
    }
    let mut seen = HashSet::new();
    for (i, line) in input.items.iter().enumerate() {
        if line.qty < 1 {
            return Err(ApiError::bad_request(
                &format!("items[{i}].qty"),
                "qty must be at least 1",
            ));
        }
        if !money_ok(line.price) {
            return Err(ApiError::bad_request(
                &format!("items[{i}].price"),
                format!("price {MONEY_RULE}"),
            ));
        }
        if !seen.insert(&line.item_id) {
            return Err(ApiError::bad_request(
                &format!("items[{i}].itemId"),
                "itemId appears twice in this order",
            ));
        }
    }
    Ok(())
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| {
        let user = path_entity_id(req, "userId")?;
        let input: Input = json_body(req)?;
        validate(&input)?;
        let now_ms = app.clock.now_millis();
        let order_id = match input.order_id.clone() {
            Some(id) => id,
            None => EntityId::parse(&SessionId::new_at(now_ms).to_string()).map_err(internal)?,
        };
        Ok((user, input, now_ms, order_id))
    };
    let ((user, input, now_ms, order_id), db) = app.tenant_request(&req, parse).await?;
    let now = app.clock.now_seconds();
    idempotent::run(&req, &db, &db.tenant, ROUTE, now, |recorder| {
        create(app, &db, &user, order_id, input, now_ms, recorder)
    })
    .await
}

/// Writes the order in one transaction (`crate::store::place_order`); with a recorder, its answer is
/// recorded in it too.
async fn create(
    app: &App,
    db: &TenantDb,
    user: &EntityId,
    order_id: EntityId,
    input: Input,
    now_ms: u64,
    recorder: Option<Recorder<'_>>,
) -> Result<Response<Body>, ApiError> {
    let chosen = input.order_id.is_some();
    let shards = app.directory.order_shards(db).await?;
    let order = NewOrder {
        summary: OrderSummary {
            order_id: order_id.to_string(),
            user_id: user.to_string(),
            date: input.date.to_string(),
            amount: input.amount,
            item_count: input.items.len() as u32,
            created_at: rfc3339(now_ms),
        },
        lines: input
            .items
            .into_iter()
            .map(|l| {
                let view = LineItem {
                    item_id: l.item_id.to_string(),
                    sku: l.sku.0,
                    qty: l.qty,
                    price: l.price,
                };
                (l.item_id, view)
            })
            .collect(),
        user: user.clone(),
        id: order_id,
        date: input.date,
    };
    let view = order.view();
    let record = recorder
        .as_ref()
        .map(|r| r.record(StatusCode::CREATED, &view))
        .transpose()?;
    store::place_order(db, shards, &order, chosen, record).await?;
    Ok(json_response(StatusCode::CREATED, &view))
}
