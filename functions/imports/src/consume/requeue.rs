//! Putting a message back on the queue for later, never counted as a delivery: deferred while its
//! tenant is over its capacity quota, held back while its tenant is being restored.

use aws_lambda_events::event::sqs::SqsMessage;
use shared::identity::ids::TenantId;
use shared::store::client::meter::with_request_meta;
use shared::store::client::scoped::TenantDb;
use shared::store::imports::{
    copy_sent, due_at_ms, fail_items, message_digest, note_copy_sent, note_deferred, Copy,
    FailReason,
};
use shared::{ApiError, App};

use super::{done_items, ConsumerSettings, Verified, BIN, MIN_DEFER_SECONDS};
use crate::{ImportMessage, COPY_ATTRIBUTE, SIGNATURE_ATTRIBUTE, TENANT_ATTRIBUTE};

/// Defers `v` while its tenant is over its capacity quota for `wait_seconds`: its import records
/// that it was held back, and a copy of the message (the same body and signed attributes, so its
/// items keep their markers and their place in the import) goes back on the queue, delayed by the
/// wait (at most SQS's 15 minutes), while this one is deleted; so a deferral never counts as a
/// delivery, and a message is deferred as often as the debt lasts. When the wait would pass the
/// import's deadline, no copy is sent: its unwritten items fail `overQuota` then.
/// Without a queue to send to (`IMPORT_QUEUE_URL` unset), the message is delivered again after its
/// visibility timeout.
pub(super) async fn defer(
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
        give_up_over_quota(app, &db, v, now_ms).await?;
        tracing::info!(tenant = %v.tenant, import_id = %v.body.import_id, wait_seconds, "import held back past its deadline by the capacity quota: its unwritten items failed overQuota");
        return Ok(());
    }
    requeue(&db, settings, v.message, &v.body, delay).await?;
    tracing::info!(tenant = %v.tenant, import_id = %v.body.import_id, delay, "import deferred: the tenant is over its capacity quota");
    Ok(())
}

/// Fails each item of `v` not written yet `overQuota`, now: the quota is why these are never
/// written, and only these (the deadline's close fails what was never delivered `undelivered`,
/// whatever another message's deferrals). The markers are the import's bookkeeping, not charged
/// to the tenant in debt; a delivery again finds them and writes nothing.
async fn give_up_over_quota(
    app: &App,
    db: &TenantDb,
    v: &Verified<'_>,
    now_ms: u64,
) -> Result<(), ApiError> {
    let done = done_items(app, v).await?;
    let open: Vec<u32> = v
        .items
        .iter()
        .map(|item| item.index)
        .filter(|i| !done.contains(i))
        .collect();
    let (import, over_quota) = (&v.body.import_id, FailReason::OverQuota);
    fail_items(
        db,
        import,
        v.body.issued_at,
        &open,
        over_quota,
        now_ms / 1000,
    )
    .await?;
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

/// How long a message of a tenant being restored (or whose key refuses) waits before it is
/// delivered again.
pub const RESTORE_HOLD_SECONDS: u32 = 60;

/// Holds back a message whose tenant is being restored, or whose key refuses, or whose items
/// DynamoDB was unavailable for through every delivery: a copy goes back on the queue a minute
/// later ([`requeue`]), as a deferral for the quota does, so however long the restore (or the
/// revocation, or the outage) lasts the message never reaches the dead-letter queue for it. Its
/// items are written after the restore (they were accepted before it, and are not part of what it
/// brings back), or once the key is usable again; past the import's deadline, no copy is sent, and
/// the deadline's close fails the unwritten items.
pub(super) async fn hold(
    app: &App,
    settings: &ConsumerSettings,
    message: &SqsMessage,
    tenant: &TenantId,
    body: &ImportMessage,
) -> Result<(), ApiError> {
    let delay = RESTORE_HOLD_SECONDS.min(settings.max_defer_seconds);
    if app.clock.now_millis() + u64::from(delay) * 1000 >= due_at_ms(body.issued_at) {
        tracing::info!(tenant = %tenant, import_id = %body.import_id, "import held back past its deadline (a restore, its key refusing, or DynamoDB unavailable): its unwritten items fail");
        return Ok(());
    }
    // Its tenant is being restored (or its key refuses): a tenant route's client would be refused,
    // and the copy's note is the consumer's own bookkeeping, not the tenant's request.
    let db = app.db_for_operator(tenant).await?;
    requeue(&db, settings, message, body, delay).await?;
    tracing::info!(tenant = %tenant, import_id = %body.import_id, delay, "import held back: the tenant is being restored, its key refuses, or DynamoDB was unavailable");
    Ok(())
}
