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
//!    count), in lanes ([`lanes`]); each item is read at its key in the tenant's *current* layout,
//!    and put back or overwritten when it differs ([`plan::puts`]).
//! 4. **Deleting**: the walk of the live items, in lanes; each one the source does not hold is
//!    deleted ([`plan::deletes`]).
//! 5. The last phase's end makes the tenant active again with the report (`lastRestore`), after
//!    deleting a scratch table.
//!
//! Each step's changes and its lane's checkpoint (position, counts, a step number it is
//! conditioned on) are one transaction, and a phase's end folds its lanes' counts into the record
//! in one transaction, so the counts are exact, a step is all or nothing, and a restore killed
//! anywhere resumes from its last step, by a call, the lane worker or the driver. Only the routes'
//! entities are
//! restored ([`plan::restored`]); usage counters, quota windows, idempotency and import records,
//! tombstones and the record keep what they are now. Writes go through the tenant's scoped
//! client (session policy and guard); the source is read through a client that can only read the
//! tenant's keys (`TenantClients::source_reader`).

mod advance;
pub mod copies;
pub mod lanes;
pub mod plan;
pub mod point_in_time;
mod steps;
pub use advance::{abort, advance, list_aborted_copy, source_changed, Progress, Tables};
pub use steps::{begin, commit, finish, Step};

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::ids::TenantId;
use crate::identity::keys::{partition_kind, ItemKey, PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
use crate::store::lifecycle::tenant_items::{self, Budget, Page, RecordInWalk, Source};
use crate::store::tenancy::tenants::{
    read_record_consistent, TenantRecord, RECORD_SETTLED_SECONDS,
};
pub use crate::store::tenancy::tenants::{Restore, RestorePhase};
use plan::{Change, Planned};

/// Seconds from a restore's start to its first write: every container's cached record has expired,
/// and a request admitted on it has ended.
pub const STARTS_DELAY_SECONDS: u64 = RECORD_SETTLED_SECONDS;

/// Items one step walks (its changes and the checkpoint are one transaction): 25, not the 99 a
/// transaction could hold, because a 99-put transaction slowed a neighbour's reads past the
/// target in the benchmark (figure 13, docs/benchmarks.md).
pub const ITEMS_PER_STEP: usize = 25;

/// The walk of `tenant`'s restored items in a layout of `shards` write shards: the write shards and
/// the catalog (the id-named partitions), never the usage, quota or record partitions.
pub fn sources(tenant: &TenantId, shards: u32) -> Vec<Source> {
    tenant_items::sources(tenant, shards, 0, RecordInWalk::Excluded)
        .into_iter()
        .filter(|s| match s {
            Source::Partition(pk) => {
                partition_kind(tenant, pk).is_some_and(crate::identity::entities::restored)
            }
            Source::Catalog(_) => true,
            Source::Record(_) => false,
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
    #[error(
        "the source caught this tenant in the middle of a {0}: its items were then in two layouts \
         or half gone; restore from a point in time before or after it"
    )]
    Unsettled(&'static str),
    #[error(
        "the source caught this tenant in its own table ({0}): the pool's copy holds only its \
         record, and restoring from it would delete every item; restore a point in time from \
         before it moved there, or its own table with DynamoDB's point-in-time recovery"
    )]
    InItsOwnTable(String),
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
        Some(then) => match (unsettled(&then), then.own_table) {
            (Some(what), _) => Err(WrongSource::Unsettled(what)),
            (None, Some(own)) => Err(WrongSource::InItsOwnTable(own)),
            (None, None) => Ok(then.shard_count),
        },
    })
}

/// What was running on the tenant when the source was taken, if anything: its items were then
/// moving (a re-sharding: a walk of the source's shard count would miss the moved ones, and the
/// deletions would remove their live copies; a move between placements: some were in the other
/// table), going (an offboarding) or being restored.
fn unsettled(then: &TenantRecord) -> Option<&'static str> {
    use crate::store::tenancy::tenants::TenantStatus;
    if then.migration.is_some() {
        Some("re-sharding")
    } else if then.moving.is_some() {
        Some("move between placements")
    } else if then.offboarding.is_some() || then.status == TenantStatus::Offboarding {
        Some("offboarding")
    } else if then.restore.is_some() || then.status == TenantStatus::Restoring {
        Some("restore")
    } else {
        None
    }
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
    // Deleting walks the live items; every other phase, the source's.
    let (walked, shards) = match phase {
        RestorePhase::Deleting => (live, live_shards),
        _ => (source, source_shards),
    };
    let partitions = sources(&walked.tenant, shards);
    tenant_items::page(walked, &partitions, after, budget(until)).await
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
        _ => plan::puts(live, source, &page.items, live_shards).await,
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
