//! exportTenant: `GET /tenants/{tenantId}/export?limit=&cursor=` → 200 with one page of the
//! tenant's items as NDJSON (`application/x-ndjson`), one `{"Item": …}` per line in DynamoDB JSON
//! (the line format of DynamoDB's own export to S3), and a `Link: <…>; rel="next"` header while
//! there are more; 404 when there is no such tenant. Pages of `limit` items (default 25, up to
//! 1,000), cut short before 5 MB (as Lambda's response carries the body: as text, escaped again) or after
//! [`READ_TIME`].
//!
//! Operator only. Reads with credentials scoped to the tenant exported, through the same walk as
//! offboarding (`shared::store::lifecycle::tenant_items`): the fixed partitions, the catalog, the record last.
//! The exported tenant is billed for the page's reads: they count in its usage (`export-tenant`)
//! and are charged to its capacity quota, as its own requests are. Its quota windows (the
//! limiter's two-minute state) are not exported; its usage counters are, as they are when read.
//! Not a snapshot: an item written during an export may or may not be in it. Refused (409) while
//! the tenant is being re-sharded or moved between placements, and a cursor does not outlive a
//! re-sharding (400). `pooltable
//! import` loads the pages into a table.

use std::time::{Duration, Instant};

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Request, Response};
use serde_json::json;
use shared::identity::cursor::{self, MAX_EXPORT_CURSOR_BYTES};
use shared::service::http::{
    bytes_in_event, page_limit_up_to, path_tenant_id, query_param, MAX_PAGE_BYTES,
    MAX_SHARDED_LIMIT,
};
use shared::store::client::meter::with_request_meta;
use shared::store::lifecycle::tenant_items::{self, item_to_json, Budget, Position, RecordInWalk};
use shared::store::tenancy::tenants::{read_record_consistent, TenantRecord};
use shared::{ApiError, App};

/// The usage counters' name for the exported tenant's share of an export.
pub const BIN: &str = "export-tenant";

/// The route a cursor is bound to.
pub const ROUTE: &str = "GET /tenants/{tenantId}/export";

/// The binding of a cursor over the walk of a tenant with `shards` product and HR shards.
pub fn route_for(shards: u32) -> String {
    format!("{ROUTE}?shards={shards}")
}

/// How long one page reads before it ends (after the partition in hand): well within the
/// function's 10 s timeout, however many small partitions the tenant has.
pub const READ_TIME: Duration = Duration::from_secs(5);

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    app.require_operator(&caller).await?;
    let tenant = path_tenant_id(&req)?;
    let limit = page_limit_up_to(&req, MAX_SHARDED_LIMIT)? as usize;
    let keys = &*app.cursor_keys()?;
    let db = app.db_for_operator(&tenant).await?;
    // Its items leave as they are stored (sealed: a copy that shredding reaches), never opened.
    app.refuse_revoked(&tenant).await?;
    let record = read_record_consistent(&db)
        .await?
        .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
    refuse_while_items_change(app, &record)?;
    // A position names a partition of one shard layout: a cursor does not outlive a re-sharding.
    let route = route_for(record.shard_count);
    // The quota windows are the limiter's state (each lives two minutes), not the tenant's data:
    // not exported (0 window shards walked). Offboarding walks them.
    let sources = tenant_items::sources(&tenant, record.shard_count, 0, RecordInWalk::Included);
    let after = query_param(&req, "cursor")?
        .map(|raw| {
            let key = cursor::decode_bounded(
                keys,
                &tenant,
                &route,
                &raw,
                MAX_EXPORT_CURSOR_BYTES,
                |_, _| true,
            )?;
            let position = Position::from_key(&key).ok_or(cursor::InvalidCursor)?;
            tenant_items::source_of(&tenant, &sources, &position)
                .map_err(|_| ApiError::from(cursor::InvalidCursor))?;
            Ok::<_, ApiError>(position)
        })
        .transpose()?;
    let budget = Budget {
        items: limit,
        // The approximation leaves out DynamoDB JSON's type tags; the exact cut is below.
        bytes: MAX_PAGE_BYTES / 2,
        until: Some(Instant::now() + READ_TIME),
    };
    // The exported tenant pays for its export (usage and capacity quota), not the operator: the
    // page's reads are metered apart from the request's own.
    let (page, meta) =
        with_request_meta(tenant_items::page(&db, &sources, after.as_ref(), budget)).await;
    app.bill(&tenant, BIN, &meta);
    if let Err(e) = app.count_quota(&tenant).await {
        tracing::warn!(tenant = %tenant, error = %e, "the exported tenant's quota counter could not be written; its units stay pending");
    }
    let page = page?;

    let mut body = String::new();
    // The body travels in Lambda's response as a JSON string, where NDJSON's escaped quotes are
    // escaped again: it is measured as it is there (`bytes_in_event`; a newline takes two).
    let mut in_event = 0;
    let mut next = page.next;
    let mut last: Option<Position> = None;
    for item in &page.items {
        let line = json!({ "Item": item_to_json(item) }).to_string();
        let size = bytes_in_event(line.as_bytes()) + 2;
        if let Some(last) = last.as_ref().filter(|_| in_event + size > MAX_PAGE_BYTES) {
            next = Some(last.clone());
            break;
        }
        in_event += size;
        body.push_str(&line);
        body.push('\n');
        last = Position::from_key(item).or(last);
    }
    let mut response = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        // lambda_http sends a body of a content type it does not know as text in base64 (4/3 its
        // size, past Lambda's 6 MB for a page cut at 5 MB of escapes; and a REST API with no binary
        // media types hands the client the base64): this header, its own, keeps it text.
        .header(SENT_AS_TEXT.0, SENT_AS_TEXT.1);
    if let Some(next) = next {
        let cursor = cursor::encode(keys, &tenant, &route, &next.to_key());
        response = response.header(
            header::LINK,
            // Relative to the request's URL (`…/tenants/<id>/export`): it holds under the API's
            // stage and a custom domain's base path alike.
            format!("<export?limit={limit}&cursor={cursor}>; rel=\"next\""),
        );
    }
    response
        .body(Body::Text(body))
        .map_err(|e| ApiError::Internal(format!("build response: {e}")))
}

/// The header `lambda_http` reads to send a body of a content type it does not know (NDJSON) as
/// text in Lambda's response, not base64 (its `X_LAMBDA_HTTP_CONTENT_ENCODING`).
const SENT_AS_TEXT: (&str, &str) = ("x-lambda-http-content-encoding", "text");

/// 409 while the tenant's items move or change under the walk, so that an export is every item or
/// refused, never a silent part.
fn refuse_while_items_change(app: &App, record: &TenantRecord) -> Result<(), ApiError> {
    if let Some(m) = &record.migration {
        return Err(ApiError::Conflict(format!(
            "This tenant is being re-sharded to {} shards: its items are moving between \
             partitions, so an export now could miss some. Export once the re-sharding has ended.",
            m.to
        )));
    }
    // The walk reads one table, and the catalog it reads can lag what the move has carried: an
    // export during a move could silently miss items, so it is refused until the move has ended.
    if let Some(m) = &record.moving {
        return Err(ApiError::Conflict(format!(
            "This tenant is being moved from {} to {}: its items are between the two tables, so an \
             export now could miss some. Export once the move has ended.",
            m.from_table, m.to_table
        )));
    }
    // Once its deletion may have begun, an offboarding tenant's partitions empty one by one, and
    // a restore rewrites them: either would make the pages a silent mix. Each page reads the
    // record, so an export that spans their start is refused from then on, never cut short.
    if let Some(o) = &record.offboarding {
        if app.clock.now_seconds() >= o.deletion_starts_at {
            return Err(ApiError::Conflict(
                "This tenant is being offboarded and its items are being deleted: an export now \
                 would miss some. Export a tenant before offboarding it."
                    .into(),
            ));
        }
    }
    if record.restore.is_some() {
        return Err(ApiError::Conflict(
            "This tenant is being restored: its items are being rewritten, so an export now would \
             mix the two versions. Export once the restore has ended."
                .into(),
        ));
    }
    Ok(())
}
