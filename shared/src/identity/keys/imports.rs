//! Bulk imports' records and item markers, deletion tombstones, and the imports' sealing key.

use super::*;
use crate::identity::entities::spaces;
use crate::identity::ids::{EntityId, TenantId};

/// `TENANT#t#IMPORT#<importId>`: a bulk import's partition: its record (`PK` = `SK`) and one marker
/// per item the consumer has finished ([`import_item_sk`]).
pub fn import_key(tenant: &TenantId, import: &EntityId) -> String {
    entity_sk(tenant, spaces::IMPORT.0, import)
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

/// `TENANT#t#IMPORT#<importId>#COPY#<message>#<generation>`: that the consumer sent the copy of
/// generation `generation` of one of the import's messages (`<message>`: a digest of its sealed
/// items, the same in every copy) back on the queue (a deferral or a hold): a delivery of the
/// message again, after an invocation that failed whole, finds it and sends no second copy
/// (`store::imports::copies`).
pub fn import_copy_sk(
    tenant: &TenantId,
    import: &EntityId,
    message: &str,
    generation: u32,
) -> String {
    format!("{}#COPY#{message}#{generation}", import_key(tenant, import))
}

/// `TENANT#t#DELETED#<kind>#<id>` (`PK` = `SK`): the tombstone of a deleted entity, for as long as an
/// import accepted before the delete may still arrive (`store::imports::Tombstone`). A partition
/// of its own, named by the id: outside every listing, found through the catalog like any other,
/// and never moved by a re-sharding (its key does not depend on the shard count).
pub fn deletion_key(tenant: &TenantId, kind: &str, id: &EntityId) -> String {
    format!("{}{kind}#{id}", entity_prefix(tenant, spaces::DELETED.0))
}

/// `TENANT#t#SEALING#imports` (`PK` = `SK`): the key the tenant's import messages are sealed with
/// (`identity::sealing`). A partition of its own, found through the catalog: offboarding deletes it,
/// and with it every copy of the tenant's items still on a queue becomes unreadable.
pub fn import_sealing_key(tenant: &TenantId) -> String {
    format!("{}imports", entity_prefix(tenant, spaces::SEALING.0))
}
