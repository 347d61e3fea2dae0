//! A restore's walks in lanes (`lifecycle::lanes`): each phase's walk (the source's items while
//! putting, the live items while deleting) is dealt out to lanes planned with the record's note of
//! their number ([`plan_lanes`]), each lane stepping with its own checkpoint: a step's changes and
//! its lane's checkpoint are one transaction ([`lane_step`]), so each change is made once and
//! counted once. When every lane of a phase is done, the lanes are deleted and their counts added
//! to the record's in one transaction that also moves the restore on: to deleting, or to its end
//! ([`end_phase`]). An abort first marks every lane done and the restore abandoned in one
//! transaction ([`stop`]), so no step commits after it, then folds the lanes' counts into the
//! report ([`fold_abandoned`]).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};

use super::plan::{Change, Planned};
use super::steps::{change_actions, commit_with, finish, Step};
use super::{plan_of, sources, Counts};
use crate::identity::ids::TenantId;
use crate::identity::keys::PK;
use crate::store::client::error::StoreError;
use crate::store::client::scoped::TenantDb;
use crate::store::client::transact::TransactError;
use crate::store::lifecycle::lanes::{self, Lane};
use crate::store::lifecycle::tenant_items::{Page, Source};
use crate::store::tenancy::tenants::{Restore, RestorePhase};

/// The lanes' operation names (`TENANT#t#LANE#<name>#…`), one per walking phase.
pub const PUTTING: &str = "restore-putting";
pub const DELETING: &str = "restore-deleting";

/// A walking phase of a restore: what its lanes walk and how their steps plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    /// Putting (the source's walk) or deleting (the live walk).
    pub putting: bool,
    pub live_shards: u32,
    pub source_shards: u32,
}

impl Walk {
    /// The walk of `state`'s phase, for a tenant of `live_shards` shards; `None` when the phase
    /// walks nothing (preparing, ended).
    pub fn of(state: &Restore, live_shards: u32) -> Option<Self> {
        let putting = match state.phase {
            RestorePhase::Putting => true,
            RestorePhase::Deleting => false,
            _ => return None,
        };
        Some(Self {
            putting,
            live_shards,
            source_shards: state.source_shards.unwrap_or(live_shards),
        })
    }

    /// The name of its lanes.
    pub fn operation(&self) -> &'static str {
        match self.putting {
            true => PUTTING,
            false => DELETING,
        }
    }

    /// The partitions it walks: the source's layout while putting, the live one while deleting.
    pub fn sources(&self, tenant: &TenantId) -> Vec<Source> {
        let shards = match self.putting {
            true => self.source_shards,
            false => self.live_shards,
        };
        sources(tenant, shards)
    }

    fn phase(&self) -> RestorePhase {
        match self.putting {
            true => RestorePhase::Putting,
            false => RestorePhase::Deleting,
        }
    }
}

/// Splits `state`'s phase's walk into `count` lanes (lane 0 resuming a walk begun before restores
/// ran in lanes), with the record's note of their number, in one transaction conditioned on
/// `state`'s step: `Raced` when another call planned, stepped or ended first.
pub async fn plan_lanes(
    live: &TenantDb,
    state: &Restore,
    walk: &Walk,
    count: u32,
    now_ms: u64,
) -> Result<Step, StoreError> {
    let next = Restore {
        lanes: Some(count),
        lanes_since_ms: Some(now_ms),
        ..state.clone()
    };
    let plan = lanes::plan(
        live,
        walk.operation(),
        count,
        state.position.clone(),
        now_ms,
    )?;
    commit_with(live, state, &[], next, plan).await
}

/// Plans `page` (read from `lane`'s walk) and commits its changes with the lane's checkpoint moved
/// past it, in one transaction conditioned on the lane's step: the lane after it, or `None` when
/// another caller stepped it first (nothing of this step is written then).
pub async fn lane_step(
    live: &TenantDb,
    source: &TenantDb,
    walk: &Walk,
    lane: &Lane,
    page: &Page,
    now_ms: u64,
) -> Result<Option<Lane>, StoreError> {
    let phase = walk.phase();
    let planned = plan_of(
        live,
        source,
        &phase,
        walk.live_shards,
        walk.source_shards,
        page,
    )
    .await?;
    let next = lane.after_step(page.next.clone(), &tally(&planned), now_ms);
    let mut actions = change_actions(live, &planned)?;
    let checkpoint_at = actions.len();
    actions.push(lanes::checkpoint(live, lane, &next)?);
    match live.transact_items(actions).await {
        Ok(()) => Ok(Some(next)),
        Err(e) if e.failed_at(checkpoint_at) => Ok(None),
        Err(TransactError::Store(e)) => Err(e),
        Err(e) => Err(StoreError::Internal(format!(
            "an unconditional restore write failed its condition: {e}"
        ))),
    }
}

/// The writes a step of `planned` changes makes, as a lane counts them: `<change>/<kind>`.
fn tally(planned: &[Planned]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for p in planned {
        let change = match p.change {
            Change::PutBack(_) => "putBack",
            Change::Overwrite(_) => "overwritten",
            Change::Delete(_) => "deleted",
        };
        *counts.entry(format!("{change}/{}", p.kind)).or_default() += 1;
    }
    counts
}

/// `state`'s counts with `all`'s added.
fn with_counts_of(state: &Restore, all: &[Lane]) -> Restore {
    let mut counts = Counts::of(state);
    let (by_key, _) = lanes::totals(all);
    for (key, n) in by_key {
        let Some((change, kind)) = key.split_once('/') else {
            continue;
        };
        let into = match change {
            "putBack" => &mut counts.put_back,
            "overwritten" => &mut counts.overwritten,
            _ => &mut counts.deleted,
        };
        *into.entry(kind.to_owned()).or_default() += n;
    }
    Restore {
        put_back: counts.put_back,
        overwritten: counts.overwritten,
        deleted: counts.deleted,
        ..state.clone()
    }
}

/// Ends the phase whose lanes (`all`, every one done) walked it all: the lanes are deleted and
/// their counts added to the record's, in one transaction that moves the restore to deleting (its
/// lanes still to plan), or ends it with its report (`finished_at`) after deleting. `Raced` when
/// another call ended the phase first.
pub async fn end_phase(
    live: &TenantDb,
    state: &Restore,
    all: &[Lane],
    finished_at: String,
) -> Result<Step, StoreError> {
    let folded = with_counts_of(state, all);
    let fold = lanes::fold(live, all)?;
    match state.phase {
        RestorePhase::Putting => {
            let next = Restore {
                phase: RestorePhase::Deleting,
                position: None,
                lanes: None,
                lanes_since_ms: None,
                ..folded
            };
            commit_with(live, state, &[], next, fold).await
        }
        _ => {
            let report = Restore {
                phase: RestorePhase::Finished,
                position: None,
                lanes: None,
                finished_at: Some(finished_at),
                ..folded
            };
            finish(live, state, &report, fold).await
        }
    }
}

/// Stops `state`'s lanes for an abort (`reason`): every lane marked done (a step in flight then
/// fails its checkpoint's condition, and no later one is taken) and the restore marked abandoned,
/// in one transaction conditioned on `state`'s step. `Raced` when a phase ended or a plan was made
/// meanwhile.
pub async fn stop(live: &TenantDb, state: &Restore, reason: String) -> Result<Step, StoreError> {
    let mut stops = Vec::new();
    if let Some(walk) = Walk::of(state, 1) {
        for lane in lanes::read(live, walk.operation(), state.lanes.unwrap_or(0)).await? {
            stops.push(mark_done(live, &lane)?);
        }
    }
    let next = Restore {
        phase: RestorePhase::Abandoned(reason),
        ..state.clone()
    };
    commit_with(live, state, &[], next, stops).await
}

/// The update that marks `lane` done whatever its step, if it is still there.
fn mark_done(live: &TenantDb, lane: &Lane) -> Result<TransactWriteItem, StoreError> {
    let update = Update::builder()
        .table_name(&*live.table)
        .key(PK, AttributeValue::S(lane.pk.clone()))
        .key("SK", AttributeValue::S(lane.sk.clone()))
        .update_expression("SET #done = :true")
        .condition_expression("attribute_exists(#pk)")
        .expression_attribute_names("#done", "done")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_values(":true", AttributeValue::Bool(true))
        .build()?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// Ends the restore an abort stopped (`state`, abandoned, its lanes done): the lanes of the phase
/// it stopped in (none, before any was planned) are deleted and their counts are the report's,
/// with the tenant active again, in one transaction.
pub async fn fold_abandoned(
    live: &TenantDb,
    state: &Restore,
    finished_at: String,
) -> Result<Step, StoreError> {
    // The lanes of one phase at most are there: a phase's end deletes its lanes.
    let planned = state.lanes.unwrap_or(0);
    let mut all = lanes::read(live, PUTTING, planned).await?;
    all.extend(lanes::read(live, DELETING, planned).await?);
    let report = Restore {
        position: None,
        lanes: None,
        finished_at: Some(finished_at),
        ..with_counts_of(state, &all)
    };
    finish(live, state, &report, lanes::fold(live, &all)?).await
}
