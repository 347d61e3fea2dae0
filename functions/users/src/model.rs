//! The model: the views this crate stores and answers with, and their conversions to and from items.
//! A view is stored as its item's attributes, next to the keys and the bookkeeping attributes
//! (`kind`, `tenantId`, the catalog entry); reading an item back gives the view.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use shared::identity::clock::rfc3339;
use shared::identity::cursor::Key;
use shared::identity::entities::EntityKind;
use shared::identity::entities::{
    EMAIL, INTEGRATION, ORDER, ORDER_DATE, ORDER_LINE, ORDER_SUMMARY, TRANSFER, USER,
};
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{
    integration_key, order_date_pk, order_key, order_line_sk, order_month_sk, primary_key as key,
    same_key, user_key, SK,
};
use shared::identity::shard::shard_for;
use shared::store::client::entity::Entity;
use shared::store::client::error::StoreError;
use shared::store::client::items::{item_with_keys, view_from_item};
use shared::store::client::query::{string_attr, Item};
use shared::store::keys::{stored_form, TenantKey};

use crate::values::{Date, EmailSegment, TransferCode};

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

/// The profile: `PK` = `SK` = `TENANT#t#USER#<u>`.
impl Entity for User {
    const DECLARATION: EntityKind = USER;
    type Id = EntityId;
    fn key(t: &TenantId, id: &EntityId) -> Key {
        same_key(user_key(t, id))
    }
}

/// The email uniqueness item: `PK` = `SK` = `TENANT#t#EMAIL#<lowercased email>`.
impl Entity for EmailOwner {
    const DECLARATION: EntityKind = EMAIL;
    type Id = EmailSegment;
    fn key(t: &TenantId, email: &EmailSegment) -> Key {
        same_key(email.key(t))
    }
}

impl EmailOwner {
    /// The owner of `user`'s email.
    pub(crate) fn of(user: &User) -> Self {
        Self {
            user_id: user.user_id.clone(),
            name: user.name.clone(),
            email: user.email.clone(),
        }
    }
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

/// The items of `order`, its date index written over `shards` shards, as stored: sealed under
/// `sealing` when the tenant has a key.
pub(crate) fn order_items(
    t: &TenantId,
    sealing: Option<&TenantKey>,
    order: &NewOrder,
    shards: u32,
) -> Result<OrderItems, StoreError> {
    let order_pk = order_key(t, &order.id);
    let summary = &order.summary;
    let header = item_with_keys(summary, same_key(order_pk.clone()), ORDER.stored_as, t)?;
    let in_collection = item_with_keys(
        summary,
        key(user_key(t, &order.user), order_pk.clone()),
        ORDER_SUMMARY.stored_as,
        t,
    )?;
    let shard = shard_for(order.id.as_str(), shards);
    let date_index = item_with_keys(
        summary,
        key(
            order_date_pk(t, order.date, &order.id),
            order_month_sk(t, order.date.month(), shard),
        ),
        ORDER_DATE.kind,
        t,
    )?;
    let mut lines = Vec::with_capacity(order.lines.len());
    for (item_id, line) in &order.lines {
        let mut item = item_with_keys(
            line,
            key(order_pk.clone(), order_line_sk(t, &order.id, item_id)),
            ORDER_LINE.stored_as,
            t,
        )?;
        item.insert("orderId".into(), AttributeValue::S(order.id.to_string()));
        lines.push(stored_form(sealing, item)?);
    }
    Ok(OrderItems {
        header: stored_form(sealing, header)?,
        summary: stored_form(sealing, in_collection)?,
        date_index: stored_form(sealing, date_index)?,
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

/// A transfer code as stored: `PK` = `SK` = `TENANT#t#TRANSFER#<sha256(code)>`, expiring at
/// `expires_at` (epoch seconds, the TTL attribute); `redeemed_by` names the request that redeemed
/// it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TransferItem {
    pub user_id: String,
    pub created_at: String,
    pub expires_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redeemed_by: Option<String>,
}

impl Entity for TransferItem {
    const DECLARATION: EntityKind = TRANSFER;
    type Id = TransferCode;
    fn key(t: &TenantId, code: &TransferCode) -> Key {
        same_key(code.key(t))
    }
}

impl From<&NewTransferCode> for TransferItem {
    fn from(code: &NewTransferCode) -> Self {
        Self {
            user_id: code.user.to_string(),
            created_at: rfc3339(code.created_ms),
            expires_at: code.expires_at,
            redeemed_by: None,
        }
    }
}

/// An integration token as stored: `PK` = `SK` = `TENANT#t#INTEGRATION#<service>`, expiring at
/// `expires_at` (epoch seconds, the TTL attribute).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct IntegrationItem {
    pub service: String,
    pub token: String,
    pub updated_at: String,
    pub expires_at: u64,
}

impl Entity for IntegrationItem {
    const DECLARATION: EntityKind = INTEGRATION;
    type Id = EntityId;
    fn key(t: &TenantId, service: &EntityId) -> Key {
        same_key(integration_key(t, service))
    }
}

impl IntegrationItem {
    /// `token` of `service`, written at `updated_ms`.
    pub(crate) fn new(service: &EntityId, token: &IntegrationToken, updated_ms: u64) -> Self {
        Self {
            service: service.to_string(),
            token: token.token.clone(),
            updated_at: rfc3339(updated_ms),
            expires_at: token.expires_at,
        }
    }
}

impl From<IntegrationItem> for IntegrationToken {
    fn from(item: IntegrationItem) -> Self {
        Self {
            service: item.service,
            token: item.token,
            expires_at: item.expires_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use shared::identity::keys::{order_date_bounds, order_date_pk, order_key, user_key};

    use super::*;
    use crate::values::Email;

    fn t() -> TenantId {
        TenantId::parse("acme").unwrap()
    }

    fn id(raw: &str) -> EntityId {
        EntityId::parse(raw).unwrap()
    }

    fn date(raw: &str) -> Date {
        Date::parse(raw).unwrap()
    }

    #[test]
    fn the_profile_sorts_after_every_order_summary_in_its_collection() {
        // GIVEN a user's profile and order summaries of any id; THEN in descending order the
        // profile comes first, so one Query reads it with the newest orders
        let t = t();
        let profile = user_key(&t, &id("u"));
        for o in ["0", "zzzz", "ZZZ", "___", "---"] {
            assert!(profile > order_key(&t, &id(o)), "{o}");
        }
    }

    #[test]
    fn date_bounds_enclose_every_order_id_of_the_range_and_nothing_else() {
        let t = t();
        let (lo, hi) = order_date_bounds(&t, date("2026-01-05"), date("2026-01-06"));
        let max_id = "z".repeat(128);
        for (d, o, inside) in [
            ("2026-01-05", "0", true),
            ("2026-01-06", max_id.as_str(), true),
            ("2026-01-06", "___", true),
            ("2026-01-04", "zzz", false),
            ("2026-01-07", "---", false),
        ] {
            let pk = order_date_pk(&t, date(d), &id(o));
            assert_eq!(lo <= pk && pk <= hi, inside, "{pk}");
        }
    }

    #[test]
    fn typed_values_key_as_their_identity_keys() {
        let t = t();
        let email = Email::parse("Ada.L+x@Example.COM").unwrap();
        assert_eq!(
            email.plain_segment().key(&t),
            shared::identity::keys::email_key(&t, "ada.l+x@example.com")
        );
        // Under a tenant's key: a digest, the same for the same email in any case, no email text
        let key = shared::isolation::vault::TenantKey::new(
            t.clone(),
            1,
            vec![7; 32],
            "arn:aws:kms:us-east-1:123456789012:key/k".into(),
        )
        .unwrap();
        let hashed = email.segment(Some(&key)).key(&t);
        assert!(hashed.starts_with(&shared::identity::keys::email_key(&t, "h-")));
        assert!(!hashed.to_ascii_lowercase().contains("ada"), "{hashed}");
        let same = Email::parse("ada.l+X@example.com").unwrap();
        assert_eq!(same.segment(Some(&key)).key(&t), hashed);
        let code = TransferCode::parse("0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(
            code.key(&t),
            shared::identity::keys::transfer_key(&t, "0123456789abcdef0123456789abcdef")
        );
    }
}
