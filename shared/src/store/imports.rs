//! Bulk imports: the record of an import, and the per-item markers its consumer writes.
//!
//! | item | PK | SK |
//! |---|---|---|
//! | import record | `TENANT#t#IMPORT#<id>` | `TENANT#t#IMPORT#<id>` |
//! | item marker | `TENANT#t#IMPORT#<id>` | `TENANT#t#IMPORT#<id>#ITEM#<index>` |
//!
//! Each item has one marker, written once, saying what became of it (`outcome`: `written`,
//! `superseded`, or `failed` with a `reason`). A written marker is put in the same transaction as
//! the item it stands for, on condition that no marker is there. So it exists exactly when the
//! item's write committed; a redelivered message writes nothing (a marker is there, whatever it
//! says); and once every item has a marker the import is final, since nothing can change a marker.
//! The import's counts are the markers counted: exact, with no counter item that every consumer
//! would contend on.
//!
//! **Final within a bound.** Every import is final by its deadline, [`FINAL_WITHIN_SECONDS`] after
//! its acceptance: the lifecycle driver then [`close`]s it, giving every item still without a marker
//! a failed one (`undelivered`: its message was lost, or SQS gave up on it after a crash, a timeout
//! or a suspended tenant; `not_enqueued`: the request failed part-way and was never retried). A
//! message delivered after that finds the marker and writes nothing. Record and markers expire
//! together, [`RETENTION_SECONDS`] after the acceptance, and an expired record or marker counts as
//! absent before TTL has removed it, so an `Idempotency-Key` reused after that names a new import.

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};

use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{
    deletion_key, import_item_sk, import_item_sk_prefix, import_key, import_sealing_key,
    EXPIRES_AT, PK, SK,
};
use crate::identity::sealing;
use crate::store::error::StoreError;
use crate::store::items::{enlist, get_item_consistent};
use crate::store::query::{put_if_absent, put_unless_live, string_attr, u64_attr, Item};
use crate::store::scoped::TenantDb;
use crate::store::transact::{transact, TransactError};

/// How long an import's record and markers are kept: 14 days, SQS's longest message retention, so
/// no message can be delivered after its marker has gone.
pub const RETENTION_SECONDS: u64 = 14 * 24 * 3600;

/// The deadline: an import is final at the latest this long after its acceptance (plus the
/// lifecycle driver's next run). Over a message's longest healthy life: five deliveries 180 s
/// apart (the queue's visibility timeout), four of them deferred by a capacity debt, and a backlog.
pub const FINAL_WITHIN_SECONDS: u64 = 3600;

const FINGERPRINT: &str = "fingerprint";
const STATE: &str = "state";
const CREATED_AT_MS: &str = "createdAtMs";
const DUE_AT_MS: &str = "dueAtMs";
const ENQUEUING: &str = "enqueuing";
const QUEUED: &str = "queued";
/// Set by [`note_deferred`]: the consumer held a message of the import back on the tenant's
/// capacity quota; what is still unwritten at the deadline failed `overQuota`.
const DEFERRED_AT_MS: &str = "deferredAtMs";
/// Set by [`close`]: the import is final. `state` keeps what it was (whether every item was sent).
const CLOSED_AT_MS: &str = "closedAtMs";
const OUTCOME: &str = "outcome";
const REASON: &str = "reason";

/// Why an item failed for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReason {
    /// DynamoDB refused it on its message's last delivery.
    Rejected,
    /// Not written by the deadline: its message was lost, or SQS gave up on it (a consumer that
    /// crashed or timed out, or a suspended tenant, on every delivery).
    Undelivered,
    /// Never sent: the request failed part-way and was not retried by the deadline.
    NotEnqueued,
    /// Not written by the deadline because the tenant was over its capacity quota: the consumer
    /// deferred its message until the deadline came.
    OverQuota,
}

impl FailReason {
    pub const ALL: [FailReason; 4] = [
        Self::Rejected,
        Self::Undelivered,
        Self::NotEnqueued,
        Self::OverQuota,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rejected => "rejected",
            Self::Undelivered => "undelivered",
            Self::NotEnqueued => "notEnqueued",
            Self::OverQuota => "overQuota",
        }
    }

    fn parse(raw: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == raw)
            .unwrap_or(Self::Rejected)
    }
}

/// What became of one item of an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Written,
    /// Not written: its product was written or deleted after the import was accepted.
    Superseded,
    Failed(FailReason),
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Self::Written => "written",
            Self::Superseded => "superseded",
            Self::Failed(_) => "failed",
        }
    }
}

/// Where an import stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Its items are being sent (or the request failed part-way; a retry with its key finishes it).
    Enqueuing,
    /// On the queue; some items have no outcome yet.
    Running,
    /// Final: every item written or superseded.
    Complete,
    /// Final: every item has an outcome, and some failed.
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enqueuing => "enqueuing",
            Self::Running => "running",
            Self::Complete => "complete",
            Self::Failed => "failed",
        }
    }
}

/// An import as `GET /imports/{id}` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub kind: String,
    pub status: Status,
    pub accepted: u32,
    pub written: u32,
    pub superseded: u32,
    /// Failed items per reason, in [`FailReason::ALL`]'s order.
    pub failed: [u32; 4],
    pub created_at: String,
    /// The deadline by which it is final (RFC 3339).
    pub final_by: String,
}

impl Progress {
    pub fn failed_total(&self) -> u32 {
        self.failed.iter().sum()
    }
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
    /// The same request made it before, at `created_at_ms`. `enqueuing`: it never finished sending
    /// its items (a retry finishes it, unless the import is `closed`: final at its deadline).
    Same {
        created_at_ms: u64,
        enqueuing: bool,
        closed: bool,
    },
    /// Another request holds this import id.
    Other,
}

/// The most imports a tenant may have open at once: accepted, and not yet final at their deadline
/// ([`FINAL_WITHIN_SECONDS`]). It bounds what one tenant puts on the lifecycle driver's list.
pub const MAX_OPEN_IMPORTS: usize = 200;
/// The attribute of the tenant's import sealing item that holds its open imports' ids (a string
/// set: adding or removing an id is idempotent, so a retried or repeated step never miscounts).
const OPEN_IMPORTS: &str = "openImports";

fn sealing_item_key(tenant: &TenantId) -> Item {
    let sealing = import_sealing_key(tenant);
    key(&sealing, &sealing)
}

/// The ids of the tenant's open imports (a consistent read of its sealing item).
pub async fn open_imports(
    db: &TenantDb,
    tenant: &TenantId,
) -> Result<std::collections::HashSet<String>, StoreError> {
    let item = get_item_consistent(db, sealing_item_key(tenant)).await?;
    Ok(match item.as_ref().and_then(|i| i.get(OPEN_IMPORTS)) {
        Some(AttributeValue::Ss(ids)) => ids.iter().cloned().collect(),
        _ => Default::default(),
    })
}

/// Counts `import` among the tenant's open imports, on its sealing item (which
/// [`ensure_sealing_key`] made): `false` when the tenant has [`MAX_OPEN_IMPORTS`] others open.
/// Idempotent: an id already counted is admitted again.
pub async fn count_open(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
) -> Result<bool, StoreError> {
    let out = db
        .client
        .update_item()
        .table_name(&*db.table)
        .set_key(Some(sealing_item_key(tenant)))
        .update_expression("ADD #open :id")
        .condition_expression(
            "attribute_exists(PK) AND (attribute_not_exists(#open) OR size(#open) < :max \
             OR contains(#open, :one))",
        )
        .expression_attribute_names("#open", OPEN_IMPORTS)
        .expression_attribute_values(":id", AttributeValue::Ss(vec![import.to_string()]))
        .expression_attribute_values(":one", AttributeValue::S(import.to_string()))
        .expression_attribute_values(":max", AttributeValue::N(MAX_OPEN_IMPORTS.to_string()))
        .send()
        .await;
    crate::store::error::written_unless_condition_failed(out)
}

/// Takes `import` off the tenant's open imports (idempotent; nothing when the sealing item is gone).
pub async fn uncount_open(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
) -> Result<(), StoreError> {
    let out = db
        .client
        .update_item()
        .table_name(&*db.table)
        .set_key(Some(sealing_item_key(tenant)))
        .update_expression("DELETE #open :id")
        .condition_expression("attribute_exists(PK)")
        .expression_attribute_names("#open", OPEN_IMPORTS)
        .expression_attribute_values(":id", AttributeValue::Ss(vec![import.to_string()]))
        .send()
        .await;
    crate::store::error::written_unless_condition_failed(out).map(|_| ())
}

/// When an import accepted at `created_at_ms` must be final ([`FINAL_WITHIN_SECONDS`]).
pub fn due_at_ms(created_at_ms: u64) -> u64 {
    created_at_ms + FINAL_WITHIN_SECONDS * 1000
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
            DUE_AT_MS.to_owned(),
            AttributeValue::N(due_at_ms(new.created_at_ms).to_string()),
        ),
        (
            EXPIRES_AT.to_owned(),
            AttributeValue::N((now_seconds + RETENTION_SECONDS).to_string()),
        ),
    ]);
    enlist(tenant, &mut item);
    // A record that has expired (its messages with it) no longer holds its id.
    if put_unless_live(db, item, now_seconds).await? {
        return Ok(Claim::New);
    }
    let Some(existing) = get_item_consistent(db, key(&pk, &pk))
        .await?
        .filter(|e| crate::store::query::is_live(e, now_seconds))
    else {
        // Expired between the two reads: a retry of the request claims it anew.
        return Err(StoreError::Contended("the import changed; retry".into()));
    };
    if string_attr(&existing, FINGERPRINT).as_deref() != Some(new.fingerprint) {
        return Ok(Claim::Other);
    }
    Ok(Claim::Same {
        created_at_ms: u64_attr(&existing, CREATED_AT_MS).unwrap_or(new.created_at_ms),
        enqueuing: string_attr(&existing, STATE).as_deref() == Some(ENQUEUING),
        closed: existing.contains_key(CLOSED_AT_MS),
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
        .condition_expression("#fingerprint = :fingerprint AND attribute_not_exists(#closed)")
        .expression_attribute_names("#state", STATE)
        .expression_attribute_names("#closed", CLOSED_AT_MS)
        .expression_attribute_names("#fingerprint", FINGERPRINT)
        .expression_attribute_values(":queued", AttributeValue::S(QUEUED.into()))
        .expression_attribute_values(":fingerprint", AttributeValue::S(fingerprint.into()))
        .build()
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// The transaction action that records `outcome` for item `index` of the import accepted at
/// `created_at_ms`, on condition that the item has no outcome yet (a marker of an expired import of
/// the same id counts as none). It expires with the import.
pub fn marker(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    index: u32,
    outcome: Outcome,
    created_at_ms: u64,
    now_seconds: u64,
) -> Result<TransactWriteItem, StoreError> {
    let mut item = key(
        &import_key(tenant, import),
        &import_item_sk(tenant, import, index),
    );
    item.insert(
        OUTCOME.to_owned(),
        AttributeValue::S(outcome.as_str().into()),
    );
    if let Outcome::Failed(reason) = outcome {
        item.insert(REASON.to_owned(), AttributeValue::S(reason.as_str().into()));
    }
    item.insert(
        EXPIRES_AT.to_owned(),
        AttributeValue::N((created_at_ms / 1000 + RETENTION_SECONDS).to_string()),
    );
    enlist(tenant, &mut item);
    let put = Put::builder()
        .table_name(&*db.table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(PK) OR #exp <= :now")
        .expression_attribute_names("#exp", EXPIRES_AT)
        .expression_attribute_values(":now", AttributeValue::N(now_seconds.to_string()))
        .build()
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    Ok(TransactWriteItem::builder().put(put).build())
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

/// The import's record, and the outcome of each of its items that has one (consistent reads).
async fn read_import(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    now_seconds: u64,
) -> Result<Option<(Item, std::collections::HashMap<String, Outcome>)>, StoreError> {
    let pk = import_key(tenant, import);
    let Some(record) = get_item_consistent(db, key(&pk, &pk))
        .await?
        .filter(|r| crate::store::query::is_live(r, now_seconds))
    else {
        return Ok(None);
    };
    let mut outcomes = std::collections::HashMap::new();
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
            .projection_expression("SK, #outcome, #reason, #exp")
            .expression_attribute_names("#outcome", OUTCOME)
            .expression_attribute_names("#reason", REASON)
            .expression_attribute_names("#exp", EXPIRES_AT)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        for marker in out.items() {
            // A marker of an expired import of this id, not yet removed by TTL, is not this one's.
            if !crate::store::query::is_live(marker, now_seconds) {
                continue;
            }
            let sk = string_attr(marker, SK).unwrap_or_default();
            // Markers written before outcomes were recorded say it by their key's suffix.
            let (item, legacy) = match (sk.strip_suffix("#SUPERSEDED"), sk.strip_suffix("#FAILED"))
            {
                (Some(item), _) => (item.to_owned(), Some(Outcome::Superseded)),
                (_, Some(item)) => (item.to_owned(), Some(Outcome::Failed(FailReason::Rejected))),
                _ => (sk.clone(), None),
            };
            let outcome = match string_attr(marker, OUTCOME).as_deref() {
                Some("written") => Outcome::Written,
                Some("superseded") => Outcome::Superseded,
                Some(_) => Outcome::Failed(FailReason::parse(
                    &string_attr(marker, REASON).unwrap_or_default(),
                )),
                None => legacy.unwrap_or(Outcome::Written),
            };
            // One outcome per item: written beats superseded beats failed (a legacy item could
            // have had more than one marker).
            let rank = |o: &Outcome| match o {
                Outcome::Written => 2,
                Outcome::Superseded => 1,
                Outcome::Failed(_) => 0,
            };
            let best = outcomes
                .get(&item)
                .is_none_or(|held| rank(&outcome) > rank(held));
            if best {
                outcomes.insert(item, outcome);
            }
        }
        start = out.last_evaluated_key.filter(|k| !k.is_empty());
        if start.is_none() {
            break;
        }
    }
    Ok(Some((record, outcomes)))
}

/// The import's record and its markers counted (consistent reads); `None` when there is no record.
pub async fn progress(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    now_seconds: u64,
) -> Result<Option<Progress>, StoreError> {
    let Some((record, outcomes)) = read_import(db, tenant, import, now_seconds).await? else {
        return Ok(None);
    };
    let accepted = u64_attr(&record, "accepted").map_or(0, |n| n as u32);
    let count = |wanted: Outcome| outcomes.values().filter(|o| **o == wanted).count() as u32;
    let failed = FailReason::ALL.map(|r| count(Outcome::Failed(r)));
    let (written, superseded) = (count(Outcome::Written), count(Outcome::Superseded));
    let state = string_attr(&record, STATE).unwrap_or_default();
    let settled = outcomes.len() as u32 >= accepted;
    let failed_any = failed.iter().any(|n| *n > 0);
    let status = if settled || record.contains_key(CLOSED_AT_MS) {
        if failed_any {
            Status::Failed
        } else {
            Status::Complete
        }
    } else if state == ENQUEUING {
        Status::Enqueuing
    } else {
        Status::Running
    };
    let created_at_ms = u64_attr(&record, CREATED_AT_MS).unwrap_or(0);
    Ok(Some(Progress {
        kind: string_attr(&record, "itemKind").unwrap_or_default(),
        status,
        accepted,
        written,
        superseded,
        failed,
        created_at: string_attr(&record, "createdAt").unwrap_or_default(),
        final_by: crate::identity::clock::rfc3339(
            u64_attr(&record, DUE_AT_MS).unwrap_or_else(|| due_at_ms(created_at_ms)),
        ),
    }))
}

/// Records `outcome` for item `index` on its own (not with a write); recording it when the item
/// has an outcome already changes nothing.
pub async fn record_outcome(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    index: u32,
    outcome: Outcome,
    created_at_ms: u64,
    now_seconds: u64,
) -> Result<(), StoreError> {
    let action = marker(
        db,
        tenant,
        import,
        index,
        outcome,
        created_at_ms,
        now_seconds,
    )?;
    let request = db.client.transact_write_items().transact_items(action);
    match transact(request).await {
        Ok(()) | Err(TransactError::ConditionFailed { .. }) => Ok(()),
        Err(TransactError::Store(e)) => Err(e),
    }
}

/// The indexes in `first..=last` of `import`'s items that have an outcome already (their live
/// markers at `now_seconds`, by one consistent Query of that range): what a delivery of a message,
/// again or deferred, skips rather than send a write its marker would refuse (a refused write
/// costs its units too). An expired marker (of an earlier import of the same id) counts for
/// nothing, as in the write's own condition.
pub async fn outcomes_between(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    (first, last): (u32, u32),
    now_seconds: u64,
) -> Result<std::collections::HashSet<u32>, StoreError> {
    let prefix = import_item_sk_prefix(tenant, import);
    let mut found = std::collections::HashSet::new();
    let mut start = None;
    loop {
        let out = db
            .query()
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :first AND :last")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", AttributeValue::S(import_key(tenant, import)))
            .expression_attribute_values(
                ":first",
                AttributeValue::S(import_item_sk(tenant, import, first)),
            )
            .expression_attribute_values(
                ":last",
                AttributeValue::S(import_item_sk(tenant, import, last)),
            )
            .projection_expression("#sk, #exp")
            .expression_attribute_names("#exp", EXPIRES_AT)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        let live = out
            .items()
            .iter()
            .filter(|item| crate::store::query::is_live(item, now_seconds));
        found.extend(live.filter_map(|item| {
            string_attr(item, SK)?
                .strip_prefix(&prefix)?
                .parse::<u32>()
                .ok()
        }));
        start = out.last_evaluated_key.filter(|k| !k.is_empty());
        if start.is_none() {
            return Ok(found);
        }
    }
}

/// Records on the import's record (the one accepted at `created_at_ms`) that the consumer held a
/// message of it back because the tenant was over its capacity quota, at `now_ms`; nothing when the
/// record is another import's or gone.
pub async fn note_deferred(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    created_at_ms: u64,
    now_ms: u64,
) -> Result<(), StoreError> {
    let pk = import_key(tenant, import);
    let out = db
        .client
        .update_item()
        .table_name(&*db.table)
        .set_key(Some(key(&pk, &pk)))
        .update_expression("SET #deferred = :now")
        .condition_expression("#created = :created")
        .expression_attribute_names("#deferred", DEFERRED_AT_MS)
        .expression_attribute_names("#created", CREATED_AT_MS)
        .expression_attribute_values(":now", AttributeValue::N(now_ms.to_string()))
        .expression_attribute_values(":created", AttributeValue::N(created_at_ms.to_string()))
        .send()
        .await;
    crate::store::error::written_unless_condition_failed(out).map(|_| ())
}

/// What [`close`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// Not due yet: its deadline is ahead.
    NotDue,
    /// Final now (or already): this many items were given a failed marker by this call.
    Closed { failed_now: u32 },
    /// No live record accepted at that time: expired, offboarded, or a later import of the same id.
    Gone,
}

/// Makes the import accepted at `created_at_ms` final once its deadline has passed: every item
/// still without an outcome is recorded failed (`not_enqueued` while its request never finished
/// sending, else `undelivered`), then the record is marked closed (`closedAtMs`). Each step is idempotent, so a
/// run killed part-way is finished by the next. Items are numbered `0..accepted`
/// (`create-import` numbers them so).
pub async fn close(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    created_at_ms: u64,
    now_ms: u64,
) -> Result<Closing, StoreError> {
    let now_seconds = now_ms / 1000;
    let Some((record, outcomes)) = read_import(db, tenant, import, now_seconds).await? else {
        // No live import of this id (its request failed before the claim, or it expired): its
        // count, if it got one, is released. A later import of the same id keeps its own.
        uncount_open(db, tenant, import).await?;
        return Ok(Closing::Gone);
    };
    if u64_attr(&record, CREATED_AT_MS) != Some(created_at_ms) {
        return Ok(Closing::Gone);
    }
    if now_ms < u64_attr(&record, DUE_AT_MS).unwrap_or_else(|| due_at_ms(created_at_ms)) {
        return Ok(Closing::NotDue);
    }
    let reason = if string_attr(&record, STATE).as_deref() == Some(ENQUEUING) {
        FailReason::NotEnqueued
    } else if record.contains_key(DEFERRED_AT_MS) {
        FailReason::OverQuota
    } else {
        FailReason::Undelivered
    };
    let accepted = u64_attr(&record, "accepted").map_or(0, |n| n as u32);
    let open: Vec<u32> = (0..accepted)
        .filter(|i| !outcomes.contains_key(&import_item_sk(tenant, import, *i)))
        .collect();
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(open.iter().map(|index| {
        record_outcome(
            db,
            tenant,
            import,
            *index,
            Outcome::Failed(reason),
            created_at_ms,
            now_seconds,
        )
    }))
    .buffer_unordered(8)
    .try_collect::<()>()
    .await?;
    // The final counts go with the close, so the `importFinished` event (read from the table's
    // stream, `crate::store::lifecycle_events`) carries them. Every item has its outcome now; they
    // are read again, since a late delivery may have written an item between the first read and
    // its failed marker (which then was not written).
    let Some((_, outcomes)) = read_import(db, tenant, import, now_seconds).await? else {
        return Ok(Closing::Gone);
    };
    let mut counts: std::collections::BTreeMap<&str, u32> = std::collections::BTreeMap::new();
    for outcome in outcomes.values().copied() {
        let name = match outcome {
            Outcome::Failed(r) => r.as_str(),
            other => other.as_str(),
        };
        *counts.entry(name).or_default() += 1;
    }
    let counts = AttributeValue::M(
        counts
            .into_iter()
            .map(|(name, n)| (name.to_owned(), AttributeValue::N(n.to_string())))
            .collect(),
    );
    let pk = import_key(tenant, import);
    let closed = db
        .client
        .update_item()
        .table_name(&*db.table)
        .set_key(Some(key(&pk, &pk)))
        .update_expression(
            "SET #closed = if_not_exists(#closed, :now), #counts = if_not_exists(#counts, :counts)",
        )
        .condition_expression("#created = :created")
        .expression_attribute_names("#closed", CLOSED_AT_MS)
        .expression_attribute_names("#counts", "finalCounts")
        .expression_attribute_names("#created", CREATED_AT_MS)
        .expression_attribute_values(":now", AttributeValue::N(now_ms.to_string()))
        .expression_attribute_values(":counts", counts)
        .expression_attribute_values(":created", AttributeValue::N(created_at_ms.to_string()))
        .send()
        .await;
    match closed {
        Ok(_) => {}
        // Offboarded (or expired and claimed anew) meanwhile: not this import any more.
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
        {
            return Ok(Closing::Gone)
        }
        Err(e) => return Err(StoreError::from_sdk(e)),
    }
    // Final: it no longer counts among the tenant's open imports.
    uncount_open(db, tenant, import).await?;
    Ok(Closing::Closed {
        failed_now: open.len() as u32,
    })
}
