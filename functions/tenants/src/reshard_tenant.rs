//! Re-sharding through `PATCH /tenants/{tenantId}` `{shardCount}`: → 202 with the record and its
//! `migration` progress while the migration runs (call again after `Retry-After`: every call moves
//! items for up to [`WORK_PER_REQUEST`]), 200 with the record once the tenant has `shardCount`
//! shards (at once when it already has); 404 when there is no such tenant; 409 while a migration
//! to another count runs, or while the tenant is being offboarded.
//!
//! Operator only. The first call writes the migration into the record; from `movesStartAt` the
//! migrator's walk runs in lanes (`shared::store::lifecycle::lanes`), each step committing its
//! lane's checkpoint, so any call or lane worker in any container resumes where the last one ended,
//! and two at once never both commit a step.

use std::time::{Duration, Instant};

use lambda_http::{Body, Response};
use shared::identity::ids::TenantId;
use shared::identity::shard::{max_shards, MAX_SHARDS};
use shared::store::client::scoped::TenantDb;
use shared::store::lifecycle::lanes;
use shared::store::lifecycle::resharding::{
    self, begin, finish_lanes, plan_lanes, sharded_sources, Step,
};
use shared::store::tenancy::tenants::{read_record_consistent, TenantRecord, TenantStatus};
use shared::{ApiError, App};

use crate::lane_walk::{self, LaneWork, LanesNow};
use crate::{accepted, done, Lanes};

/// How long one call moves items before it answers 202 (the function timeout is 10 s).
pub const WORK_PER_REQUEST: Duration = Duration::from_secs(5);

/// The route whose account (the platform's usage) a re-sharding's steps are charged to, by a call
/// or by the lifecycle driver.
pub const ROUTE: &str = crate::operation::Operation::Resharding.route();

/// Starts, continues or confirms `tenant`'s re-sharding to `to` shards, asked by an operator of
/// `operator` (on the platform's account: [`crate::operation::Operation::Resharding`]). The request
/// is already checked (operator, `to` in range).
pub async fn reshard(
    app: &App,
    runner: &Lanes,
    operator: &TenantId,
    tenant: &TenantId,
    to: u32,
    lanes_asked: Option<u32>,
) -> Result<Response<Body>, ApiError> {
    let db = app.db_to_change(tenant).await?;
    app.refuse_revoked(tenant).await?;
    let deadline = Instant::now() + WORK_PER_REQUEST;
    // A start races only other starts and status changes: one more read settles it.
    for _ in 0..3 {
        let record = read_record_consistent(&db)
            .await?
            .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
        if record.status == TenantStatus::Offboarding {
            return Err(ApiError::Conflict(
                "This tenant is being offboarded; its record no longer changes.".into(),
            ));
        }
        crate::refuse_while_restoring_or_moving(&record)?;
        if to > max_shards(record.own_table.is_some()) {
            return Err(ApiError::bad_request(
                "shardCount",
                format!(
                    "A tenant in the pool has at most {MAX_SHARDS} shards; move it into its own \
                     table first (PATCH {{\"placement\": \"own\"}})."
                ),
            ));
        }
        let record = match &record.migration {
            None if record.shard_count == to => return Ok(done(record)),
            None => match start(app, &db, &record, to, (operator, lanes_asked)).await? {
                Step::Committed(record) => {
                    tracing::info!(tenant = %tenant, from = record.shard_count, to, by = %operator, "tenant re-sharding started");
                    *record
                }
                Step::Raced => continue,
            },
            Some(m) if m.to != to => {
                return Err(ApiError::Conflict(format!(
                    "A re-sharding from {} to {} shards is running; finish it first \
                     (PATCH with {{\"shardCount\": {}}}), then start another.",
                    m.from, m.to, m.to
                )))
            }
            Some(_) => record,
        };
        return migrate(app, runner, &db, record, deadline).await;
    }
    Err(ApiError::Conflict(
        "The tenant record kept changing; retry.".into(),
    ))
}

/// Lists the tenant for the lifecycle driver, then begins its migration: a started re-sharding is
/// never missing from the driver's list.
async fn start(
    app: &App,
    db: &TenantDb,
    record: &TenantRecord,
    to: u32,
    (operator, lanes_asked): (&TenantId, Option<u32>),
) -> Result<Step, ApiError> {
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    shared::store::lifecycle::driving::list(&platform_db, &db.tenant, app.clock.now_millis())
        .await?;
    let now_ms = app.clock.now_millis();
    Ok(begin(db, record, to, operator, now_ms, lanes_asked).await?)
}

/// Runs the migrator's lanes (planned by the first call after `movesStartAt`): with a lane queue,
/// sends again the lanes nobody has stepped for a while; without one, steps every lane not yet done
/// side by side until `deadline` ([`crate::lane_walk`]). Once every lane is done, deletes them and
/// ends the migration in one transaction. What every PATCH does after its first, and what the
/// lifecycle driver does with no client calling.
pub async fn migrate(
    app: &App,
    runner: &Lanes,
    db: &TenantDb,
    record: TenantRecord,
    deadline: Instant,
) -> Result<Response<Body>, ApiError> {
    let state = crate::running_state(app, db, &record, |r| r.migration.as_ref(), "a re-sharding")?;
    let now = app.clock.now_seconds();
    if now < state.progress.moves_start_at {
        return Ok(accepted(record, state.progress.moves_start_at - now));
    }
    let work = LaneWork::Move { to: state.to };
    let sources = sharded_sources(&db.tenant, state.from);
    let walk = lane_walk::Walk {
        work: &work,
        sources: &sources,
        planned: state.lanes,
        position: &state.position,
        asked: state.lanes_asked,
    };
    let now_ms = app.clock.now_millis();
    let plan = |count| {
        let state = &state;
        async move { Ok(plan_lanes(db, state, count, now_ms).await?) }
    };
    match lane_walk::walk(app, runner, db, walk, deadline, plan).await? {
        LanesNow::Raced => crate::reread(app, db, is_resharding).await,
        LanesNow::Running(_) => {
            let record = read_record_consistent(db)
                .await?
                .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
            // With a queue the workers move and a call only watches: come back in a few seconds.
            Ok(accepted(record, if runner.queued() { 5 } else { 1 }))
        }
        LanesNow::AllDone(all) => {
            let (counts, _) = lanes::totals(&all);
            if finish_lanes(db, &state, &all).await? {
                let moved = counts.get(resharding::MOVED).copied().unwrap_or(0);
                tracing::info!(tenant = %db.tenant, shards = state.to, moved, "tenant re-sharded");
            }
            crate::reread(app, db, is_resharding).await
        }
    }
}

fn is_resharding(record: &TenantRecord) -> bool {
    record.migration.is_some()
}
