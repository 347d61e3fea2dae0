//! This crate's keys, typed: thin wrappers over `shared::identity::keys` that take the validated
//! values ([`Email`], [`TransferCode`], [`Date`], [`Month`]) instead of strings (table:
//! `docs/key-scheme.md`, generated).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{self, KeyShapeError};

use crate::values::{Date, Email, Month, TransferCode};

/// Entity kinds in this crate's keys, from their declarations (`shared::identity::entities`).
pub mod kind {
    use shared::identity::entities::{self, Gsi1};

    pub const USER: &str = entities::USER.kind;
    pub const EMAIL: &str = entities::EMAIL.kind;
    pub const ORDER: &str = entities::ORDER.kind;
    /// An order's line items sort under it: `TENANT#t#ORDER#<o>#ITEM#<i>`.
    pub const ITEM: &str = "ITEM";
    /// The date index's GSI1 partitions: `ORDERS#<YYYY-MM>#<shard>`.
    pub const ORDERS: &str = match entities::ORDER_DATE.gsi1 {
        Gsi1::MonthShards { partition } => partition,
        Gsi1::BySortKey => panic!("the order date index is under month shards"),
    };
    /// The date index's own PK (GSI1 sort key): `ORDERDATE#<YYYY-MM-DD>#<orderId>`.
    pub const ORDER_DATE: &str = entities::ORDER_DATE.kind;
    pub const TRANSFER: &str = entities::TRANSFER.kind;
    pub const INTEGRATION: &str = entities::INTEGRATION.kind;
    /// The `kind` attribute of an order summary in a user's collection.
    pub const ORDER_SUMMARY: &str = entities::ORDER_SUMMARY.stored_as;
}

pub use shared::identity::keys::{integration_key, order_key, order_line_sk, user_key};

/// `TENANT#t#EMAIL#<lowercased email>`: the email uniqueness item's PK and SK.
pub fn email_key(t: &TenantId, email: &Email) -> String {
    keys::email_key(t, email.normalized())
}

/// `TENANT#t#ORDERS#<YYYY-MM>#<shard>`: one GSI1 partition of the order date index.
pub fn order_month_sk(t: &TenantId, month: Month, shard: u32) -> String {
    keys::order_month_sk(t, month, shard)
}

/// `TENANT#t#ORDERDATE#<YYYY-MM-DD>#<o>`: the date index item's PK, its sort key in GSI1.
pub fn order_date_pk(t: &TenantId, date: Date, order: &EntityId) -> String {
    keys::order_date_pk(t, date, order)
}

/// The lowest and highest GSI1 sort key of orders dated `from` to `to` (inclusive).
pub fn order_date_bounds(t: &TenantId, from: Date, to: Date) -> (String, String) {
    keys::order_date_bounds(t, from, to)
}

pub fn parse_order_date_pk(t: &TenantId, value: &str) -> Result<(Date, EntityId), KeyShapeError> {
    let (date, order) = keys::parse_order_date_pk(t, value)?;
    Ok((Date::parse(date).map_err(|_| KeyShapeError)?, order))
}

/// `TENANT#t#TRANSFER#<code>`: a transfer code's PK and SK.
pub fn transfer_key(t: &TenantId, code: &TransferCode) -> String {
    keys::transfer_key(t, code.key_segment())
}

/// A `{PK, SK}` key map.
pub fn key(pk: String, sk: String) -> HashMap<String, AttributeValue> {
    keys::primary_key(pk, sk)
}

/// A key map whose PK and SK are both `value` (single-item entities).
pub fn same_key(value: String) -> HashMap<String, AttributeValue> {
    key(value.clone(), value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::identity::entities::{ORDER, ORDER_DATE};
    use shared::identity::keys::KeySpace;

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
    fn typed_keys_are_the_identity_keys_of_their_values() {
        let t = t();
        let email = Email::parse("Ada.L+x@Example.COM").unwrap();
        assert_eq!(
            email_key(&t, &email),
            keys::email_key(&t, "ada.l+x@example.com")
        );
        let d = date("2026-11-05");
        assert_eq!(
            order_month_sk(&t, d.month(), 3),
            keys::order_month_sk(&t, "2026-11", 3)
        );
        assert_eq!(
            order_date_pk(&t, d, &id("o-9")),
            keys::order_date_pk(&t, "2026-11-05", &id("o-9"))
        );
        let code = TransferCode::parse("0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(
            transfer_key(&t, &code),
            keys::transfer_key(&t, "0123456789abcdef0123456789abcdef")
        );
    }

    #[test]
    fn the_profile_sorts_after_every_order_summary_in_its_collection() {
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
    fn order_date_pk_parses_back_and_refuses_other_shapes() {
        let t = t();
        let pk = order_date_pk(&t, date("2024-02-29"), &id("o-1"));
        assert_eq!(
            parse_order_date_pk(&t, &pk),
            Ok((date("2024-02-29"), id("o-1")))
        );
        let other = TenantId::parse("other").unwrap();
        for bad in [
            ORDER_DATE.key(&t, "2024-02-30#o-1"),
            ORDER_DATE.key(&t, "2024-02-29#o#1"),
            ORDER_DATE.key(&t, "2024-02-29"),
            ORDER_DATE.key(&other, "2024-02-29#o-1"),
            ORDER.key(&t, "2024-02-29#o-1"),
        ] {
            assert_eq!(parse_order_date_pk(&t, &bad), Err(KeyShapeError), "{bad}");
        }
    }
}
