//! getTenant: `GET /tenants/{tenantId}` → 200 or 404.
//!
//! A tenant may read its own record; an operator (scope `pooltable/admin` or group `platform-admin`)
//! may read any. One GetItem, with credentials scoped to the tenant whose record is read. A tenant's
//! own user does not see which operator's tenant started a re-sharding (`migration.requestedBy`).

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, path_tenant_id};
use shared::store::client::scoped::TenantDb;
use shared::store::tenancy::tenants::{read_record, TenantRecord};
use shared::{ApiError, App};

use crate::{LanesProgress, TenantView};

/// The progress of `record`'s offboarding's, re-sharding's, move's or restore's lanes, while it
/// runs in them (one consistent Query of their partition).
async fn lanes_of(
    app: &App,
    db: &TenantDb,
    record: &TenantRecord,
) -> Result<Option<LanesProgress>, ApiError> {
    use crate::lane_walk::LaneWork;
    use shared::store::lifecycle::{lanes, moving, resharding, restoring};
    let now_ms = app.clock.now_millis();
    let running = |work: LaneWork| (work.operation(), work.lanes_db(db));
    let ((operation, kept), sources, before, since) = if let Some(o) = record
        .offboarding
        .as_ref()
        .filter(|o| o.lanes.is_some() && !o.walked)
    {
        let sources = crate::offboard_tenant::walk_sources(record)?;
        (
            running(LaneWork::Delete),
            sources,
            o.deleted.clone(),
            o.lanes_since_ms,
        )
    } else if let Some(m) = record.migration.as_ref().filter(|m| m.lanes.is_some()) {
        let sources = resharding::sharded_sources(&db.tenant, m.from);
        let work = LaneWork::Move { to: m.to };
        (running(work), sources, Default::default(), m.lanes_since_ms)
    } else if let Some(m) = record.moving.as_ref().filter(|m| m.lanes.is_some()) {
        let sources = moving::sources(&db.tenant, record);
        let work = LaneWork::Relocate { to: m.to };
        (running(work), sources, Default::default(), m.lanes_since_ms)
    } else if let Some((r, walk)) = record
        .restore
        .as_ref()
        .filter(|r| r.lanes.is_some())
        .and_then(|r| Some((r, restoring::lanes::Walk::of(r, record.shard_count)?)))
    {
        let sources = walk.sources(&db.tenant);
        (
            (walk.operation(), db.clone()),
            sources,
            Default::default(),
            r.lanes_since_ms,
        )
    } else {
        return Ok(None);
    };
    let all = lanes::read(&kept, operation).await?;
    let progress = LanesProgress::of(&db.tenant, &sources, &all, &before, since, now_ms);
    Ok(Some(progress))
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let tenant = path_tenant_id(&req)?;
    let db = if tenant == caller.tenant {
        app.db(&tenant).await?
    } else {
        app.require_operator(&caller).await?;
        app.db_for_operator(&tenant).await?
    };
    let record = read_record(&db)
        .await?
        .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
    let lanes = lanes_of(app, &db, &record).await?;
    let mut view = TenantView::from(record);
    match (&mut view.offboarding, &mut view.migration, lanes) {
        (Some(offboarding), _, Some(lanes)) => {
            offboarding.deleted_total = lanes.items_done;
            offboarding.deleted = lanes.by_kind.clone();
            offboarding.lanes = Some(lanes);
        }
        (None, Some(migration), lanes) => migration.lanes = lanes,
        (_, _, lanes) => {
            if let Some(moving) = &mut view.moving {
                moving.lanes = lanes;
            } else if let Some(restore) = &mut view.restore {
                restore.lanes = lanes;
            }
        }
    }
    let view = match caller.operator {
        true => view,
        false => view.for_tenant_user(),
    };
    Ok(json_response(StatusCode::OK, &view))
}
