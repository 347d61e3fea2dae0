//! The users crate's keys: profiles, email uniqueness, orders (header, line items, the user's
//! summary, the date index under GSI1's month shards), transfer codes and integration tokens.
//! Every value in `rest` is validated by the caller's types (ids, dates, codes: none holds `#`).

use std::fmt::Display;

use super::*;
use crate::identity::entities::spaces;
use crate::identity::entities::{Gsi1, EMAIL, INTEGRATION, ORDER, ORDER_DATE, TRANSFER, USER};
use crate::identity::ids::EntityId;

/// The order date index's GSI1 partitions (`TENANT#t#ORDERS#<YYYY-MM>#<shard>`), from its declaration.
const ORDERS: Space = match ORDER_DATE.gsi1 {
    Gsi1::MonthShards { partition } => Space(partition),
    Gsi1::BySortKey => panic!("the order date index is under month shards"),
};

/// An order's line items sort under it: `TENANT#t#ORDER#<o>#ITEM#<i>`.
const LINE_ITEM: &str = "ITEM";

/// `TENANT#t#USER#<u>`: the user's partition, and the profile's PK and SK.
pub fn user_key(tenant: &TenantId, user: &EntityId) -> String {
    USER.key(tenant, user)
}

/// `TENANT#t#EMAIL#<lowercased email>`: the email uniqueness item's PK and SK.
pub fn email_key(tenant: &TenantId, normalized_email: impl Display) -> String {
    EMAIL.key(tenant, normalized_email)
}

/// `TENANT#t#ORDER#<o>`: the order's partition, its header's SK and its summary's SK.
/// `TENANT#t#ERASED#<kind>#<id>` (`PK` = `SK`): the record that `kind` `id` (a user, or one of an
/// erased user's orders) was erased. A partition of its own, named by the id, found through the
/// catalog; never restored (a restore re-applies it: `store::erasures`), deleted only by offboarding.
pub fn erasure_key(tenant: &TenantId, kind: &str, id: &EntityId) -> String {
    format!("{}{kind}#{id}", entity_prefix(tenant, spaces::ERASED.0))
}

/// The id of `tenant`'s key value `value` in the partitions of entity `kind`
/// (`TENANT#t#<KIND>#<id>…` → `id`), when it is one.
pub fn id_in_partition<'a>(tenant: &TenantId, kind: &str, value: &'a str) -> Option<&'a str> {
    let rest = value.strip_prefix(&entity_prefix(tenant, kind))?;
    rest.split('#').next().filter(|id| !id.is_empty())
}

pub fn order_key(tenant: &TenantId, order: &EntityId) -> String {
    ORDER.key(tenant, order)
}

/// `TENANT#t#ORDER#<o>#ITEM#<itemId>`: a line item's SK in the order's partition.
pub fn order_line_sk(tenant: &TenantId, order: &EntityId, item: &EntityId) -> String {
    ORDER.key(tenant, format_args!("{order}#{LINE_ITEM}#{item}"))
}

/// `TENANT#t#ORDERS#<YYYY-MM>#<shard>`: one GSI1 partition of the order date index.
pub fn order_month_sk(tenant: &TenantId, month: impl Display, shard: u32) -> String {
    ORDERS.key(tenant, format_args!("{month}#{shard}"))
}

/// `TENANT#t#ORDERDATE#<YYYY-MM-DD>#<o>`: the date index item's PK, its sort key in GSI1.
pub fn order_date_pk(tenant: &TenantId, date: impl Display, order: &EntityId) -> String {
    ORDER_DATE.key(tenant, format_args!("{date}#{order}"))
}

/// The lowest and highest GSI1 sort key of orders dated `from` to `to` (inclusive). Order ids use
/// only `[A-Za-z0-9_-]`, all below `~`, so `<to>#~` is above every order id of `to`.
pub fn order_date_bounds(
    tenant: &TenantId,
    from: impl Display,
    to: impl Display,
) -> (String, String) {
    (
        ORDER_DATE.key(tenant, format_args!("{from}#")),
        ORDER_DATE.key(tenant, format_args!("{to}#~")),
    )
}

/// The date (unparsed) and the order an [`order_date_pk`] names.
pub fn parse_order_date_pk<'a>(
    tenant: &TenantId,
    value: &'a str,
) -> Result<(&'a str, EntityId), KeyShapeError> {
    let (date, order) = ORDER_DATE
        .strip(tenant, value)?
        .split_once('#')
        .ok_or(KeyShapeError)?;
    Ok((date, EntityId::parse(order).map_err(|_| KeyShapeError)?))
}

/// `TENANT#t#TRANSFER#<sha256(code)>`: a transfer code's PK and SK, under the SHA-256 of the code
/// (64 lowercase hex digits), never the code itself. A code grants access for 15 minutes, and a
/// key is readable in a copy of the table (a backup, an export, a keyed tenant's sealed items
/// included); its digest is not a code. A code has 122 random bits, so trying codes cannot
/// reverse it.
pub fn transfer_key(tenant: &TenantId, code: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(code.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    TRANSFER.key(tenant, hex)
}

/// `TENANT#t#INTEGRATION#<service>`: an integration token's PK and SK.
pub fn integration_key(tenant: &TenantId, service: &EntityId) -> String {
    INTEGRATION.key(tenant, service)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::fixtures::{acme, id};

    #[test]
    fn golden_user_keys() {
        let t = acme();
        assert_eq!(user_key(&t, &id("u-1")), "TENANT#acme#USER#u-1");
        assert_eq!(
            email_key(&t, "ada.l+x@example.com"),
            "TENANT#acme#EMAIL#ada.l+x@example.com"
        );
        assert_eq!(order_key(&t, &id("o-9")), "TENANT#acme#ORDER#o-9");
        assert_eq!(
            order_line_sk(&t, &id("o-9"), &id("line-2")),
            "TENANT#acme#ORDER#o-9#ITEM#line-2"
        );
        assert_eq!(
            order_month_sk(&t, "2026-11", 3),
            "TENANT#acme#ORDERS#2026-11#3"
        );
        assert_eq!(
            order_date_pk(&t, "2026-01-05", &id("o-9")),
            "TENANT#acme#ORDERDATE#2026-01-05#o-9"
        );
        assert_eq!(
            order_date_bounds(&t, "2026-01-05", "2026-02-28"),
            (
                "TENANT#acme#ORDERDATE#2026-01-05#".to_owned(),
                "TENANT#acme#ORDERDATE#2026-02-28#~".to_owned()
            )
        );
        assert_eq!(
            transfer_key(&t, "0123456789abcdef0123456789abcdef"),
            "TENANT#acme#TRANSFER#3eb1bd439947eb762998e566ccc2e099c791118b2f40579cc4f7da2b5061b7f9"
        );
        assert_eq!(
            integration_key(&t, &id("github")),
            "TENANT#acme#INTEGRATION#github"
        );
    }
}
