//! Bulk imports: the record of an import, and the per-item markers its consumer writes.
//!
//! Their keys are built in `shared::identity::keys`; the key table (generated from it) is in
//! `docs/key-scheme.md`.
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

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::builders::PutBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, Put};

use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{import_key, EXPIRES_AT};
use crate::store::client::items::enlist;
use crate::store::client::query::{string_attr, Item};
use crate::store::client::scoped::TenantDb;

/// How long an import's record and markers are kept: 14 days, SQS's longest message retention, so
/// no message can be delivered after its marker has gone.
pub const RETENTION_SECONDS: u64 = 14 * 24 * 3600;

/// The deadline: an import is final at the latest this long after its acceptance (plus the
/// lifecycle driver's next run). Over a message's longest healthy life: five deliveries 180 s
/// apart (the queue's visibility timeout), four of them deferred by a capacity debt, and a backlog.
pub const FINAL_WITHIN_SECONDS: u64 = 3600;

const CREATED_AT_MS: &str = "createdAtMs";
const DUE_AT_MS: &str = "dueAtMs";
/// Set by [`note_deferred`]: the consumer held a message of the import back on the tenant's
/// capacity quota (an operator's note: the items it gives up on are failed `overQuota` each).
const DEFERRED_AT_MS: &str = "deferredAtMs";
/// Set by [`close`]: the import is final. `state` keeps what it was (whether every item was sent).
const CLOSED_AT_MS: &str = "closedAtMs";

/// The record's `state`: whether the request has sent every item to the queue ([`Sending`]).
const STATE: &str = "state";

/// What an import's record says of its request's sending ([`STATE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sending {
    /// Its items are being sent (or the request failed part-way).
    Enqueuing,
    /// Every item was sent.
    Queued,
}

impl Sending {
    fn as_str(self) -> &'static str {
        match self {
            Self::Enqueuing => "enqueuing",
            Self::Queued => "queued",
        }
    }

    /// As the record stores it.
    fn stored(self) -> AttributeValue {
        AttributeValue::S(self.as_str().to_owned())
    }

    /// Whether `record` says so.
    fn is_of(self, record: &Item) -> bool {
        string_attr(record, STATE).as_deref() == Some(self.as_str())
    }
}

/// A marker's attributes: what became of its item ([`Outcome`]) and, when it failed, why
/// ([`FailReason`]).
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

/// An UpdateItem of `import`'s record on condition that it is the one accepted at `created_at_ms`
/// (not a later import of the same id); what it changes is the caller's.
fn record_update(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    created_at_ms: u64,
) -> UpdateItemFluentBuilder {
    let pk = import_key(tenant, import);
    db.sdk_update_at(pk.clone(), pk)
        .condition_expression("#created = :created")
        .expression_attribute_names("#created", CREATED_AT_MS)
        .expression_attribute_values(":created", AttributeValue::N(created_at_ms.to_string()))
}

/// A transaction's Put of `item`, kept [`RETENTION_SECONDS`] after `since_ms` (an import's
/// acceptance, or a delete's time: as long as a message of an import accepted before may come) and
/// entered in the catalog of `db`'s tenant; its condition is the caller's.
fn retained_put(db: &TenantDb, mut item: Item, since_ms: u64) -> PutBuilder {
    item.insert(
        EXPIRES_AT.to_owned(),
        AttributeValue::N((since_ms / 1000 + RETENTION_SECONDS).to_string()),
    );
    enlist(&db.tenant, &mut item);
    Put::builder().table_name(&*db.table).set_item(Some(item))
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
    /// Another request holds this import id; `closed`: its import is final.
    Other { closed: bool },
}

mod claim;
mod close;
mod copies;
mod open;
mod outcomes;
mod progress;
mod sealing;
mod tombstone;
pub use claim::{claim, due_at_ms, mark_enqueued, marker, ItemOutcome};
pub use close::{close, closed, mark_noted, Closing, Finished};
pub use copies::{copy_sent, message_digest, note_copy_sent, Copy};
pub use open::{count_open, uncount_open, MAX_OPEN_IMPORTS};
pub use outcomes::{fail_items, note_deferred, outcomes_between, record_outcome};
pub use progress::progress;
use progress::read_import;
pub use sealing::{
    ensure_sealing_item, message_key, opening, retire_plain_key, sealing_key, MessageKey, Opening,
    SealingItem, StoredKey,
};
pub use tombstone::Tombstone;
