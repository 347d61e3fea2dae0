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

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use shared::identity::clock::rfc3339;
use shared::identity::ids::{EntityId, TenantId};
use shared::service::http::{json_body_up_to, json_response, request_bytes_in_event};
use shared::service::idempotent::{self, Recorder};
use shared::store::client::scoped::TenantDb;
use shared::store::client::transact::TransactError;
use shared::store::imports::{
    claim, count_open, due_at_ms, ensure_sealing_item, mark_enqueued, message_key, uncount_open,
    Claim, FailReason, NewImport, Progress, Status, MAX_OPEN_IMPORTS,
};
use shared::store::lifecycle::driving::{list_import, unlist_import, DueImport};
use shared::{ApiError, App};

use crate::{ImportItem, ImportKind, ImportQueue};

mod checks;
mod enqueue;
#[cfg(test)]
mod tests;

use checks::{checked_items, departments_exist};
use enqueue::{enqueue, Outgoing};

pub const ROUTE: &str = "create-import";
/// The largest request body, as it travels in the Lambda event (JSON-escaped, or base64 when
/// binary: `request_bytes_in_event`):
/// Lambda's synchronous payload limit is 6 MB (6,291,456 bytes), the event's headers and claims
/// included. A body Lambda refuses never reaches the function; one within its limit but past this
/// one is a 413 that says so.
pub const MAX_BODY_BYTES: usize = 6_000_000;
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
        let in_event = request_bytes_in_event(req.body());
        if in_event > MAX_BODY_BYTES {
            return Err(ApiError::PayloadTooLarge(format!(
                "The request body takes {in_event} bytes in the Lambda event (JSON-escaped: a quote \
                 or a backslash counts twice; base64 when sent as binary); the limit is \
                 {MAX_BODY_BYTES}."
            )));
        }
        let input: CreateImportInput = json_body_up_to(req, MAX_BODY_BYTES)?;
        Ok((input.kind, checked_items(input)?))
    };
    let ((kind, (items, request_index)), db) = app.tenant_request(&req, parse).await?;
    let t = &db.tenant;
    let import = match idempotent::key_of(&req)? {
        Some(key) => derived_id(key.as_str())?,
        None => hex_id(&uuid::Uuid::now_v7().simple().to_string())?,
    };
    let now = app.clock.now_seconds();
    // The departments are checked within the effect: a retry of a request answered before gets
    // its recorded answer, even if one of them has gone since (a restore).
    let db = &db;
    idempotent::run(&req, db, t, ROUTE, now, |recorder| async move {
        departments_exist(app, db, t, &items, &request_index).await?;
        create(app, queue, db, t, (import, kind, items), recorder).await
    })
    .await
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
    let listed = list_and_count(app, db, t, &import, new.created_at_ms).await?;
    let claimed = claim(db, t, &import, &new).await?;
    // An import made before (the key sent again) has the entry its first request listed, until it
    // is final: this one is unlisted, so a key sent again, however often, never grows the list.
    if !matches!(claimed, Claim::New) {
        unlist_extra(app, &listed).await;
    }
    // The count above is undone for an import that is final already (the key sent again after its
    // record's answer expired): nothing of it is open, and no deadline would release it again.
    if let Claim::Same { closed: true, .. } | Claim::Other { closed: true } = claimed {
        uncount_open(db, t, &import).await?;
    }
    let issued_at = match claimed {
        Claim::New => new.created_at_ms,
        // The same request, answered before: every item was sent, so nothing is sent again. By a
        // request with this key at the same time: its recorded answer (the layer answers it when
        // this one fails). Else (its key's record has expired since): the import as it stands.
        Claim::Same {
            enqueuing: false, ..
        } => {
            if let Some(recorder) = &recorder {
                if recorder.answered_meanwhile().await? {
                    return Err(ApiError::Conflict(
                        "A request with this Idempotency-Key answered meanwhile.".into(),
                    ));
                }
            }
            return Ok(accepted_response(
                &import,
                as_it_stands(app, db, t, &import).await?,
            ));
        }
        // A retry of a request that failed part-way, too late: the import is final (or about to
        // be, by the driver), its unsent items `notEnqueued`. Nothing is sent.
        Claim::Same {
            created_at_ms,
            closed,
            ..
        } if closed || new.created_at_ms >= due_at_ms(created_at_ms) => {
            // Final (or about to be): it counts no more among the open imports.
            if !closed {
                uncount_open(db, t, &import).await?;
            }
            return Err(ApiError::Conflict(format!(
                "Import {import} passed its deadline before this request finished sending it, and is final (GET /imports/{import}); import again with a new Idempotency-Key."
            )));
        }
        // A retry of a request that failed part-way, in time: its items are sent again, as of the
        // first attempt, and their markers keep each one written once.
        Claim::Same { created_at_ms, .. } => created_at_ms,
        Claim::Other { .. } => {
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
    let sealing_key = message_key(db, &sealing)?;
    enqueue(app, queue, t, &sent, &sealing_key, items).await?;
    let view = running_view(&import, kind, accepted, issued_at);
    mark_sent(db, t, &import, &fingerprint, &view, recorder).await?;
    Ok(accepted_response(&import, view))
}

/// Lists the import (accepted at `created_at_ms`) for the lifecycle driver, then counts it among
/// the tenant's open imports: 429 when the count finds the bound reached (the listing undone).
/// The entry listed.
async fn list_and_count(
    app: &App,
    db: &TenantDb,
    t: &TenantId,
    import: &EntityId,
    created_at_ms: u64,
) -> Result<DueImport, ApiError> {
    // Listed for the lifecycle driver before the record exists, so no import is ever missing from
    // its list: it is final by its deadline whatever becomes of this request (and its count is
    // released then).
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    let due = DueImport {
        due_at_ms: due_at_ms(created_at_ms),
        tenant: t.clone(),
        import: import.clone(),
        created_at_ms,
    };
    list_import(&platform_db, &due).await?;
    if !count_open(db, t, import).await? {
        if let Err(e) = unlist_import(&platform_db, &due).await {
            tracing::warn!(error = %e, "an import refused over the bound stays on the driver's list until its deadline");
        }
        return Err(too_many_open_imports());
    }
    Ok(due)
}

/// Unlists `listed`, an entry of an import its first request listed already. One left by a failed
/// unlisting is closed and unlisted by the driver at its deadline, as an entry of a final import.
async fn unlist_extra(app: &App, listed: &DueImport) {
    let unlisted = async {
        let platform_db = app.db_for_operator(&TenantId::platform()).await?;
        unlist_import(&platform_db, listed).await?;
        Ok::<_, ApiError>(())
    };
    if let Err(e) = unlisted.await {
        tracing::warn!(error = %e, "an entry of an import listed before stays on the driver's list until its deadline");
    }
}

/// The view of an import of `accepted` items of `kind` just sent, as of `issued_at`: running, no
/// item with an outcome yet.
fn running_view(import: &EntityId, kind: ImportKind, accepted: u32, issued_at: u64) -> ImportView {
    ImportView::of(
        import,
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
    )
}

/// Marks the import enqueued, every item sent, in one transaction with the key's answer (`view`,
/// 202) when a key was sent: 409 when the import changed since it was claimed.
async fn mark_sent(
    db: &TenantDb,
    t: &TenantId,
    import: &EntityId,
    fingerprint: &str,
    view: &ImportView,
    recorder: Option<Recorder<'_>>,
) -> Result<(), ApiError> {
    let location = location_of(import);
    let recorded = recorder
        .as_ref()
        .map(|recorder| {
            recorder.record_with_headers(
                StatusCode::ACCEPTED,
                view,
                &[(header::LOCATION, &location)],
            )
        })
        .transpose()?;
    mark_enqueued(db, t, import, fingerprint, recorded)
        .await
        .map_err(|e| match e {
            TransactError::ConditionFailed { index: 0, .. } => {
                ApiError::Conflict("The import changed while it was sent; retry.".into())
            }
            other => other.into(),
        })?;
    Ok(())
}

/// An import's `Location`: relative to the request's URL (`…/imports` → `…/imports/<id>`), so it
/// holds under the API's stage (`/dev`, on the default endpoint) and a custom domain's base path
/// alike, which an absolute `/imports/<id>` left out.
fn location_of(import: &EntityId) -> String {
    format!("imports/{import}")
}

/// 202 with the import's view and its `Location`.
fn accepted_response(import: &EntityId, view: ImportView) -> Response<Body> {
    let mut response = json_response(StatusCode::ACCEPTED, &view);
    if let Ok(location) = location_of(import).parse() {
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
