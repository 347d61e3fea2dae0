//! Restoring one tenant: making its live items equal to a source table's (a point-in-time or backup
//! restore of the pool), while every other tenant stays as it is now.
//!
//! 1. [`begin`] sets the record's status to `restoring` (every container answers the tenant's
//!    requests 503 once its cached record expires) and writes the restore's state, conditioned on
//!    the tenant being active with no re-sharding, offboarding or restore running. Nothing is
//!    written before `startsAt` ([`STARTS_DELAY_SECONDS`] later), when no request admitted before can
//!    still be writing.
//! 2. A point-in-time restore first waits for its scratch table ([`point_in_time`]), then checks that
//!    it holds this tenant (the record's `createdAt`: a tenant id reused since is another tenant).
//! 3. **Putting**: the walk of the source's items of the tenant ([`sources`], in the source's shard
//!    count), page by page; each item is read at its key in the tenant's *current* layout, and put
//!    back or overwritten when it differs ([`plan::puts`]).
//! 4. **Deleting**: the walk of the live items; each one the source does not hold is deleted
//!    ([`plan::deletes`]).
//! 5. [`finish`] makes the tenant active again with the report (`lastRestore`), after deleting a
//!    scratch table.
//!
//! Each step's changes and its checkpoint (position, counts, a step number it is conditioned on)
//! are one transaction, so the counts are exact, a step is all or nothing, and a restore killed
//! anywhere resumes from its last step, by a call or by the driver. Only the routes' entities are
//! restored ([`plan::restored`]); usage counters, quota windows, idempotency and import records,
//! tombstones and the record keep what they are now. Writes go through the tenant's scoped
//! client (session policy and guard); the source is read through a client that can only read the
//! tenant's keys (`TenantClients::source_reader`).

pub mod plan;
pub mod point_in_time;

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};

use crate::identity::ids::TenantId;
use crate::identity::keys::{partition_kind, tenant_record_key, ItemKey, PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
use crate::store::client::transact::{transact, TransactError};
use crate::store::lifecycle::tenant_items::{self, Budget, Page, RecordInWalk, Source};
use crate::store::tenancy::tenants::{
    read_record_consistent, value, TenantRecord, TenantStatus, RECORD_SETTLED_SECONDS,
};
pub use crate::store::tenancy::tenants::{Restore, RestorePhase};
use plan::{Change, Planned};

/// Seconds from a restore's start to its first write: every container's cached record has expired,
/// and a request admitted on it has ended.
pub const STARTS_DELAY_SECONDS: u64 = RECORD_SETTLED_SECONDS;

/// Items one step walks: its changes and the checkpoint fit one transaction (100 actions).
pub const ITEMS_PER_STEP: usize = 99;

/// The walk of `tenant`'s restored items in a layout of `shards` write shards: the write shards and
/// the catalog (the id-named partitions), never the usage, quota or record partitions.
pub fn sources(tenant: &TenantId, shards: u32) -> Vec<Source> {
    tenant_items::sources(tenant, shards, 0, RecordInWalk::Excluded)
        .into_iter()
        .filter(|s| match s {
            Source::Partition(pk) => {
                partition_kind(tenant, pk).is_some_and(crate::identity::entities::holds_entities)
            }
            Source::Catalog(_) => true,
        })
        .collect()
}

/// One page of a walk, as a step takes it.
fn budget(until: Option<std::time::Instant>) -> Budget {
    Budget {
        items: ITEMS_PER_STEP,
        bytes: crate::store::lifecycle::pacing::STEP_BYTES,
        until,
    }
}

/// Why a source cannot restore this tenant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WrongSource {
    #[error("the source holds no record of this tenant: it was not onboarded then")]
    NotOnboardedThen,
    #[error(
        "the source's tenant of this id was onboarded at {then}, this one at {now}: the id was \
         reused, and the source holds another tenant's data"
    )]
    AnotherTenant { then: String, now: String },
}

/// The source's record of the tenant, checked to be the live tenant's: its shard count then.
pub async fn source_shards(
    source: &TenantDb,
    live: &TenantRecord,
) -> Result<Result<u32, WrongSource>, StoreError> {
    Ok(match read_record_consistent(source).await? {
        None => Err(WrongSource::NotOnboardedThen),
        Some(then) if then.created_at != live.created_at => Err(WrongSource::AnotherTenant {
            then: then.created_at,
            now: live.created_at.clone(),
        }),
        Some(then) => Ok(then.shard_count),
    })
}

/// Counts of a restore or a dry run, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub put_back: BTreeMap<String, u64>,
    pub overwritten: BTreeMap<String, u64>,
    pub deleted: BTreeMap<String, u64>,
}

impl Counts {
    fn add(&mut self, planned: &[Planned]) {
        for p in planned {
            let counts = match p.change {
                Change::PutBack(_) => &mut self.put_back,
                Change::Overwrite(_) => &mut self.overwritten,
                Change::Delete(_) => &mut self.deleted,
            };
            *counts.entry(p.kind.clone()).or_default() += 1;
        }
    }

    pub fn of(restore: &Restore) -> Self {
        Self {
            put_back: restore.put_back.clone(),
            overwritten: restore.overwritten.clone(),
            deleted: restore.deleted.clone(),
        }
    }
}

/// A dry run's walk ran out of time before it saw every item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the dry run did not finish within one request")]
pub struct TooLargeToDryRun;

/// What a restore from `source` would change in `live`'s items, without changing anything: the
/// plans its steps would commit, counted. `Ok(Err(_))` when `until` passed first.
pub async fn dry_run(
    live: &TenantDb,
    source: &TenantDb,
    live_shards: u32,
    source_shards: u32,
    until: std::time::Instant,
) -> Result<Result<Counts, TooLargeToDryRun>, StoreError> {
    let mut counts = Counts::default();
    for phase in [RestorePhase::Putting, RestorePhase::Deleting] {
        let mut position = None;
        loop {
            if std::time::Instant::now() >= until {
                return Ok(Err(TooLargeToDryRun));
            }
            let page = page_of(
                live,
                source,
                &phase,
                live_shards,
                source_shards,
                position.as_ref(),
                Some(until),
            )
            .await?;
            let Some(last) = page.items.last() else {
                break;
            };
            counts.add(&plan_of(live, source, &phase, live_shards, source_shards, &page).await?);
            position = Some(position_of(last));
        }
    }
    Ok(Ok(counts))
}

async fn page_of(
    live: &TenantDb,
    source: &TenantDb,
    phase: &RestorePhase,
    live_shards: u32,
    source_shards: u32,
    after: Option<&ItemKey>,
    until: Option<std::time::Instant>,
) -> Result<Page, StoreError> {
    match phase {
        RestorePhase::Deleting => {
            tenant_items::page(
                live,
                &sources(&live.tenant, live_shards),
                after,
                budget(until),
            )
            .await
        }
        _ => {
            tenant_items::page(
                source,
                &sources(&source.tenant, source_shards),
                after,
                budget(until),
            )
            .await
        }
    }
}

async fn plan_of(
    live: &TenantDb,
    source: &TenantDb,
    phase: &RestorePhase,
    live_shards: u32,
    source_shards: u32,
    page: &Page,
) -> Result<Vec<Planned>, StoreError> {
    match phase {
        RestorePhase::Deleting => plan::deletes(source, &page.items, source_shards).await,
        _ => plan::puts(live, &page.items, live_shards).await,
    }
}

fn position_of(item: &Item) -> ItemKey {
    let text = |name: &str| match item.get(name) {
        Some(AttributeValue::S(s)) => s.clone(),
        _ => String::new(),
    };
    ItemKey {
        pk: text(PK),
        sk: text(SK),
    }
}

/// What a conditioned step did.
#[derive(Debug)]
pub enum Step {
    /// Committed: the record's restore state as it now is.
    Committed(Box<Restore>),
    /// Another call committed a step first, or the restore ended: read the record again.
    Raced,
}

/// Starts restoring `db`'s tenant as `restore` says (its `steps` 0), with `also` (an idempotency
/// record) in the same transaction: `Raced` when the tenant is not active, or another operation runs.
pub async fn begin(
    db: &TenantDb,
    restore: &Restore,
    also: Option<TransactWriteItem>,
) -> Result<Step, StoreError> {
    let update = record_update(db)
        .update_expression("SET #state = :restoring, #r = :r")
        .condition_expression(
            "attribute_exists(PK) AND (attribute_not_exists(#state) OR #state = :active) \
             AND attribute_not_exists(#m) AND attribute_not_exists(#o) AND attribute_not_exists(#r)",
        )
        .expression_attribute_names("#state", "status")
        .expression_attribute_names("#r", "restore")
        .expression_attribute_names("#m", "migration")
        .expression_attribute_names("#o", "offboarding")
        .expression_attribute_values(":restoring", value(TenantStatus::Restoring)?)
        .expression_attribute_values(":active", value(TenantStatus::Active)?)
        .expression_attribute_values(":r", restore.to_attribute())
        .build()
        .map_err(internal)?;
    let mut actions = vec![TransactWriteItem::builder().update(update).build()];
    actions.extend(also);
    let request = db
        .client
        .transact_write_items()
        .set_transact_items(Some(actions));
    match transact(request).await {
        Ok(()) => Ok(Step::Committed(Box::new(restore.clone()))),
        Err(e) if e.failed_at(0) => Ok(Step::Raced),
        Err(e) => Err(unexpected(e)),
    }
}

/// Commits one step: `planned`'s changes, and the record's checkpoint moved to `next` (from
/// `state`, on condition that no other step was committed since), in one transaction.
pub async fn commit(
    db: &TenantDb,
    state: &Restore,
    planned: &[Planned],
    mut next: Restore,
) -> Result<Step, StoreError> {
    next.steps = state.steps + 1;
    let mut counts = Counts::of(&next);
    counts.add(planned);
    next.put_back = counts.put_back;
    next.overwritten = counts.overwritten;
    next.deleted = counts.deleted;
    let mut actions = Vec::with_capacity(planned.len() + 1);
    for p in planned {
        let action = match &p.change {
            Change::PutBack(item) | Change::Overwrite(item) => TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&*db.table)
                        .set_item(Some(item.clone()))
                        .build()
                        .map_err(internal)?,
                )
                .build(),
            Change::Delete(key) => TransactWriteItem::builder()
                .delete(
                    Delete::builder()
                        .table_name(&*db.table)
                        .set_key(Some(key.clone()))
                        .build()
                        .map_err(internal)?,
                )
                .build(),
        };
        actions.push(action);
    }
    let checkpoint_at = actions.len();
    actions.push(
        TransactWriteItem::builder()
            .update(checkpoint(db, state, "SET #r = :next", &next)?)
            .build(),
    );
    let request = db
        .client
        .transact_write_items()
        .set_transact_items(Some(actions));
    match transact(request).await {
        Ok(()) => Ok(Step::Committed(Box::new(next))),
        Err(e) if e.failed_at(checkpoint_at) => Ok(Step::Raced),
        Err(e) => Err(unexpected(e)),
    }
}

/// Ends the restore: the tenant active again, `report` (phase `Finished` or `Abandoned`) kept as
/// `lastRestore`, on condition that no other step was committed since `state`.
pub async fn finish(db: &TenantDb, state: &Restore, report: &Restore) -> Result<Step, StoreError> {
    let update = checkpoint(
        db,
        state,
        "SET #state = :active, #last = :next REMOVE #r",
        report,
    )?;
    let request = db
        .client
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().update(update).build());
    match transact(request).await {
        Ok(()) => Ok(Step::Committed(Box::new(report.clone()))),
        Err(e) if e.failed_at(0) => Ok(Step::Raced),
        Err(e) => Err(unexpected(e)),
    }
}

/// The record's update `expression` with `:next` = `next`, conditioned on `state`'s step.
fn checkpoint(
    db: &TenantDb,
    state: &Restore,
    expression: &str,
    next: &Restore,
) -> Result<Update, StoreError> {
    let key = tenant_record_key(&db.tenant);
    let mut update = Update::builder()
        .table_name(&*db.table)
        .key(PK, AttributeValue::S(key.clone()))
        .key(SK, AttributeValue::S(key))
        .update_expression(expression)
        .condition_expression("#state = :restoring AND #r.#steps = :steps")
        .expression_attribute_names("#state", "status")
        .expression_attribute_names("#r", "restore")
        .expression_attribute_names("#steps", "steps")
        .expression_attribute_values(":restoring", value(TenantStatus::Restoring)?)
        .expression_attribute_values(":steps", AttributeValue::N(state.steps.to_string()))
        .expression_attribute_values(":next", next.to_attribute());
    if expression.contains("#last") {
        update = update
            .expression_attribute_names("#last", "lastRestore")
            .expression_attribute_values(":active", value(TenantStatus::Active)?);
    }
    update.build().map_err(internal)
}

fn record_update(db: &TenantDb) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
    let key = tenant_record_key(&db.tenant);
    Update::builder()
        .table_name(&*db.table)
        .key(PK, AttributeValue::S(key.clone()))
        .key(SK, AttributeValue::S(key))
}

/// A transaction's failure other than its checked condition's.
fn unexpected(e: TransactError) -> StoreError {
    match e {
        TransactError::Store(e) => e,
        TransactError::ConditionFailed { index, .. } => StoreError::Internal(format!(
            "an unconditional restore write (action {index}) failed its condition"
        )),
    }
}

fn internal(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Internal(e.to_string())
}

/// Where a restore stands after [`advance`].
#[derive(Debug)]
pub enum Progress {
    /// Still running: call again after this many seconds.
    Running {
        state: Box<Restore>,
        retry_after: u64,
    },
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
}

/// Runs the restore's steps until it ends, another call takes over, or `until` passes: what every
/// call does after its first, and what the driver does with no client calling.
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
                let Some(at) = state.point_in_time.clone() else {
                    return Err(StoreError::Internal(
                        "a restore preparing without a point in time".into(),
                    ));
                };
                match point_in_time::ready(tables.manager, &state.source_table).await? {
                    None => {
                        if let Err(e) = point_in_time::start(
                            tables.manager,
                            tables.pool,
                            &state.source_table,
                            &at,
                        )
                        .await
                        {
                            return abandon(live, &state, e.to_string(), now_text).await;
                        }
                        return Ok(Progress::Running {
                            state: Box::new(state),
                            retry_after: 30,
                        });
                    }
                    Some(false) => {
                        return Ok(Progress::Running {
                            state: Box::new(state),
                            retry_after: 30,
                        })
                    }
                    Some(true) => match source_shards(tables.source, record).await? {
                        Ok(shards) => {
                            let next = Restore {
                                phase: RestorePhase::Putting,
                                source_shards: Some(shards),
                                ..state.clone()
                            };
                            commit(live, &state, &[], next).await?
                        }
                        Err(wrong) => {
                            point_in_time::drop_scratch(tables.manager, &state.source_table)
                                .await?;
                            return abandon(live, &state, wrong.to_string(), now_text).await;
                        }
                    },
                }
            }
            RestorePhase::Putting | RestorePhase::Deleting => {
                let source_shards = state.source_shards.unwrap_or(record.shard_count);
                let page = page_of(
                    live,
                    tables.source,
                    &state.phase,
                    record.shard_count,
                    source_shards,
                    state.position.as_ref(),
                    Some(until),
                )
                .await?;
                match page.items.last() {
                    Some(last) => {
                        let step_started = std::time::Instant::now();
                        let planned = plan_of(
                            live,
                            tables.source,
                            &state.phase,
                            record.shard_count,
                            source_shards,
                            &page,
                        )
                        .await?;
                        let next = Restore {
                            position: Some(position_of(last)),
                            ..state.clone()
                        };
                        let step = commit(live, &state, &planned, next).await?;
                        // Paced at a partition's write rate, like every lifecycle step.
                        let units = crate::store::lifecycle::pacing::transactional_write_units(
                            planned.iter().map(|p| match &p.change {
                                Change::PutBack(item)
                                | Change::Overwrite(item)
                                | Change::Delete(item) => item,
                            }),
                        );
                        crate::store::lifecycle::pacing::pace(step_started, units).await;
                        step
                    }
                    None if state.phase == RestorePhase::Putting => {
                        let next = Restore {
                            phase: RestorePhase::Deleting,
                            position: None,
                            ..state.clone()
                        };
                        commit(live, &state, &[], next).await?
                    }
                    None => {
                        if state.point_in_time.is_some() {
                            point_in_time::drop_scratch(tables.manager, &state.source_table)
                                .await?;
                        }
                        let report = Restore {
                            phase: RestorePhase::Finished,
                            position: None,
                            finished_at: Some(now_text),
                            ..state.clone()
                        };
                        return Ok(match finish(live, &state, &report).await? {
                            Step::Committed(report) => Progress::Ended(report),
                            Step::Raced => Progress::Raced,
                        });
                    }
                }
            }
            RestorePhase::Finished | RestorePhase::Abandoned(_) => {
                return Ok(Progress::Ended(Box::new(state)))
            }
        };
        state = match step {
            Step::Committed(next) => *next,
            Step::Raced => return Ok(Progress::Raced),
        };
    }
}

/// Ends a restore that cannot go on (its source could not be made, or holds another tenant), with
/// nothing written: the tenant active again, the reason in the report.
async fn abandon(
    live: &TenantDb,
    state: &Restore,
    reason: String,
    now: String,
) -> Result<Progress, StoreError> {
    let report = Restore {
        phase: RestorePhase::Abandoned(reason),
        position: None,
        finished_at: Some(now),
        ..state.clone()
    };
    Ok(match finish(live, state, &report).await? {
        Step::Committed(report) => Progress::Ended(report),
        Step::Raced => Progress::Raced,
    })
}
