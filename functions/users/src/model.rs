//! The model: the views this crate stores and answers with, and their conversions to and from items.
//! A view is stored as its item's attributes, next to the keys and the bookkeeping attributes
//! (`kind`, `tenantId`, the catalog entry); reading an item back gives the view.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use shared::identity::clock::rfc3339;
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{EXPIRES_AT, SK};
use shared::identity::shard::shard_for;
use shared::store::client::error::StoreError;
use shared::store::client::items::{enlist, item_with_keys, view_from_item};
use shared::store::client::query::{string_attr, u64_attr, Item};

use crate::keys::{
    email_key, integration_key, key, kind, order_date_pk, order_key, order_line_sk, order_month_sk,
    same_key, transfer_key, user_key,
};
use crate::values::{Date, Email, TransferCode};

/// The stored user profile (also the API view).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub user_id: String,
    pub name: String,
    pub email: String,
    pub updated_at: String,
}

/// An order as the user's collection and the date index hold it (no line items).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderSummary {
    pub order_id: String,
    pub user_id: String,
    pub date: String,
    pub amount: f64,
    pub item_count: u32,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LineItem {
    pub item_id: String,
    pub sku: String,
    pub qty: u32,
    pub price: f64,
}

/// An order with its line items (the API view of createOrder and getOrder).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Order {
    #[serde(flatten)]
    pub summary: OrderSummary,
    pub items: Vec<LineItem>,
}

/// A profile with its newest order summaries (the API view of getUser).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserWithOrders {
    #[serde(flatten)]
    pub user: User,
    pub orders: Vec<OrderSummary>,
}

/// What the email uniqueness item holds: its owner (the API view of findUserByEmail).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmailOwner {
    pub user_id: String,
    pub name: String,
    pub email: String,
}

/// An integration token (the API view of getIntegrationToken).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationToken {
    pub service: String,
    pub token: String,
    pub expires_at: u64,
}

/// The profile item: `PK` = `SK` = `TENANT#t#USER#<u>`.
pub(crate) fn profile_item(t: &TenantId, id: &EntityId, user: &User) -> Result<Item, StoreError> {
    item_with_keys(user, same_key(user_key(t, id)), kind::USER, t)
}

/// The email uniqueness item of `user`: `PK` = `SK` = `TENANT#t#EMAIL#<lowercased email>`.
pub(crate) fn email_item(t: &TenantId, email: &Email, user: &User) -> Result<Item, StoreError> {
    let owner = EmailOwner {
        user_id: user.user_id.clone(),
        name: user.name.clone(),
        email: user.email.clone(),
    };
    item_with_keys(&owner, same_key(email_key(t, email)), kind::EMAIL, t)
}

/// A profile and its newest order summaries, from a descending Query of the user's collection: the
/// profile (SK = the partition) comes first; `None` when it is not there.
pub(crate) fn user_with_orders(
    partition: &str,
    items: Vec<Item>,
    recent: usize,
) -> Result<Option<UserWithOrders>, StoreError> {
    let mut items = items.into_iter();
    let Some(profile) = items
        .next()
        .filter(|i| string_attr(i, SK).as_deref() == Some(partition))
    else {
        return Ok(None);
    };
    let orders = items
        .take(recent)
        .map(view_from_item::<OrderSummary>)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(UserWithOrders {
        user: view_from_item(profile)?,
        orders,
    }))
}

/// An order to place: the typed user, order and line item ids and the date its keys are built from,
/// with the views it stores.
pub struct NewOrder {
    pub user: EntityId,
    pub id: EntityId,
    pub date: Date,
    pub summary: OrderSummary,
    pub lines: Vec<(EntityId, LineItem)>,
}

impl NewOrder {
    /// The order as createOrder answers it.
    pub fn view(&self) -> Order {
        Order {
            summary: self.summary.clone(),
            items: self.lines.iter().map(|(_, l)| l.clone()).collect(),
        }
    }
}

/// An order's items, as one transaction writes them.
pub(crate) struct OrderItems {
    /// `PK` = `SK` = `TENANT#t#ORDER#<o>`.
    pub header: Item,
    /// In the user's collection: `PK` = `TENANT#t#USER#<u>`, `SK` = the order's key.
    pub summary: Item,
    /// `PK` = `TENANT#t#ORDERDATE#<date>#<o>`, `SK` = `TENANT#t#ORDERS#<YYYY-MM>#<shard>`.
    pub date_index: Item,
    /// `PK` = the order's key, `SK` = `TENANT#t#ORDER#<o>#ITEM#<itemId>`.
    pub lines: Vec<Item>,
}

/// The items of `order`, its date index written over `shards` shards.
pub(crate) fn order_items(
    t: &TenantId,
    order: &NewOrder,
    shards: u32,
) -> Result<OrderItems, StoreError> {
    let order_pk = order_key(t, &order.id);
    let summary = &order.summary;
    let header = item_with_keys(summary, same_key(order_pk.clone()), kind::ORDER, t)?;
    let in_collection = item_with_keys(
        summary,
        key(user_key(t, &order.user), order_pk.clone()),
        kind::ORDER_SUMMARY,
        t,
    )?;
    let shard = shard_for(order.id.as_str(), shards);
    let date_index = item_with_keys(
        summary,
        key(
            order_date_pk(t, order.date, &order.id),
            order_month_sk(t, order.date.month(), shard),
        ),
        kind::ORDER_DATE,
        t,
    )?;
    let mut lines = Vec::with_capacity(order.lines.len());
    for (item_id, line) in &order.lines {
        let mut item = item_with_keys(
            line,
            key(order_pk.clone(), order_line_sk(t, &order.id, item_id)),
            kind::ITEM,
            t,
        )?;
        item.insert("orderId".into(), AttributeValue::S(order.id.to_string()));
        lines.push(item);
    }
    Ok(OrderItems {
        header,
        summary: in_collection,
        date_index,
        lines,
    })
}

/// An order from its partition's items: the header (SK = the partition) and its line items; `None`
/// when there is no header.
pub(crate) fn order_from_items(
    partition: &str,
    items: Vec<Item>,
) -> Result<Option<Order>, StoreError> {
    let mut header = None;
    let mut lines = Vec::new();
    for item in items {
        if string_attr(&item, SK).as_deref() == Some(partition) {
            header = Some(view_from_item::<OrderSummary>(item)?);
        } else {
            lines.push(view_from_item::<LineItem>(item)?);
        }
    }
    Ok(header.map(|summary| Order {
        summary,
        items: lines,
    }))
}

/// A transfer code to store: the code, its user, when it was made and when it expires.
pub struct NewTransferCode {
    pub code: TransferCode,
    pub user: EntityId,
    pub created_ms: u64,
    /// Epoch seconds; also the TTL attribute.
    pub expires_at: u64,
}

/// An item at `key` (its `PK` and `SK`) of `item_kind` holding the string `fields`, expiring at
/// `expires_at` (epoch seconds, the TTL attribute), in the tenant's catalog.
fn expiring_item<const N: usize>(
    t: &TenantId,
    key: String,
    item_kind: &str,
    fields: [(&str, String); N],
    expires_at: u64,
) -> Item {
    let mut item = same_key(key);
    item.insert("kind".into(), AttributeValue::S(item_kind.into()));
    item.insert("tenantId".into(), AttributeValue::S(t.to_string()));
    item.extend(fields.map(|(name, value)| (name.to_owned(), AttributeValue::S(value))));
    item.insert(EXPIRES_AT.into(), AttributeValue::N(expires_at.to_string()));
    enlist(t, &mut item);
    item
}

/// The transfer code item: `PK` = `SK` = `TENANT#t#TRANSFER#<code>`.
pub(crate) fn transfer_item(t: &TenantId, code: &NewTransferCode) -> Item {
    let fields = [
        ("userId", code.user.to_string()),
        ("createdAt", rfc3339(code.created_ms)),
    ];
    let key = transfer_key(t, &code.code);
    expiring_item(t, key, kind::TRANSFER, fields, code.expires_at)
}

/// The integration token item: `PK` = `SK` = `TENANT#t#INTEGRATION#<service>`, updated at
/// `updated_ms`.
pub(crate) fn integration_item(
    t: &TenantId,
    service: &EntityId,
    token: &IntegrationToken,
    updated_ms: u64,
) -> Item {
    let fields = [
        ("service", service.to_string()),
        ("token", token.token.clone()),
        ("updatedAt", rfc3339(updated_ms)),
    ];
    let key = integration_key(t, service);
    expiring_item(t, key, kind::INTEGRATION, fields, token.expires_at)
}

/// The token an integration token item holds.
pub(crate) fn integration_token(
    service: &EntityId,
    item: &Item,
) -> Result<IntegrationToken, StoreError> {
    let (Some(token), Some(expires_at)) = (string_attr(item, "token"), u64_attr(item, EXPIRES_AT))
    else {
        return Err(StoreError::Internal("stored token is incomplete".into()));
    };
    Ok(IntegrationToken {
        service: service.to_string(),
        token,
        expires_at,
    })
}
