//! driveLifecycle: steps every listed re-sharding, move between placements, offboarding and restore
//! to its end with no client calling
//! (`shared::store::lifecycle::driving`). EventBridge invokes it every minute; it has a reserved concurrency of
//! one, and each run stops starting work after [`RUN_BUDGET`] (under its 30 s timeout), so two runs
//! never overlap. Each tenant gets what one PATCH or DELETE call would do (up to 5 s of steps, each
//! committed with its checkpoint in the record), so a run killed mid-step resumes, in the next run,
//! from the last committed step. The PATCH and DELETE calls still work, to nudge or to watch.
//!
//! Then it makes every import past its deadline final (`shared::store::imports::close`), and
//! deletes the point-in-time copies aborted restores left (`restoring::copies`).
//!
//! The tenants get the first 12 s of a run, [`TENANTS_IN_FLIGHT`] at once, the least recently driven
//! first (so a run that cannot serve every listed tenant starts the next where it left off: no
//! tenant's operation waits for another's to end); imports are closed 8 at once until 20 s, and
//! copies deleted one at a time until then too.
//!
//! Answers `{"listed", "finished", "pending", "importsClosed", "importsDue"}`: tenants it found
//! listed, whose operation it saw end (or found nothing running for), and still listed; imports it
//! closed, and imports due that wait for the next run.

use std::time::{Duration, Instant};

use lambda_http::http::StatusCode;
use lambda_http::{Body, Response};
use serde::Serialize;
use shared::identity::ids::TenantId;
use shared::isolation::policy::Scope;
use shared::store::client::scoped::TenantDb;
use shared::store::imports;
use shared::store::lifecycle::driving;
use shared::store::tenancy::tenants::{
    read_record_consistent, TenantRecord, LONGEST_FUNCTION_TIMEOUT_SECONDS,
};
use shared::{ApiError, App};

use crate::operation::Operation;
use crate::Lanes;
use crate::{move_tenant, offboard_tenant, reshard_tenant, restore_tenant};

/// How long one run starts new work: a tenant begun just before may add one call's 5 s.
pub const RUN_BUDGET: Duration = Duration::from_secs(20);

#[derive(Debug, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Driven {
    pub listed: usize,
    pub finished: usize,
    pub pending: usize,
    /// Imports past their deadline made final by this run (`shared::store::imports::close`).
    pub imports_closed: usize,
    /// Imports past their deadline left for the next run (out of time, or a step failed).
    pub imports_due: usize,
}

/// Imports past their deadline read per run from each partition of their list; the rest wait for
/// the next run (a minute later).
const IMPORTS_PER_SHARD: i32 = 1_000;

/// How long the tenants' operations may take of a run, so imports always get the rest of it.
const LIFECYCLE_BUDGET: Duration = Duration::from_secs(12);

/// Imports closed at once.
const CLOSES_IN_FLIGHT: usize = 8;

/// Tenants driven at once: their operations are independent, each on its own tenant's partitions.
const TENANTS_IN_FLIGHT: usize = 4;

/// One run of the driver, an offboarding's lanes run as `lanes` says.
pub async fn drive(app: &App, lanes: &Lanes) -> Result<Driven, ApiError> {
    drive_at_most(app, lanes, usize::MAX).await
}

/// [`drive`], giving a call's worth to at most `tenants` listed tenants (the rest are pending):
/// what a run does when its time is short, counted instead of timed, for tests.
pub async fn drive_at_most(app: &App, lanes: &Lanes, tenants: usize) -> Result<Driven, ApiError> {
    use futures::StreamExt;
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    // The least recently driven first: a run that cannot serve everyone starts the next where it
    // left off (`driving::listed`).
    let listed = driving::listed(&platform_db).await?;
    let listed_at: Vec<u64> = listed.iter().map(|l| l.listed_at_ms).collect();
    let started = Instant::now();
    let deadline = started + LIFECYCLE_BUDGET;
    let mut driven = Driven {
        listed: listed.len(),
        ..Driven::default()
    };
    let begun = std::sync::atomic::AtomicUsize::new(0);
    let (platform_db, begun) = (&platform_db, &begun);
    let outcomes = futures::stream::iter(listed.into_iter().map(|entry| async move {
        let turn = begun.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if Instant::now() >= deadline || turn >= tenants {
            return None;
        }
        let stepped = Box::pin(step(app, lanes, &entry.tenant)).await;
        if let Err(e) = driving::note_driven(platform_db, &entry, app.clock.now_millis()).await {
            tracing::warn!(tenant = %entry.tenant, error = %e, "the driver could not note its turn");
        }
        Some((entry, stepped))
    }))
    .buffer_unordered(TENANTS_IN_FLIGHT)
    .collect::<Vec<_>>()
    .await;
    for outcome in outcomes {
        let Some((entry, stepped)) = outcome else {
            driven.pending += 1;
            continue;
        };
        let (tenant, listed_at_ms) = (&entry.tenant, entry.listed_at_ms);
        match stepped {
            // Nothing runs yet for an entry listed a moment ago: its operation is listed before it
            // begins, so it may be beginning now. It is unlisted only once a request that listed it
            // has surely ended.
            Ok(true)
                if app.clock.now_millis().saturating_sub(listed_at_ms)
                    < LONGEST_FUNCTION_TIMEOUT_SECONDS * 1000 =>
            {
                driven.pending += 1;
            }
            // Unlisted only if no newer listing replaced the one read above (a tenant of this id
            // onboarded again and listed meanwhile keeps its entry).
            Ok(true) => match driving::unlist(platform_db, tenant, listed_at_ms).await? {
                true => driven.finished += 1,
                false => driven.pending += 1,
            },
            Ok(false) => driven.pending += 1,
            // One tenant's failure (a throttle, a timeout) never stops the others'; the next run
            // tries again from its checkpoint.
            Err(e) => {
                tracing::warn!(tenant = %tenant, error = %e, "a lifecycle step failed; the next run resumes it");
                driven.pending += 1;
            }
        }
    }
    let closed = close_due_imports(app, platform_db, started + RUN_BUDGET, &mut driven).await;
    // After the imports, which a tenant waits for: a copy is only a cost, and one DynamoDB still
    // makes stays due for many runs.
    delete_aborted_copies(app, platform_db, started + RUN_BUDGET).await;
    // The run's steps were charged to the platform's account: written before the run ends, also
    // when closing imports failed.
    app.flush_platform_usage().await;
    closed?;
    // How long the oldest listed operation has run: an alarm fires when one is stuck.
    let now_ms = app.clock.now_millis();
    let oldest_seconds = listed_at
        .iter()
        .map(|at| now_ms.saturating_sub(*at) / 1000)
        .max()
        .unwrap_or(0);
    app.emit_event(
        &[
            ("LifecycleListed", driven.listed as f64),
            ("LifecycleFinished", driven.finished as f64),
            ("LifecyclePending", driven.pending as f64),
            ("LifecycleOldestListedSeconds", oldest_seconds as f64),
            ("ImportsClosed", driven.imports_closed as f64),
            ("ImportsDue", driven.imports_due as f64),
        ],
        &[],
    );
    tracing::info!(
        listed = driven.listed,
        finished = driven.finished,
        pending = driven.pending,
        imports_closed = driven.imports_closed,
        imports_due = driven.imports_due,
        "lifecycle driver run"
    );
    Ok(driven)
}

/// Deletes every point-in-time copy an aborted restore left that is due
/// (`shared::store::lifecycle::restoring::copies`), and unlists it once DynamoDB has: one it still
/// makes stays listed for the next run, and so does one the tenant's running restore reads (an
/// abort that failed after listing it: the restore runs on until an abort ends it). None is started
/// after `deadline` (each costs a session, a read and a DeleteTable). Failures are logged; the next
/// run tries again.
async fn delete_aborted_copies(app: &App, platform_db: &TenantDb, deadline: Instant) {
    use shared::store::lifecycle::restoring::{copies, point_in_time};
    let pool = app.tenants.table_name();
    let manager = app.tenants.table_manager();
    let now = app.clock.now_millis();
    let listed = match copies::listed(platform_db).await {
        Ok(listed) => listed,
        Err(e) => {
            return tracing::warn!(error = %e, "the aborted restores' copies could not be read")
        }
    };
    for copy in listed.into_iter().filter(|c| c.due_at_ms <= now) {
        if Instant::now() >= deadline {
            return tracing::info!("aborted restores' copies left for the next run: out of time");
        }
        let deleted = async {
            // Never a table but a copy of this tenant's restores, whatever the entry says.
            if point_in_time::is_scratch_of(pool, copy.tenant.as_str(), &copy.table) {
                let record = match app.operator_db(&copy.tenant, Scope::Operator).await? {
                    Some(db) => read_record_consistent(&db).await?,
                    None => None,
                };
                let read_by_its_restore = record
                    .and_then(|r| r.restore)
                    .is_some_and(|r| r.source_table == copy.table);
                if read_by_its_restore {
                    return Ok(false);
                }
                match point_in_time::drop_scratch(&manager, &copy.table).await {
                    Err(shared::store::client::error::StoreError::Contended(_)) => {
                        return Ok(false)
                    }
                    done => done?,
                }
            }
            Ok::<_, ApiError>(copies::unlist(platform_db, &copy).await?)
        };
        match deleted.await {
            Ok(true) => tracing::info!(copy = %copy.table, "an aborted restore's copy deleted"),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(copy = %copy.table, error = %e, "an aborted restore's copy could not be deleted; the next run tries again")
            }
        }
    }
}

/// Makes every import past its deadline final, notes it final on its entry (the change the pool's
/// stream carries as its `importFinished`), then unlists it (`shared::store::imports::close`),
/// [`CLOSES_IN_FLIGHT`] at a time until `deadline`. An entry whose tenant is gone or being
/// offboarded is only unlisted (noted first if its import was closed before): nothing may be
/// written into a tenant being deleted.
async fn close_due_imports(
    app: &App,
    platform_db: &shared::store::client::scoped::TenantDb,
    deadline: Instant,
    driven: &mut Driven,
) -> Result<(), ApiError> {
    use futures::StreamExt;
    let due = driving::imports_due(platform_db, app.clock.now_millis(), IMPORTS_PER_SHARD).await?;
    // The tenants in turn: a tenant with many imports due never holds up another's.
    let due = driving::fair_order(due);
    let closings = futures::stream::iter(due.into_iter().map(|entry| async move {
        if Instant::now() >= deadline {
            return None;
        }
        let closed = async {
            let Some(db) = app.operator_db(&entry.tenant, Scope::Tenant).await? else {
                return Ok(imports::Closing::Gone);
            };
            let Some(record) = read_record_consistent(&db).await? else {
                return Ok(imports::Closing::Gone);
            };
            let now = app.clock.now_millis();
            if record.offboarding.is_some() {
                // Nothing is written into a tenant being deleted; an import it closed before
                // (a run cut off before its note) is still noted, in the pool.
                let (tenant, import) = (&entry.tenant, &entry.import);
                let closed =
                    imports::closed(&db, tenant, import, entry.created_at_ms, now / 1000).await?;
                if let Some(finished) = closed.filter(|f| !f.noted) {
                    driving::note_import_finished(platform_db, &entry, &finished, now).await?;
                }
                return Ok(imports::Closing::Gone);
            }
            let closing =
                imports::close(&db, &entry.tenant, &entry.import, entry.created_at_ms, now).await?;
            // Its end is noted on its entry, in the pool, before the entry goes: that note is its
            // one `importFinished`, wherever its record is (a table of the tenant's own is on a
            // stream the publisher does not read, and the record may move between the two).
            // Once per import, not per entry: its record is marked noted after the note, and an
            // entry listed again for it (the producer's session may list any import) goes unnoted.
            if let imports::Closing::Closed { finished, .. } = &closing {
                if !finished.noted {
                    driving::note_import_finished(platform_db, &entry, finished, now).await?;
                    let (tenant, import) = (&entry.tenant, &entry.import);
                    imports::mark_noted(&db, tenant, import, entry.created_at_ms, now).await?;
                }
            }
            Ok::<_, ApiError>(closing)
        };
        let outcome = match closed.await {
            Ok(imports::Closing::NotDue) => Err(None),
            Ok(closing) => match driving::unlist_import(platform_db, &entry).await {
                Ok(()) => Ok(closing),
                Err(e) => Err(Some(ApiError::from(e))),
            },
            Err(e) => Err(Some(e)),
        };
        Some((entry, outcome))
    }))
    .buffer_unordered(CLOSES_IN_FLIGHT)
    .collect::<Vec<_>>()
    .await;
    for closing in closings {
        match closing {
            // Out of time: the next run.
            None => driven.imports_due += 1,
            Some((entry, Ok(imports::Closing::Closed { failed_now, .. }))) => {
                tracing::info!(tenant = %entry.tenant, import_id = %entry.import, failed_now, "an import past its deadline is final");
                driven.imports_closed += 1;
            }
            Some((_, Ok(_))) => {}
            Some((_, Err(None))) => driven.imports_due += 1,
            // One import's failure (a throttle, a timeout) never stops the others'.
            Some((entry, Err(Some(e)))) => {
                tracing::warn!(tenant = %entry.tenant, import_id = %entry.import, error = %e, "an import could not be closed; the next run tries again");
                driven.imports_due += 1;
            }
        }
    }
    Ok(())
}

/// One call's worth of `tenant`'s operation; `true` when nothing of it is left to do.
async fn step(app: &App, lanes: &Lanes, tenant: &TenantId) -> Result<bool, ApiError> {
    // No record: offboarded (its report is written), or never onboarded.
    let Some(db) = app.operator_db(tenant, Scope::Operator).await? else {
        return Ok(true);
    };
    let Some(record) = read_record_consistent(&db).await? else {
        return Ok(true);
    };
    // Listed, but nothing runs: its start was refused, or it has ended.
    let Some(operation) = Operation::running_on(&record) else {
        return Ok(true);
    };
    // A revoked tenant's operation waits, listed, until its key is usable again.
    if !operation.may_go_on(app, tenant).await {
        return Ok(false);
    }
    // Charged to the platform's account under the route a call would be, as the calls are.
    let answer = operation
        .charged(app, advance(operation, app, lanes, &db, record))
        .await?;
    if answer.status() != StatusCode::OK {
        return Ok(false);
    }
    // Another operation may wait behind the one that ended (a keying behind a re-sharding begun
    // after it): the tenant stays listed while one runs.
    let after = read_record_consistent(&db).await?;
    Ok(after.as_ref().and_then(Operation::running_on).is_none())
}

/// One call's worth of `operation`, already begun on `record`: 200 once it has ended, 202 while it
/// runs.
async fn advance(
    operation: Operation,
    app: &App,
    lanes: &Lanes,
    db: &TenantDb,
    record: TenantRecord,
) -> Result<Response<Body>, ApiError> {
    match operation {
        Operation::Offboarding => offboard_tenant::advance(app, lanes, db, record).await,
        Operation::Resharding => {
            let deadline = Instant::now() + reshard_tenant::WORK_PER_REQUEST;
            reshard_tenant::migrate(app, lanes, db, record, deadline).await
        }
        Operation::Moving => {
            let deadline = Instant::now() + move_tenant::WORK_PER_REQUEST;
            move_tenant::advance(app, lanes, db, record, deadline).await
        }
        Operation::Restoring => {
            restore_tenant::advance(
                app,
                lanes,
                db,
                record,
                restore_tenant::Stepper::CallOrDriver,
            )
            .await
        }
        Operation::Keying => {
            let deadline = Instant::now() + crate::key_tenant::WORK_PER_REQUEST;
            crate::key_tenant::advance(app, db, record, deadline).await
        }
    }
}
