//! The platform's own partitions (`TENANT#_platform#…`): offboarding reports, the lifecycle driver's list, the copies it deletes, the imports' deadline list.

use super::*;
use crate::identity::entities::{spaces, Space};
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::shard::shard_for;

/// `TENANT#_platform#<space>`: a platform space that is one partition.
fn platform_partition(space: Space) -> String {
    format!("{}{}", tenant_prefix(&TenantId::platform()), space.0)
}

/// `TENANT#_platform#<space>#`: what every key of a platform space starts with.
fn platform_prefix(space: Space) -> String {
    entity_prefix(&TenantId::platform(), space.0)
}

/// `TENANT#_platform#OFFBOARDED#<offboarded>`: the partition of every report of `offboarded`'s
/// offboardings, in the platform's partition ([`TenantId::platform`]): a report outlives the tenant
/// of the operator who asked for it, and no tenant of that id (a later one included) can read it.
pub fn offboarding_reports_pk(offboarded: &TenantId) -> String {
    format!("{}{offboarded}", platform_prefix(spaces::OFFBOARDED))
}

/// `TENANT#_platform#DRIVE`: the partition listing every tenant whose re-sharding or offboarding
/// the lifecycle driver steps to its end, in the platform's partition.
pub fn lifecycle_drive_pk() -> String {
    platform_partition(spaces::DRIVE)
}

/// `TENANT#_platform#DRIVE#<tenant>`: `tenant`'s entry in [`lifecycle_drive_pk`].
pub fn lifecycle_drive_sk(tenant: &TenantId) -> String {
    format!("{}{tenant}", platform_prefix(spaces::DRIVE))
}

/// `TENANT#_platform#COPIES`: the partition listing every point-in-time copy a restore's abort
/// leaves for the lifecycle driver to delete, in the platform's partition.
pub fn copies_to_delete_pk() -> String {
    platform_partition(spaces::COPIES)
}

/// `TENANT#_platform#COPIES#<table>`: the entry of the copy `table` in [`copies_to_delete_pk`].
pub fn copy_to_delete_sk(table: &str) -> String {
    format!("{}{table}", platform_prefix(spaces::COPIES))
}

/// `TENANT#_platform#CONTROL`: the partition of the control plane's requests (SaaS Builder
/// Toolkit events), each answered once, in the platform's partition.
pub fn control_requests_pk() -> String {
    platform_partition(spaces::CONTROL)
}

/// `TENANT#_platform#CONTROL#<request>`: one request's entry in [`control_requests_pk`]
/// (`<request>`: its kind and the control plane's id of it, `onboarding#<registration id>`).
pub fn control_request_sk(request: &str) -> String {
    format!("{}{request}", platform_prefix(spaces::CONTROL))
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

/// `TENANT#_platform#IMPORTS_DUE#`: what every partition of the imports' deadline list starts with
/// (the only keys of the platform's partition `create-import` may reach).
pub fn import_due_pk_prefix() -> String {
    platform_prefix(spaces::IMPORTS_DUE)
}

/// Partition `shard` of the imports' deadline list.
pub fn import_due_shard_pk(shard: u32) -> String {
    format!("{}{shard}", platform_prefix(spaces::IMPORTS_DUE))
}

/// `TENANT#_platform#IMPORTS_DUE#<dueAtMs, 13 digits>#<tenant>#<importId>`: an import's entry in
/// [`import_due_pk`]. The fixed-width deadline first, so "every entry due by now" is one key range
/// ([`import_due_sk_before`]).
pub fn import_due_sk(due_at_ms: u64, tenant: &TenantId, import: &EntityId) -> String {
    format!(
        "{}{due_at_ms:013}#{tenant}#{import}",
        platform_prefix(spaces::IMPORTS_DUE)
    )
}

/// An entry's attribute: when the import it lists was accepted (a later import of the same id is
/// not closed by an older entry).
pub const IMPORT_DUE_CREATED_AT: &str = "createdAtMs";

/// The attributes `create-import` sets on an import's entry in the deadline list, besides its key:
/// its kind (`IMPORT_DUE`), its partition's tenant (`_platform`) and [`IMPORT_DUE_CREATED_AT`]. They
/// are all its session may name there (`isolation::policy::PlatformAccess::ImportsDue`): the
/// lifecycle driver's note of the import's close, the entry's change the pool's stream publishes as
/// its `importFinished`, is out of its reach.
pub const IMPORT_DUE_LISTING: [&str; 3] = ["kind", "tenantId", IMPORT_DUE_CREATED_AT];

/// The bound below which every [`import_due_sk`] is due at `now_ms` (`SK < bound`).
pub fn import_due_sk_before(now_ms: u64) -> String {
    format!("{}{:013}", platform_prefix(spaces::IMPORTS_DUE), now_ms + 1)
}

/// The tenant and import an [`import_due_sk`] names.
pub fn parse_import_due_sk(sk: &str) -> Option<(u64, TenantId, EntityId)> {
    let rest = sk.strip_prefix(&platform_prefix(spaces::IMPORTS_DUE))?;
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
