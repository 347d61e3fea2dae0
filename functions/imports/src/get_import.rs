//! getImport: `GET /imports/{importId}` → 200 `{importId, kind, accepted, written, failed, status,
//! createdAt}`, or 404. One consistent GetItem of the record, and a consistent Query counting its
//! markers (`shared::store::imports`), so a count never goes back.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, path_entity_id};
use shared::store::imports::progress;
use shared::{ApiError, App};

use crate::create_import::ImportView;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let import = path_entity_id(&req, "importId")?;
    let db = app.db(&caller.tenant).await?;
    let Some(p) = progress(&db, &caller.tenant, &import).await? else {
        return Err(ApiError::NotFound("No such import.".into()));
    };
    let status = if !p.enqueued {
        "enqueuing"
    } else if p.written + p.superseded + p.failed >= p.accepted {
        "complete"
    } else {
        "running"
    };
    let view = ImportView {
        import_id: import.to_string(),
        kind: p.kind,
        accepted: p.accepted,
        written: p.written,
        superseded: p.superseded,
        failed: p.failed,
        status,
        created_at: p.created_at,
    };
    Ok(json_response(StatusCode::OK, &view))
}
