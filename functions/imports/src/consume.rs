//! The import queue's consumer: a batch of SQS messages in, the ids of those to deliver again out
//! (`ReportBatchItemFailures`).
//!
//! For each message:
//! - The signature over the `tenant` attribute and the body must verify. A message that does not
//!   was not made by `POST /imports` (someone wrote it straight to the queue): it is logged as an
//!   alarm and dropped, and nothing is written.
//! - Each item is written with the tenant's scoped credentials, in one transaction with its marker
//!   (`shared::store::imports`). A marker already there means the item has its outcome (an earlier
//!   delivery wrote it or found it superseded, or the import passed its deadline and is final), and
//!   nothing is written again.
//! - Any item's failure (a refused tenant, throttling, an item DynamoDB will not take) leaves the
//!   message for redelivery; its written items are skipped then. On its last delivery
//!   (`ApproximateReceiveCount` reaching the queue's `maxReceiveCount`, `IMPORT_MAX_RECEIVES` here)
//!   the items still failing are recorded as failed, as SQS then moves the message to the
//!   dead-letter queue; unless DynamoDB was only unavailable for some (throttled, or an outage,
//!   through every delivery): then a copy is delivered a minute later, as a first delivery, and
//!   only the refused items fail.
//!
//! The rate: one invocation writes at most `IMPORT_WRITES_IN_FLIGHT` items at once, whatever the
//! batch holds, and the event source mapping runs at most `MaximumConcurrency` invocations, so at most
//! their product of writes are in flight across the queue.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use futures::StreamExt;
use shared::identity::ids::TenantId;
use shared::store::client::meter::with_request_meta;
use shared::store::imports::{outcomes_between, record_outcome, FailReason, ItemOutcome, Outcome};
use shared::{ApiError, App};

use crate::{ImportMessage, MessageItem};

mod accept;
mod requeue;
mod settings;
mod write;

use accept::{accepted, Accepted, SealingKeys};
pub use requeue::RESTORE_HOLD_SECONDS;
use requeue::{defer, hold};
pub use settings::{
    ConsumerSettings, DEFAULT_MAX_DEFER_SECONDS, DEFAULT_MAX_RECEIVES, DEFAULT_WRITES_IN_FLIGHT,
    MIN_DEFER_SECONDS,
};
use write::write_metered;

/// The usage counters' name for the consumer's writes.
pub const BIN: &str = "import-consumer";

/// One verified message of the batch.
struct Verified<'a> {
    message: &'a SqsMessage,
    tenant: TenantId,
    body: ImportMessage,
    items: Vec<MessageItem>,
}

/// Handles one batch: the answer lists the messages to deliver again.
///
/// Each tenant's messages are written one after another, the tenants' at once (at most
/// `writes_in_flight` items in flight in all): before each message the tenant's capacity quota is
/// read from the shared window (a container that has not counted the tenant recently learns it
/// first), and after it the message's units are settled into the window, so the next message sees
/// them. A message whose tenant is in debt is deferred ([`defer`]), however many times it was
/// received, and never holds up another tenant's messages.
pub async fn consume(app: &App, settings: &ConsumerSettings, event: SqsEvent) -> SqsBatchResponse {
    if let Err(e) = app.signing.refresh(app.clock.now_millis()).await {
        tracing::error!(error = %e, "no signing keys: every message is delivered again");
    }
    let mut sealing_keys = SealingKeys::new();
    let mut verified: Vec<Verified> = Vec::new();
    let mut response = SqsBatchResponse::default();
    for message in &event.records {
        match accepted(app, &mut sealing_keys, message).await {
            Accepted::Yes(tenant, body, items) => verified.push(Verified {
                message,
                tenant,
                body,
                items,
            }),
            Accepted::Dropped => {}
            Accepted::Again => response.add_failure(message.message_id.clone().unwrap_or_default()),
            Accepted::Held(tenant, body) => {
                if let Err(e) = hold(app, settings, message, &tenant, &body).await {
                    tracing::warn!(tenant = %tenant, error = %e, "an import message of a tenant being restored could not be held back; it is delivered again");
                    response.add_failure(message.message_id.clone().unwrap_or_default());
                }
            }
        }
    }
    let mut tenants: Vec<TenantId> = verified.iter().map(|v| v.tenant.clone()).collect();
    tenants.sort();
    tenants.dedup();
    let writes = tokio::sync::Semaphore::new(settings.writes_in_flight);
    let per_tenant = tenants.iter().map(|tenant| {
        let messages: Vec<&Verified> = verified.iter().filter(|v| &v.tenant == tenant).collect();
        consume_tenant(app, settings, &writes, tenant, messages)
    });
    let outcomes = futures::future::join_all(per_tenant).await;
    let mut items = 0;
    for (written, again) in outcomes {
        items += written;
        for id in again {
            response.add_failure(id);
        }
    }
    if let Err(e) = app.flush_usage().await {
        tracing::warn!(error = %e, "usage metering failed; the batch is unaffected");
    }
    tracing::info!(
        messages = event.records.len(),
        items,
        again = response.batch_item_failures.len(),
        "import batch"
    );
    response
}

/// One tenant's messages of a batch, one after another: each deferred while the tenant is over
/// its capacity quota, else written and its units settled into the tenant's window. Answers the
/// items it tried to write and the ids of the messages to deliver again.
async fn consume_tenant(
    app: &App,
    settings: &ConsumerSettings,
    writes: &tokio::sync::Semaphore,
    tenant: &TenantId,
    messages: Vec<&Verified<'_>>,
) -> (usize, Vec<String>) {
    let mut again = Vec::new();
    let mut items = 0;
    for v in messages {
        let id = v.message.message_id.clone().unwrap_or_default();
        // A container that has not counted the tenant recently reads its window and debt first.
        app.learn_quota(tenant).await;
        let wait = app.quota_wait_seconds(tenant).await;
        if wait > 0 {
            if let Err(e) = defer(app, settings, v, wait).await {
                tracing::warn!(tenant = %tenant, import_id = %v.body.import_id, error = %e, "an import message could not be deferred; it is delivered again");
                again.push(id);
            }
            continue;
        }
        // Items a delivery before this one gave an outcome are not sent again.
        let done = match done_items(app, v).await {
            Ok(done) => done,
            Err(e) => {
                tracing::warn!(tenant = %tenant, error = %e, "an import message's markers could not be read; it is delivered again");
                again.push(id);
                continue;
            }
        };
        let todo = v.items.iter().filter(|item| !done.contains(&item.index));
        // Each item is written only while the tenant's bucket holds something, as this container
        // knows it (each written item's units are charged to it at once): at most the items in
        // flight when it runs dry are written beyond the quota.
        let results: Vec<(u32, Written)> = futures::stream::iter(todo.map(|item| async {
            let _permit = writes.acquire().await;
            if app.quota_wait_seconds(tenant).await > 0 {
                return (item.index, Written::HeldBack);
            }
            match write_metered(app, tenant, &v.body, item).await {
                Ok(()) => (item.index, Written::Yes),
                Err(ApiError::Unavailable(_)) => (item.index, Written::Unavailable),
                Err(_) => (item.index, Written::Refused),
            }
        }))
        .buffer_unordered(settings.writes_in_flight)
        .collect()
        .await;
        items += results.len();
        // The message's units, settled into the tenant's window before its next message.
        if let Err(e) = app.count_quota(tenant).await {
            tracing::warn!(tenant = %tenant, error = %e, "the quota counter could not be written; the batch is unaffected");
        }
        let held_back = results.iter().any(|(_, w)| *w == Written::HeldBack);
        if results.iter().any(|(_, w)| w.failed()) {
            if !settled_with_failures(app, settings, v, &results, held_back).await {
                again.push(id);
            }
        } else if held_back {
            // The bucket ran dry part-way: the rest of the message is deferred.
            let wait = app.quota_wait_seconds(tenant).await.max(1);
            if let Err(e) = defer(app, settings, v, wait).await {
                tracing::warn!(tenant = %tenant, import_id = %v.body.import_id, error = %e, "an import message could not be deferred; it is delivered again");
                again.push(id);
            }
        }
    }
    (items, again)
}

/// What became of one item in this delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    Yes,
    /// Not written: DynamoDB or the item refused it (a refused tenant, an item it will not take).
    Refused,
    /// Not written: DynamoDB was unavailable or throttled it, past the SDK's retries.
    Unavailable,
    /// Not sent: the tenant's bucket was empty.
    HeldBack,
}

impl Written {
    fn failed(self) -> bool {
        matches!(self, Written::Refused | Written::Unavailable)
    }
}

/// Settles a message some of whose items were not written (`results`; `held_back`: some were not
/// sent): whether it is deleted (a copy carries on with it), else it is delivered again, its written
/// items skipped then.
///
/// On its last delivery SQS moves it to the dead-letter queue, and its failed items are recorded
/// as failed ([`note_failures`]); a copy carries on with what the bucket held back (never
/// dead-lettered with them). But an item DynamoDB was only unavailable for through every delivery
/// (an outage, or throttling, for minutes) was not refused: the message is held back instead, a
/// copy delivered a minute later as a first delivery ([`hold`], until the import's deadline), and
/// only the refused items fail for good.
async fn settled_with_failures(
    app: &App,
    settings: &ConsumerSettings,
    v: &Verified<'_>,
    results: &[(u32, Written)],
    held_back: bool,
) -> bool {
    let of = |kind: Written| -> Vec<u32> {
        results
            .iter()
            .filter(|(_, w)| *w == kind)
            .map(|(index, _)| *index)
            .collect()
    };
    let (refused, unavailable) = (of(Written::Refused), of(Written::Unavailable));
    if receives(v.message) >= settings.max_receives && !unavailable.is_empty() {
        match hold(app, settings, v.message, &v.tenant, &v.body).await {
            Ok(()) => {
                if !refused.is_empty() {
                    note_failures(app, settings, v, &refused).await;
                }
                return true;
            }
            Err(e) => {
                tracing::warn!(tenant = %v.tenant, import_id = %v.body.import_id, error = %e, "an import message DynamoDB was unavailable for could not be held back; it is dead-lettered");
            }
        }
    }
    let failed = [refused, unavailable].concat();
    let failed_for_good = note_failures(app, settings, v, &failed).await;
    if failed_for_good && held_back {
        let wait = app.quota_wait_seconds(&v.tenant).await.max(1);
        if let Err(e) = defer(app, settings, v, wait).await {
            tracing::warn!(tenant = %v.tenant, import_id = %v.body.import_id, error = %e, "the items held back of a dead-lettered import message could not be deferred");
        }
    }
    false
}

/// The indexes of `v`'s items that already have an outcome (one consistent Query of their range).
async fn done_items(
    app: &App,
    v: &Verified<'_>,
) -> Result<std::collections::HashSet<u32>, ApiError> {
    let (Some(first), Some(last)) = (
        v.items.iter().map(|i| i.index).min(),
        v.items.iter().map(|i| i.index).max(),
    ) else {
        return Ok(Default::default());
    };
    let db = app.db(&v.tenant).await?;
    let now = app.clock.now_seconds();
    let (done, meta) = with_request_meta(outcomes_between(
        &db,
        &v.tenant,
        &v.body.import_id,
        (first, last),
        now,
    ))
    .await;
    app.bill(&v.tenant, BIN, &meta);
    Ok(done?)
}

/// A message with `failed` items, to be delivered again: on its last delivery its failed items are
/// recorded as failed, as SQS then moves it to the dead-letter queue. Whether they were (they are
/// final: a copy of the message passes them by).
async fn note_failures(
    app: &App,
    settings: &ConsumerSettings,
    v: &Verified<'_>,
    failed: &[u32],
) -> bool {
    let receives = receives(v.message);
    let last = receives >= settings.max_receives;
    tracing::warn!(
        tenant = %v.tenant,
        import_id = %v.body.import_id,
        items = ?failed,
        receives,
        last,
        "import items were not written"
    );
    if last {
        let recorded = async {
            let db = app.db(&v.tenant).await?;
            let now = app.clock.now_seconds();
            for index in failed {
                let of = ItemOutcome {
                    import: &v.body.import_id,
                    index: *index,
                    outcome: Outcome::Failed(FailReason::Rejected),
                    created_at_ms: v.body.issued_at,
                };
                record_outcome(&db, &of, now).await?;
            }
            Ok::<_, ApiError>(())
        };
        match recorded.await {
            Ok(()) => return true,
            Err(e) => {
                tracing::error!(tenant = %v.tenant, import_id = %v.body.import_id, error = %e, "failed import items could not be recorded as failed");
            }
        }
    }
    false
}

/// How many times SQS has delivered `message`, this delivery included.
fn receives(message: &SqsMessage) -> u32 {
    message
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}
