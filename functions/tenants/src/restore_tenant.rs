//! restoreTenant: `POST /tenants/{tenantId}/restore` `{"from": {"table": "<name>"} | {"pointInTime":
//! "<RFC 3339>"}, "dryRun"?: bool}` → makes the tenant's items equal to what they were in the
//! source, and leaves every other tenant's as they are now
//! ([`shared::store::lifecycle::restoring`]).
//!
//! - `dryRun: true` (a source table only): 200 with the exact counts, per kind, of what a restore
//!   would put back, overwrite and delete; nothing changes.
//! - Otherwise: 202 with the record and the restore's progress (the tenant answers 503 from now on,
//!   and nothing is written for [`STARTS_DELAY_SECONDS`]); the lifecycle driver steps it to its end
//!   with no client calling, and another call with the same `from` nudges it (up to
//!   [`WORK_PER_REQUEST`] of steps); 200 with the record and `lastRestore`, its report, once done,
//!   and to the same call after the end (`"again": true` restores again from that source). With an
//!   `Idempotency-Key`, a retry answers the first answer again and starts nothing.
//! - 400 for a body that is not one source, or a table not named `<pool>-restore-…` (IAM lets the
//!   function read no other); 404 for no such tenant; 409 for the operator's own tenant, a tenant
//!   not active, or one being re-sharded, offboarded or restored from another source; 422 for a
//!   source that does not exist or has no catalog index, holds no record of the tenant, holds another
//!   tenant of its id (a reused id) or the tenant in the middle of a re-sharding, offboarding or
//!   restore, or a point in time outside the table's restore window.

use std::time::{Duration, Instant};

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use shared::identity::clock::rfc3339;
use shared::identity::ids::TenantId;
use shared::service::http::{json_body, json_response};
use shared::service::idempotent;
use shared::store::client::scoped::TenantDb;
use shared::store::lifecycle::restoring::{
    self, point_in_time, Counts, Progress, Restore, RestorePhase, Tables, STARTS_DELAY_SECONDS,
};
use shared::store::tenancy::tenants::{read_record_consistent, TenantRecord, TenantStatus};
use shared::{ApiError, App};

use crate::operation::Operation;
use crate::{accepted, Lanes, TenantView};

mod start;
use start::{begin, checked_source_table, dry_run_answer};

/// How long one call steps before it answers 202.
pub const WORK_PER_REQUEST: Duration = Duration::from_secs(5);

/// The route whose account (the platform's usage) a restore's steps are charged to, by a call or by
/// the lifecycle driver.
pub const ROUTE: &str = crate::operation::Operation::Restoring.route();

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RestoreInput {
    from: Option<SourceInput>,
    #[serde(default)]
    dry_run: bool,
    /// Ends the running restore now: what it wrote stays, and the tenant is served again.
    #[serde(default)]
    abort: bool,
    /// Restore again from the source the last restore used (otherwise that call answers the last
    /// restore's report: a retry or a nudge after the end starts nothing).
    #[serde(default)]
    again: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SourceInput {
    table: Option<String>,
    point_in_time: Option<String>,
}

/// Where the items come from, checked.
enum Source {
    Table(String),
    PointInTime(String),
}

impl Source {
    /// Whether `restore` reads from this source.
    fn is(&self, restore: &Restore) -> bool {
        match self {
            Source::Table(t) => restore.point_in_time.is_none() && *t == restore.source_table,
            Source::PointInTime(at) => restore.point_in_time.as_ref() == Some(at),
        }
    }
}

/// A dry run's answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DryRun {
    tenant_id: String,
    dry_run: bool,
    source: String,
    #[serde(flatten)]
    counts: Counts,
}

pub async fn handle(app: &App, lanes: &Lanes, req: Request) -> Result<Response<Body>, ApiError> {
    let (operator, tenant) = crate::operator_on_another_tenant(
        app,
        &req,
        "An operator cannot restore its own tenant: its operators would be refused while it runs. \
         Ask an operator of another tenant.",
    )
    .await?;
    let input: RestoreInput = json_body(&req)?;
    if input.abort {
        if input.from.is_some() || input.dry_run || input.again {
            return Err(ApiError::bad_request(
                "abort",
                "abort is asked alone: {\"abort\": true} ends the running restore",
            ));
        }
        let abort = abort(app, &operator, &tenant);
        return Operation::Restoring.charged(app, abort).await;
    }
    let from = input.from.ok_or_else(|| {
        ApiError::bad_request(
            "from",
            "from is {\"table\": \"<name>\"} or {\"pointInTime\": \"<RFC 3339>\"}",
        )
    })?;
    let source = match (from.table, from.point_in_time) {
        (Some(table), None) => {
            if !point_in_time::is_source_name(app.tenants.table_name(), &table) {
                return Err(ApiError::bad_request(
                    "from.table",
                    format!(
                        "a source table is named {}{}… (a table name: at most 255 of A-Z a-z 0-9 _ . -): a restore of the pool (point-in-time or \
                         backup) made under that name",
                        app.tenants.table_name(),
                        point_in_time::SOURCE_INFIX
                    ),
                ));
            }
            if point_in_time::is_scratch_name(app.tenants.table_name(), &table) {
                return Err(ApiError::bad_request(
                    "from.table",
                    format!(
                        "{table} is a point-in-time restore's scratch table (named \
                         <pool>-restore-<tenant>-<13 digits>): another restore's copy, which it \
                         deletes when it ends. Restore from a point in time, or from a table named \
                         otherwise"
                    ),
                ));
            }
            Source::Table(table)
        }
        (None, Some(at)) => {
            point_in_time::parse_time(&at)
                .map_err(|e| ApiError::bad_request("from.pointInTime", e.to_string()))?;
            if input.dry_run {
                return Err(ApiError::bad_request(
                    "dryRun",
                    "a dry run reads a source table: restore the point in time into one first, \
                     or restore without a dry run",
                ));
            }
            Source::PointInTime(at)
        }
        _ => {
            return Err(ApiError::bad_request(
                "from",
                "from is {\"table\": \"<name>\"} or {\"pointInTime\": \"<RFC 3339>\"}",
            ))
        }
    };
    // The restore is the platform's cost, never the operator's tenant's (nor the target's quota).
    let ask = Ask {
        dry_run: input.dry_run,
        again: input.again,
        lanes: crate::lane_walk::asked_lanes(&req)?,
    };
    let work = restore(app, lanes, &req, &operator, &tenant, source, ask);
    Operation::Restoring.charged(app, work).await
}

/// What the operator asked besides the source.
#[derive(Debug, Clone, Copy)]
struct Ask {
    dry_run: bool,
    again: bool,
    /// The lanes each phase runs in (`?lanes=`), else `LIFECYCLE_LANES`.
    lanes: Option<u32>,
}

async fn restore(
    app: &App,
    lanes: &Lanes,
    req: &Request,
    operator: &TenantId,
    tenant: &TenantId,
    source: Source,
    ask: Ask,
) -> Result<Response<Body>, ApiError> {
    let db = app.db_to_change(tenant).await?;
    app.refuse_revoked(tenant).await?;
    if ask.dry_run {
        return Box::pin(start_or_continue(
            app, lanes, operator, &db, source, ask, None,
        ))
        .await;
    }
    let now_s = app.clock.now_seconds();
    idempotent::run(req, &db, tenant, ROUTE, now_s, |recorder| {
        Box::pin(start_or_continue(
            app, lanes, operator, &db, source, ask, recorder,
        ))
    })
    .await
}

/// Starts the restore (or answers a dry run), or continues the running one from the same source.
/// `recorder`: the Idempotency-Key's record, written with the start.
async fn start_or_continue(
    app: &App,
    lanes: &Lanes,
    operator: &TenantId,
    db: &TenantDb,
    source: Source,
    ask: Ask,
    recorder: Option<idempotent::Recorder<'_>>,
) -> Result<Response<Body>, ApiError> {
    let dry_run = ask.dry_run;
    let tenant = &db.tenant;
    let record = read_record_consistent(db)
        .await?
        .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
    if let Some(running) = &record.restore {
        if source.is(running) && !dry_run {
            return Box::pin(advance(app, lanes, db, record, Stepper::CallOrDriver)).await;
        }
        return Err(crate::refuse_while_restoring_or_moving(&record).unwrap_err());
    }
    let repeated = record.last_restore.as_ref().is_some_and(|r| source.is(r));
    if repeated && !dry_run && !ask.again {
        // The same call after its restore ended (a nudge, or a retry without an Idempotency-Key):
        // the report, never a second restore.
        return Ok(json_response(StatusCode::OK, &TenantView::from(record)));
    }
    refuse_unless_idle(&record)?;
    // Every source is a copy of the pool (a point in time of it, or an operator's restored copy),
    // which holds none of an own-table tenant's items: restoring from one would delete them all.
    if let Some(own) = &record.own_table {
        return Err(ApiError::Conflict(format!(
            "This tenant's items are in its own table ({own}): restore that table with DynamoDB's \
             own point-in-time recovery; a restore from the pool would find none of its items."
        )));
    }
    let pool = app.tenants.table_name();
    let manager = app.tenants.table_manager();
    let now_ms = app.clock.now_millis();
    let (table, point, source_shards, source_id) = match source {
        Source::Table(table) => {
            let (source_id, reader, shards) =
                checked_source_table(app, db, &manager, &record, &table).await?;
            if dry_run {
                let seconds = app.settings.dry_run_seconds;
                return Box::pin(dry_run_answer(db, &reader, &record, shards, table, seconds))
                    .await;
            }
            (table, None, Some(shards), Some(source_id))
        }
        Source::PointInTime(at) => {
            point_in_time::check_window(&manager, pool, &at)
                .await
                .map_err(|e| match e {
                    point_in_time::Unrestorable::Store(e) => ApiError::from(e),
                    other => ApiError::Unprocessable(format!("{pool}: {other}.")),
                })?;
            (
                point_in_time::scratch_table(pool, tenant, now_ms),
                Some(at),
                None,
                None,
            )
        }
    };
    let starts_at = now_ms / 1000 + STARTS_DELAY_SECONDS;
    let requested_by = operator.to_string();
    let state = Restore {
        source_id,
        lanes_asked: ask.lanes,
        ..Restore::new(table, point, now_ms, requested_by, starts_at, source_shards)
    };
    begin(app, operator, db, record, state, now_ms, recorder).await
}

/// 409 unless the tenant is active with nothing else running.
fn refuse_unless_idle(record: &TenantRecord) -> Result<(), ApiError> {
    let busy = if record.offboarding.is_some() || record.status == TenantStatus::Offboarding {
        "is being offboarded"
    } else if record.migration.is_some() {
        "is being re-sharded; finish that first"
    } else if record.moving.is_some() {
        "is being moved between placements; finish that first"
    } else if record.status != TenantStatus::Active {
        "is not active (resume it first)"
    } else {
        return Ok(());
    };
    Err(ApiError::Conflict(format!("This tenant {busy}.")))
}

/// What an aborted restore's reason starts with (the operator's tenant follows).
const ABORTED_BY: &str = "aborted by an operator of ";

/// Aborts `tenant`'s running restore, asked by an operator of `operator`: 200 with the record,
/// whose `lastRestore` is `abandoned` with the counts of what was done (again, for the same abort
/// retried after it ended); 409 when none runs and the last one was not aborted.
async fn abort(
    app: &App,
    operator: &TenantId,
    tenant: &TenantId,
) -> Result<Response<Body>, ApiError> {
    let db = app.db_to_change(tenant).await?;
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    let manager = app.tenants.table_manager();
    // A step of the restore may commit between the read and the abort's write: read again.
    for _ in 0..5 {
        let record = read_record_consistent(&db)
            .await?
            .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
        let Some(state) = record.restore.clone() else {
            // The same abort again (a retry whose answer was lost): the same answer, nothing done.
            let aborted = record.last_restore.as_ref().is_some_and(
                |r| matches!(&r.phase, RestorePhase::Abandoned(why) if why.starts_with(ABORTED_BY)),
            );
            return match (aborted, &record.last_restore) {
                (true, Some(last)) => {
                    // Its copy listed again, due from now: the first call's second listing may
                    // have been lost with its answer, and a copy started late would be left.
                    let (pool, clock) = (app.tenants.table_name(), app.clock.as_ref());
                    let listed =
                        restoring::list_aborted_copy(&db, &platform_db, pool, last, clock).await;
                    if let Err(e) = listed {
                        tracing::warn!(tenant = %tenant, error = %e,
                            "an aborted restore's copy could not be listed again");
                    }
                    Ok(json_response(StatusCode::OK, &TenantView::from(record)))
                }
                _ => Err(ApiError::Conflict(
                    "No restore of this tenant is running.".into(),
                )),
            };
        };
        let reason = format!("{ABORTED_BY}{operator}");
        let (pool, clock) = (app.tenants.table_name(), app.clock.as_ref());
        match restoring::abort(&db, &platform_db, &manager, pool, &state, reason, clock).await? {
            Progress::Ended(_) => {
                tracing::info!(tenant = %tenant, by = %operator, "tenant restore aborted");
                let record = read_record_consistent(&db)
                    .await?
                    .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
                crate::remember(app, tenant, &record);
                return Ok(json_response(StatusCode::OK, &TenantView::from(record)));
            }
            _ => continue,
        }
    }
    Err(ApiError::Unavailable(
        "The restore kept stepping while it was being aborted; ask again.".into(),
    ))
}

/// Who steps a restore in [`advance`]: the lane worker may not start a point-in-time copy (its
/// role may not restore the pool); a call and the lifecycle driver may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stepper {
    CallOrDriver,
    LaneWorker,
}

/// Runs `record`'s restore (already begun) until it ends (200 with the report), another call takes
/// over, or [`WORK_PER_REQUEST`] passes (202 with the progress): what every call with the same
/// source does after its first, what the lifecycle driver does with no client calling, and what
/// the lane worker that steps a phase's last lane does. A walking phase runs in lanes
/// ([`crate::lane_walk`]): planned by the first call to reach it, then stepped by the lane workers
/// (or, with no queue, by each call for its time); the phase's end folds them.
pub async fn advance(
    app: &App,
    runner: &Lanes,
    db: &TenantDb,
    mut record: TenantRecord,
    stepper: Stepper,
) -> Result<Response<Body>, ApiError> {
    let tenant = db.tenant.clone();
    let until = Instant::now() + WORK_PER_REQUEST;
    loop {
        let Some(state) = record.restore.clone() else {
            return Ok(json_response(StatusCode::OK, &TenantView::from(record)));
        };
        let source = app.tenants.source_reader(&tenant, &state.source_table);
        let manager = app.tenants.table_manager();
        let tables = Tables {
            source: &source,
            manager: &manager,
            pool: app.tenants.table_name(),
            may_start_copy: stepper == Stepper::CallOrDriver,
        };
        let now = || (app.clock.now_seconds(), rfc3339(app.clock.now_millis()));
        let progress = Box::pin(restoring::advance(db, &tables, &record, now, until)).await?;
        record = match progress {
            Progress::Running { state, retry_after } => {
                return Ok(accepted(
                    TenantRecord {
                        restore: Some(*state),
                        ..record
                    },
                    retry_after,
                ))
            }
            Progress::Walking(state) => {
                match crate::restore_lanes::walk(app, runner, db, &record, *state, source, until)
                    .await?
                {
                    crate::restore_lanes::Walked::Running(retry_after) => {
                        let record = read_record_consistent(db)
                            .await?
                            .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
                        crate::remember(app, &tenant, &record);
                        return Ok(match record.restore {
                            Some(_) => accepted(record, retry_after),
                            None => json_response(StatusCode::OK, &TenantView::from(record)),
                        });
                    }
                    // A phase ended, here or elsewhere: on from the record as it now is.
                    crate::restore_lanes::Walked::PhaseEnded => {
                        read_record_consistent(db)
                            .await?
                            .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?
                    }
                }
            }
            Progress::Ended(report) => {
                tracing::info!(tenant = %tenant, source = %report.source_table, phase = ?report.phase, "tenant restore ended");
                TenantRecord {
                    status: TenantStatus::Active,
                    restore: None,
                    last_restore: Some(*report),
                    ..record
                }
            }
            // Another call took the step, or ended the restore.
            Progress::Raced => read_record_consistent(db)
                .await?
                .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?,
        };
        crate::remember(app, &tenant, &record);
        if record.restore.is_some() && Instant::now() >= until {
            return Ok(accepted(record, 1));
        }
    }
}
