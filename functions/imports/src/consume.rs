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
use shared::store::imports::{
    marker, not_deleted_since, record_outcome, sealing_key, FailReason, Outcome, RETENTION_SECONDS,
};
use shared::store::layout::Put;
use shared::store::meter::with_request_meta;
use shared::{ApiError, App};

use hr::store::{store_department, store_employee, EmployeeFields, WrittenAt};

use crate::{
    open_items, verify, ImportItem, ImportMessage, MessageItem, SIGNATURE_ATTRIBUTE,
    TENANT_ATTRIBUTE,
};

/// The usage counters' name for the consumer's writes.
pub const BIN: &str = "import-consumer";
/// The queue's `maxReceiveCount` when `IMPORT_MAX_RECEIVES` is not set (template.yaml's).
pub const DEFAULT_MAX_RECEIVES: u32 = 5;
/// Items one invocation writes at once when `IMPORT_WRITES_IN_FLIGHT` is not set.
pub const DEFAULT_WRITES_IN_FLIGHT: usize = 4;

/// The consumer's own settings, read once in `main`.
#[derive(Debug, Clone, Copy)]
pub struct ConsumerSettings {
    /// The queue's `maxReceiveCount`: the delivery on which a failing item is recorded as failed.
    pub max_receives: u32,
    /// Items written at once by one invocation (1–64).
    pub writes_in_flight: usize,
}

impl ConsumerSettings {
    pub fn from_env() -> Result<Self, shared::service::app::ConfigError> {
        Ok(Self {
            max_receives: setting("IMPORT_MAX_RECEIVES", DEFAULT_MAX_RECEIVES, 1..=1000)?,
            writes_in_flight: setting("IMPORT_WRITES_IN_FLIGHT", DEFAULT_WRITES_IN_FLIGHT, 1..=64)?,
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
pub async fn consume(app: &App, settings: ConsumerSettings, event: SqsEvent) -> SqsBatchResponse {
    if let Err(e) = app.signing.refresh(app.clock.now_millis()).await {
        tracing::error!(error = %e, "no signing keys: every message is delivered again");
    }
    let mut sealing_keys = SealingKeys::new();
    let mut verified = Vec::new();
    let mut response = SqsBatchResponse::default();
    for message in &event.records {
        match accepted(app, &mut sealing_keys, message).await {
            Accepted::Yes(tenant, body, items) => {
                // Imports draw from the tenant's capacity quota: while its bucket is in debt, the
                // message waits on the queue (its visibility timeout), except on its last
                // delivery, which is written and charged, so a quota never loses an import.
                let wait = app.quota_wait_seconds(&tenant).await;
                if wait > 0 && receives(message) < settings.max_receives {
                    tracing::info!(tenant = %tenant, import_id = %body.import_id, wait, "import deferred: the tenant is over its capacity quota");
                    response.add_failure(message.message_id.clone().unwrap_or_default());
                    continue;
                }
                verified.push(Verified {
                    message,
                    tenant,
                    body,
                    items,
                })
            }
            Accepted::Dropped => {}
            Accepted::Again => response.add_failure(message.message_id.clone().unwrap_or_default()),
        }
    }
    // Every item of the batch, at most `writes_in_flight` at once: (message, item, result).
    let writes = verified.iter().enumerate().flat_map(|(m, v)| {
        v.items.iter().map(move |item| async move {
            (m, item, write_metered(app, &v.tenant, &v.body, item).await)
        })
    });
    let results: Vec<_> = futures::stream::iter(writes)
        .buffer_unordered(settings.writes_in_flight)
        .collect()
        .await;
    for (m, v) in verified.iter().enumerate() {
        let failed: Vec<u32> = results
            .iter()
            .filter(|(of, _, result)| *of == m && result.is_err())
            .map(|(_, item, _)| item.index)
            .collect();
        if !failed.is_empty() {
            note_failures(app, settings, v, &failed).await;
            response.add_failure(v.message.message_id.clone().unwrap_or_default());
        }
    }
    let mut tenants: Vec<&TenantId> = verified.iter().map(|v| &v.tenant).collect();
    tenants.sort();
    tenants.dedup();
    for tenant in tenants {
        if let Err(e) = app.count_quota(tenant).await {
            tracing::warn!(tenant = %tenant, error = %e, "the quota counter could not be written; the batch is unaffected");
        }
    }
    if let Err(e) = app.flush_usage().await {
        tracing::warn!(error = %e, "usage metering failed; the batch is unaffected");
    }
    tracing::info!(
        messages = event.records.len(),
        items = results.len(),
        again = response.batch_item_failures.len(),
        "import batch"
    );
    response
}

/// A message with `failed` items, to be delivered again: on its last delivery its failed items are
/// recorded as failed, as SQS then moves it to the dead-letter queue.
async fn note_failures(app: &App, settings: ConsumerSettings, v: &Verified<'_>, failed: &[u32]) {
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
                record_outcome(
                    &db,
                    &v.tenant,
                    &v.body.import_id,
                    *index,
                    Outcome::Failed(FailReason::Rejected),
                    v.body.issued_at,
                    now,
                )
                .await?;
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
        Ok(None) => {
            tracing::error!(
                alarm = "import_key_destroyed",
                tenant = %tenant,
                import_id = %body.import_id,
                "dropped an import message whose tenant's key is gone"
            );
            dropped(app, &tenant, "keyDestroyed");
            Accepted::Dropped
        }
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
        tracing::error!(
            alarm = "expired_import_message",
            tenant = %tenant,
            import_id = %body.import_id,
            "dropped an import message older than its markers (a replay)"
        );
        dropped(app, &tenant, "expired");
        return Accepted::Dropped;
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
            unsealed(app, keys, tenant, body).await
        }
        Ok(_) => {
            tracing::error!(
                alarm = "import_for_a_former_tenant",
                tenant = %tenant,
                import_id = %body.import_id,
                "dropped an import message sent before the tenant was offboarded"
            );
            dropped(app, &tenant, "formerTenant");
            Accepted::Dropped
        }
        Err(e) => {
            tracing::warn!(tenant = %tenant, error = %e, "the tenant record is unavailable; the message will be delivered again");
            Accepted::Again
        }
    }
}

/// Counts a signed message dropped for good, by `reason` (the `DroppedImportMessages` metric).
fn dropped(app: &App, tenant: &TenantId, reason: &str) {
    app.emit_event(
        &[("DroppedImportMessages", 1.0)],
        &[("tenantId", tenant.as_str()), ("reason", reason)],
    );
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
            tenant,
            &body.import_id,
            item.index,
            Outcome::Written,
            body.issued_at,
            now,
        )?,
        not_deleted_since(
            &db,
            tenant,
            body.kind.entity(),
            item.item.id(),
            body.issued_at,
        )?,
    ];
    let (written, put) = match &item.item {
        ImportItem::Product(p) => {
            let (keys, put) = products::store_product(
                &db,
                layout,
                tenant,
                &p.product_id,
                &p.document,
                body.issued_at,
                along,
                true,
            )
            .await?;
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
            record_outcome(
                &db,
                tenant,
                &body.import_id,
                item.index,
                Outcome::Superseded,
                body.issued_at,
                now,
            )
            .await?
        }
    }
    Ok(())
}
