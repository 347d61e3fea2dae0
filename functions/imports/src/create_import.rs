//! createImport: `POST /imports` `{kind, items}` → 202 `{importId, kind, accepted, status}`.
//!
//! Every item is checked before anything is sent: a bad one answers 400 naming its index
//! (`items[3].document`), and nothing is enqueued. Then the items go to the import queue in signed
//! messages of up to 25 items (`ITEMS_PER_MESSAGE`), sent in batches of up to 10, and last the
//! import's record is written (with the `Idempotency-Key`'s record, when one was sent). An answer of
//! 202 therefore means every item is on the queue.
//!
//! With an `Idempotency-Key`, the import id is derived from the key, so a client that retries after
//! a failure part-way (some messages sent, no answer) sends the same `(importId, index)` items
//! again, and the consumer's markers write each item once. Without one, a failed request may leave
//! some of its items to be written under an import id nobody was told; retrying rewrites them.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use futures::{StreamExt, TryStreamExt};
use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use shared::identity::clock::rfc3339;
use shared::identity::ids::{EntityId, TenantId};
use shared::service::http::{json_body_up_to, json_response};
use shared::service::idempotent::{self, Recorder};
use shared::store::imports::record_item;
use shared::store::scoped::TenantDb;
use shared::{ApiError, App};

use crate::{
    sign, ImportKind, ImportMessage, ImportQueue, MessageItem, ProductItem, ITEMS_PER_MESSAGE,
    MAX_ITEMS, MESSAGE_BYTES, SIGNATURE_ATTRIBUTE, TENANT_ATTRIBUTE,
};

pub const ROUTE: &str = "create-import";
/// The largest request body: Lambda's synchronous payload limit is 6 MB.
pub const MAX_BODY_BYTES: usize = 6_000_000;
/// SQS takes at most 10 messages and 256 KiB per SendMessageBatch; this leaves room for attributes.
const BATCH_ENTRIES: usize = 10;
const BATCH_BYTES: usize = 240 * 1024;
/// Batches in flight at once.
const SENDS_IN_FLIGHT: usize = 4;
/// Sends of a batch's entries that SQS failed (not the caller's fault) before the request fails.
const SEND_ATTEMPTS: u32 = 3;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateImportInput {
    kind: ImportKind,
    /// Checked one by one, so a 400 names the item's index.
    items: Vec<serde_json::Value>,
}

/// An import as the API returns it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportView {
    pub import_id: String,
    pub kind: String,
    pub accepted: u32,
    pub written: u32,
    pub failed: u32,
    /// `running` until every accepted item is written or failed, then `complete`.
    pub status: &'static str,
    pub created_at: String,
}

pub async fn handle(
    app: &App,
    queue: &ImportQueue,
    req: Request,
) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let input: CreateImportInput = json_body_up_to(&req, MAX_BODY_BYTES)?;
    let items = checked_items(&input)?;
    let db = app.db(&caller.tenant).await?;
    let t = &caller.tenant;
    let import = match idempotent::key_of(&req)? {
        Some(key) => derived_id(key.as_str())?,
        None => hex_id(&uuid::Uuid::now_v7().simple().to_string())?,
    };
    let now = app.clock.now_seconds();
    idempotent::run(&req, &db, t, ROUTE, now, |recorder| {
        create(app, queue, &db, t, (import, input.kind, items), recorder)
    })
    .await
}

/// Every item, checked: 1 to [`MAX_ITEMS`] of them, each well-formed, with no product id twice (the
/// queue does not keep order, so the later of two would not reliably win).
fn checked_items(input: &CreateImportInput) -> Result<Vec<ProductItem>, ApiError> {
    if input.items.is_empty() || input.items.len() > MAX_ITEMS {
        return Err(ApiError::bad_request(
            "items",
            format!(
                "An import takes 1 to {MAX_ITEMS} items; this one has {}.",
                input.items.len()
            ),
        ));
    }
    let mut seen: HashMap<EntityId, usize> = HashMap::new();
    let mut items = Vec::with_capacity(input.items.len());
    for (index, raw) in input.items.iter().enumerate() {
        let path = format!("items[{index}]");
        let item: ProductItem = serde_json::from_value(raw.clone())
            .map_err(|e| ApiError::bad_request(&path, format!("Invalid item: {e}")))?;
        products::check_product(&item.document, &format!("{path}.document"))?;
        if let Some(first) = seen.insert(item.product_id.clone(), index) {
            return Err(ApiError::bad_request(
                &format!("{path}.productId"),
                format!(
                    "Product {} is also items[{first}]; an import names each product once.",
                    item.product_id
                ),
            ));
        }
        items.push(item);
    }
    Ok(items)
}

/// The import id of an `Idempotency-Key`: the same key names the same import (per tenant, as every
/// key is under its tenant's prefix).
fn derived_id(key: &str) -> Result<EntityId, ApiError> {
    let digest = Sha256::digest(format!("{ROUTE}\n{key}").as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    hex_id(&hex)
}

fn hex_id(hex: &str) -> Result<EntityId, ApiError> {
    EntityId::parse(hex).map_err(|_| ApiError::Internal("hex digits are an entity id".into()))
}

async fn create(
    app: &App,
    queue: &ImportQueue,
    db: &TenantDb,
    t: &TenantId,
    (import, kind, items): (EntityId, ImportKind, Vec<ProductItem>),
    recorder: Option<Recorder<'_>>,
) -> Result<Response<Body>, ApiError> {
    let accepted = items.len() as u32;
    enqueue(app, queue, t, &import, kind, items).await?;
    let now_ms = app.clock.now_millis();
    let view = ImportView {
        import_id: import.to_string(),
        kind: kind.as_str().to_owned(),
        accepted,
        written: 0,
        failed: 0,
        status: "running",
        created_at: rfc3339(now_ms),
    };
    let record = record_item(
        t,
        &import,
        kind.as_str(),
        accepted,
        &view.created_at,
        now_ms / 1000,
    );
    if !idempotent::put_new(db, record, recorder.as_ref(), StatusCode::ACCEPTED, &view).await? {
        // Only when the same key was used more than a day ago (its record is gone, the import's not).
        return Err(ApiError::Conflict(
            "This Idempotency-Key started another import in the last 14 days; use a new key."
                .into(),
        ));
    }
    let mut response = json_response(StatusCode::ACCEPTED, &view);
    if let Ok(location) = format!("/imports/{import}").parse() {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// Sends the items in signed messages of up to [`ITEMS_PER_MESSAGE`] items and [`MESSAGE_BYTES`].
/// The tenant is the `MessageGroupId` too: on a standard queue that makes it an SQS fair queue,
/// which keeps one tenant's backlog from delaying the others'.
async fn enqueue(
    app: &App,
    queue: &ImportQueue,
    t: &TenantId,
    import: &EntityId,
    kind: ImportKind,
    items: Vec<ProductItem>,
) -> Result<(), ApiError> {
    let keys = &app.settings.cursor_keys;
    let mut messages: Vec<(Vec<MessageItem>, usize)> = Vec::new();
    for (index, item) in items.into_iter().enumerate() {
        let size = serde_json::to_vec(&item.document).map_or(0, |b| b.len()) + 200;
        let item = MessageItem {
            index: index as u32,
            product_id: item.product_id,
            document: item.document,
        };
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
            import_id: import.clone(),
            kind,
            items,
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
