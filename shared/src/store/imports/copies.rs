//! The copies of a deferred or held import message that the consumer sends back on the queue.
//!
//! A deferral (the tenant over its quota) or a hold (the tenant being restored) sends a copy of the
//! message and lets the original be deleted. When the invocation fails whole (a timeout, a crash)
//! after the copy went out, the original comes back too, and would be copied again: copies of
//! copies could multiply until the import's deadline. So each copy is of a generation (the
//! original's plus one, carried by the message) and noted once sent; a delivery that finds its next
//! generation noted sends nothing. Only a failure between the send and the note can leave two
//! copies of one generation, and their next deferral sends one: copies never multiply.

use aws_sdk_dynamodb::types::AttributeValue;

use super::RETENTION_SECONDS;
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{import_copy_sk, import_key, primary_key, EXPIRES_AT};
use crate::store::client::error::StoreError;
use crate::store::client::items::enlist;
use crate::store::client::scoped::TenantDb;

/// One copy: of `import`'s message `message` (a digest of its sealed items, [`message_digest`]),
/// of generation `generation`.
#[derive(Debug, Clone, Copy)]
pub struct Copy<'a> {
    pub import: &'a EntityId,
    pub message: &'a str,
    pub generation: u32,
}

/// What names one message of an import in every copy of it: its sealed items, hashed.
pub fn message_digest(sealed_items: &str) -> String {
    format!(
        "{:016x}",
        crate::identity::shard::fnv1a64(sealed_items.as_bytes())
    )
}

impl Copy<'_> {
    fn key(&self, tenant: &TenantId) -> (String, String) {
        (
            import_key(tenant, self.import),
            import_copy_sk(tenant, self.import, self.message, self.generation),
        )
    }
}

/// Whether `copy` was sent already (a consistent read).
pub async fn copy_sent(db: &TenantDb, copy: Copy<'_>) -> Result<bool, StoreError> {
    let (pk, sk) = copy.key(&db.tenant);
    let out = db
        .sdk_get_at(pk, sk)
        .consistent_read(true)
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(out.item.is_some())
}

/// Notes that `copy` was sent, kept as long as the import's markers (from `created_at_ms`).
pub async fn note_copy_sent(
    db: &TenantDb,
    copy: Copy<'_>,
    created_at_ms: u64,
) -> Result<(), StoreError> {
    let (pk, sk) = copy.key(&db.tenant);
    let mut item = primary_key(pk, sk);
    item.insert(
        EXPIRES_AT.to_owned(),
        AttributeValue::N((created_at_ms / 1000 + RETENTION_SECONDS).to_string()),
    );
    enlist(&db.tenant, &mut item);
    crate::store::client::items::put(db, item).await
}
