//! Moving a tenant between the pool and its own table through `PATCH /tenants/{tenantId}`
//! `{"placement": "own" | "pool"}`, while it is served (`shared::store::lifecycle::moving`): 202 with
//! the record and its `move` progress while the move runs (call again after `Retry-After`: with a
//! lane queue the lane workers backfill, else every call backfills for up to
//! [`WORK_PER_REQUEST`]), 200 with the record once the tenant is placed
//! there (at once when it already is); 404 when there is no such tenant; 409 while a move the other
//! way, a re-sharding, a restore or an offboarding of the tenant runs; 503 when a new own table is
//! not ready yet (a retry waits again).
//!
//! Operator only. The first call makes the own table (moving into one), lists the tenant for the
//! lifecycle driver, and writes the move into the record; from `movesStartAt` the backfill runs in
//! lanes, each step committing its lane's checkpoint, so any call, lane worker or the driver, in
//! any container, resumes where the last one ended, and two at once never both commit a step.

use std::time::{Duration, Instant};

use lambda_http::{Body, Response};
use serde::Serialize;
use shared::identity::ids::TenantId;
use shared::store::client::scoped::TenantDb;
use shared::store::lifecycle::moving::{
    begin, finish_lanes, plan_lanes, sources, tables, Placement, PlacementMove, MOVED,
};
use shared::store::lifecycle::resharding::Step;
use shared::store::lifecycle::{driving, lanes};
use shared::store::tenancy::placement::{delete_own_table, own_table_name};
use shared::store::tenancy::tenants::{read_record_consistent, TenantRecord, TenantStatus};
use shared::{ApiError, App};

use crate::lane_walk::{self, LaneWork, LanesNow};
use crate::{accepted, done, Lanes};

/// How long one call backfills before it answers 202 (the function timeout is 10 s).
pub const WORK_PER_REQUEST: Duration = Duration::from_secs(5);

/// The lanes a move's backfill runs in unless its operator asks otherwise (`?lanes=`): one, not
/// `LIFECYCLE_LANES`. A moving tenant is served throughout, and its own requests wait behind the
/// backfill's transactions on its partitions: its p99 was lowest at one lane in figure 17 (2.7×
/// before, 4.7× at 4, 16× at 16 on DynamoDB Local), and the churn test (`moving.rs`) once saw a
/// page answer 503 at 16. The lane still runs on the lane queue, continuously.
pub const MOVE_LANES: u32 = 1;

/// The route whose account (the platform's usage) a move's steps are charged to, by a call or by
/// the lifecycle driver.
pub const ROUTE: &str = crate::operation::Operation::Moving.route();

/// A move between placements in progress, as the API shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MoveView {
    /// `own` or `pool`.
    pub to: &'static str,
    pub from_table: String,
    pub to_table: String,
    #[serde(flatten)]
    pub progress: crate::ProgressView,
    /// The backfill's lanes, while it runs in them (`GET /tenants/{tenantId}` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lanes: Option<crate::LanesProgress>,
}

impl From<&PlacementMove> for MoveView {
    fn from(m: &PlacementMove) -> Self {
        Self {
            to: placement_name(m.to),
            from_table: m.from_table.clone(),
            to_table: m.to_table.clone(),
            progress: (&m.progress).into(),
            lanes: None,
        }
    }
}

/// The placement as the API spells it.
pub fn placement_name(placement: Placement) -> &'static str {
    match placement {
        Placement::Own => "own",
        Placement::Pool => "pool",
    }
}

fn placement_of(record: &TenantRecord) -> Placement {
    match record.own_table {
        Some(_) => Placement::Own,
        None => Placement::Pool,
    }
}

/// Starts, continues or confirms `tenant`'s move to `to`, asked by an operator of `operator` (on
/// the platform's account: [`crate::operation::Operation::Moving`]).
pub async fn run(
    app: &App,
    runner: &Lanes,
    operator: &TenantId,
    tenant: &TenantId,
    to: Placement,
    lanes_asked: Option<u32>,
) -> Result<Response<Body>, ApiError> {
    app.refuse_revoked(tenant).await?;
    let deadline = Instant::now() + WORK_PER_REQUEST;
    // A start races only other starts and status changes: one more read settles it.
    for _ in 0..3 {
        let db = app.db_to_change(tenant).await?;
        let record = read_record_consistent(&db)
            .await?
            .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
        refuse_while_other_runs(&record)?;
        let max = shared::identity::shard::MAX_SHARDS;
        if to == Placement::Pool && record.moving.is_none() && record.shard_count > max {
            return Err(ApiError::Conflict(format!(
                "This tenant has {} shards, and a tenant in the pool at most {max}; re-shard it \
                 to {max} or fewer first (PATCH {{\"shardCount\": {max}}}).",
                record.shard_count
            )));
        }
        match &record.moving {
            None if placement_of(&record) == to => return Ok(done(record)),
            None => match start(app, &db, &record, to, (operator, lanes_asked)).await? {
                Step::Committed(record) => {
                    tracing::info!(tenant = %tenant, to = placement_name(to), by = %operator, "tenant move started");
                    return advance(app, runner, &db, *record, deadline).await;
                }
                Step::Raced => continue,
            },
            Some(m) if m.to != to => {
                return Err(ApiError::Conflict(format!(
                    "A move to {} runs; finish it first (PATCH with {{\"placement\": \"{}\"}}), \
                     then move back.",
                    placement_name(m.to),
                    placement_name(m.to)
                )))
            }
            Some(_) => return advance(app, runner, &db, record, deadline).await,
        }
    }
    Err(ApiError::Conflict(
        "The tenant record kept changing; retry.".into(),
    ))
}

/// 409 while the tenant is being offboarded, re-sharded or restored.
fn refuse_while_other_runs(record: &TenantRecord) -> Result<(), ApiError> {
    if record.status == TenantStatus::Offboarding || record.offboarding.is_some() {
        return Err(ApiError::Conflict(
            "This tenant is being offboarded; its record no longer changes.".into(),
        ));
    }
    if let Some(m) = &record.migration {
        return Err(ApiError::Conflict(format!(
            "This tenant is being re-sharded to {} shards; finish that first \
             (PATCH /tenants/{{tenantId}} {{\"shardCount\": {}}}).",
            m.to, m.to
        )));
    }
    match record.moving {
        // A move is this route's own: the caller decides above.
        Some(_) => Ok(()),
        None => crate::refuse_while_restoring_or_moving(record),
    }
}

/// Makes the own table (moving into one), lists the tenant for the lifecycle driver, then begins
/// the move: a started move is never missing from the driver's list.
async fn start(
    app: &App,
    db: &TenantDb,
    record: &TenantRecord,
    to: Placement,
    (operator, lanes_asked): (&TenantId, Option<u32>),
) -> Result<Step, ApiError> {
    let pool = app.tenants.table_name();
    let to_table = match to {
        Placement::Own => {
            let own = own_table_name(pool, &db.tenant).ok_or_else(|| {
                ApiError::Conflict(
                    "This tenant's id is too long for an own table beside this pool's name.".into(),
                )
            })?;
            let manager = db.own_table_manager()?;
            crate::own_table::make_or_take(app, manager, &db.tenant, &own, record).await?;
            own
        }
        Placement::Pool => pool.to_owned(),
    };
    let now_ms = app.clock.now_millis();
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    driving::list(&platform_db, &db.tenant, now_ms).await?;
    Ok(begin(db, record, to, &to_table, operator, now_ms, lanes_asked).await?)
}

/// Runs the backfill's lanes (planned by the first call after `movesStartAt`): with a lane queue,
/// sends again the lanes nobody has stepped for a while; without one, steps every lane not yet done
/// side by side until `deadline` ([`crate::lane_walk`]). Once every lane is done, deletes an own
/// source table, then the lanes, and sets the placement, the last two in one transaction. What
/// every PATCH does after its first, what the lifecycle driver does with no client calling, and
/// what the lane worker that steps the last lane does.
pub async fn advance(
    app: &App,
    runner: &Lanes,
    db: &TenantDb,
    record: TenantRecord,
    deadline: Instant,
) -> Result<Response<Body>, ApiError> {
    let state = crate::running_state(app, db, &record, |r| r.moving.as_ref(), "a move")?;
    let now = app.clock.now_seconds();
    if now < state.progress.moves_start_at {
        return Ok(accepted(record, state.progress.moves_start_at - now));
    }
    let work = LaneWork::Relocate { to: state.to };
    let sources = sources(&db.tenant, &record);
    let walk = lane_walk::Walk {
        work: &work,
        sources: &sources,
        planned: state.lanes,
        position: &state.position,
        asked: state.lanes_asked.or(Some(MOVE_LANES)),
    };
    let now_ms = app.clock.now_millis();
    let plan = |count| {
        let state = &state;
        async move { Ok(plan_lanes(db, state, count, now_ms).await?) }
    };
    match lane_walk::walk(app, runner, db, walk, deadline, plan).await? {
        LanesNow::Raced => crate::reread(app, db, is_moving).await,
        LanesNow::Running(_) => {
            let record = read_record_consistent(db)
                .await?
                .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
            // With a queue the workers move and a call only watches: come back in a few seconds.
            Ok(accepted(record, if runner.queued() { 5 } else { 0 }))
        }
        LanesNow::AllDone(all) => {
            // Only the table the tenant's id names under the pool is ever deleted.
            if state.to == Placement::Pool {
                let (own, _) = tables(db, Placement::Pool)?;
                let manager = db.own_table_manager()?;
                delete_own_table(&app.tenants.table_manager(), manager, &own).await?;
            }
            if finish_lanes(db, &state, &all).await? {
                let (counts, _) = lanes::totals(&all);
                let moved = counts.get(MOVED).copied().unwrap_or(0);
                tracing::info!(tenant = %db.tenant, to = placement_name(state.to), moved, "tenant moved");
            }
            crate::reread(app, db, is_moving).await
        }
    }
}

fn is_moving(record: &TenantRecord) -> bool {
    record.moving.is_some()
}
