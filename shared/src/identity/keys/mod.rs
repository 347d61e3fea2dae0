//! The key scheme. Every `PK` and every `SK` starts with `TENANT#<tenantId>#`, because `SK` is the
//! partition key of the inverted `GSI1`, and IAM's `dynamodb:LeadingKeys` condition checks the
//! partition key of whichever table or index a request targets.
//!
//! Every key is built and parsed here, from the declarations in [`crate::identity::entities`]
//! (through [`KeySpace`]): no other module formats a key. The key table in `docs/key-scheme.md`
//! and ARCHITECTURE is generated from [`key_table`], which calls these builders, so a change to a
//! key's bytes shows there (`pooltable gen --check` fails until it is regenerated).
//!
//! Builders take only validated ids (`TenantId`, `EntityId`, `SessionId`), none of which can hold
//! `#`, so one entity's key can never be forged from another's id.

use thiserror::Error;

use crate::identity::ids::TenantId;

/// One item's primary key as plain strings: a position in a walk, or a checkpoint kept in an item.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ItemKey {
    pub pk: String,
    pub sk: String,
}

impl ItemKey {
    /// The table key (`PK`, `SK`) of an item or a `LastEvaluatedKey`; `None` unless both are strings.
    pub fn from_key(key: &Key) -> Option<Self> {
        use aws_sdk_dynamodb::types::AttributeValue::S;
        match (key.get(PK), key.get(SK)) {
            (Some(S(pk)), Some(S(sk))) => Some(Self {
                pk: pk.clone(),
                sk: sk.clone(),
            }),
            _ => None,
        }
    }

    /// The key as DynamoDB takes it.
    pub fn to_key(&self) -> Key {
        primary_key(self.pk.clone(), self.sk.clone())
    }
}

/// A DynamoDB key (or `LastEvaluatedKey`): attribute name → value.
pub type Key = std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>;

/// The table key (`PK`, `SK`) with these values: what names one item in a request, or starts an
/// item that is built attribute by attribute.
pub fn primary_key(pk: impl Into<String>, sk: impl Into<String>) -> Key {
    use aws_sdk_dynamodb::types::AttributeValue::S;
    Key::from([(PK.to_owned(), S(pk.into())), (SK.to_owned(), S(sk.into()))])
}

/// The table key of a single-item partition: `PK` and `SK` both `value` (a user's profile, an email's
/// uniqueness item, a transfer code, an order's header).
pub fn same_key(value: impl Into<String>) -> Key {
    let value = value.into();
    primary_key(value.clone(), value)
}

/// The table key (`PK`, `SK`) of `item` as it is, whatever their type: what names it in a GetItem
/// or a Delete, or starts a Query after it.
pub fn table_key(item: &Key) -> Key {
    [PK, SK]
        .into_iter()
        .filter_map(|k| item.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect()
}

pub const PK: &str = "PK";
pub const SK: &str = "SK";
pub const GSI1: &str = "GSI1";
/// Epoch seconds; the table's TTL attribute. Reads also compare it, since TTL deletion lags.
pub const EXPIRES_AT: &str = "expiresAt";

/// A key value did not have the expected shape for this tenant.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("key value does not have the expected shape")]
pub struct KeyShapeError;

/// `TENANT#<t>#`: the prefix every key value of the tenant starts with.
pub fn tenant_prefix(tenant: &TenantId) -> String {
    format!("{TENANT_SEGMENT}{tenant}#")
}

/// The first segment of every key value. Public for the attack tests that forge values no builder
/// makes (a bare `TENANT#t`, an upper-case tenant); every real key comes from a builder.
pub const TENANT_SEGMENT: &str = "TENANT#";

/// A space of one tenant's keys: every key value of it is `TENANT#<t>#<segment>#<rest>`.
/// Implemented by the entity and partition declarations ([`crate::identity::entities`]) and by
/// the machinery's own spaces ([`Space`]), so each key is built from the declaration that names it.
pub trait KeySpace {
    /// The key segment after the tenant (`PRODUCT`, `USAGE`, `IDEMPOTENCY`).
    fn segment(&self) -> &'static str;

    /// `TENANT#<t>#<segment>#`: the prefix of every key of the space (for `begins_with`).
    fn prefix(&self, tenant: &TenantId) -> String {
        entity_prefix(tenant, self.segment())
    }

    /// `TENANT#<t>#<segment>#<rest>`. `rest` is made of validated ids, numbers and `#`s.
    fn key(&self, tenant: &TenantId, rest: impl std::fmt::Display) -> String {
        format!("{}{rest}", self.prefix(tenant))
    }

    /// What follows the space's prefix in `value`, when `value` is a key of this space and tenant.
    fn strip<'a>(&self, tenant: &TenantId, value: &'a str) -> Result<&'a str, KeyShapeError> {
        strip_entity_prefix(tenant, self.segment(), value)
    }
}

pub use crate::identity::entities::Space;

impl KeySpace for Space {
    fn segment(&self) -> &'static str {
        self.0
    }
}

impl KeySpace for crate::identity::entities::FixedSpace {
    fn segment(&self) -> &'static str {
        self.kind
    }
}

impl KeySpace for crate::identity::entities::EntityKind {
    fn segment(&self) -> &'static str {
        self.kind
    }
}

/// A key value from an unvalidated tenant segment: `TENANT#<tenant>#<rest>`. For tests that hold
/// tenant ids as strings or forge keys no validated id can make; never on a request path.
pub fn raw_key(tenant: impl std::fmt::Display, rest: impl std::fmt::Display) -> String {
    format!("{TENANT_SEGMENT}{tenant}#{rest}")
}

/// The tenant segment of a key value (`TENANT#<t>#…` → `t`), unvalidated; `None` for a value of
/// no tenant.
pub fn tenant_segment(value: &str) -> Option<&str> {
    value.strip_prefix(TENANT_SEGMENT)?.split('#').next()
}

fn entity_prefix(tenant: &TenantId, kind: &str) -> String {
    format!("{TENANT_SEGMENT}{tenant}#{kind}#")
}

fn strip_entity_prefix<'a>(
    tenant: &TenantId,
    kind: &str,
    value: &'a str,
) -> Result<&'a str, KeyShapeError> {
    value
        .strip_prefix(TENANT_SEGMENT)
        .and_then(|rest| rest.strip_prefix(tenant.as_str()))
        .and_then(|rest| rest.strip_prefix('#'))
        .and_then(|rest| rest.strip_prefix(kind))
        .and_then(|rest| rest.strip_prefix('#'))
        .ok_or(KeyShapeError)
}

/// Entity kinds stored in sharded partitions (`TENANT#t#<PARTITION>#<shard>`).
/// The key segments of the kinds the shared layers name, from their declarations
/// ([`crate::identity::entities`]).
pub mod kind {
    use crate::identity::entities;

    pub const TENANT: &str = entities::TENANT_RECORD.kind;
    pub const PRODUCT: &str = entities::PRODUCT.kind;
    /// The HR partition space: employees and departments share it, told apart by the SK's kind.
    pub const HR: &str = entities::HR.kind;
    pub const EMPLOYEE: &str = entities::EMPLOYEE.kind;
    pub const DEPARTMENT: &str = entities::DEPARTMENT.kind;
    pub const MEMBER: &str = entities::MEMBER.stored_as;
}

/// The shape of a partition key value for telemetry: its kind, and its shard where the partition is
/// write-sharded; never an id, and never the tenant (logged on its own). `TENANT#t#PRODUCT#7` →
/// `PRODUCT#7`, `TENANT#t#ORDERS#2026-11#3` → `ORDERS#3`, `TENANT#t#SESSION#<id>` → `SESSION`; a value
/// of no tenant → `?`.
pub fn key_shape(value: &str) -> String {
    let Some(rest) = value.strip_prefix(TENANT_SEGMENT) else {
        return "?".into();
    };
    let mut segments = rest.split('#').skip(1);
    let Some(kind) = segments.next().filter(|k| !k.is_empty()) else {
        return "?".into();
    };
    let is_known_kind = kind.bytes().all(|b| b.is_ascii_uppercase());
    if !is_known_kind {
        return "?".into();
    }
    let shard = segments
        .last()
        .filter(|s| !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit()));
    match shard {
        Some(shard) if crate::identity::entities::shard_in_key_shape(kind) => {
            format!("{kind}#{shard}")
        }
        _ => kind.to_owned(),
    }
}

/// The tenant whose key value `value` is (`TENANT#<t>#…`), if it is one.
pub fn tenant_of_key(value: &str) -> Option<TenantId> {
    let (tenant, _) = value.strip_prefix(TENANT_SEGMENT)?.split_once('#')?;
    TenantId::parse(tenant).ok()
}

/// The tenant record: `PK` = `SK` = `TENANT#t#TENANT`.
pub fn tenant_record_key(tenant: &TenantId) -> String {
    format!("{}{}", tenant_prefix(tenant), kind::TENANT)
}

/// The tenant whose record key `value` is (`TENANT#t#TENANT`), if it is one.
pub fn parse_tenant_record_key(value: &str) -> Option<TenantId> {
    let tenant = value
        .strip_prefix(TENANT_SEGMENT)?
        .strip_suffix(kind::TENANT)?
        .strip_suffix('#')?;
    let tenant = TenantId::parse(tenant).ok()?;
    (tenant_record_key(&tenant) == value).then_some(tenant)
}

/// The kind segment of `tenant`'s key value `pk` (`TENANT#t#<KIND>#…` → `KIND`); `None` for another
/// tenant's key or an empty kind.
pub fn partition_kind<'a>(tenant: &TenantId, pk: &'a str) -> Option<&'a str> {
    let rest = pk.strip_prefix(&tenant_prefix(tenant))?;
    rest.split('#').next().filter(|kind| !kind.is_empty())
}

mod catalog;
mod imports;
mod lanes;
mod metering;
mod platform;
mod sessions;
mod sharded;
mod table;
mod users;
pub use catalog::{catalog_key, catalog_shard_key, CATALOG, CATALOG_INDEX, CATALOG_SHARDS};
pub use imports::{
    deletion_key, import_copy_sk, import_item_sk, import_item_sk_prefix, import_key,
    import_sealing_key,
};
pub use lanes::{lane_key, lanes_prefix};
pub use metering::{
    idempotency_record_key, is_metering_pk, parse_quota_window_second, quota_window_pk,
    quota_window_pk_prefix, quota_window_sk, usage_counter_pk, usage_counter_pk_prefix,
    usage_counter_sk, usage_counter_sk_bounds,
};
pub use platform::{
    control_request_sk, control_requests_pk, copies_to_delete_pk, copy_to_delete_sk, import_due_pk,
    import_due_pk_prefix, import_due_shard_pk, import_due_sk, import_due_sk_before,
    lifecycle_drive_pk, lifecycle_drive_sk, offboarding_report_sk, offboarding_reports_pk,
    parse_import_due_sk, IMPORT_DUE_CREATED_AT, IMPORT_DUE_LISTING, IMPORT_DUE_SHARDS,
};
pub use sessions::{
    child_sk, customer_sk, customer_sk_prefix, parse_child_sk, parse_customer_sk, parse_session_pk,
    session_collection_sk_prefix, session_pk,
};
pub use sharded::{
    department_members_pk, entity_sk, entity_sk_prefix, home_shard_pk, parse_entity_sk,
    parse_shard_pk, shard_pk, sharded_entity_key,
};
pub use table::{key_table, key_table_markdown, KeyRow, SAMPLE_SHARDS};
pub use users::{
    email_key, erasure_key, id_in_partition, integration_key, order_date_bounds, order_date_pk,
    order_key, order_line_sk, order_month_sk, parse_order_date_pk, transfer_key, user_key,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keys_tenant_is_its_first_segment_after_tenant() {
        let acme = TenantId::parse("acme").ok();
        assert_eq!(tenant_of_key("TENANT#acme#PRODUCT#3#p-1"), acme);
        assert_eq!(tenant_of_key("TENANT#acme#TENANT"), acme);
        for not_one in ["TENANT#acme", "TENANT##PRODUCT", "USER#acme#u-1", ""] {
            assert_eq!(tenant_of_key(not_one), None, "{not_one}");
        }
    }
}
