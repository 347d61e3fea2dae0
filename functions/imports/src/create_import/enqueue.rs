//! Sending an import's items to the queue: sealed and signed messages, sent in batches, a batch's
//! entries SQS failed on its side sent again.

use std::time::Duration;

use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use futures::{StreamExt, TryStreamExt};
use shared::identity::ids::{EntityId, TenantId};
use shared::store::imports::MessageKey;
use shared::{ApiError, App};

use crate::{
    seal_items, sign, ImportItem, ImportKind, ImportMessage, ImportQueue, MessageItem,
    ITEMS_PER_MESSAGE, MESSAGE_BYTES, SIGNATURE_ATTRIBUTE, TENANT_ATTRIBUTE,
};

/// SQS takes at most 10 messages and 256 KiB per SendMessageBatch; this leaves room for attributes.
const BATCH_ENTRIES: usize = 10;
const BATCH_BYTES: usize = 240 * 1024;
/// Batches in flight at once.
const SENDS_IN_FLIGHT: usize = 4;
/// Sends of a batch's entries that SQS failed (not the caller's fault) before the request fails.
const SEND_ATTEMPTS: u32 = 3;

/// What every message of one import carries besides its items.
pub(super) struct Outgoing<'a> {
    pub(super) import: &'a EntityId,
    pub(super) kind: ImportKind,
    pub(super) issued_at: u64,
    pub(super) tenant_since: &'a str,
}

/// Sends the items in signed messages of up to [`ITEMS_PER_MESSAGE`] items and [`MESSAGE_BYTES`],
/// sealed with the tenant's import key.
/// The tenant is the `MessageGroupId` too: on a standard queue that makes it an SQS fair queue,
/// which keeps one tenant's backlog from delaying the others'.
pub(super) async fn enqueue(
    app: &App,
    queue: &ImportQueue,
    t: &TenantId,
    sent: &Outgoing<'_>,
    sealing_key: &MessageKey,
    items: Vec<(u32, ImportItem)>,
) -> Result<(), ApiError> {
    let keys = &*app.cursor_keys()?;
    let mut messages: Vec<(Vec<MessageItem>, usize)> = Vec::new();
    for (index, item) in items {
        let size = serde_json::to_vec(&item).map_or(0, |b| b.len()) + 200;
        let item = MessageItem { index, item };
        match messages.last_mut() {
            Some((items, bytes))
                if items.len() < ITEMS_PER_MESSAGE && *bytes + size <= MESSAGE_BYTES =>
            {
                *bytes += size;
                items.push(item);
            }
            _ => messages.push((vec![item], size)),
        }
    }
    let mut batches: Vec<Vec<SendMessageBatchRequestEntry>> = Vec::new();
    let mut batch_bytes = 0;
    for (n, (items, _)) in messages.into_iter().enumerate() {
        let message = ImportMessage {
            import_id: sent.import.clone(),
            kind: sent.kind,
            issued_at: sent.issued_at,
            tenant_since: sent.tenant_since.to_owned(),
            sealed_items: seal_items(&sealing_key.key, t, sent.import, &items)?,
            key_version: sealing_key.version,
        };
        let body = serde_json::to_string(&message)
            .map_err(|e| ApiError::Internal(format!("serialize message: {e}")))?;
        let signature = sign(keys, t, &body);
        let size = body.len() + signature.len() + t.as_str().len() + 64;
        let entry = SendMessageBatchRequestEntry::builder()
            .id(n.to_string())
            .message_body(body)
            .message_group_id(t.as_str())
            .message_attributes(TENANT_ATTRIBUTE, string_attribute(t.as_str())?)
            .message_attributes(SIGNATURE_ATTRIBUTE, string_attribute(&signature)?)
            .build()
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        match batches.last_mut() {
            Some(batch) if batch.len() < BATCH_ENTRIES && batch_bytes + size <= BATCH_BYTES => {
                batch_bytes += size;
                batch.push(entry);
            }
            _ => {
                batch_bytes = size;
                batches.push(vec![entry]);
            }
        }
    }
    futures::stream::iter(batches.into_iter().map(|batch| send_batch(queue, batch)))
        .buffer_unordered(SENDS_IN_FLIGHT)
        .try_collect::<()>()
        .await
}

fn string_attribute(value: &str) -> Result<MessageAttributeValue, ApiError> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .map_err(|e| ApiError::Internal(e.to_string()))
}

/// Sends `entries`, sending again those SQS failed on its side, up to [`SEND_ATTEMPTS`] times.
async fn send_batch(
    queue: &ImportQueue,
    mut entries: Vec<SendMessageBatchRequestEntry>,
) -> Result<(), ApiError> {
    for attempt in 0..SEND_ATTEMPTS {
        let out = queue
            .client
            .send_message_batch()
            .queue_url(&queue.url)
            .set_entries(Some(entries.clone()))
            .send()
            .await
            .map_err(|e| {
                tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "the import queue refused a batch");
                ApiError::Unavailable("The import queue is unavailable; retry with the same Idempotency-Key.".into())
            })?;
        if let Some(ours) = out.failed().iter().find(|f| f.sender_fault()) {
            return Err(ApiError::Internal(format!(
                "the import queue refused a message: {} {}",
                ours.code(),
                ours.message().unwrap_or_default()
            )));
        }
        let failed: Vec<&str> = out.failed().iter().map(|f| f.id()).collect();
        if failed.is_empty() {
            return Ok(());
        }
        entries.retain(|e| failed.contains(&e.id()));
        tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
    }
    Err(ApiError::Unavailable(
        "The import queue did not take every item; retry with the same Idempotency-Key.".into(),
    ))
}
