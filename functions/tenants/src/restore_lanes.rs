//! A restore's walking phase in lanes (`shared::store::lifecycle::restoring::lanes`): planned by the
//! first call to reach it, stepped by the lane workers (or, with no queue, by each call for its
//! time), and folded at its end; what [`crate::restore_tenant::advance`] does while the restore
//! puts or deletes.

use std::time::Instant;

use shared::identity::clock::rfc3339;
use shared::store::client::scoped::TenantDb;
use shared::store::lifecycle::restoring::{self, point_in_time, Restore, RestorePhase, Step};
use shared::store::tenancy::tenants::TenantRecord;
use shared::{ApiError, App};

use crate::lane_walk::{self, LaneWork, LanesNow};
use crate::Lanes;

/// Where a walking phase stands after [`walk`].
pub(crate) enum Walked {
    /// Its lanes still run: come back after this many seconds.
    Running(u64),
    /// It ended (or another call moved the restore on): read the record again.
    PhaseEnded,
}

/// Plans (the first call to reach the phase), steps or sends again, and at the end folds, the lanes
/// of `state`'s walking phase.
pub(crate) async fn walk(
    app: &App,
    runner: &Lanes,
    db: &TenantDb,
    record: &TenantRecord,
    state: Restore,
    source: TenantDb,
    until: Instant,
) -> Result<Walked, ApiError> {
    let walk = restoring::lanes::Walk::of(&state, record.shard_count)
        .ok_or_else(|| ApiError::Internal("a restore walking in no walking phase".into()))?;
    let sources = walk.sources(&db.tenant);
    let work = LaneWork::Restore {
        walk: walk.clone(),
        source: Box::new(source),
    };
    let lanes = lane_walk::Walk {
        work: &work,
        sources: &sources,
        planned: state.lanes,
        position: &state.position,
        asked: state.lanes_asked,
    };
    let now_ms = app.clock.now_millis();
    let plan = |count| {
        let (state, walk) = (&state, &walk);
        async move {
            let step = restoring::lanes::plan_lanes(db, state, walk, count, now_ms).await?;
            Ok(matches!(step, Step::Committed(_)))
        }
    };
    match lane_walk::walk(app, runner, db, lanes, until, plan).await? {
        LanesNow::Raced => Ok(Walked::PhaseEnded),
        // With a queue the workers step and a call only watches: come back in a few seconds.
        LanesNow::Running(_) => Ok(Walked::Running(if runner.queued() { 5 } else { 0 })),
        LanesNow::AllDone(all) => {
            let deleting = state.phase == RestorePhase::Deleting;
            if deleting && state.point_in_time.is_some() {
                point_in_time::drop_scratch(&app.tenants.table_manager(), &state.source_table)
                    .await?;
            }
            let now = rfc3339(app.clock.now_millis());
            restoring::lanes::end_phase(db, &state, &all, now).await?;
            Ok(Walked::PhaseEnded)
        }
    }
}
