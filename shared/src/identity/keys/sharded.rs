//! Entities in a tenant's write-sharded partitions (`TENANT#t#<partition>#<shard>`), and the department adjacency list.

use super::*;
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::shard::shard_for;

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

#[cfg(test)]
mod sharded_key_tests {
    use super::*;
    use crate::identity::fixtures::{acme, id, tenant};

    #[test]
    fn golden_deletion_key_is_outside_the_product_listing_and_catalogued() {
        let key = deletion_key(&acme(), kind::PRODUCT, &id("sku-1"));
        assert_eq!(key, "TENANT#acme#DELETED#PRODUCT#sku-1");
        assert!(!key.starts_with(&entity_sk_prefix(&acme(), kind::PRODUCT)));
        assert!(catalog_key(&acme(), &key).is_some());
    }

    #[test]
    fn golden_import_keys() {
        let acme = acme();
        let import = id("0f3c");
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
        let t = acme();
        let p = id("sku-1");
        assert_eq!(tenant_record_key(&t), "TENANT#acme#TENANT");
        assert_eq!(catalog_shard_key(&t, 15), "TENANT#acme#CATALOG#15");
        assert_eq!(lifecycle_drive_pk(), "TENANT#_platform#DRIVE");
        assert_eq!(lifecycle_drive_sk(&t), "TENANT#_platform#DRIVE#acme");
        let gone = tenant("gone");
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
