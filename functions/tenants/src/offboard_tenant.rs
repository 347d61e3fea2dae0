//! offboardTenant: `DELETE /tenants/{tenantId}` → 202 with the progress while the offboarding runs
//! (call again after `Retry-After`), 200 with the deletion report once every item of the tenant is
//! gone (also to later calls by any operator: the report is kept in the platform's partition, not
//! under any tenant, so it outlives the requesting operator's tenant and no tenant can read it); 404
//! when there is no such tenant (and no report of one); 409 for the operator's own tenant.
//!
//! Operator only. The first call sets the tenant `offboarding` (every container refuses it within
//! [`shared::store::tenancy::tenants::RECORD_TTL_SECONDS`]); deletion starts
//! [`DELETION_DELAY_SECONDS`] later, so no request of the tenant can still be writing. Each later call
//! deletes for up to [`WORK_PER_REQUEST`], in steps that each commit with their checkpoint
//! (`shared::store::lifecycle::offboarding`), so any call, in any container, resumes where the last one ended.

use std::time::{Duration, Instant};

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Request, Response};
use shared::identity::clock::rfc3339;
use shared::identity::ids::TenantId;
use shared::isolation::policy::Scope;
use shared::service::http::json_response;
use shared::store::client::scoped::TenantDb;
use shared::store::lifecycle::driving;
use shared::store::lifecycle::offboarding::{
    begin, delete_record, fold, plan_lanes, read_report, write_report, Finished, Offboarding,
    Report, Step, DELETION_DELAY_SECONDS,
};
use shared::store::lifecycle::tenant_items::{self, RecordInWalk};
use shared::store::tenancy::placement::{delete_own_table, own_table_name, table_exists};
use shared::store::tenancy::tenants::{read_record_consistent, TenantRecord};
use shared::{ApiError, App};

use crate::lane_walk::{self, LaneWork, LanesNow};
use crate::operation::Operation;
use crate::{Lanes, LanesProgress, OffboardingView};

/// When to call again while the lane workers delete (a call then only reads their progress).
const QUEUED_RETRY_SECONDS: u64 = 5;

/// How long one call deletes before it answers 202 (the function timeout is 10 s).
pub const WORK_PER_REQUEST: Duration = Duration::from_secs(5);

pub async fn handle(app: &App, lanes: &Lanes, req: Request) -> Result<Response<Body>, ApiError> {
    let (operator, tenant) = crate::operator_on_another_tenant(
        app,
        &req,
        "An operator cannot offboard its own tenant. Ask an operator of another tenant.",
    )
    .await?;
    let asked = crate::lane_walk::asked_lanes(&req)?;
    let offboard = offboard_as(app, lanes, &operator, &tenant, asked);
    Operation::Offboarding.charged(app, offboard).await
}

/// The route whose account (the platform's usage) an offboarding's steps are charged to, by a call
/// or by the lifecycle driver.
pub const ROUTE: &str = crate::operation::Operation::Offboarding.route();

/// Starts, continues or reports `tenant`'s offboarding, asked by an operator of `operator` (the
/// platform, for the control plane), on the platform's account ([`Operation::Offboarding`]).
pub(crate) async fn offboard_as(
    app: &App,
    lanes: &Lanes,
    operator: &TenantId,
    tenant: &TenantId,
    lanes_asked: Option<u32>,
) -> Result<Response<Body>, ApiError> {
    let Some(db) = app.operator_db(tenant, Scope::Operator).await? else {
        return finished_report(app, tenant).await;
    };
    let Some(record) = read_record_consistent(&db).await? else {
        return finished_report(app, tenant).await;
    };
    let now_ms = app.clock.now_millis();
    refuse_while_resharding(&record)?;
    let record = match record.offboarding {
        Some(_) => record,
        None => {
            // Listed for the driver first: a started offboarding is never missing from its list.
            let platform_db = app.db_for_operator(&TenantId::platform()).await?;
            driving::list(&platform_db, tenant, now_ms).await?;
            let starts = now_ms / 1000 + DELETION_DELAY_SECONDS;
            let begun = begin(&db, operator, rfc3339(now_ms), starts, lanes_asked)
                .await?
                .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
            refuse_while_resharding(&begun)?;
            tracing::info!(tenant = %tenant, by = %operator, "tenant offboarding started");
            begun
        }
    };
    advance(app, lanes, &db, record).await
}

/// Runs `record`'s offboarding (already begun) until it is done (200 with the report), another call
/// takes over, or [`WORK_PER_REQUEST`] passes (202 with the progress): what every DELETE does after
/// its first, and what the lifecycle driver does with no client calling.
pub async fn advance(
    app: &App,
    lanes: &Lanes,
    db: &TenantDb,
    record: TenantRecord,
) -> Result<Response<Body>, ApiError> {
    let tenant = &db.tenant;
    let mut state =
        crate::running_state(app, db, &record, |r| r.offboarding.as_ref(), "offboarding")?;
    let now_s = app.clock.now_seconds();
    if now_s < state.deletion_starts_at {
        return Ok(accepted(
            &record.tenant_id,
            &state,
            None,
            state.deletion_starts_at - now_s,
        ));
    }
    let sources = walk_sources(&record)?;
    let deadline = Instant::now() + WORK_PER_REQUEST;
    // An own table is deleted when its items are: gone already, a call before this one got that far.
    let tables = app.tenants.table_manager();
    // Only the table the tenant's id names under the pool, whatever else the record says.
    let own_table = match &record.own_table {
        Some(own) if Some(own) == own_table_name(app.tenants.table_name(), tenant).as_ref() => {
            Some(own.clone())
        }
        Some(other) => {
            return Err(ApiError::Internal(format!(
                "the record names {other}, which is not this tenant's own table"
            )))
        }
        None => None,
    };
    let own_table_gone = match &own_table {
        Some(own) => !table_exists(&tables, own).await?,
        None => false,
    };
    if !state.walked && !own_table_gone {
        state = match walk_in_lanes(app, lanes, db, &state, &sources, deadline).await? {
            Walked::Done(state) => state,
            // With a queue the workers delete and a call only watches: come back in a few
            // seconds. Without one, each call deletes: come back at once.
            Walked::Running(progress) => {
                let retry = if lanes.queued() {
                    QUEUED_RETRY_SECONDS
                } else {
                    0
                };
                return Ok(accepted(&record.tenant_id, &state, Some(progress), retry));
            }
            Walked::Raced => return reread(app, db, &state).await,
        };
    }
    if let Some(own) = &own_table {
        delete_own_table(&tables, db.own_table_manager()?, own).await?;
    }
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    let mut view =
        OffboardingView::finished(tenant.as_str(), &state, rfc3339(app.clock.now_millis()));
    // Every item is gone from the live table: its key goes too, and with it every copy's items.
    // The report names the key before it is shredded; a run cut off after the shredding finds no
    // key and keeps what its report names.
    // What a run before this one reported is kept (a run cut off mid-shredding left only some).
    if let Some(keys) = &app.keys {
        view.tenant_key = match shredded_before(&platform_db, tenant, &state).await? {
            Some(shredded) => Some(shredded),
            None => keys.to_shred(tenant, &record.created_at).await?,
        };
    }
    let report = Report {
        steps: state.steps,
        body: serde_json::to_string(&view)
            .map_err(|e| ApiError::Internal(format!("serialize report: {e}")))?,
    };
    let by = &state.requested_by;
    let Some(report) = write_report(db, &platform_db, &record, by, &report).await? else {
        // Another call committed a step, or finished, meanwhile.
        return reread(app, db, &state).await;
    };
    if let Some(keys) = &app.keys {
        keys.shred(tenant, &record.created_at).await?;
    }
    match delete_record(db, report.steps).await? {
        Finished::Done => {
            app.directory.remember(tenant, None);
            tracing::info!(tenant = %tenant, by = %by, deleted = view.deleted_total, "tenant offboarded");
            Ok(report_response(report))
        }
        Finished::Raced => reread(app, db, &state).await,
    }
}

/// What an earlier run of `state`'s offboarding of `tenant` reported shredding: its report, when
/// there is one of this offboarding (asked at the same time); `None` otherwise.
async fn shredded_before(
    platform_db: &TenantDb,
    tenant: &TenantId,
    state: &Offboarding,
) -> Result<Option<shared::store::keys::Shredded>, ApiError> {
    let Some(report) = read_report(platform_db, tenant).await? else {
        return Ok(None);
    };
    let body: serde_json::Value = serde_json::from_str(&report.body).unwrap_or_default();
    if body["requestedAt"].as_str() != Some(state.requested_at.as_str()) {
        return Ok(None);
    }
    Ok(serde_json::from_value(body["tenantKey"].clone()).ok())
}

/// Where the walk in lanes stands after a call's work.
enum Walked {
    /// Every lane is done and folded into the record: the state to finish from.
    Done(Offboarding),
    /// Lanes are left: their progress.
    Running(LanesProgress),
    /// Another call planned or folded first.
    Raced,
}

/// Plans `state`'s lanes if nobody has and sends them to the lane queue; then, with a queue,
/// sends again the lanes nobody has stepped for a while, and without one runs every lane not yet
/// done side by side until `deadline` ([`crate::lane_walk`]); and folds them into the record once
/// all are done.
async fn walk_in_lanes(
    app: &App,
    runner: &Lanes,
    db: &TenantDb,
    state: &Offboarding,
    sources: &[tenant_items::Source],
    deadline: Instant,
) -> Result<Walked, ApiError> {
    let mut planned_now = None;
    let walk = lane_walk::Walk {
        work: &LaneWork::Delete,
        sources,
        planned: state.lanes,
        position: &state.position,
        asked: state.lanes_asked,
    };
    let now_ms = app.clock.now_millis();
    let slot = &mut planned_now;
    let plan = move |count| {
        let planned_now = slot;
        async move {
            Ok(match plan_lanes(db, state, count, now_ms).await? {
                Step::Committed(next) => {
                    *planned_now = Some(next);
                    true
                }
                Step::Raced => false,
            })
        }
    };
    let now = lane_walk::walk(app, runner, db, walk, deadline, plan).await?;
    // The state as planned now, whose step the fold is conditioned on.
    let state = planned_now.unwrap_or_else(|| state.clone());
    match now {
        LanesNow::Raced => Ok(Walked::Raced),
        LanesNow::Running(all) => Ok(Walked::Running(LanesProgress::of(
            &db.tenant,
            sources,
            &all,
            &state.deleted,
            state.lanes_since_ms,
            app.clock.now_millis(),
        ))),
        LanesNow::AllDone(all) => match fold(db, &state, &all).await? {
            Step::Committed(next) => Ok(Walked::Done(next)),
            Step::Raced => Ok(Walked::Raced),
        },
    }
}

/// The walk's sources of `record`'s tenant, record excluded: what its lanes are dealt.
pub fn walk_sources(record: &TenantRecord) -> Result<Vec<tenant_items::Source>, ApiError> {
    let tenant = TenantId::parse(&record.tenant_id)
        .map_err(|e| ApiError::Internal(format!("a record's tenant id: {e}")))?;
    Ok(tenant_items::sources(
        &tenant,
        record.shard_count,
        shared::store::quota::limiter::walked_window_shards(&record.limits()),
        RecordInWalk::Excluded,
    ))
}

/// 202 with the offboarding as it is now (another call moved it on), or the report when it ended.
async fn reread(app: &App, db: &TenantDb, state: &Offboarding) -> Result<Response<Body>, ApiError> {
    match read_record_consistent(db).await? {
        Some(current) => Ok(accepted(
            &current.tenant_id,
            current.offboarding.as_ref().unwrap_or(state),
            None,
            1,
        )),
        None => finished_report(app, &db.tenant).await,
    }
}

/// 409 while the tenant is being re-sharded (and not yet offboarding): its items are moving
/// between shards, which a walk could miss. Finish the re-sharding first.
pub(crate) fn refuse_while_resharding(
    record: &shared::store::tenancy::tenants::TenantRecord,
) -> Result<(), ApiError> {
    match (&record.migration, &record.offboarding) {
        (Some(m), None) => Err(ApiError::Conflict(format!(
            "This tenant is being re-sharded to {} shards; finish that first \
             (PATCH /tenants/{{tenantId}} {{\"shardCount\": {}}}).",
            m.to, m.to
        ))),
        (None, None) => crate::refuse_while_restoring_or_moving(record),
        _ => Ok(()),
    }
}

/// 200 with the report of `tenant`'s latest finished offboarding, or 404 when there is none (no such
/// tenant, ever).
async fn finished_report(app: &App, tenant: &TenantId) -> Result<Response<Body>, ApiError> {
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    read_report(&platform_db, tenant)
        .await?
        .map(report_response)
        .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))
}

/// 200 with a stored report, as it was answered when the offboarding finished.
fn report_response(report: Report) -> Response<Body> {
    let mut response = Response::new(Body::Text(report.body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// 202 with the progress (`lanes`' when the walk runs in them), and when to call again.
fn accepted(
    tenant: &str,
    state: &Offboarding,
    lanes: Option<LanesProgress>,
    retry_after_seconds: u64,
) -> Response<Body> {
    let mut response = json_response(
        StatusCode::ACCEPTED,
        &OffboardingView::running(tenant, state, lanes),
    );
    if let Ok(value) = retry_after_seconds.to_string().parse() {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}
