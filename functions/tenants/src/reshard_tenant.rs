//! Re-sharding through `PATCH /tenants/{tenantId}` `{shardCount}`: → 202 with the record and its
//! `migration` progress while the migration runs (call again after `Retry-After`: every call moves
//! items for up to [`WORK_PER_REQUEST`]), 200 with the record once the tenant has `shardCount`
//! shards (at once when it already has); 404 when there is no such tenant; 409 while a migration
//! to another count runs, or while the tenant is being offboarded.
//!
//! Operator only. The first call writes the migration into the record; the migrator's steps
//! (`shared::store::lifecycle::resharding`) each commit a checkpoint there, so any call in any container
//! resumes where the last one ended, and two calls at once never both commit a step.

use std::time::{Duration, Instant};

use lambda_http::{Body, Response};
use shared::identity::ids::TenantId;
use shared::identity::keys::{ItemKey, PK, SK};
use shared::identity::shard::{max_shards, MAX_SHARDS};
use shared::store::client::query::string_attr;
use shared::store::client::scoped::TenantDb;
use shared::store::lifecycle::resharding::{
    begin, checkpoint, finish, move_page, sharded_sources, Step, ITEMS_PER_STEP,
};
use shared::store::lifecycle::tenant_items::{self, Budget};
use shared::store::tenancy::tenants::{read_record_consistent, TenantRecord, TenantStatus};
use shared::{ApiError, App};

use crate::{accepted, done};

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
    operator: &TenantId,
    tenant: &TenantId,
    to: u32,
) -> Result<Response<Body>, ApiError> {
    let db = app.db_to_change(tenant).await?;
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
            None => match start(app, &db, &record, to, operator).await? {
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
        return migrate(app, &db, record, deadline).await;
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
    operator: &TenantId,
) -> Result<Step, ApiError> {
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    shared::store::lifecycle::driving::list(&platform_db, &db.tenant, app.clock.now_millis())
        .await?;
    Ok(begin(db, record, to, operator, app.clock.now_millis()).await?)
}

/// Runs the migrator until it is done, another call takes over, or `deadline` passes: what every
/// PATCH does after its first, and what the lifecycle driver does with no client calling.
pub async fn migrate(
    app: &App,
    db: &TenantDb,
    mut record: TenantRecord,
    deadline: Instant,
) -> Result<Response<Body>, ApiError> {
    let mut state =
        crate::running_state(app, db, &record, |r| r.migration.as_ref(), "a re-sharding")?;
    let now = app.clock.now_seconds();
    if now < state.progress.moves_start_at {
        return Ok(accepted(record, state.progress.moves_start_at - now));
    }
    let sources = sharded_sources(&db.tenant, state.from);
    // Each page's moves within a partition's second of writes, and paced at a partition's rate.
    let budget = Budget {
        items: ITEMS_PER_STEP,
        bytes: shared::store::lifecycle::pacing::STEP_BYTES,
        until: Some(deadline),
    };
    loop {
        let step_started = Instant::now();
        let page = tenant_items::page(db, &sources, state.position.as_ref(), budget).await?;
        let step = match page.items.last() {
            None => finish(db, &state).await?,
            Some(last) => {
                let position = ItemKey {
                    pk: string_attr(last, PK).unwrap_or_default(),
                    sk: string_attr(last, SK).unwrap_or_default(),
                };
                let moved = move_page(db, &page, state.to).await?;
                checkpoint(db, &state, position, moved).await?
            }
        };
        record = match crate::after_step(app, db, step, |r| r.migration.is_some()).await? {
            Ok(next) => next,
            Err(answer) => return Ok(answer),
        };
        let Some(next) = record.migration.clone() else {
            tracing::info!(tenant = %db.tenant, shards = record.shard_count, moved = state.progress.moved, "tenant re-sharded");
            return Ok(done(record));
        };
        state = next;
        // Paced before the call may end, so the next call starts when the partition has taken
        // this page's moves (a page is at most about half a second of it).
        let units = shared::store::lifecycle::pacing::transactional_write_units(&page.items);
        shared::store::lifecycle::pacing::pace(step_started, units).await;
        if Instant::now() >= deadline {
            return Ok(accepted(record, 0));
        }
    }
}
