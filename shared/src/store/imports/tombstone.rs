//! Tombstones: a delete that an import accepted before it must not undo.

use super::*;
use crate::identity::ids::EntityId;
use crate::identity::keys::{deletion_key, primary_key};
use crate::store::client::error::StoreError;
use crate::store::client::scoped::TenantDb;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};

/// The attribute of a tombstone: when the entity was deleted, epoch milliseconds.
pub(super) const DELETED_AT_MS: &str = "deletedAtMs";

/// The tombstone of one entity of `db`'s tenant: its deletion, recorded so that an import accepted
/// before it never brings the entity back.
pub struct Tombstone<'a> {
    db: &'a TenantDb,
    key: String,
}

impl<'a> Tombstone<'a> {
    /// The tombstone of `kind` `id` (`TENANT#t#DELETED#<kind>#<id>`).
    pub fn of(db: &'a TenantDb, kind: &str, id: &EntityId) -> Self {
        let key = deletion_key(&db.tenant, kind, id);
        Self { db, key }
    }

    /// Its Put, deleted at `deleted_at_ms`, to send in the delete's own transaction, so it exists
    /// exactly when the delete committed. It lives as long as an import message may
    /// ([`RETENTION_SECONDS`]), so an import accepted before the delete never brings the entity
    /// back ([`Tombstone::absent_since`]).
    pub fn put(&self, deleted_at_ms: u64) -> Result<TransactWriteItem, StoreError> {
        let mut item = primary_key(self.key.clone(), self.key.clone());
        item.insert(
            DELETED_AT_MS.to_owned(),
            AttributeValue::N(deleted_at_ms.to_string()),
        );
        let put = retained_put(self.db, item, deleted_at_ms).build()?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// A ConditionCheck that the entity was not deleted at or after `since_ms` (an import's
    /// acceptance): sent along with an import's write of it.
    pub fn absent_since(&self, since_ms: u64) -> Result<TransactWriteItem, StoreError> {
        let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
            .table_name(&*self.db.table)
            .set_key(Some(primary_key(self.key.clone(), self.key.clone())))
            .condition_expression("attribute_not_exists(PK) OR #deleted < :since")
            .expression_attribute_names("#deleted", DELETED_AT_MS)
            .expression_attribute_values(":since", AttributeValue::N(since_ms.to_string()))
            .build()?;
        Ok(TransactWriteItem::builder().condition_check(check).build())
    }
}
