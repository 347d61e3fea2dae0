//! createImport: `POST /imports` `{kind, items}` → 202 `{importId, kind, accepted, status}`.
//!
//! `kind` is `products`, `departments` or `employees`; each item is what the kind's PUT takes, with
//! its id (`{productId, document}`, `{departmentId, name}`, `{employeeId, name, departmentId,
//! email?}`). Every item is checked before anything is sent: a bad one answers 400 naming its index
//! (`items[3].document`), and so does an employee whose department does not exist; nothing is
//! enqueued then. An id given twice keeps its last item. Then
//! the items go to the import queue in signed messages of up to 25 items (`ITEMS_PER_MESSAGE`), sent
//! in batches of up to 10, and last the import's record is written (with the `Idempotency-Key`'s record, when one was sent). An answer of
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
use shared::store::client::scoped::TenantDb;
use shared::store::client::transact::TransactError;
use shared::store::imports::{
    claim, count_open, due_at_ms, ensure_sealing_item, mark_enqueued, uncount_open, Claim,
    FailReason, NewImport, Progress, Status, MAX_OPEN_IMPORTS,
};
use shared::store::lifecycle::driving::{list_import, unlist_import, DueImport};
use shared::{ApiError, App};

use crate::{
    seal_items, sign, ImportItem, ImportKind, ImportMessage, ImportQueue, MessageItem,
    ITEMS_PER_MESSAGE, MAX_ITEMS, MESSAGE_BYTES, SIGNATURE_ATTRIBUTE, TENANT_ATTRIBUTE,
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
/// What a tenant at its bound of open imports is told to wait: the lifecycle driver runs every
/// minute, and closes every import past its deadline.
const OPEN_IMPORTS_RETRY_AFTER_SECONDS: u32 = 60;
/// 429: the tenant has [`MAX_OPEN_IMPORTS`] imports open.
fn too_many_open_imports() -> ApiError {
    ApiError::TooManyRequests {
        detail: format!(
            "This tenant has {MAX_OPEN_IMPORTS} imports open; each is open until it is final, at the \
             latest an hour after it was accepted. Retry after the time in Retry-After."
        ),
        retry_after_seconds: OPEN_IMPORTS_RETRY_AFTER_SECONDS,
    }
}

/// Department reads in flight at once when an import of employees is checked.
const DEPARTMENT_READS_IN_FLIGHT: usize = 8;

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
    pub superseded: u32,
    /// Every failed item.
    pub failed: u32,
    /// Failed items per reason: `rejected`, `undelivered`, `notEnqueued`, `overQuota`.
    pub failed_by: std::collections::BTreeMap<&'static str, u32>,
    /// `enqueuing` until every item is on the queue, then `running` until every item has an
    /// outcome; final then: `complete` (every item written or superseded) or `failed`.
    pub status: &'static str,
    pub created_at: String,
    /// The time by which the import is final at the latest.
    pub final_by: String,
}

impl ImportView {
    pub fn of(import: &EntityId, p: &shared::store::imports::Progress) -> Self {
        Self {
            import_id: import.to_string(),
            kind: p.kind.clone(),
            accepted: p.accepted,
            written: p.written,
            superseded: p.superseded,
            failed: p.failed_total(),
            failed_by: FailReason::ALL
                .into_iter()
                .zip(p.failed)
                .map(|(r, n)| (r.as_str(), n))
                .collect(),
            status: p.status.as_str(),
            created_at: p.created_at.clone(),
            final_by: p.final_by.clone(),
        }
    }
}

pub async fn handle(
    app: &App,
    queue: &ImportQueue,
    req: Request,
) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| {
        let input: CreateImportInput = json_body_up_to(req, MAX_BODY_BYTES)?;
        Ok((input.kind, checked_items(input)?))
    };
    let ((kind, (items, request_index)), db) = app.tenant_request(&req, parse).await?;
    let t = &db.tenant;
    departments_exist(app, &db, t, &items, &request_index).await?;
    let import = match idempotent::key_of(&req)? {
        Some(key) => derived_id(key.as_str())?,
        None => hex_id(&uuid::Uuid::now_v7().simple().to_string())?,
    };
    let now = app.clock.now_seconds();
    idempotent::run(&req, &db, t, ROUTE, now, |recorder| {
        create(app, queue, &db, t, (import, kind, items), recorder)
    })
    .await
}

/// Every item, checked (1 to [`MAX_ITEMS`] of them, each well-formed for the import's kind; a 400
/// names the item's index in the request), numbered in request order. An id given more than once
/// keeps its last item, as if the items were written in order: the queue keeps no order, so
/// sending both would let either win. Beside them, each kept item's index in the request, for a 400
/// that names it.
fn checked_items(input: CreateImportInput) -> Result<(Numbered, Vec<u32>), ApiError> {
    if input.items.is_empty() || input.items.len() > MAX_ITEMS {
        return Err(ApiError::bad_request(
            "items",
            format!(
                "An import takes 1 to {MAX_ITEMS} items; this one has {}.",
                input.items.len()
            ),
        ));
    }
    let mut last: HashMap<EntityId, usize> = HashMap::new();
    let mut items = Vec::with_capacity(input.items.len());
    for (index, raw) in input.items.into_iter().enumerate() {
        let item = input.kind.item(raw, &format!("items[{index}]"))?;
        last.insert(item.id().clone(), index);
        items.push((index as u32, item));
    }
    items.retain(|(index, item)| last.get(item.id()) == Some(&(*index as usize)));
    // Numbered 0..accepted from here on (the consumer's markers, and the deadline's close, count on
    // it); a retry of the same request numbers them the same way.
    let request_index = items.iter().map(|(index, _)| *index).collect();
    let items = items
        .into_iter()
        .enumerate()
        .map(|(n, (_, item))| (n as u32, item))
        .collect();
    Ok((items, request_index))
}

/// An import's items, numbered `0..accepted`.
type Numbered = Vec<(u32, ImportItem)>;

/// For an import of employees: every department they name exists now (a 400 names the first item
/// naming one that does not, and nothing is sent). Departments are never deleted, so the consumer
/// finds each one when it writes the employee (on whichever shard a re-sharding has put it by then).
async fn departments_exist(
    app: &App,
    db: &TenantDb,
    t: &TenantId,
    items: &[(u32, ImportItem)],
    request_index: &[u32],
) -> Result<(), ApiError> {
    let mut seen = std::collections::HashSet::new();
    // Owned ids: a stream's closure over borrowed ones is not `Send` for every lifetime.
    // Each department with the request index of the first item naming it.
    let first_naming: Vec<(EntityId, u32)> = items
        .iter()
        .zip(request_index)
        .filter_map(|((_, item), index)| match item {
            ImportItem::Employee(e) if seen.insert(&e.department_id) => {
                Some((e.department_id.clone(), *index))
            }
            _ => None,
        })
        .collect();
    if first_naming.is_empty() {
        return Ok(());
    }
    let layout = app.directory.layout(db).await?;
    let found: Vec<Option<u32>> = futures::stream::iter(first_naming)
        .map(|(d, index)| async move {
            let keys = hr::store::keys(t, layout, shared::identity::keys::kind::DEPARTMENT, &d);
            let found = shared::store::tenancy::layout::locate(db, layout, &keys).await?;
            Ok::<_, ApiError>(found.is_none().then_some(index))
        })
        .buffered(DEPARTMENT_READS_IN_FLIGHT)
        .try_collect()
        .await?;
    // In item order, so the 400 names the first item naming a missing department.
    let missing = found.into_iter().flatten().next();
    match missing {
        None => Ok(()),
        Some(index) => Err(ApiError::bad_request(
            &format!("items[{index}].departmentId"),
            "names no existing department; import the departments first",
        )),
    }
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

/// A digest of what an import writes (its kind and items, with their indexes): the same request
/// has the same one, whatever the key.
fn fingerprint(kind: ImportKind, items: &[(u32, ImportItem)]) -> Result<String, ApiError> {
    let canonical = serde_json::to_vec(&(kind, items))
        .map_err(|e| ApiError::Internal(format!("serialize items: {e}")))?;
    Ok(Sha256::digest(&canonical)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Claims the import's record, sends its items, then marks it enqueued (in one transaction with the
/// key's answer, when a key was sent).
async fn create(
    app: &App,
    queue: &ImportQueue,
    db: &TenantDb,
    t: &TenantId,
    (import, kind, items): (EntityId, ImportKind, Vec<(u32, ImportItem)>),
    recorder: Option<Recorder<'_>>,
) -> Result<Response<Body>, ApiError> {
    let accepted = items.len() as u32;
    let fingerprint = fingerprint(kind, &items)?;
    let tenant_since = app
        .directory
        .record(t)
        .await?
        .map(|r| r.created_at.clone())
        .unwrap_or_default();
    let new = NewImport {
        kind: kind.as_str(),
        accepted,
        fingerprint: &fingerprint,
        created_at_ms: app.clock.now_millis(),
    };
    // The tenant's import key item also holds its open imports: past the bound, 429 before anything
    // is written (the count below decides, should two requests race for the last place).
    let sealing = ensure_sealing_item(db, t).await?;
    let open = &sealing.open_imports;
    if open.len() >= MAX_OPEN_IMPORTS && !open.contains(import.as_str()) {
        return Err(too_many_open_imports());
    }
    // Listed for the lifecycle driver before the record exists, so no import is ever missing from
    // its list: it is final by its deadline whatever becomes of this request (and its count is
    // released then).
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    let due = DueImport {
        due_at_ms: due_at_ms(new.created_at_ms),
        tenant: t.clone(),
        import: import.clone(),
        created_at_ms: new.created_at_ms,
    };
    list_import(&platform_db, &due).await?;
    if !count_open(db, t, &import).await? {
        if let Err(e) = unlist_import(&platform_db, &due).await {
            tracing::warn!(error = %e, "an import refused over the bound stays on the driver's list until its deadline");
        }
        return Err(too_many_open_imports());
    }
    let issued_at = match claim(db, t, &import, &new).await? {
        Claim::New => new.created_at_ms,
        // The same request, answered before (its key's record has expired since): every item was
        // sent, so nothing is sent again; the answer is the import as it stands.
        Claim::Same {
            enqueuing: false, ..
        } => {
            return Ok(accepted_response(
                &import,
                as_it_stands(app, db, t, &import).await?,
            ))
        }
        // A retry of a request that failed part-way, too late: the import is final (or about to
        // be, by the driver), its unsent items `notEnqueued`. Nothing is sent.
        Claim::Same {
            created_at_ms,
            closed,
            ..
        } if closed || new.created_at_ms >= due_at_ms(created_at_ms) => {
            // Final (or about to be): it counts no more among the open imports.
            uncount_open(db, t, &import).await?;
            return Err(ApiError::Conflict(format!(
                "Import {import} passed its deadline before this request finished sending it, and is final (GET /imports/{import}); import again with a new Idempotency-Key."
            )));
        }
        // A retry of a request that failed part-way, in time: its items are sent again, as of the
        // first attempt, and their markers keep each one written once.
        Claim::Same { created_at_ms, .. } => created_at_ms,
        Claim::Other => {
            return Err(ApiError::Unprocessable(
                "This Idempotency-Key named another import in the last 14 days.".into(),
            ))
        }
    };
    let sent = Outgoing {
        import: &import,
        kind,
        issued_at,
        tenant_since: &tenant_since,
    };
    enqueue(app, queue, t, &sent, &sealing.key, items).await?;
    let view = ImportView::of(
        &import,
        &Progress {
            kind: kind.as_str().to_owned(),
            status: Status::Running,
            accepted,
            written: 0,
            superseded: 0,
            failed: [0; 4],
            created_at: rfc3339(issued_at),
            final_by: rfc3339(due_at_ms(issued_at)),
        },
    );
    let location = format!("/imports/{import}");
    let recorded = recorder
        .as_ref()
        .map(|recorder| {
            recorder.record_with_headers(
                StatusCode::ACCEPTED,
                &view,
                &[(header::LOCATION, &location)],
            )
        })
        .transpose()?;
    mark_enqueued(db, t, &import, &fingerprint, recorded)
        .await
        .map_err(|e| match e {
            TransactError::ConditionFailed { index: 0, .. } => {
                ApiError::Conflict("The import changed while it was sent; retry.".into())
            }
            other => other.into(),
        })?;
    Ok(accepted_response(&import, view))
}

/// 202 with the import's view and its `Location`.
fn accepted_response(import: &EntityId, view: ImportView) -> Response<Body> {
    let mut response = json_response(StatusCode::ACCEPTED, &view);
    if let Ok(location) = format!("/imports/{import}").parse() {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// The import's view as `GET /imports/{id}` would answer it now.
async fn as_it_stands(
    app: &App,
    db: &TenantDb,
    t: &TenantId,
    import: &EntityId,
) -> Result<ImportView, ApiError> {
    let progress = shared::store::imports::progress(db, t, import, app.clock.now_seconds())
        .await?
        .ok_or_else(|| ApiError::Conflict("The import changed while it was read; retry.".into()))?;
    Ok(ImportView::of(import, &progress))
}

/// What every message of one import carries besides its items.
struct Outgoing<'a> {
    import: &'a EntityId,
    kind: ImportKind,
    issued_at: u64,
    tenant_since: &'a str,
}

/// Sends the items in signed messages of up to [`ITEMS_PER_MESSAGE`] items and [`MESSAGE_BYTES`],
/// sealed with the tenant's import key.
/// The tenant is the `MessageGroupId` too: on a standard queue that makes it an SQS fair queue,
/// which keeps one tenant's backlog from delaying the others'.
async fn enqueue(
    app: &App,
    queue: &ImportQueue,
    t: &TenantId,
    sent: &Outgoing<'_>,
    sealing_key: &[u8],
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
            sealed_items: seal_items(sealing_key, t, sent.import, &items)?,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_product_imports_fingerprint_is_the_one_it_had_before_imports_took_other_kinds() {
        // GIVEN a product import as a client sent it before departments and employees were added
        let items = vec![
            json_item(r#"{"productId":"p-1","document":{"name":"lamp"}}"#),
            json_item(r#"{"productId":"p-2","document":{"n":2}}"#),
        ];
        let (items, _) = checked_items(CreateImportInput {
            kind: ImportKind::Products,
            items,
        })
        .unwrap();
        // THEN its canonical bytes and digest are unchanged, so a keyed retry across the deploy
        // still names the same import
        assert_eq!(
            serde_json::to_string(&(ImportKind::Products, &items)).unwrap(),
            r#"["products",[[0,{"productId":"p-1","document":{"name":"lamp"}}],[1,{"productId":"p-2","document":{"n":2}}]]]"#
        );
        assert_eq!(
            fingerprint(ImportKind::Products, &items).unwrap(),
            "ede06853152f798842f05797b6b917be04ec5b8a7231fd9831cfcb6b160d6fee"
        );
    }

    #[test]
    fn each_kind_takes_its_own_items_and_names_a_bad_one_by_its_index() {
        let check = |kind, items: &[&str]| {
            checked_items(CreateImportInput {
                kind,
                items: items.iter().map(|i| json_item(i)).collect(),
            })
        };
        let (departments, request_index) = check(
            ImportKind::Departments,
            &[
                r#"{"departmentId":"eng","name":"Engineering"}"#,
                r#"{"departmentId":"ops","name":"Ops"}"#,
                r#"{"departmentId":"eng","name":"Engineering 2"}"#,
            ],
        )
        .unwrap();
        // an id given twice keeps its last item, and the items are numbered from 0 again
        let ids: Vec<(u32, &str)> = departments
            .iter()
            .map(|(n, i)| (*n, i.id().as_str()))
            .collect();
        assert_eq!(ids, [(0, "ops"), (1, "eng")]);
        assert_eq!(request_index, [1, 2]);
        assert!(check(
            ImportKind::Employees,
            &[r#"{"employeeId":"e-1","name":"Ada","departmentId":"eng","email":"a@x"}"#]
        )
        .is_ok());
        for (kind, bad, field) in [
            // an employee in an import of departments
            (
                ImportKind::Departments,
                r#"{"employeeId":"e-1","name":"Ada","departmentId":"eng"}"#,
                "items[1]",
            ),
            (
                ImportKind::Employees,
                r#"{"employeeId":"e-1","name":"Ada"}"#,
                "items[1]",
            ),
            (
                ImportKind::Employees,
                r#"{"employeeId":"e-1","name":" ","departmentId":"eng"}"#,
                "items[1]",
            ),
            (
                ImportKind::Departments,
                r#"{"departmentId":"a#b","name":"x"}"#,
                "items[1]",
            ),
            (
                ImportKind::Departments,
                "{\"departmentId\":\"d\",\"name\":\"\\u0001\"}",
                "items[1].name",
            ),
        ] {
            let good = match kind {
                ImportKind::Departments => r#"{"departmentId":"ok","name":"Fine"}"#,
                _ => r#"{"employeeId":"ok","name":"Fine","departmentId":"eng"}"#,
            };
            match check(kind, &[good, bad]) {
                Err(ApiError::BadRequest { field: Some(f), .. }) => assert_eq!(f, field, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    fn json_item(text: &str) -> serde_json::Value {
        serde_json::from_str(text).unwrap()
    }
}
