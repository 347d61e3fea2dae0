//! Bulk imports: the record of an import, and the per-item markers its consumer writes.
//!
//! | item | PK | SK |
//! |---|---|---|
//! | import record | `TENANT#t#IMPORT#<id>` | `TENANT#t#IMPORT#<id>` |
//! | item marker | `TENANT#t#IMPORT#<id>` | `TENANT#t#IMPORT#<id>#ITEM#<index>` |
//! | superseded marker | `TENANT#t#IMPORT#<id>` | `TENANT#t#IMPORT#<id>#ITEM#<index>#SUPERSEDED` |
//! | failure marker | `TENANT#t#IMPORT#<id>` | `TENANT#t#IMPORT#<id>#ITEM#<index>#FAILED` |
//!
//! A marker is written in the same transaction as the item it stands for, on condition that it is
//! absent. So it exists exactly when the item's write committed, a redelivered message writes nothing
//! (its marker is there), and the import's counts are the markers counted: exact, with no counter
//! item that every consumer would contend on. An item not written because its product was written
//! after the import was accepted gets a superseded marker instead. An item that failed for good gets a marker with
//! `outcome = failed` instead. Both expire with the import, after [`RETENTION_SECONDS`].

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};

use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{
    deletion_key, import_item_sk, import_item_sk_prefix, import_key, import_sealing_key,
    EXPIRES_AT, PK, SK,
};
use crate::identity::sealing;
use crate::store::error::StoreError;
use crate::store::items::{enlist, get_item_consistent};
use crate::store::query::{put_if_absent, string_attr, u64_attr, Item};
use crate::store::scoped::TenantDb;
use crate::store::transact::{transact, TransactError};

/// How long an import's record and markers are kept: 14 days, SQS's longest message retention, so
/// no message can be delivered after its marker has gone.
pub const RETENTION_SECONDS: u64 = 14 * 24 * 3600;

const FAILED_SUFFIX: &str = "#FAILED";
const FINGERPRINT: &str = "fingerprint";
const STATE: &str = "state";
const CREATED_AT_MS: &str = "createdAtMs";
const ENQUEUING: &str = "enqueuing";
const QUEUED: &str = "queued";
const SUPERSEDED_SUFFIX: &str = "#SUPERSEDED";

/// What became of one item of an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Written,
    /// Not written: its product was written after the import was accepted.
    Superseded,
    /// Refused on its last delivery; the message goes to the dead-letter queue.
    Failed,
}

/// An import as `GET /imports/{id}` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub kind: String,
    /// Until every item is on the queue (a request still sending, or one that failed part-way and
    /// whose retry will finish it): `false`.
    pub enqueued: bool,
    pub accepted: u32,
    pub written: u32,
    pub superseded: u32,
    pub failed: u32,
    pub created_at: String,
}

fn key(pk: &str, sk: &str) -> Item {
    Item::from([
        (PK.to_owned(), AttributeValue::S(pk.to_owned())),
        (SK.to_owned(), AttributeValue::S(sk.to_owned())),
    ])
}

/// A new import's record, as [`claim`] writes it.
#[derive(Debug, Clone)]
pub struct NewImport<'a> {
    pub kind: &'a str,
    pub accepted: u32,
    /// A digest of what the import writes: a retry of the same request has the same one.
    pub fingerprint: &'a str,
    pub created_at_ms: u64,
}

/// What [`claim`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The record is new: the import is this request's.
    New,
    /// The same request made it before (its items may be partly enqueued): carry on, as of its
    /// `created_at_ms`.
    Same { created_at_ms: u64 },
    /// Another request holds this import id.
    Other,
}

/// Writes the record of import `import` (state `enqueuing`) unless it exists; when it does, tells
/// whether the same request made it. The record is written before any message is sent, so two
/// requests can never send items under one import id.
pub async fn claim(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    new: &NewImport<'_>,
) -> Result<Claim, StoreError> {
    let pk = import_key(tenant, import);
    let now_seconds = new.created_at_ms / 1000;
    let mut item = key(&pk, &pk);
    item.extend([
        ("kind".to_owned(), AttributeValue::S("IMPORT".into())),
        ("tenantId".to_owned(), AttributeValue::S(tenant.to_string())),
        ("importId".to_owned(), AttributeValue::S(import.to_string())),
        (
            "itemKind".to_owned(),
            AttributeValue::S(new.kind.to_owned()),
        ),
        (
            "accepted".to_owned(),
            AttributeValue::N(new.accepted.to_string()),
        ),
        (
            FINGERPRINT.to_owned(),
            AttributeValue::S(new.fingerprint.to_owned()),
        ),
        (STATE.to_owned(), AttributeValue::S(ENQUEUING.to_owned())),
        (
            "createdAt".to_owned(),
            AttributeValue::S(crate::identity::clock::rfc3339(new.created_at_ms)),
        ),
        (
            CREATED_AT_MS.to_owned(),
            AttributeValue::N(new.created_at_ms.to_string()),
        ),
        (
            EXPIRES_AT.to_owned(),
            AttributeValue::N((now_seconds + RETENTION_SECONDS).to_string()),
        ),
    ]);
    enlist(tenant, &mut item);
    if put_if_absent(db, item).await? {
        return Ok(Claim::New);
    }
    let Some(existing) = get_item_consistent(db, key(&pk, &pk)).await? else {
        // Expired between the two reads: a retry of the request claims it anew.
        return Err(StoreError::Contended("the import changed; retry".into()));
    };
    if string_attr(&existing, FINGERPRINT).as_deref() != Some(new.fingerprint) {
        return Ok(Claim::Other);
    }
    Ok(Claim::Same {
        created_at_ms: u64_attr(&existing, CREATED_AT_MS).unwrap_or(new.created_at_ms),
    })
}

/// The transaction action that marks the import's items as all enqueued, on condition that the
/// record is still this request's.
pub fn enqueued(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    fingerprint: &str,
) -> Result<TransactWriteItem, StoreError> {
    let pk = import_key(tenant, import);
    let update = Update::builder()
        .table_name(&*db.table)
        .set_key(Some(key(&pk, &pk)))
        .update_expression("SET #state = :queued")
        .condition_expression("#fingerprint = :fingerprint")
        .expression_attribute_names("#state", STATE)
        .expression_attribute_names("#fingerprint", FINGERPRINT)
        .expression_attribute_values(":queued", AttributeValue::S(QUEUED.into()))
        .expression_attribute_values(":fingerprint", AttributeValue::S(fingerprint.into()))
        .build()
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    Ok(TransactWriteItem::builder().update(update).build())
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
    sk.push_str(match outcome {
        Outcome::Written => "",
        Outcome::Superseded => SUPERSEDED_SUFFIX,
        Outcome::Failed => FAILED_SUFFIX,
    });
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

/// The transaction action that checks item `index` was not found superseded by an earlier delivery:
/// a redelivered item must not be written once a newer write has won, even after that newer product
/// is deleted.
pub fn not_superseded(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    index: u32,
) -> Result<TransactWriteItem, StoreError> {
    let sk = format!(
        "{}{SUPERSEDED_SUFFIX}",
        import_item_sk(tenant, import, index)
    );
    let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
        .table_name(&*db.table)
        .key(PK, AttributeValue::S(import_key(tenant, import)))
        .key(SK, AttributeValue::S(sk))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
}

/// The tenant's import sealing key (a consistent read): `None` when it has none, because it never
/// imported or because offboarding destroyed it.
pub async fn sealing_key(db: &TenantDb, tenant: &TenantId) -> Result<Option<Vec<u8>>, StoreError> {
    let pk = import_sealing_key(tenant);
    let item = get_item_consistent(db, key(&pk, &pk)).await?;
    Ok(item
        .and_then(|i| i.get(SEALING_KEY).and_then(|k| k.as_b().ok()).cloned())
        .map(|b| b.into_inner())
        .filter(|k| k.len() == sealing::KEY_BYTES))
}

/// The tenant's import sealing key, made (random, 256 bits) when it has none. Two producers racing
/// both read back the one that was stored.
pub async fn ensure_sealing_key(db: &TenantDb, tenant: &TenantId) -> Result<Vec<u8>, StoreError> {
    if let Some(existing) = sealing_key(db, tenant).await? {
        return Ok(existing);
    }
    let fresh = sealing::new_key().map_err(|e| StoreError::Internal(e.to_string()))?;
    let pk = import_sealing_key(tenant);
    let mut item: Item = key(&pk, &pk);
    item.insert(
        SEALING_KEY.to_owned(),
        AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(fresh.to_vec())),
    );
    enlist(tenant, &mut item);
    if put_if_absent(db, item).await? {
        return Ok(fresh.to_vec());
    }
    sealing_key(db, tenant)
        .await?
        .ok_or_else(|| StoreError::Internal("the import sealing key vanished".into()))
}

const SEALING_KEY: &str = "key";

/// The attribute of a tombstone: when the entity was deleted, epoch milliseconds.
const DELETED_AT_MS: &str = "deletedAtMs";

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
    let mut item: Item = [
        (PK.to_owned(), AttributeValue::S(key.clone())),
        (SK.to_owned(), AttributeValue::S(key)),
        (
            DELETED_AT_MS.to_owned(),
            AttributeValue::N(deleted_at_ms.to_string()),
        ),
        (
            EXPIRES_AT.to_owned(),
            AttributeValue::N((deleted_at_ms / 1000 + RETENTION_SECONDS).to_string()),
        ),
    ]
    .into();
    enlist(tenant, &mut item);
    let put = Put::builder()
        .table_name(&*db.table)
        .set_item(Some(item))
        .build()
        .map_err(|e| StoreError::Internal(e.to_string()))?;
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
        .key(PK, AttributeValue::S(key.clone()))
        .key(SK, AttributeValue::S(key))
        .condition_expression("attribute_not_exists(PK) OR #deleted < :since")
        .expression_attribute_names("#deleted", DELETED_AT_MS)
        .expression_attribute_values(":since", AttributeValue::N(since_ms.to_string()))
        .build()
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
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
    let mut superseded = std::collections::HashSet::new();
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
            if let Some(item) = sk.strip_suffix(FAILED_SUFFIX) {
                failed.insert(item.to_owned());
            } else if let Some(item) = sk.strip_suffix(SUPERSEDED_SUFFIX) {
                superseded.insert(item.to_owned());
            } else {
                written.insert(sk);
            }
        }
        start = out.last_evaluated_key.filter(|k| !k.is_empty());
        if start.is_none() {
            break;
        }
    }
    Ok(Some(Progress {
        kind: string_attr(&record, "itemKind").unwrap_or_default(),
        enqueued: string_attr(&record, STATE).as_deref() != Some(ENQUEUING),
        accepted: u64_attr(&record, "accepted").map_or(0, |n| n as u32),
        written: written.len() as u32,
        superseded: superseded.difference(&written).count() as u32,
        // A failed item written later (redriven from the dead-letter queue) counts as written.
        failed: failed
            .iter()
            .filter(|i| !written.contains(*i) && !superseded.contains(*i))
            .count() as u32,
        created_at: string_attr(&record, "createdAt").unwrap_or_default(),
    }))
}

/// Records `outcome` for item `index` on its own (not with a write); recording it twice is the same
/// as once.
pub async fn record_outcome(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    index: u32,
    outcome: Outcome,
    now_seconds: u64,
) -> Result<(), StoreError> {
    let action = marker(db, tenant, import, index, outcome, now_seconds)?;
    let request = db.client.transact_write_items().transact_items(action);
    match transact(request).await {
        Ok(()) | Err(TransactError::ConditionFailed { .. }) => Ok(()),
        Err(TransactError::Store(e)) => Err(e),
    }
}
