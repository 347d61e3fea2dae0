//! Tombstones: a delete that an import accepted before it must not undo.

use super::*;
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{deletion_key, primary_key};
use crate::store::client::error::StoreError;
use crate::store::client::scoped::TenantDb;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};

/// The attribute of a tombstone: when the entity was deleted, epoch milliseconds.
pub(super) const DELETED_AT_MS: &str = "deletedAtMs";

/// The tombstone of `kind` `id`, deleted at `deleted_at_ms`: a Put to send in the delete's own
/// transaction, so it exists exactly when the delete committed. It lives as long as an import
/// message may ([`RETENTION_SECONDS`]), so an import accepted before the delete never brings the
/// entity back ([`not_deleted_since`]).
pub fn tombstone(
    db: &TenantDb,
    tenant: &TenantId,
    kind: &str,
    id: &EntityId,
    deleted_at_ms: u64,
) -> Result<TransactWriteItem, StoreError> {
    let key = deletion_key(tenant, kind, id);
    let mut item = primary_key(key.clone(), key);
    item.insert(
        DELETED_AT_MS.to_owned(),
        AttributeValue::N(deleted_at_ms.to_string()),
    );
    let put = retained_put(db, tenant, item, deleted_at_ms).build()?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// A ConditionCheck that `kind` `id` was not deleted at or after `since_ms` (an import's
/// acceptance): sent along with an import's write of it.
pub fn not_deleted_since(
    db: &TenantDb,
    tenant: &TenantId,
    kind: &str,
    id: &EntityId,
    since_ms: u64,
) -> Result<TransactWriteItem, StoreError> {
    let key = deletion_key(tenant, kind, id);
    let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
        .table_name(&*db.table)
        .set_key(Some(primary_key(key.clone(), key)))
        .condition_expression("attribute_not_exists(PK) OR #deleted < :since")
        .expression_attribute_names("#deleted", DELETED_AT_MS)
        .expression_attribute_values(":since", AttributeValue::N(since_ms.to_string()))
        .build()?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
}
