//! The key scheme. Every `PK` and every `SK` starts with `TENANT#<tenantId>#`, because `SK` is the
//! partition key of the inverted `GSI1`, and IAM's `dynamodb:LeadingKeys` condition checks the
//! partition key of whichever table or index a request targets.
//!
//! | item | PK | SK |
//! |---|---|---|
//! | root session | `TENANT#t#SESSION#<sessionId>` | `TENANT#t#CUSTOMER#<customerId>` |
//! | child session | `TENANT#t#SESSION#<parentId>` | `TENANT#t#CHILD#<childId>` |
//!
//! Builders take only validated ids (`TenantId`, `EntityId`, `SessionId`), none of which can hold
//! `#`, so one entity's key can never be forged from another's id.

use thiserror::Error;

use crate::identity::ids::{EntityId, SessionId, TenantId};
use crate::identity::shard::shard_for;

/// One item's primary key as plain strings: a position in a walk, or a checkpoint kept in an item.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ItemKey {
    pub pk: String,
    pub sk: String,
}

/// A DynamoDB key (or `LastEvaluatedKey`): attribute name → value.
pub type Key = std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>;

pub const PK: &str = "PK";
pub const SK: &str = "SK";
pub const GSI1: &str = "GSI1";
/// Epoch seconds; the table's TTL attribute. Reads also compare it, since TTL deletion lags.
pub const EXPIRES_AT: &str = "expiresAt";

const SESSION: &str = crate::identity::entities::SESSION.kind;
const CUSTOMER: &str = "CUSTOMER";
const CHILD: &str = "CHILD";

/// A key value did not have the expected shape for this tenant.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("key value does not have the expected shape")]
pub struct KeyShapeError;

/// `TENANT#<t>#`: the prefix every key value of the tenant starts with.
pub fn tenant_prefix(tenant: &TenantId) -> String {
    format!("TENANT#{tenant}#")
}

fn entity_prefix(tenant: &TenantId, kind: &str) -> String {
    format!("TENANT#{tenant}#{kind}#")
}

fn strip_entity_prefix<'a>(
    tenant: &TenantId,
    kind: &str,
    value: &'a str,
) -> Result<&'a str, KeyShapeError> {
    value
        .strip_prefix("TENANT#")
        .and_then(|rest| rest.strip_prefix(tenant.as_str()))
        .and_then(|rest| rest.strip_prefix('#'))
        .and_then(|rest| rest.strip_prefix(kind))
        .and_then(|rest| rest.strip_prefix('#'))
        .ok_or(KeyShapeError)
}

/// `TENANT#t#SESSION#<sessionId>`: the partition of a session's item collection.
pub fn session_pk(tenant: &TenantId, session: &SessionId) -> String {
    format!("{}{session}", entity_prefix(tenant, SESSION))
}

pub fn parse_session_pk(tenant: &TenantId, value: &str) -> Result<SessionId, KeyShapeError> {
    SessionId::parse(strip_entity_prefix(tenant, SESSION, value)?).map_err(|_| KeyShapeError)
}

/// `TENANT#t#C`: the sort-key prefix of everything in a session's item collection, which holds only
/// `CHILD#` items and the root's `CUSTOMER#` item (and `CUSTOMER` sorts after `CHILD`).
pub fn session_collection_sk_prefix(tenant: &TenantId) -> String {
    format!("TENANT#{tenant}#C")
}

/// `TENANT#t#CUSTOMER#<customerId>`: a root session's SK, so GSI1 groups sessions by customer.
pub fn customer_sk(tenant: &TenantId, customer: &EntityId) -> String {
    format!("{}{customer}", entity_prefix(tenant, CUSTOMER))
}

pub fn customer_sk_prefix(tenant: &TenantId) -> String {
    entity_prefix(tenant, CUSTOMER)
}

pub fn parse_customer_sk(tenant: &TenantId, value: &str) -> Result<EntityId, KeyShapeError> {
    EntityId::parse(strip_entity_prefix(tenant, CUSTOMER, value)?).map_err(|_| KeyShapeError)
}

/// `TENANT#t#CHILD#<childId>`: a child session's SK inside its parent's item collection.
pub fn child_sk(tenant: &TenantId, child: &SessionId) -> String {
    format!("{}{child}", entity_prefix(tenant, CHILD))
}

pub fn child_sk_prefix(tenant: &TenantId) -> String {
    entity_prefix(tenant, CHILD)
}

pub fn parse_child_sk(tenant: &TenantId, value: &str) -> Result<SessionId, KeyShapeError> {
    SessionId::parse(strip_entity_prefix(tenant, CHILD, value)?).map_err(|_| KeyShapeError)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(raw: &str) -> TenantId {
        TenantId::parse(raw).unwrap()
    }

    fn sid() -> SessionId {
        SessionId::parse("0190f1b2-3c4d-7e5f-8a6b-7c8d9e0f1a2b").unwrap()
    }

    #[test]
    fn golden_session_keys() {
        let acme = t("acme");
        assert_eq!(tenant_prefix(&acme), "TENANT#acme#");
        assert_eq!(
            session_pk(&acme, &sid()),
            "TENANT#acme#SESSION#0190f1b2-3c4d-7e5f-8a6b-7c8d9e0f1a2b"
        );
        assert_eq!(
            customer_sk(&acme, &EntityId::parse("cust-42").unwrap()),
            "TENANT#acme#CUSTOMER#cust-42"
        );
        assert_eq!(
            child_sk(&acme, &sid()),
            "TENANT#acme#CHILD#0190f1b2-3c4d-7e5f-8a6b-7c8d9e0f1a2b"
        );
        assert_eq!(child_sk_prefix(&acme), "TENANT#acme#CHILD#");
        assert_eq!(customer_sk_prefix(&acme), "TENANT#acme#CUSTOMER#");
    }

    #[test]
    fn parsers_invert_builders() {
        let acme = t("acme");
        assert_eq!(
            parse_session_pk(&acme, &session_pk(&acme, &sid())),
            Ok(sid())
        );
        assert_eq!(parse_child_sk(&acme, &child_sk(&acme, &sid())), Ok(sid()));
        let cust = EntityId::parse("c1").unwrap();
        assert_eq!(
            parse_customer_sk(&acme, &customer_sk(&acme, &cust)),
            Ok(cust)
        );
    }

    #[test]
    fn parsers_refuse_another_tenants_or_another_kinds_key() {
        let a = t("a");
        let pk_of_ab = session_pk(&t("a-b"), &sid());
        assert_eq!(parse_session_pk(&a, &pk_of_ab), Err(KeyShapeError));
        assert_eq!(
            parse_session_pk(&a, &child_sk(&a, &sid())),
            Err(KeyShapeError)
        );
        assert_eq!(
            parse_customer_sk(&a, "TENANT#a#CUSTOMER#x#y"),
            Err(KeyShapeError)
        );
        assert_eq!(
            parse_customer_sk(&a, "TENANT#A#CUSTOMER#x"),
            Err(KeyShapeError)
        );
    }
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
    let Some(rest) = value.strip_prefix("TENANT#") else {
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

/// The tenant record: `PK` = `SK` = `TENANT#t#TENANT`.
pub fn tenant_record_key(tenant: &TenantId) -> String {
    format!("TENANT#{tenant}#{}", kind::TENANT)
}

/// `TENANT#t#<partition>#<shard>`: one of a tenant's write-sharded partitions.
pub fn shard_pk(tenant: &TenantId, partition: &str, shard: u32) -> String {
    format!("{}{shard}", entity_prefix(tenant, partition))
}

pub fn parse_shard_pk(
    tenant: &TenantId,
    partition: &str,
    value: &str,
) -> Result<u32, KeyShapeError> {
    let digits = strip_entity_prefix(tenant, partition, value)?;
    if digits.is_empty() || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(KeyShapeError);
    }
    digits.parse().map_err(|_| KeyShapeError)
}

/// The key of entity `id` of `kind`, stored in the tenant's `partition` write shards (`shards` of them):
/// `PK` = its shard ([`shard_pk`], the shard from the id's hash), `SK` = [`entity_sk`].
pub fn sharded_entity_key(
    tenant: &TenantId,
    partition: &str,
    kind: &str,
    id: &EntityId,
    shards: u32,
) -> Key {
    use aws_sdk_dynamodb::types::AttributeValue::S;
    Key::from([
        (
            PK.to_owned(),
            S(shard_pk(tenant, partition, shard_for(id.as_str(), shards))),
        ),
        (SK.to_owned(), S(entity_sk(tenant, kind, id))),
    ])
}

/// The partition an entity item (`pk`, `sk`) has among `shards` write shards: its partition space's
/// shard for the id in `sk` ([`sharded_entity_key`]); `None` when the keys are not a sharded entity's
/// of this tenant. A re-sharding moves an item to it.
pub fn home_shard_pk(tenant: &TenantId, pk: &str, sk: &str, shards: u32) -> Option<String> {
    let partition = partition_kind(tenant, pk)?;
    parse_shard_pk(tenant, partition, pk).ok()?;
    let entity_kind = partition_kind(tenant, sk)?;
    let id = parse_entity_sk(tenant, entity_kind, sk).ok()?;
    Some(shard_pk(tenant, partition, shard_for(id.as_str(), shards)))
}

/// `TENANT#t#<kind>#<id>`: an entity's sort key (also its own GSI1 partition).
pub fn entity_sk(tenant: &TenantId, kind: &str, id: &EntityId) -> String {
    format!("{}{id}", entity_prefix(tenant, kind))
}

/// `TENANT#t#<kind>#`: for `begins_with` on all entities of a kind.
pub fn entity_sk_prefix(tenant: &TenantId, kind: &str) -> String {
    entity_prefix(tenant, kind)
}

pub fn parse_entity_sk(
    tenant: &TenantId,
    kind: &str,
    value: &str,
) -> Result<EntityId, KeyShapeError> {
    EntityId::parse(strip_entity_prefix(tenant, kind, value)?).map_err(|_| KeyShapeError)
}

/// `TENANT#t#DEPARTMENT#<id>#MEMBERS`: the adjacency partition listing a department's employees.
pub fn department_members_pk(tenant: &TenantId, department: &EntityId) -> String {
    format!(
        "{}{department}#MEMBERS",
        entity_prefix(tenant, kind::DEPARTMENT)
    )
}

/// `TENANT#t#IMPORT#<importId>`: a bulk import's partition: its record (`PK` = `SK`) and one marker
/// per item the consumer has finished ([`import_item_sk`]).
pub fn import_key(tenant: &TenantId, import: &EntityId) -> String {
    entity_sk(tenant, "IMPORT", import)
}

/// `TENANT#t#IMPORT#<importId>#ITEM#<index>`: the marker that item `index` of the import is written
/// (or failed for good). Written in the same transaction as the item, so it exists exactly when the
/// item's write committed, and a redelivered message finds it and writes nothing.
pub fn import_item_sk(tenant: &TenantId, import: &EntityId, index: u32) -> String {
    format!("{}{index:04}", import_item_sk_prefix(tenant, import))
}

/// `TENANT#t#IMPORT#<importId>#ITEM#`: for `begins_with` on an import's markers.
pub fn import_item_sk_prefix(tenant: &TenantId, import: &EntityId) -> String {
    format!("{}#ITEM#", import_key(tenant, import))
}

/// `TENANT#t#DELETED#<kind>#<id>` (`PK` = `SK`): the tombstone of a deleted entity, for as long as an
/// import accepted before the delete may still arrive (`store::imports::tombstone`). A partition
/// of its own, named by the id: outside every listing, found through the catalog like any other,
/// and never moved by a re-sharding (its key does not depend on the shard count).
pub fn deletion_key(tenant: &TenantId, kind: &str, id: &EntityId) -> String {
    format!("{}{kind}#{id}", entity_prefix(tenant, "DELETED"))
}

/// `TENANT#t#SEALING#imports` (`PK` = `SK`): the key the tenant's import messages are sealed with
/// (`identity::sealing`). A partition of its own, found through the catalog: offboarding deletes it,
/// and with it every copy of the tenant's items still on a queue becomes unreadable.
pub fn import_sealing_key(tenant: &TenantId) -> String {
    format!("{}imports", entity_prefix(tenant, "SEALING"))
}

/// The catalog index: every item outside a tenant's fixed partitions carries [`CATALOG`], so an
/// operator can enumerate the tenant (export, offboarding) with Queries, never a Scan. Its partition
/// key is `catalog`, its sort key the table's `PK`; it projects keys only.
pub const CATALOG_INDEX: &str = "GSI2";
/// The catalog attribute: `TENANT#t#CATALOG#<fnv(PK) mod CATALOG_SHARDS>`.
pub const CATALOG: &str = "catalog";
/// Catalog partitions per tenant: a tenant's item writes spread over this many index partitions.
pub const CATALOG_SHARDS: u32 = 16;

/// `TENANT#_platform#OFFBOARDED#<offboarded>`: the partition of every report of `offboarded`'s
/// offboardings, in the platform's partition ([`TenantId::platform`]): a report outlives the tenant
/// of the operator who asked for it, and no tenant of that id (a later one included) can read it.
pub fn offboarding_reports_pk(offboarded: &TenantId) -> String {
    format!(
        "{}{offboarded}",
        entity_prefix(&TenantId::platform(), "OFFBOARDED")
    )
}

/// `TENANT#_platform#DRIVE`: the partition listing every tenant whose re-sharding or offboarding
/// the lifecycle driver steps to its end, in the platform's partition.
pub fn lifecycle_drive_pk() -> String {
    format!("{}DRIVE", tenant_prefix(&TenantId::platform()))
}

/// `TENANT#_platform#DRIVE#<tenant>`: `tenant`'s entry in [`lifecycle_drive_pk`].
pub fn lifecycle_drive_sk(tenant: &TenantId) -> String {
    format!("{}{tenant}", entity_prefix(&TenantId::platform(), "DRIVE"))
}

/// Partitions of the imports' deadline list: every `create-import` of every tenant writes one
/// entry, so it is spread like a hot key ([`import_due_pk`]).
pub const IMPORT_DUE_SHARDS: u32 = 8;

/// `TENANT#_platform#IMPORTS_DUE#<shard>`: one of [`IMPORT_DUE_SHARDS`] partitions listing every
/// import the lifecycle driver must bring to a final state by its deadline, sorted by that deadline
/// ([`import_due_sk`]). An import's shard is its tenant and id hashed.
pub fn import_due_pk(tenant: &TenantId, import: &EntityId) -> String {
    import_due_shard_pk(shard_for(&format!("{tenant}#{import}"), IMPORT_DUE_SHARDS))
}

/// Partition `shard` of the imports' deadline list.
pub fn import_due_shard_pk(shard: u32) -> String {
    format!(
        "{}IMPORTS_DUE#{shard}",
        tenant_prefix(&TenantId::platform())
    )
}

/// `TENANT#_platform#IMPORTS_DUE#<dueAtMs, 13 digits>#<tenant>#<importId>`: an import's entry in
/// [`import_due_pk`]. The fixed-width deadline first, so "every entry due by now" is one key range
/// ([`import_due_sk_before`]).
pub fn import_due_sk(due_at_ms: u64, tenant: &TenantId, import: &EntityId) -> String {
    format!(
        "{}{due_at_ms:013}#{tenant}#{import}",
        entity_prefix(&TenantId::platform(), "IMPORTS_DUE")
    )
}

/// The bound below which every [`import_due_sk`] is due at `now_ms` (`SK < bound`).
pub fn import_due_sk_before(now_ms: u64) -> String {
    format!(
        "{}{:013}",
        entity_prefix(&TenantId::platform(), "IMPORTS_DUE"),
        now_ms + 1
    )
}

/// The tenant and import an [`import_due_sk`] names.
pub fn parse_import_due_sk(sk: &str) -> Option<(u64, TenantId, EntityId)> {
    let rest = sk.strip_prefix(&entity_prefix(&TenantId::platform(), "IMPORTS_DUE"))?;
    let mut parts = rest.splitn(3, '#');
    let due = parts.next()?.parse().ok()?;
    let tenant = TenantId::parse(parts.next()?).ok()?;
    let import = EntityId::parse(parts.next()?).ok()?;
    Some((due, tenant, import))
}

/// `TENANT#_platform#OFFBOARDED#<offboarded>#<createdAt>`: the report of one offboarding, named by
/// the offboarded record's `createdAt`, so each tenant of a reused id gets its own report.
pub fn offboarding_report_sk(offboarded: &TenantId, created_at: &str) -> String {
    format!("{}#{created_at}", offboarding_reports_pk(offboarded))
}

/// The kind segment of `tenant`'s key value `pk` (`TENANT#t#<KIND>#…` → `KIND`); `None` for another
/// tenant's key or an empty kind.
pub fn partition_kind<'a>(tenant: &TenantId, pk: &'a str) -> Option<&'a str> {
    let rest = pk.strip_prefix(&tenant_prefix(tenant))?;
    rest.split('#').next().filter(|kind| !kind.is_empty())
}

/// `TENANT#t#CATALOG#<shard>`: one of the tenant's catalog partitions.
pub fn catalog_shard_key(tenant: &TenantId, shard: u32) -> String {
    format!("{}{shard}", entity_prefix(tenant, "CATALOG"))
}

/// The catalog value an item with partition key `pk` carries: `None` when `pk` is one of the
/// tenant's fixed partitions ([`crate::identity::entities::FIXED_SPACES`]: their items carry no catalog
/// entry, every other partition is named by an id and is found through the catalog) or not the
/// tenant's at all.
pub fn catalog_key(tenant: &TenantId, pk: &str) -> Option<String> {
    let kind = partition_kind(tenant, pk)?;
    if crate::identity::entities::fixed_space(kind).is_some() {
        return None;
    }
    let shard = (crate::identity::shard::fnv1a64(pk.as_bytes()) % u64::from(CATALOG_SHARDS)) as u32;
    Some(catalog_shard_key(tenant, shard))
}

#[cfg(test)]
mod sharded_key_tests {
    use super::*;

    #[test]
    fn golden_deletion_key_is_outside_the_product_listing_and_catalogued() {
        let acme = TenantId::parse("acme").unwrap();
        let p = EntityId::parse("sku-1").unwrap();
        let key = deletion_key(&acme, kind::PRODUCT, &p);
        assert_eq!(key, "TENANT#acme#DELETED#PRODUCT#sku-1");
        assert!(!key.starts_with(&entity_sk_prefix(&acme, kind::PRODUCT)));
        assert!(catalog_key(&acme, &key).is_some());
    }

    #[test]
    fn golden_import_keys() {
        let acme = TenantId::parse("acme").unwrap();
        let import = EntityId::parse("0f3c").unwrap();
        assert_eq!(import_key(&acme, &import), "TENANT#acme#IMPORT#0f3c");
        assert_eq!(
            import_item_sk(&acme, &import, 7),
            "TENANT#acme#IMPORT#0f3c#ITEM#0007"
        );
        assert!(
            import_item_sk(&acme, &import, 999).starts_with(&import_item_sk_prefix(&acme, &import))
        );
        // An import is found through the catalog, like every partition named by an id.
        assert!(catalog_key(&acme, &import_key(&acme, &import)).is_some());
        // Its deadline entry sorts by the deadline, and every entry due by a time is one key range.
        let due = import_due_sk(1_764_000_000_000, &acme, &import);
        assert_eq!(due, "TENANT#_platform#IMPORTS_DUE#1764000000000#acme#0f3c");
        assert_eq!(
            import_due_pk(&acme, &import),
            import_due_shard_pk(shard_for("acme#0f3c", IMPORT_DUE_SHARDS))
        );
        assert_eq!(import_due_shard_pk(3), "TENANT#_platform#IMPORTS_DUE#3");
        assert!(due < import_due_sk_before(1_764_000_000_000));
        assert!(due >= import_due_sk_before(1_763_999_999_999));
        assert_eq!(
            parse_import_due_sk(&due),
            Some((1_764_000_000_000, acme.clone(), import.clone()))
        );
    }

    #[test]
    fn golden_sharded_keys() {
        let t = TenantId::parse("acme").unwrap();
        let p = EntityId::parse("sku-1").unwrap();
        assert_eq!(tenant_record_key(&t), "TENANT#acme#TENANT");
        assert_eq!(catalog_shard_key(&t, 15), "TENANT#acme#CATALOG#15");
        assert_eq!(lifecycle_drive_pk(), "TENANT#_platform#DRIVE");
        assert_eq!(lifecycle_drive_sk(&t), "TENANT#_platform#DRIVE#acme");
        let gone = TenantId::parse("gone").unwrap();
        assert_eq!(
            offboarding_reports_pk(&gone),
            "TENANT#_platform#OFFBOARDED#gone"
        );
        assert_eq!(
            offboarding_report_sk(&gone, "2026-11-24T10:00:00.000Z"),
            "TENANT#_platform#OFFBOARDED#gone#2026-11-24T10:00:00.000Z"
        );
        assert_eq!(shard_pk(&t, kind::PRODUCT, 7), "TENANT#acme#PRODUCT#7");
        assert_eq!(
            entity_sk(&t, kind::PRODUCT, &p),
            "TENANT#acme#PRODUCT#sku-1"
        );
        assert_eq!(
            entity_sk_prefix(&t, kind::EMPLOYEE),
            "TENANT#acme#EMPLOYEE#"
        );
        assert_eq!(
            department_members_pk(&t, &p),
            "TENANT#acme#DEPARTMENT#sku-1#MEMBERS"
        );
        assert_eq!(
            parse_shard_pk(&t, kind::PRODUCT, "TENANT#acme#PRODUCT#7"),
            Ok(7)
        );
        assert_eq!(
            parse_shard_pk(&t, kind::PRODUCT, "TENANT#acme#PRODUCT#x"),
            Err(KeyShapeError)
        );
        assert_eq!(
            parse_entity_sk(&t, kind::PRODUCT, "TENANT#acme#PRODUCT#sku-1"),
            Ok(p)
        );
    }

    #[test]
    fn key_shapes_name_the_kind_and_shard_never_an_id() {
        for (value, shape) in [
            ("TENANT#acme#PRODUCT#7", "PRODUCT#7"),
            ("TENANT#acme#HR#15", "HR#15"),
            ("TENANT#acme#USAGE#3", "USAGE#3"),
            ("TENANT#acme#ORDERS#2026-11#3", "ORDERS#3"),
            (
                "TENANT#acme#SESSION#01a1fcba-9139-7bdd-8e68-8992306e0b9d",
                "SESSION",
            ),
            ("TENANT#acme#CUSTOMER#42", "CUSTOMER"),
            ("TENANT#acme#USER#u1", "USER"),
            ("TENANT#acme#TENANT", "TENANT"),
            ("TENANT#acme#DEPARTMENT#eng#MEMBERS", "DEPARTMENT"),
            ("TENANT#acme#PRODUCT#sku-1001", "PRODUCT"),
            ("TENANT#acme#lower#1", "?"),
            ("acme#PRODUCT#7", "?"),
            ("TENANT#acme", "?"),
        ] {
            assert_eq!(key_shape(value), shape, "{value}");
        }
    }
}

#[cfg(test)]
mod catalog_tests {
    use super::*;

    #[test]
    fn id_named_partitions_get_a_catalog_entry_and_fixed_ones_none() {
        let t = TenantId::parse("acme").unwrap();
        // GIVEN a partition named by an id, WHEN its catalog value is built, THEN it is stable golden
        assert_eq!(
            catalog_key(
                &t,
                "TENANT#acme#SESSION#0193a0b1-0000-7000-8000-000000000001"
            )
            .as_deref(),
            Some("TENANT#acme#CATALOG#11")
        );
        assert!(catalog_key(&t, "TENANT#acme#DEPARTMENT#d1#MEMBERS").is_some());
        assert!(catalog_key(&t, "TENANT#acme#IDEMPOTENCY#create-order#k").is_some());
        // AND fixed partitions, and other tenants' keys, get none
        for fixed in [
            "TENANT#acme#TENANT",
            "TENANT#acme#PRODUCT#3",
            "TENANT#acme#HR#0",
            "TENANT#acme#USAGE#7",
            "TENANT#acme#RATE#1",
            "TENANT#acme2#SESSION#x",
            "TENANT#acme#",
        ] {
            assert_eq!(catalog_key(&t, fixed), None, "{fixed}");
        }
    }
}
