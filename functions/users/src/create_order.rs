//! createOrder: `POST /users/{userId}/orders` `{orderId?, date, amount, items: [{itemId, sku, qty,
//! price}]}` → 201 with the order.
//!
//! One TransactWriteItems, so an order is written whole or not at all:
//! - ConditionCheck: the user's profile exists (404 otherwise);
//! - Put the order header, `PK` = `SK` = `TENANT#t#ORDER#<o>`, on condition it does not exist (409);
//! - Put the order summary in the user's collection (`PK` = `TENANT#t#USER#<u>`, `SK` = the order's
//!   key), which getUser reads with the profile;
//! - Put the date index item (`PK` = `TENANT#t#ORDERDATE#<date>#<o>`,
//!   `SK` = `TENANT#t#ORDERS#<YYYY-MM>#<fnv(o) mod N>`), which listTenantOrders reads through GSI1;
//! - one Put per line item (`PK` = the order's key, `SK` = `TENANT#t#ORDER#<o>#ITEM#<itemId>`).
//!
//! A transaction holds at most 100 actions, so an order has at most [`MAX_LINE_ITEMS`] (95) line
//! items (one action is kept for the `Idempotency-Key` record, written in the same transaction); more
//! answer 400 (`items`) before anything is sent. The tenant's shard count N comes from its
//! record (cached per container), so the tenant must be onboarded (403 otherwise).

use std::collections::HashSet;

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use shared::identity::clock::rfc3339;
use shared::identity::ids::{EntityId, SessionId};
use shared::identity::shard::shard_for;
use shared::service::http::{json_body, json_response, path_entity_id};
use shared::service::idempotent::{self, Recorder};
use shared::store::client::scoped::TenantDb;
use shared::store::client::transact::transact;
use shared::{ApiError, App};

use crate::{
    internal, item_with_keys, key, kind, order_date_pk, order_key, order_line_sk, order_month_sk,
    same_key, user_exists_check, user_key, Date, LineItem, OrderSummary, Text,
};

/// TransactWriteItems' limit (100) minus the user check, the header, the summary, the date index and
/// an idempotency record.
pub const MAX_LINE_ITEMS: usize = 95;

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

/// An order with its line items (the API view of createOrder and getOrder).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Order {
    #[serde(flatten)]
    pub summary: OrderSummary,
    pub items: Vec<LineItem>,
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
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let user = path_entity_id(&req, "userId")?;
    let input: Input = json_body(&req)?;
    validate(&input)?;
    let now_ms = app.clock.now_millis();
    let order_id = match input.order_id.clone() {
        Some(id) => id,
        None => EntityId::parse(&SessionId::new_at(now_ms).to_string()).map_err(internal)?,
    };
    let db = app.db(t).await?;
    let now = app.clock.now_seconds();
    idempotent::run(&req, &db, t, ROUTE, now, |recorder| {
        create(app, &db, &user, order_id, input, now_ms, recorder)
    })
    .await
}

/// Writes the order in one transaction; with a recorder, its answer is recorded in it too.
async fn create(
    app: &App,
    db: &TenantDb,
    user: &EntityId,
    order_id: EntityId,
    input: Input,
    now_ms: u64,
    recorder: Option<Recorder<'_>>,
) -> Result<Response<Body>, ApiError> {
    let t = &db.tenant;
    let shards = app.directory.order_shards(db).await?;

    let summary = OrderSummary {
        order_id: order_id.to_string(),
        user_id: user.to_string(),
        date: input.date.to_string(),
        amount: input.amount,
        item_count: input.items.len() as u32,
        created_at: rfc3339(now_ms),
    };
    let lines: Vec<(EntityId, LineItem)> = input
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
        .collect();

    let order_pk = order_key(t, &order_id);
    let put = |item| {
        Put::builder()
            .table_name(&*db.table)
            .set_item(Some(item))
            .build()
            .map(|p| TransactWriteItem::builder().put(p).build())
            .map_err(internal)
    };
    let header = Put::builder()
        .table_name(&*db.table)
        .set_item(Some(item_with_keys(
            &summary,
            same_key(order_pk.clone()),
            kind::ORDER,
            t,
        )?))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .map_err(internal)?;
    let mut actions = vec![
        user_exists_check(db, t, user)?,
        TransactWriteItem::builder().put(header).build(),
        put(item_with_keys(
            &summary,
            key(user_key(t, user), order_pk.clone()),
            kind::ORDER_SUMMARY,
            t,
        )?)?,
        put(item_with_keys(
            &summary,
            key(
                order_date_pk(t, input.date, &order_id),
                order_month_sk(t, input.date.month(), shard_for(order_id.as_str(), shards)),
            ),
            kind::ORDER_DATE,
            t,
        )?)?,
    ];
    for (item_id, line) in &lines {
        let mut item = item_with_keys(
            line,
            key(order_pk.clone(), order_line_sk(t, &order_id, item_id)),
            kind::ITEM,
            t,
        )?;
        item.insert(
            "orderId".into(),
            aws_sdk_dynamodb::types::AttributeValue::S(order_id.to_string()),
        );
        actions.push(put(item)?);
    }

    let order = Order {
        summary,
        items: lines.into_iter().map(|(_, l)| l).collect(),
    };
    if let Some(recorder) = &recorder {
        actions.push(recorder.record(StatusCode::CREATED, &order)?);
    }
    let request = db
        .client
        .transact_write_items()
        .set_transact_items(Some(actions));
    match transact(request).await {
        Ok(()) => Ok(json_response(StatusCode::CREATED, &order)),
        Err(e) if e.failed_at(0) => Err(ApiError::NotFound("No such user.".into())),
        Err(e) if e.failed_at(1) => Err(ApiError::Conflict(
            "An order with this orderId already exists.".into(),
        )),
        Err(e) => Err(e.into()),
    }
}
