//! getTenant: `GET /tenants/{tenantId}` → 200 or 404.
//!
//! A tenant may read its own record; an operator (scope `pooltable/admin` or group `platform-admin`)
//! may read any. One GetItem, with credentials scoped to the tenant whose record is read. A tenant's
//! own user does not see which operator's tenant started a re-sharding (`migration.requestedBy`).

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, path_tenant_id};
use shared::store::tenancy::tenants::read_record;
use shared::{ApiError, App};

use crate::{LanesProgress, TenantView};

/// The progress of `record`'s offboarding's, re-sharding's or move's lanes, while it runs in them (one
/// consistent Query of their partition).
async fn lanes_of(
    app: &App,
    db: &shared::store::client::scoped::TenantDb,
    record: &shared::store::tenancy::tenants::TenantRecord,
) -> Result<Option<LanesProgress>, ApiError> {
    use crate::lane_walk::LaneWork;
    use shared::store::lifecycle::{lanes, moving, resharding};
    let now_ms = app.clock.now_millis();
    let (work, sources, before, since) = match (&record.offboarding, &record.migration) {
        (Some(o), _) if o.lanes.is_some() && !o.walked => (
            LaneWork::Delete,
            crate::offboard_tenant::walk_sources(record)?,
            o.deleted.clone(),
            o.lanes_since_ms,
        ),
        (_, Some(m)) if m.lanes.is_some() => (
            LaneWork::Move { to: m.to },
            resharding::sharded_sources(&db.tenant, m.from),
            Default::default(),
            m.lanes_since_ms,
        ),
        _ => match &record.moving {
            Some(m) if m.lanes.is_some() => (
                LaneWork::Relocate { to: m.to },
                moving::sources(&db.tenant, record),
                Default::default(),
                m.lanes_since_ms,
            ),
            _ => return Ok(None),
        },
    };
    let all = lanes::read(&work.lanes_db(db), work.operation()).await?;
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
            }
        }
    }
    let view = match caller.operator {
        true => view,
        false => view.for_tenant_user(),
    };
    Ok(json_response(StatusCode::OK, &view))
}
