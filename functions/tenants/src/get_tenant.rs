//! getTenant: `GET /tenants/{tenantId}` → 200 or 404.
//!
//! A tenant may read its own record; an operator (scope `pooltable/admin` or group `platform-admin`)
//! may read any. One GetItem, with credentials scoped to the tenant whose record is read (and, while
//! an operation runs in lanes, a consistent GetItem of it and of each of its lanes). A tenant's
//! own user does not see which operator's tenant started a re-sharding (`migration.requestedBy`).

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, path_tenant_id};
use shared::store::client::scoped::TenantDb;
use shared::store::tenancy::tenants::{read_record, read_record_consistent, TenantRecord};
use shared::{ApiError, App};

use crate::{LanesProgress, TenantView};

/// An operation of `record` running in lanes: its lanes' operation and partition (`db`'s, or the
/// pool's for an own-table tenant's), the walk's sources, what the record counted before them,
/// and when they were planned, and how many.
struct Running {
    operation: &'static str,
    kept: TenantDb,
    planned: u32,
    sources: Vec<shared::store::lifecycle::tenant_items::Source>,
    before: std::collections::BTreeMap<String, u64>,
    since: Option<u64>,
}

/// `record`'s offboarding, re-sharding, move or restore, while it runs in lanes. A re-sharding or a
/// move whose end has noted its lanes' count on the record (`lanesMoved`, its first transaction) is
/// counted there alone: its lanes, still there until the second, would count each item twice.
fn running(db: &TenantDb, record: &TenantRecord) -> Result<Option<Running>, ApiError> {
    use crate::lane_walk::LaneWork;
    use shared::store::lifecycle::{moving, resharding, restoring};
    use shared::store::tenancy::tenants::MoveProgress;
    let running = |work: LaneWork| (work.operation(), work.lanes_db(db));
    let in_lanes =
        |lanes: Option<u32>, progress: &MoveProgress| lanes.is_some() && progress.lanes_moved == 0;
    let ((operation, kept), sources, before, since, planned) = if let Some(o) = record
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
            o.lanes,
        )
    } else if let Some(m) = record
        .migration
        .as_ref()
        .filter(|m| in_lanes(m.lanes, &m.progress))
    {
        let sources = resharding::sharded_sources(&db.tenant, m.from);
        let work = LaneWork::Move { to: m.to };
        let since = m.lanes_since_ms;
        (running(work), sources, Default::default(), since, m.lanes)
    } else if let Some(m) = record
        .moving
        .as_ref()
        .filter(|m| in_lanes(m.lanes, &m.progress))
    {
        let sources = moving::sources(&db.tenant, record);
        let work = LaneWork::Relocate { to: m.to };
        let since = m.lanes_since_ms;
        (running(work), sources, Default::default(), since, m.lanes)
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
            r.lanes,
        )
    } else {
        return Ok(None);
    };
    Ok(Some(Running {
        operation,
        kept,
        planned: planned.unwrap_or(0),
        sources,
        before,
        since,
    }))
}

/// The tenant's record and, while an operation runs in lanes, their progress, as of one moment.
/// Without one, the record as a plain read gives it (half a read unit). With one, the record is
/// read again consistently, as the lanes are: a phase's end folds the lanes' counts into the
/// record and deletes the lanes in one transaction, so a stale record beside lanes already folded
/// would show the counts low. Fewer lanes found than planned (folded after the record was read,
/// or between the lanes' own reads, which are side by side, not one snapshot) read the record once
/// more.
async fn record_and_lanes(
    app: &App,
    db: &TenantDb,
) -> Result<(TenantRecord, Option<LanesProgress>), ApiError> {
    use shared::store::lifecycle::lanes;
    let record = read_record(db).await?.ok_or_else(no_such_tenant)?;
    if running(db, &record)?.is_none() {
        return Ok((record, None));
    }
    let mut reads = 0;
    loop {
        reads += 1;
        let record = read_record_consistent(db)
            .await?
            .ok_or_else(no_such_tenant)?;
        let Some(r) = running(db, &record)? else {
            return Ok((record, None));
        };
        let all = lanes::read(&r.kept, r.operation, r.planned).await?;
        if all.len() < r.planned as usize && reads < 2 {
            continue;
        }
        let now_ms = app.clock.now_millis();
        let progress = LanesProgress::of(&db.tenant, &r.sources, &all, &r.before, r.since, now_ms);
        return Ok((record, Some(progress)));
    }
}

fn no_such_tenant() -> ApiError {
    ApiError::NotFound("No such tenant.".into())
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
    let (record, lanes) = record_and_lanes(app, &db).await?;
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
