//! Running a restore's steps: what a call and the driver do.

use std::ops::ControlFlow;

use super::lanes;
use super::steps::{commit, Step};
use super::{copies, point_in_time, source_shards};
use crate::identity::clock::{rfc3339, Clock};
use crate::store::client::error::StoreError;
use crate::store::client::scoped::TenantDb;
use crate::store::tenancy::tenants::{Restore, RestorePhase, TenantRecord};

/// Where a restore stands after [`advance`].
#[derive(Debug)]
pub enum Progress {
    /// Still running: call again after this many seconds.
    Running {
        state: Box<Restore>,
        retry_after: u64,
    },
    /// Walking (putting or deleting): its lanes are to be stepped (`lanes`), by the caller.
    Walking(Box<Restore>),
    /// Ended: the report.
    Ended(Box<Restore>),
    /// Another call took the step: read the record again.
    Raced,
}

/// What [`advance`] needs besides the tenant's scoped client.
pub struct Tables<'a> {
    /// The source reader ([`crate::store::client::scoped::TenantClients::source_reader`]).
    pub source: &'a TenantDb,
    /// Table management on the function's credentials (the scratch table).
    pub manager: &'a aws_sdk_dynamodb::Client,
    /// The pool's table name.
    pub pool: &'a str,
    /// Whether this caller may start the point-in-time copy a preparing restore reads from: not
    /// the lane worker, whose role may not restore the pool (`RestoreTablesReadingPolicy`).
    pub may_start_copy: bool,
}

/// Runs the restore's steps until it walks (its lanes are the caller's to step), ends, another
/// call takes over, or `until` passes: what every call does after its first, and what the driver
/// does with no client calling.
pub async fn advance(
    live: &TenantDb,
    tables: &Tables<'_>,
    record: &TenantRecord,
    now: impl Fn() -> (u64, String),
    until: std::time::Instant,
) -> Result<Progress, StoreError> {
    let Some(mut state) = record.restore.clone() else {
        return Ok(Progress::Raced);
    };
    if let Some(changed) = source_changed(tables, &record.tenant_id, &state).await? {
        if !read_to_the_end(live, &state).await? {
            let (_, now_text) = now();
            return abandon(live, &state, changed, now_text).await;
        }
    }
    loop {
        let (now_seconds, now_text) = now();
        if now_seconds < state.starts_at {
            let retry_after = state.starts_at - now_seconds;
            return Ok(Progress::Running {
                state: Box::new(state),
                retry_after,
            });
        }
        if std::time::Instant::now() >= until {
            return Ok(Progress::Running {
                state: Box::new(state),
                retry_after: 0,
            });
        }
        let step = match &state.phase {
            RestorePhase::Preparing => {
                match prepare(live, tables, record, &state, now_text).await? {
                    ControlFlow::Continue(step) => step,
                    ControlFlow::Break(progress) => return Ok(progress),
                }
            }
            RestorePhase::Putting | RestorePhase::Deleting => {
                return Ok(Progress::Walking(Box::new(state)))
            }
            // Stopped by an abort whose end did not commit: end it now.
            RestorePhase::Abandoned(_) => {
                let (_, now_text) = now();
                return abandon(live, &state, String::new(), now_text).await;
            }
            RestorePhase::Finished => return Ok(Progress::Ended(Box::new(state))),
        };
        state = match step {
            Step::Committed(next) => *next,
            Step::Raced => return Ok(Progress::Raced),
        };
    }
}

/// Whether `state` reads nothing more from its source: its deleting lanes are all done. The end of
/// a point-in-time restore drops its scratch copy just before it records the phase's end, so a call
/// cut off between the two leaves the source gone and the restore whole: it is ended, never
/// abandoned.
async fn read_to_the_end(live: &TenantDb, state: &Restore) -> Result<bool, StoreError> {
    let Some(planned) = state
        .lanes
        .filter(|_| state.phase == RestorePhase::Deleting)
    else {
        return Ok(false);
    };
    let lanes = crate::store::lifecycle::lanes::read(live, lanes::DELETING, planned).await?;
    Ok(!lanes.is_empty() && lanes.iter().all(|lane| lane.done))
}

/// Why `state`'s source can no longer be read as the one the restore started from, if it cannot:
/// its name is not one a restore of `tenant` reads (derived again, never trusted from the record),
/// or the table under it was deleted or made again since its identity was kept.
pub async fn source_changed(
    tables: &Tables<'_>,
    tenant: &str,
    state: &Restore,
) -> Result<Option<String>, StoreError> {
    let name = &state.source_table;
    let named = match &state.point_in_time {
        Some(_) => point_in_time::is_scratch_of(tables.pool, tenant, name),
        None => {
            point_in_time::is_source_name(tables.pool, name)
                && !point_in_time::is_scratch_name(tables.pool, name)
        }
    };
    if !named {
        return Ok(Some(format!(
            "{name} is not a table a restore of this tenant reads"
        )));
    }
    let Some(kept) = &state.source_id else {
        return Ok(None);
    };
    let now = point_in_time::describe_source(tables.manager, name).await?;
    Ok(match now {
        Some(source) if source.identity == *kept => None,
        Some(_) => Some(format!(
            "the source table {name} was made again under its name since the restore started"
        )),
        None => Some(format!(
            "the source table {name} was deleted since the restore started"
        )),
    })
}

/// Ends the running restore `state` of `live`'s tenant because an operator asked (`reason`): what
/// it wrote stays, its counts are the report's, and the tenant is active again. `Raced`: a step
/// committed meanwhile (read the record again and ask again).
///
/// A point in time's copy is listed for the driver to delete first ([`copies::list`], on
/// `platform_db`), then the restore ended, then the copy listed again, due a function's timeout
/// after the end (a call that read the restore as preparing just before it may still start the
/// copy until then), then deleted at once when DynamoDB lets it: while it still makes the copy (20
/// minutes or more) it refuses. The driver deletes it then.
pub async fn abort(
    live: &TenantDb,
    platform_db: &TenantDb,
    manager: &aws_sdk_dynamodb::Client,
    pool: &str,
    state: &Restore,
    reason: String,
    clock: &dyn Clock,
) -> Result<Progress, StoreError> {
    let copy = list_aborted_copy(live, platform_db, pool, state, clock).await?;
    let ended = abandon(live, state, reason, rfc3339(clock.now_millis())).await?;
    if copy && matches!(ended, Progress::Ended(_)) {
        // Due from the end, not from the first listing: the end may take long (retries, throttling).
        if let Err(e) = list_aborted_copy(live, platform_db, pool, state, clock).await {
            tracing::warn!(copy = %state.source_table, error = %e,
                "an aborted restore's copy could not be listed again; it stays due from the abort");
        }
        match point_in_time::drop_scratch(manager, &state.source_table).await {
            Ok(()) | Err(StoreError::Contended(_)) => {}
            Err(e) => tracing::warn!(copy = %state.source_table, error = %e,
                "an aborted restore's copy could not be deleted; the driver deletes it"),
        }
    }
    Ok(ended)
}

/// Lists the point-in-time copy of `state` (a restore of `live`'s tenant, running or aborted) for
/// the driver to delete, due a function's timeout from now ([`copies::list`]); `false` when it
/// reads no copy. Asked again for an abort retried after its restore ended, whose second listing
/// may have been lost with its answer: a copy started late is then still deleted.
pub async fn list_aborted_copy(
    live: &TenantDb,
    platform_db: &TenantDb,
    pool: &str,
    state: &Restore,
    clock: &dyn Clock,
) -> Result<bool, StoreError> {
    // The name is derived again, never trusted from the record: only this tenant's own copies.
    let copy = state.point_in_time.is_some()
        && point_in_time::is_scratch_of(pool, live.tenant.as_str(), &state.source_table);
    if copy {
        let now = clock.now_millis();
        copies::list(platform_db, &live.tenant, &state.source_table, now).await?;
    }
    Ok(copy)
}

/// Ends a restore that cannot go on (its source could not be made, holds another tenant or
/// changed, or an operator aborted it): its lanes stopped and the restore marked abandoned with
/// `reason` ([`lanes::stop`]; already, when `state` is), then the lanes' counts folded into the
/// report and the tenant active again ([`lanes::fold_abandoned`]).
async fn abandon(
    live: &TenantDb,
    state: &Restore,
    reason: String,
    now: String,
) -> Result<Progress, StoreError> {
    let stopped = match &state.phase {
        RestorePhase::Abandoned(_) => state.clone(),
        _ => match lanes::stop(live, state, reason).await? {
            Step::Committed(next) => *next,
            Step::Raced => return Ok(Progress::Raced),
        },
    };
    Ok(match lanes::fold_abandoned(live, &stopped, now).await? {
        Step::Committed(report) => Progress::Ended(report),
        Step::Raced => Progress::Raced,
    })
}

/// The preparing phase's step: starts the point-in-time copy the restore reads from, or waits for
/// it, or, once it is ready, checks its shards and moves the restore to its putting phase. Breaks
/// with the answer when the restore waits, or is abandoned (DynamoDB refused the copy; the copy's
/// shards do not fit).
async fn prepare(
    live: &TenantDb,
    tables: &Tables<'_>,
    record: &TenantRecord,
    state: &Restore,
    now_text: String,
) -> Result<ControlFlow<Progress, Step>, StoreError> {
    let waiting = || {
        ControlFlow::Break(Progress::Running {
            state: Box::new(state.clone()),
            retry_after: 30,
        })
    };
    let Some(at) = state.point_in_time.clone() else {
        return Err(StoreError::Internal(
            "a restore preparing without a point in time".into(),
        ));
    };
    match point_in_time::ready(tables.manager, &state.source_table).await? {
        // A caller that may not start the copy (the lane worker, finding a restore begun after the
        // one whose lane it stepped) leaves it to a call or a driver run: DynamoDB's AccessDenied
        // would otherwise end a restore nobody asked to end.
        None if !tables.may_start_copy => Ok(waiting()),
        None => {
            let started =
                point_in_time::start(tables.manager, tables.pool, &state.source_table, &at).await;
            match started {
                Ok(_) => Ok(waiting()),
                // A throttle or a timeout is tried again by the next call; DynamoDB's refusal (no
                // recovery, a time outside the window, a limit) ends the restore before anything
                // was written.
                Err(
                    e @ point_in_time::Unrestorable::Store(
                        StoreError::Unavailable(_) | StoreError::Throttled { .. },
                    ),
                ) => Err(StoreError::Unavailable(e.to_string())),
                Err(e) => abandon(live, state, e.to_string(), now_text)
                    .await
                    .map(ControlFlow::Break),
            }
        }
        Some(false) => Ok(waiting()),
        Some(true) => match source_shards(tables.source, record).await? {
            Ok(shards) => {
                let made =
                    point_in_time::describe_source(tables.manager, &state.source_table).await?;
                let next = Restore {
                    phase: RestorePhase::Putting,
                    source_shards: Some(shards),
                    source_id: made.map(|m| m.identity),
                    ..state.clone()
                };
                Ok(ControlFlow::Continue(commit(live, state, &[], next).await?))
            }
            Err(wrong) => {
                point_in_time::drop_scratch(tables.manager, &state.source_table).await?;
                abandon(live, state, wrong.to_string(), now_text)
                    .await
                    .map(ControlFlow::Break)
            }
        },
    }
}
