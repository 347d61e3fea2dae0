//! getImport: `GET /imports/{importId}` → 200 `{importId, kind, accepted, written, superseded,
//! failed, failedBy, status, createdAt, finalBy}`, or 404. One consistent GetItem of the record, and a consistent Query counting its
//! markers (`shared::store::imports`), so a count never goes back.

use lambda_http::{Body, Request, Response};
use shared::identity::ids::EntityId;
use shared::service::http::path_entity_id;
use shared::service::single::get_one;
use shared::store::client::scoped::TenantDb;
use shared::store::imports::progress;
use shared::{ApiError, App};

use crate::create_import::ImportView;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let read = |db: TenantDb, import: EntityId| async move {
        let found = progress(&db, &db.tenant, &import, app.clock.now_seconds()).await?;
        Ok(found.map(|p| ImportView::of(&import, &p)))
    };
    let of = |req: &Request| path_entity_id(req, "importId");
    get_one(app, &req, of, read, "No such import.").await
}
