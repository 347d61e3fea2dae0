//! Bulk imports: the record of an import, and the per-item markers its consumer writes.
//!
//! | item | PK | SK |
//! |---|---|---|
//! | import record | `TENANT#t#IMPORT#<id>` | `TENANT#t#IMPORT#<id>` |
//! | item marker | `TENANT#t#IMPORT#<id>` | `TENANT#t#IMPORT#<id>#ITEM#<index>` |
//! | failure marker | `TENANT#t#IMPORT#<id>` | `TENANT#t#IMPORT#<id>#ITEM#<index>#FAILED` |
//!
//! A marker is written in the same transaction as the item it stands for, on condition that it is
//! absent. So it exists exactly when the item's write committed, a redelivered message writes nothing
//! (its marker is there), and the import's counts are the markers counted: exact, with no counter
//! item that every consumer would contend on. An item that failed for good gets a marker with
//! `outcome = failed` instead. Both expire with the import, after [`RETENTION_SECONDS`].

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};

use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{
    import_item_sk, import_item_sk_prefix, import_key, EXPIRES_AT, PK, SK,
};
use crate::store::error::StoreError;
use crate::store::items::{enlist, get_item_consistent};
use crate::store::query::{string_attr, u64_attr, Item};
use crate::store::scoped::TenantDb;
use crate::store::transact::{transact, TransactError};

/// How long an import's record and markers are kept: 14 days, SQS's longest message retention, so
/// no message can be delivered after its marker has gone.
pub const RETENTION_SECONDS: u64 = 14 * 24 * 3600;

const FAILED_SUFFIX: &str = "#FAILED";

/// What became of one item of an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Written,
    /// Refused on its last delivery; the message goes to the dead-letter queue.
    Failed,
}

/// An import as `GET /imports/{id}` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub kind: String,
    pub accepted: u32,
    pub written: u32,
    pub failed: u32,
    pub created_at: String,
}

fn key(pk: &str, sk: &str) -> Item {
    Item::from([
        (PK.to_owned(), AttributeValue::S(pk.to_owned())),
        (SK.to_owned(), AttributeValue::S(sk.to_owned())),
    ])
}

/// The record of a new import of `accepted` items of `kind`, made at `now_seconds` (`created_at` its
/// RFC 3339 form), ready to put.
pub fn record_item(
    tenant: &TenantId,
    import: &EntityId,
    kind: &str,
    accepted: u32,
    created_at: &str,
    now_seconds: u64,
) -> Item {
    let pk = import_key(tenant, import);
    let mut item = key(&pk, &pk);
    item.extend([
        ("kind".to_owned(), AttributeValue::S("IMPORT".into())),
        ("tenantId".to_owned(), AttributeValue::S(tenant.to_string())),
        ("importId".to_owned(), AttributeValue::S(import.to_string())),
        ("itemKind".to_owned(), AttributeValue::S(kind.to_owned())),
        (
            "accepted".to_owned(),
            AttributeValue::N(accepted.to_string()),
        ),
        (
            "createdAt".to_owned(),
            AttributeValue::S(created_at.to_owned()),
        ),
        (
            EXPIRES_AT.to_owned(),
            AttributeValue::N((now_seconds + RETENTION_SECONDS).to_string()),
        ),
    ]);
    enlist(tenant, &mut item);
    item
}

/// The transaction action that records `outcome` for item `index`, on condition that this outcome is
/// not recorded for it yet.
pub fn marker(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    index: u32,
    outcome: Outcome,
    now_seconds: u64,
) -> Result<TransactWriteItem, StoreError> {
    let mut sk = import_item_sk(tenant, import, index);
    if outcome == Outcome::Failed {
        sk.push_str(FAILED_SUFFIX);
    }
    let mut item = key(&import_key(tenant, import), &sk);
    item.insert(
        EXPIRES_AT.to_owned(),
        AttributeValue::N((now_seconds + RETENTION_SECONDS).to_string()),
    );
    enlist(tenant, &mut item);
    let put = Put::builder()
        .table_name(&*db.table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// The import's record and its markers counted (consistent reads); `None` when there is no record.
pub async fn progress(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
) -> Result<Option<Progress>, StoreError> {
    let pk = import_key(tenant, import);
    let Some(record) = get_item_consistent(db, key(&pk, &pk)).await? else {
        return Ok(None);
    };
    let mut written = std::collections::HashSet::new();
    let mut failed = std::collections::HashSet::new();
    let mut start = None;
    loop {
        let out = db
            .client
            .query()
            .table_name(&*db.table)
            .key_condition_expression("PK = :pk AND begins_with(SK, :items)")
            .expression_attribute_values(":pk", AttributeValue::S(pk.clone()))
            .expression_attribute_values(
                ":items",
                AttributeValue::S(import_item_sk_prefix(tenant, import)),
            )
            .projection_expression(SK)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        for marker in out.items() {
            let sk = string_attr(marker, SK).unwrap_or_default();
            match sk.strip_suffix(FAILED_SUFFIX) {
                Some(item) => failed.insert(item.to_owned()),
                None => written.insert(sk),
            };
        }
        start = out.last_evaluated_key.filter(|k| !k.is_empty());
        if start.is_none() {
            break;
        }
    }
    Ok(Some(Progress {
        kind: string_attr(&record, "itemKind").unwrap_or_default(),
        accepted: u64_attr(&record, "accepted").map_or(0, |n| n as u32),
        written: written.len() as u32,
        // A failed item written later (redriven from the dead-letter queue) counts as written.
        failed: failed.difference(&written).count() as u32,
        created_at: string_attr(&record, "createdAt").unwrap_or_default(),
    }))
}

/// Records that item `index` failed for good; recording it twice is the same as once.
pub async fn record_failure(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    index: u32,
    now_seconds: u64,
) -> Result<(), StoreError> {
    let action = marker(db, tenant, import, index, Outcome::Failed, now_seconds)?;
    let request = db.client.transact_write_items().transact_items(action);
    match transact(request).await {
        Ok(()) | Err(TransactError::ConditionFailed { .. }) => Ok(()),
        Err(TransactError::Store(e)) => Err(e),
    }
}
