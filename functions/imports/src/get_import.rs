//! getImport: `GET /imports/{importId}` → 200 `{importId, kind, accepted, written, superseded,
//! failed, failedBy, status, createdAt, finalBy}`, or 404. One consistent GetItem of the record, and a consistent Query counting its
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
    let Some(p) = progress(&db, &caller.tenant, &import, app.clock.now_seconds()).await? else {
        return Err(ApiError::NotFound("No such import.".into()));
    };
    Ok(json_response(StatusCode::OK, &ImportView::of(&import, &p)))
}
