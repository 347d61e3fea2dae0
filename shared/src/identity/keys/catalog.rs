//! The catalog index: every item outside a tenant's fixed partitions is found through it.

use super::*;
use crate::identity::entities::spaces;
use crate::identity::ids::TenantId;

/// The catalog index: every item outside a tenant's fixed partitions carries [`CATALOG`], so an
/// operator can enumerate the tenant (export, offboarding) with Queries, never a Scan. Its partition
/// key is `catalog`, its sort key the table's `PK`; it projects keys only.
pub const CATALOG_INDEX: &str = "GSI2";
/// The catalog attribute: `TENANT#t#CATALOG#<fnv(PK) mod CATALOG_SHARDS>`.
pub const CATALOG: &str = "catalog";
/// Catalog partitions per tenant: a tenant's item writes spread over this many index partitions.
pub const CATALOG_SHARDS: u32 = 16;

/// `TENANT#t#CATALOG#<shard>`: one of the tenant's catalog partitions.
pub fn catalog_shard_key(tenant: &TenantId, shard: u32) -> String {
    format!("{}{shard}", entity_prefix(tenant, spaces::CATALOG.0))
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
mod catalog_tests {
    use super::*;
    use crate::identity::fixtures::acme;

    #[test]
    fn id_named_partitions_get_a_catalog_entry_and_fixed_ones_none() {
        let t = acme();
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
