//! Users, their orders, one-time transfer codes and integration tokens.
//!
//! Their keys are built in `shared::identity::keys` (table: `docs/key-scheme.md`, generated).
//!
//! A user's item collection holds the profile and one summary per order. In descending SK order the
//! profile (`…#USER#…`) sorts before the summaries (`…#ORDER#…`), so one Query with `Limit` 11 reads
//! the profile and its 10 newest orders (newest by orderId: the default ids are UUIDv7, time-ordered).
//!
//! Every key is built here from validated values (`EntityId`, [`Email`], [`TransferCode`],
//! [`Date`], [`Month`]), none of which can carry `#`.

// @generated begin: `pooltable gen` writes the route modules from routes.yaml
pub mod create_order;
pub mod create_transfer_code;
pub mod find_user_by_email;
pub mod get_integration_token;
pub mod get_order;
pub mod get_tenant_usage;
pub mod get_usage;
pub mod get_user;
pub mod list_tenant_orders;
pub mod put_integration_token;
pub mod put_user;
pub mod redeem_transfer_code;
// @generated end

use std::collections::HashMap;
use std::fmt;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{self, KeyShapeError, PK, SK};
use shared::ApiError;

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
    keys::transfer_key(t, &code.0)
}

/// A `{PK, SK}` key map.
pub fn key(pk: String, sk: String) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(pk)),
        (SK.to_owned(), AttributeValue::S(sk)),
    ])
}

/// A key map whose PK and SK are both `value` (single-item entities).
pub fn same_key(value: String) -> HashMap<String, AttributeValue> {
    key(value.clone(), value)
}

/// An email address: ASCII `[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`, at most 254 characters.
/// It can never contain `#`, so its lowercased form is safe inside a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Email(String);

impl Email {
    pub const MAX_LEN: usize = 254;

    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        const RULE: &str =
            "must be an email address (local@domain.tld, ASCII, at most 254 characters)";
        if raw.is_empty() || raw.len() > Self::MAX_LEN {
            return Err(RULE);
        }
        let (local, domain) = raw.split_once('@').ok_or(RULE)?;
        let local_ok = !local.is_empty()
            && local
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._%+-".contains(&b));
        let domain_chars_ok = domain
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        let tld_ok = domain.rsplit_once('.').is_some_and(|(host, tld)| {
            !host.is_empty() && tld.len() >= 2 && tld.bytes().all(|b| b.is_ascii_alphabetic())
        });
        if local_ok && domain_chars_ok && tld_ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(RULE)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The lowercased form: uniqueness is case-insensitive.
    pub fn normalized(&self) -> String {
        self.0.to_ascii_lowercase()
    }
}

impl<'de> Deserialize<'de> for Email {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// A one-time transfer code: 32 lowercase hex digits (a random UUIDv4, 122 random bits).
#[derive(Clone, PartialEq, Eq)]
pub struct TransferCode(String);

impl TransferCode {
    pub const LEN: usize = 32;

    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4().simple().to_string())
    }

    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        if raw.len() == Self::LEN
            && raw
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Self(raw.to_owned()))
        } else {
            Err("code must be 32 lowercase hexadecimal digits")
        }
    }

    /// The code itself, for the one response that hands it out. Never log it.
    pub fn reveal(&self) -> &str {
        &self.0
    }
}

/// Never prints the code, so it cannot reach a log by accident.
impl fmt::Debug for TransferCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TransferCode(<redacted>)")
    }
}

/// A calendar month.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Month {
    pub year: u16,
    pub month: u8,
}

impl Month {
    pub fn previous(self) -> Self {
        if self.month == 1 {
            Self {
                year: self.year - 1,
                month: 12,
            }
        } else {
            Self {
                year: self.year,
                month: self.month - 1,
            }
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        let b = raw.as_bytes();
        if b.len() != 7 || b[4] != b'-' {
            return None;
        }
        let year = digits(&b[..4])? as u16;
        let month = digits(&b[5..])? as u8;
        (year >= 1 && (1..=12).contains(&month)).then_some(Self { year, month })
    }

    /// Months from `from`'s to `to`'s, newest first (empty when `from` > `to`).
    pub fn newest_first(from: Date, to: Date) -> Vec<Month> {
        let (first, mut m) = (from.month(), to.month());
        let mut out = Vec::new();
        while m >= first {
            out.push(m);
            if m.year == 1 && m.month == 1 {
                break;
            }
            m = m.previous();
        }
        out
    }

    fn days(self) -> u8 {
        match self.month {
            4 | 6 | 9 | 11 => 30,
            2 if is_leap(self.year) => 29,
            2 => 28,
            _ => 31,
        }
    }
}

impl fmt::Display for Month {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}", self.year, self.month)
    }
}

fn is_leap(y: u16) -> bool {
    (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400)
}

fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
}

/// A real calendar date, `YYYY-MM-DD` (years 0001 to 9999).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    pub year: u16,
    pub month: u8,
    pub day: u8,
}

impl Date {
    pub const RULE: &'static str = "must be a calendar date YYYY-MM-DD";

    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let b = raw.as_bytes();
        if b.len() != 10 || b[7] != b'-' {
            return Err(Self::RULE);
        }
        let m = Month::parse(&raw[..7]).ok_or(Self::RULE)?;
        let day = digits(&b[8..]).ok_or(Self::RULE)? as u8;
        if day == 0 || day > m.days() {
            return Err(Self::RULE);
        }
        Ok(Self {
            year: m.year,
            month: m.month,
            day,
        })
    }

    pub fn month(self) -> Month {
        Month {
            year: self.year,
            month: self.month,
        }
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{:02}", self.month(), self.day)
    }
}

impl Serialize for Date {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Date {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

pub use shared::service::http::{PageBody, Text};

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

pub use shared::store::client::items::{item_with_keys, view_from_item};

/// `?from=YYYY-MM-DD&to=YYYY-MM-DD`: both required, `from` not after `to`, and the range touching at
/// most `max_months` calendar months (400 naming the parameter otherwise).
pub fn date_range(req: &lambda_http::Request, max_months: usize) -> Result<(Date, Date), ApiError> {
    let param = |name: &str| {
        let raw = shared::service::http::query_param(req, name).ok_or_else(|| {
            ApiError::bad_request(
                name,
                format!("query parameter {name} is required (YYYY-MM-DD)"),
            )
        })?;
        Date::parse(&raw).map_err(|rule| ApiError::bad_request(name, format!("{name} {rule}")))
    };
    let (from, to) = (param("from")?, param("to")?);
    if from > to {
        return Err(ApiError::bad_request("from", "from must not be after to"));
    }
    if Month::newest_first(from, to).len() > max_months {
        return Err(ApiError::bad_request(
            "to",
            format!("the range may span at most {max_months} calendar months"),
        ));
    }
    Ok((from, to))
}

/// The transaction action that checks user `user` exists (orders and transfer codes need one).
pub fn user_exists_check(
    db: &shared::store::client::scoped::TenantDb,
    t: &TenantId,
    user: &EntityId,
) -> Result<aws_sdk_dynamodb::types::TransactWriteItem, ApiError> {
    let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
        .table_name(&*db.table)
        .set_key(Some(same_key(user_key(t, user))))
        .condition_expression("attribute_exists(PK)")
        .build()
        .map_err(internal)?;
    Ok(aws_sdk_dynamodb::types::TransactWriteItem::builder()
        .condition_check(check)
        .build())
}

pub(crate) fn internal(e: impl fmt::Display) -> ApiError {
    ApiError::Internal(e.to_string())
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

    #[test]
    fn emails_follow_the_strict_rule() {
        for ok in ["a@b.co", "Ada.L+x_y%z-1@mail.example.org", "x@1-2.io"] {
            assert!(Email::parse(ok).is_ok(), "{ok}");
        }
        let long = format!("{}@example.com", "a".repeat(243));
        assert_eq!(long.len(), 255);
        for bad in [
            "",
            "a",
            "a@b",
            "a@b.c",
            "@b.co",
            "a@.co",
            "a@b.c0",
            "a#b@c.co",
            "a@b#c.co",
            "a@@b.co",
            "a b@c.co",
            " a@b.co",
            "a@b.co ",
            "é@b.co",
            "a@b.co\n",
            long.as_str(),
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn dates_are_real_calendar_dates() {
        for ok in ["2024-02-29", "2026-12-31", "2000-02-29", "0001-01-01"] {
            assert_eq!(date(ok).to_string(), ok);
        }
        for bad in [
            "2026-02-29",
            "1900-02-29",
            "2026-04-31",
            "2026-13-01",
            "2026-00-10",
            "2026-01-00",
            "0000-01-01",
            "2026-1-01",
            "2026/01/01",
            "26-01-01",
            "2026-01-01T00:00:00Z",
            "+026-01-01",
            "",
        ] {
            assert!(Date::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn months_are_listed_newest_first_across_years() {
        let ms: Vec<String> = Month::newest_first(date("2025-11-30"), date("2026-02-01"))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(ms, ["2026-02", "2026-01", "2025-12", "2025-11"]);
        assert!(Month::newest_first(date("2026-03-01"), date("2026-02-01")).is_empty());
    }

    #[test]
    fn transfer_codes_are_32_lowercase_hex_and_never_printed() {
        let c = TransferCode::random();
        assert!(TransferCode::parse(c.reveal()).is_ok());
        assert_ne!(c.reveal(), TransferCode::random().reveal());
        assert!(!format!("{c:?}").contains(c.reveal()));
        for bad in [
            "",
            "0123456789ABCDEF0123456789abcdef",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0",
            "0123456789abcdef0123456789abcdeg",
            "01234567-89ab-cdef-0123-456789abcdef",
        ] {
            assert!(TransferCode::parse(bad).is_err(), "{bad}");
        }
    }
}
