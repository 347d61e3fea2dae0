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
//!   dead-letter queue.
//!
//! The rate: one invocation writes at most `IMPORT_WRITES_IN_FLIGHT` items at once, whatever the
//! batch holds, and the event source mapping runs at most `MaximumConcurrency` invocations, so at most
//! their product of writes are in flight across the queue.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use futures::StreamExt;
use shared::identity::ids::TenantId;
use shared::store::client::meter::with_request_meta;
use shared::store::client::scoped::TenantDb;
use shared::store::imports::{
    copy_sent, due_at_ms, marker, message_digest, note_copy_sent, note_deferred, outcomes_between,
    record_outcome, sealing_key, Copy, FailReason, ItemOutcome, Outcome, Tombstone,
    RETENTION_SECONDS,
};
use shared::store::tenancy::layout::Put;
use shared::{ApiError, App};

use hr::store::{store_department, store_employee, EmployeeFields, WrittenAt};

use crate::{
    open_items, verify, ImportItem, ImportMessage, ImportQueue, MessageItem, COPY_ATTRIBUTE,
    SIGNATURE_ATTRIBUTE, TENANT_ATTRIBUTE,
};

/// The usage counters' name for the consumer's writes.
pub const BIN: &str = "import-consumer";
/// The queue's `maxReceiveCount` when `IMPORT_MAX_RECEIVES` is not set (template.yaml's).
pub const DEFAULT_MAX_RECEIVES: u32 = 5;
/// Items one invocation writes at once when `IMPORT_WRITES_IN_FLIGHT` is not set.
pub const DEFAULT_WRITES_IN_FLIGHT: usize = 4;

/// The consumer's own settings, read once in `main`.
#[derive(Debug, Clone)]
pub struct ConsumerSettings {
    /// The queue's `maxReceiveCount`: the delivery on which a failing item is recorded as failed.
    pub max_receives: u32,
    /// Items written at once by one invocation (1–64).
    pub writes_in_flight: usize,
    /// The import queue, where a message deferred by its tenant's capacity quota goes back
    /// (`IMPORT_QUEUE_URL`; without it a deferred message waits for its visibility timeout).
    pub requeue: Option<ImportQueue>,
    /// The longest a deferred copy waits on the queue (`IMPORT_DEFER_MAX_SECONDS`, 0–900; SQS's
    /// longest delay is 900).
    pub max_defer_seconds: u32,
}

/// A deferred message's shortest delay, in seconds.
pub const MIN_DEFER_SECONDS: u32 = 5;
/// A deferred message's longest delay: SQS's maximum.
pub const DEFAULT_MAX_DEFER_SECONDS: u32 = 900;

impl ConsumerSettings {
    pub fn from_env() -> Result<Self, shared::service::app::ConfigError> {
        let requeue = match std::env::var("IMPORT_QUEUE_URL") {
            Ok(url) if !url.is_empty() => Some(ImportQueue::from_env()?),
            _ => None,
        };
        Ok(Self {
            max_receives: setting("IMPORT_MAX_RECEIVES", DEFAULT_MAX_RECEIVES, 1..=1000)?,
            writes_in_flight: setting("IMPORT_WRITES_IN_FLIGHT", DEFAULT_WRITES_IN_FLIGHT, 1..=64)?,
            requeue,
            max_defer_seconds: setting(
                "IMPORT_DEFER_MAX_SECONDS",
                DEFAULT_MAX_DEFER_SECONDS,
                0..=DEFAULT_MAX_DEFER_SECONDS,
            )?,
        })
    }
}

fn setting<T>(
    name: &'static str,
    default: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, shared::service::app::ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    use shared::service::app::ConfigError;
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v.parse().ok().filter(|n| range.contains(n)).ok_or_else(|| {
            ConfigError::Invalid(
                name,
                format!("must be {} to {}", range.start(), range.end()),
            )
        }),
        _ => Ok(default),
    }
}

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
                Err(_) => (item.index, Written::Failed),
            }
        }))
        .buffer_unordered(settings.writes_in_flight)
        .collect()
        .await;
        items += results.len();
        let failed: Vec<u32> = results
            .iter()
            .filter(|(_, w)| *w == Written::Failed)
            .map(|(index, _)| *index)
            .collect();
        // The message's units, settled into the tenant's window before its next message.
        if let Err(e) = app.count_quota(tenant).await {
            tracing::warn!(tenant = %tenant, error = %e, "the quota counter could not be written; the batch is unaffected");
        }
        if !failed.is_empty() {
            note_failures(app, settings, v, &failed).await;
            again.push(id);
        } else if results.iter().any(|(_, w)| *w == Written::HeldBack) {
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
    Failed,
    /// Not sent: the tenant's bucket was empty.
    HeldBack,
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

/// Defers `v` while its tenant is over its capacity quota for `wait_seconds`: its import records
/// that it was held back, and a copy of the message (the same body and signed attributes, so its
/// items keep their markers and their place in the import) goes back on the queue, delayed by the
/// wait (at most SQS's 15 minutes), while this one is deleted; so a deferral never counts as a
/// delivery, and a message is deferred as often as the debt lasts. When the wait would pass the
/// import's deadline, no copy is sent: the deadline's close fails the unwritten items `overQuota`.
/// Without a queue to send to (`IMPORT_QUEUE_URL` unset), the message is delivered again after its
/// visibility timeout.
async fn defer(
    app: &App,
    settings: &ConsumerSettings,
    v: &Verified<'_>,
    wait_seconds: u32,
) -> Result<(), ApiError> {
    let now_ms = app.clock.now_millis();
    let db = app.db(&v.tenant).await?;
    // Charged to the tenant, as its writes are.
    let (noted, meta) = with_request_meta(note_deferred(
        &db,
        &v.tenant,
        &v.body.import_id,
        v.body.issued_at,
        now_ms,
    ))
    .await;
    app.bill(&v.tenant, BIN, &meta);
    noted?;
    let deadline_ms = due_at_ms(v.body.issued_at);
    // At least a few seconds, so a tenant slightly in debt does not cycle its messages through
    // the consumer every second.
    let delay = wait_seconds
        .max(MIN_DEFER_SECONDS)
        .min(settings.max_defer_seconds);
    if now_ms + u64::from(wait_seconds) * 1000 >= deadline_ms {
        tracing::info!(tenant = %v.tenant, import_id = %v.body.import_id, wait_seconds, "import held back past its deadline by the capacity quota: its unwritten items fail overQuota");
        return Ok(());
    }
    requeue(&db, settings, v.message, &v.body, delay).await?;
    tracing::info!(tenant = %v.tenant, import_id = %v.body.import_id, delay, "import deferred: the tenant is over its capacity quota");
    Ok(())
}

/// Sends a copy of `message` (the same body and signed attributes) back on the import queue,
/// delayed by `delay` seconds, in its tenant's message group: the caller then lets the original be
/// deleted, so the copy's delivery is a first one. The copy is of the next generation, sent once
/// (`store::imports::copies`): a delivery of `message` again after an invocation that failed whole
/// finds its copy sent, and sends none.
async fn requeue(
    db: &TenantDb,
    settings: &ConsumerSettings,
    message: &SqsMessage,
    body: &ImportMessage,
    delay: u32,
) -> Result<(), ApiError> {
    let Some(queue) = &settings.requeue else {
        return Err(ApiError::Unavailable(
            "no import queue to defer to; delivered again".into(),
        ));
    };
    let digest = message_digest(&body.sealed_items);
    let copy = Copy {
        import: &body.import_id,
        message: &digest,
        generation: generation(message) + 1,
    };
    if copy_sent(db, copy).await? {
        tracing::info!(tenant = %db.tenant, import_id = %body.import_id, generation = copy.generation, "this message's copy went out before (an invocation that failed whole): none is sent again");
        return Ok(());
    }
    let attribute = |value: String| {
        aws_sdk_sqs::types::MessageAttributeValue::builder()
            .data_type("String")
            .string_value(value)
            .build()
            .ok()
    };
    let attributes = [TENANT_ATTRIBUTE, SIGNATURE_ATTRIBUTE]
        .into_iter()
        .filter_map(|name| {
            let value = message.message_attributes.get(name)?.string_value.clone()?;
            Some((name.to_owned(), attribute(value)?))
        })
        .chain(attribute(copy.generation.to_string()).map(|a| (COPY_ATTRIBUTE.to_owned(), a)))
        .collect();
    queue
        .client
        .send_message()
        .queue_url(&queue.url)
        .message_body(message.body.clone().unwrap_or_default())
        .set_message_attributes(Some(attributes))
        // The tenant's group, as the producer sends it: SQS's fair queue keeps a tenant's backlog
        // from holding up another's.
        .message_group_id(db.tenant.as_str())
        .delay_seconds(delay as i32)
        .send()
        .await
        .map_err(|e| {
            ApiError::Unavailable(format!("the import queue refused a deferred copy: {e}"))
        })?;
    // The copy is out: the original goes whether or not this note is written (without it, a
    // failure of the whole invocation could send one more copy of this generation, no more).
    if let Err(e) = note_copy_sent(db, copy, body.issued_at).await {
        tracing::warn!(tenant = %db.tenant, import_id = %body.import_id, error = %e, "a copy went out but could not be noted");
    }
    Ok(())
}

/// Which copy `message` is: 0 for the producer's, else its [`COPY_ATTRIBUTE`].
fn generation(message: &SqsMessage) -> u32 {
    message
        .message_attributes
        .get(COPY_ATTRIBUTE)
        .and_then(|a| a.string_value.as_deref())
        .and_then(|g| g.parse().ok())
        .unwrap_or(0)
}

/// How long a message of a tenant being restored waits before it is delivered again.
pub const RESTORE_HOLD_SECONDS: u32 = 60;

/// Holds back a message whose tenant is being restored: a copy goes back on the queue a minute
/// later ([`requeue`]), as a deferral for the quota does, so however long the restore lasts the
/// message never reaches the dead-letter queue for it. Its items are written after the restore (they
/// were accepted before it, and are not part of what it brings back); past the import's deadline,
/// no copy is sent, and the deadline's close fails the unwritten items.
async fn hold(
    app: &App,
    settings: &ConsumerSettings,
    message: &SqsMessage,
    tenant: &TenantId,
    body: &ImportMessage,
) -> Result<(), ApiError> {
    let delay = RESTORE_HOLD_SECONDS.min(settings.max_defer_seconds);
    if app.clock.now_millis() + u64::from(delay) * 1000 >= due_at_ms(body.issued_at) {
        tracing::info!(tenant = %tenant, import_id = %body.import_id, "import held back past its deadline by a restore: its unwritten items fail");
        return Ok(());
    }
    // Its tenant is being restored: a tenant route's client would be refused (503), and the copy's
    // note is the consumer's own bookkeeping, not the tenant's request.
    let db = app.db_for_operator(tenant).await?;
    requeue(&db, settings, message, body, delay).await?;
    tracing::info!(tenant = %tenant, import_id = %body.import_id, delay, "import held back: the tenant is being restored");
    Ok(())
}

/// A message with `failed` items, to be delivered again: on its last delivery its failed items are
/// recorded as failed, as SQS then moves it to the dead-letter queue.
async fn note_failures(app: &App, settings: &ConsumerSettings, v: &Verified<'_>, failed: &[u32]) {
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
        if let Err(e) = recorded.await {
            tracing::error!(tenant = %v.tenant, import_id = %v.body.import_id, error = %e, "failed import items could not be recorded as failed");
        }
    }
}

/// The message's items, opened with the tenant's import key. No key means offboarding destroyed
/// it (crypto-shredding): dropped. A key that does not open a message it signed is kept for a
/// person, like any signed message this version cannot read.
async fn unsealed(
    app: &App,
    keys: &mut SealingKeys,
    tenant: TenantId,
    body: ImportMessage,
) -> Accepted {
    let key = match keys.get(&tenant) {
        Some(known) => Ok(known.clone()),
        None => {
            let read = async {
                let db = app.db(&tenant).await?;
                Ok::<_, ApiError>(sealing_key(&db, &tenant).await?)
            };
            let read = read.await;
            if let Ok(key) = &read {
                keys.insert(tenant.clone(), key.clone());
            }
            read
        }
    };
    match key {
        Ok(Some(key)) => match open_items(&key, &tenant, &body.import_id, &body.sealed_items) {
            Some(items) => Accepted::Yes(tenant, body, items),
            None => {
                tracing::error!(tenant = %tenant, import_id = %body.import_id, "the tenant's import key does not open a message it signed");
                Accepted::Again
            }
        },
        Ok(None) => dropped(app, &tenant, &body, KEY_DESTROYED),
        Err(e) => {
            tracing::warn!(tenant = %tenant, error = %e, "the tenant's import key is unavailable; the message will be delivered again");
            Accepted::Again
        }
    }
}

/// Each tenant's import sealing key, read once per batch (a consistent read: `None` once
/// offboarding destroyed it).
type SealingKeys = std::collections::HashMap<TenantId, Option<Vec<u8>>>;

/// How many times SQS has delivered `message`, this delivery included.
fn receives(message: &SqsMessage) -> u32 {
    message
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// [`write`], with what it cost added to the tenant's usage and charged to its quota.
async fn write_metered(
    app: &App,
    tenant: &TenantId,
    body: &ImportMessage,
    item: &MessageItem,
) -> Result<(), ApiError> {
    let (result, meta) = with_request_meta(write(app, tenant, body, item)).await;
    if let Err(e) = &result {
        tracing::warn!(tenant = %tenant, import_id = %body.import_id, index = item.index, error = %e, "an import item was not written");
    }
    app.bill(tenant, BIN, &meta);
    result
}

/// Whether a message is written: only when its signature verifies, it is younger than its
/// markers, and its tenant is the one that sent it.
enum Accepted {
    Yes(TenantId, ImportMessage, Vec<MessageItem>),
    /// Refused for good, with an alarm: deleted, and nothing written.
    Dropped,
    /// To be delivered again (and so, in the end, moved to the dead-letter queue).
    Again,
    /// Its tenant is being restored: held back on the queue until the restore ends, never counted
    /// as a delivery.
    Held(TenantId, ImportMessage),
}

async fn accepted(app: &App, keys: &mut SealingKeys, message: &SqsMessage) -> Accepted {
    let message_id = message.message_id.as_deref().unwrap_or("-");
    let Some((tenant, raw)) = signed(app, message) else {
        // Never deleted at once: it may be signed with a key this container does not know yet (a
        // rotation that reached the producer first). Delivered again, it is written once a
        // consumer knows the key; otherwise it ends in the dead-letter queue, never written.
        tracing::error!(
            alarm = "forged_import_message",
            message_id,
            "an import message whose signature does not verify (forged, or a key this consumer does not know yet): not written, delivered again"
        );
        app.emit_event(
            &[("ForgedImportMessages", 1.0)],
            &[("messageId", message_id)],
        );
        return Accepted::Again;
    };
    let Ok(body) = serde_json::from_str::<ImportMessage>(raw) else {
        // Signed by us, yet unreadable (a format this version does not know): kept for a person.
        tracing::error!(tenant = %tenant, message_id, "an import message signed by POST /imports does not parse");
        return Accepted::Again;
    };
    // The same arithmetic as the markers' expiry (`issuedAt` seconds + retention), so a message is
    // never written in a second where its import's markers already count as expired.
    if app.clock.now_seconds() >= body.issued_at / 1000 + RETENTION_SECONDS {
        return dropped(app, &tenant, &body, EXPIRED);
    }
    // The message names the tenant record it was sent for (its createdAt). A cached record (or
    // absence) that differs may be stale, a tenant of this id offboarded and onboarded again within
    // the cache's 30 s: dropping is for good, so it is decided on a consistent read.
    let current = match app.directory.record(&tenant).await {
        Ok(Some(record)) if record.created_at == body.tenant_since => Ok(Some(record)),
        Ok(_) => app.directory.record_now(&tenant).await,
        Err(e) => Err(e),
    };
    match current {
        Ok(Some(record)) if record.created_at == body.tenant_since => {
            if record.status == shared::store::tenancy::tenants::TenantStatus::Restoring {
                return Accepted::Held(tenant, body);
            }
            unsealed(app, keys, tenant, body).await
        }
        Ok(_) => dropped(app, &tenant, &body, FORMER_TENANT),
        Err(e) => {
            tracing::warn!(tenant = %tenant, error = %e, "the tenant record is unavailable; the message will be delivered again");
            Accepted::Again
        }
    }
}

/// Why a signed message is dropped for good: its alarm, its `reason` in the metric, and what the
/// log line says.
struct DropReason {
    alarm: &'static str,
    reason: &'static str,
    says: &'static str,
}

const KEY_DESTROYED: DropReason = DropReason {
    alarm: "import_key_destroyed",
    reason: "keyDestroyed",
    says: "dropped an import message whose tenant's key is gone",
};
const EXPIRED: DropReason = DropReason {
    alarm: "expired_import_message",
    reason: "expired",
    says: "dropped an import message older than its markers (a replay)",
};
const FORMER_TENANT: DropReason = DropReason {
    alarm: "import_for_a_former_tenant",
    reason: "formerTenant",
    says: "dropped an import message sent before the tenant was offboarded",
};

/// Drops a signed message for good: an alarm line, and a count by reason (the
/// `DroppedImportMessages` metric).
fn dropped(app: &App, tenant: &TenantId, body: &ImportMessage, why: DropReason) -> Accepted {
    tracing::error!(
        alarm = why.alarm,
        tenant = %tenant,
        import_id = %body.import_id,
        "{}",
        why.says
    );
    app.emit_event(
        &[("DroppedImportMessages", 1.0)],
        &[("tenant_id", tenant.as_str()), ("reason", why.reason)],
    );
    Accepted::Dropped
}

/// The message's tenant and body, when its signature verifies.
fn signed<'a>(app: &App, message: &'a SqsMessage) -> Option<(TenantId, &'a str)> {
    let attribute = |name| {
        message
            .message_attributes
            .get(name)?
            .string_value
            .as_deref()
    };
    let tenant = TenantId::parse(attribute(TENANT_ATTRIBUTE)?).ok()?;
    let body = message.body.as_deref()?;
    verify(
        &*app.cursor_keys().ok()?,
        &tenant,
        body,
        attribute(SIGNATURE_ATTRIBUTE)?,
    )
    .then_some((tenant, body))
}

/// Writes the item and its marker, as of the import's acceptance, unless its marker says an earlier
/// delivery did; when the entity was written or deleted after the import was accepted, records the
/// item as superseded instead. Each kind is written by the same code as its PUT.
async fn write(
    app: &App,
    tenant: &TenantId,
    body: &ImportMessage,
    item: &MessageItem,
) -> Result<(), ApiError> {
    if item.item.kind() != body.kind {
        return Err(ApiError::Internal(format!(
            "an item of {} in an import of {}",
            item.item.kind().as_str(),
            body.kind.as_str()
        )));
    }
    item.item.check("item")?;
    let db = app.db(tenant).await?;
    let layout = app.directory.layout(&db).await?;
    let now = app.clock.now_seconds();
    let along = vec![
        marker(
            &db,
            &ItemOutcome {
                import: &body.import_id,
                index: item.index,
                outcome: Outcome::Written,
                created_at_ms: body.issued_at,
            },
            now,
        )?,
        Tombstone::of(&db, body.kind.entity(), item.item.id()).absent_since(body.issued_at)?,
    ];
    let (written, put) = match &item.item {
        ImportItem::Product(p) => {
            let write = products::ProductWrite {
                id: &p.product_id,
                document: &p.document,
                written_at: WrittenAt::as_of(body.issued_at),
                along,
            };
            let (keys, put) = products::store_product(&db, layout, write).await?;
            (keys.write, put)
        }
        ImportItem::Department(d) => {
            let at = WrittenAt::as_of(body.issued_at);
            let id = (&d.department_id, d.name.0.as_str());
            let stored = store_department(&db, layout, tenant, id, at, along).await?;
            (stored.cached_as, stored.put)
        }
        ImportItem::Employee(e) => {
            let fields = EmployeeFields {
                name: &e.name.0,
                department: &e.department_id,
                email: e.email.as_ref().map(|m| m.0.as_str()),
            };
            let at = WrittenAt::as_of(body.issued_at);
            let stored =
                store_employee(&db, layout, tenant, (&e.employee_id, fields), at, along).await?;
            (stored.cached_as, stored.put)
        }
    };
    match put {
        Put::Written { .. } => app.read_cache.forget(tenant, &written),
        // The item has an outcome already (an earlier delivery wrote it or found it superseded,
        // or the import passed its deadline): nothing is written again.
        Put::Refused { along: 0 } => {}
        // The entity was written (`Superseded`) or deleted (its tombstone, along 1) after the
        // import was accepted: the tenant's later word stands.
        Put::Refused { .. } | Put::Superseded => {
            let of = ItemOutcome {
                import: &body.import_id,
                index: item.index,
                outcome: Outcome::Superseded,
                created_at_ms: body.issued_at,
            };
            record_outcome(&db, &of, now).await?
        }
    }
    Ok(())
}
