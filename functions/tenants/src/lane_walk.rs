//! Stepping one lane of an operation's walk (`shared::store::lifecycle::lanes`), whoever steps it:
//! a call or the driver with no lane queue, or the lane worker; for an offboarding, a re-sharding or
//! a move. What a step does is the operation's
//! ([`LaneWork`]); the loop, its pacing, its end, and the sending again of lost lanes are shared.

use std::time::Instant;

use shared::identity::keys::ItemKey;
use shared::store::client::error::StoreError;
use shared::store::client::scoped::TenantDb;
use shared::store::lifecycle::lanes::{self, Lane};
use shared::store::lifecycle::offboarding::{self, ITEMS_PER_STEP};
use shared::store::lifecycle::tenant_items::{self, Budget, Page, Source};
use shared::store::lifecycle::{moving, pacing, resharding, restoring};
use shared::{ApiError, App};

use crate::{LaneMessage, Lanes};

/// What one step of a lane does with the page its walk read.
#[derive(Debug, Clone)]
pub enum LaneWork {
    /// An offboarding's: deletes the page, in the transaction of the lane's checkpoint.
    Delete,
    /// A re-sharding's to `to` shards: moves each item whose shard changes, a few to a
    /// transaction with the lane's checkpoint past them.
    Move { to: u32 },
    /// A move's to placement `to`: relocates the page from the source table to the target, a few
    /// items to a transaction with the lane's checkpoint past them, kept in the pool.
    Relocate { to: moving::Placement },
    /// A restore's phase (`walk`): plans the page against the other table (`source` is read) and
    /// commits its changes with the lane's checkpoint, in one transaction.
    Restore {
        walk: restoring::lanes::Walk,
        source: Box<TenantDb>,
    },
}

impl LaneWork {
    /// The name of its lanes (`TENANT#t#LANE#<operation>#…`).
    pub fn operation(&self) -> &'static str {
        match self {
            LaneWork::Delete => offboarding::OPERATION,
            LaneWork::Move { .. } => resharding::OPERATION,
            LaneWork::Relocate { .. } => moving::OPERATION,
            LaneWork::Restore { walk, .. } => walk.operation(),
        }
    }

    /// Items one step of it walks: a restore's and a move's steps are smaller, so that the
    /// tenant's neighbours and its own requests wait less behind a transaction.
    fn items_per_step(&self) -> usize {
        match self {
            LaneWork::Restore { .. } => restoring::ITEMS_PER_STEP,
            LaneWork::Relocate { .. } => moving::ITEMS_PER_STEP,
            _ => ITEMS_PER_STEP,
        }
    }

    /// Where its lanes are kept: a move's in the pool, beside the record (its own source table is
    /// deleted before it ends); the others' in the tenant's table.
    pub fn lanes_db(&self, db: &TenantDb) -> TenantDb {
        match self {
            LaneWork::Relocate { .. } => db.for_record(),
            _ => db.clone(),
        }
    }

    /// What its lanes walk: a move's source table, a restore's source while putting; the others'
    /// the tenant's table.
    fn walked_db(&self, db: &TenantDb) -> Result<TenantDb, StoreError> {
        Ok(match self {
            LaneWork::Relocate { to } => db.on_table(&moving::tables(db, *to)?.0),
            LaneWork::Restore { walk, source } if walk.putting => (**source).clone(),
            _ => db.clone(),
        })
    }

    /// One step over `page`, read from `lane`'s walk: the lane after it, or `None` when another
    /// caller stepped the lane first.
    async fn step(
        &self,
        app: &App,
        db: &TenantDb,
        lane: &Lane,
        page: &Page,
    ) -> Result<Option<Lane>, StoreError> {
        let now_ms = app.clock.now_millis();
        Ok(match self {
            LaneWork::Delete => match offboarding::delete_step(db, lane, page, now_ms).await? {
                offboarding::Step::Committed(next) => Some(next),
                offboarding::Step::Raced => None,
            },
            LaneWork::Move { to } => resharding::move_step(db, lane, page, *to, now_ms).await?,
            LaneWork::Relocate { to } => moving::move_step(db, lane, page, *to, now_ms).await?,
            LaneWork::Restore { walk, source } => {
                restoring::lanes::lane_step(db, source, walk, lane, page, now_ms).await?
            }
        })
    }
}

/// How a lane's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneRun {
    /// Its walk found nothing more.
    Done,
    /// Its time was up with `steps` committed; it has more to walk.
    OutOfTime { steps: u64 },
    /// Another caller committed one of its steps first: that one walks it now.
    Raced,
    /// DynamoDB throttled its table or an index, or its partition again and again, with `steps`
    /// committed: it has more to walk after [`pacing::TABLE_THROTTLE_WAIT`].
    Throttled { steps: u64 },
}

/// Steps `lane` of `count` over `sources` until its walk is done, another caller commits one of its
/// steps first, or `deadline` passes; each step within a partition's second of writes, and the
/// next paced at a partition's rate. A step DynamoDB throttles (past the SDK's own retries) is
/// retried as its reasons say ([`pacing::throttle_scope`]): its partition's, after a backoff and
/// at half the pace each time, [`pacing::PARTITION_RETRIES`] times in a row at most; its table's
/// or an index's, not in this run ([`LaneRun::Throttled`]). A throttled step wrote nothing: a
/// step is one transaction.
pub async fn run_lane(
    app: &App,
    db: &TenantDb,
    work: &LaneWork,
    sources: &[Source],
    count: u32,
    mut lane: Lane,
    deadline: Instant,
) -> Result<LaneRun, ApiError> {
    let own = lanes::lane_sources(sources, lane.lane, count);
    let walked = work.walked_db(db)?;
    let budget = Budget {
        items: work.items_per_step(),
        bytes: pacing::STEP_BYTES,
        until: Some(deadline),
    };
    let (mut throttled, mut slowdown) = (0, 1);
    loop {
        let step_started = Instant::now();
        let stepped = async {
            let page = tenant_items::page(&walked, &own, lane.position.as_ref(), budget).await?;
            let next = work.step(app, db, &lane, &page).await?;
            Ok::<_, StoreError>((page, next))
        };
        let page = match stepped.await {
            Ok((_, None)) => return Ok(LaneRun::Raced),
            Ok((page, Some(next))) => {
                (lane, throttled) = (next, 0);
                page
            }
            Err(StoreError::Throttled { reasons }) => {
                let scope = pacing::throttle_scope(&reasons);
                throttled += 1;
                tracing::warn!(tenant = %db.tenant, operation = work.operation(), lane = lane.lane, ?reasons, ?scope, throttled, "a lane's step was throttled");
                if scope == pacing::ThrottleScope::Table || throttled > pacing::PARTITION_RETRIES {
                    return Ok(LaneRun::Throttled { steps: lane.steps });
                }
                slowdown = (slowdown * 2).min(16);
                tokio::time::sleep(pacing::partition_backoff(throttled)).await;
                if Instant::now() >= deadline {
                    return Ok(LaneRun::OutOfTime { steps: lane.steps });
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if lane.done {
            return Ok(LaneRun::Done);
        }
        // Paced before the call may end, so the next step, here or in any container, starts
        // when the partition has taken this one (a step is at most about half a second of it).
        let units = pacing::transactional_write_units(&page.items);
        pacing::pace_slowed(step_started, units, slowdown).await;
        if Instant::now() >= deadline {
            return Ok(LaneRun::OutOfTime { steps: lane.steps });
        }
    }
}

/// Steps every lane of `pending` side by side until `deadline`: what a call or the driver does with
/// no lane queue.
pub async fn run_lanes(
    app: &App,
    db: &TenantDb,
    work: &LaneWork,
    sources: &[Source],
    count: u32,
    pending: Vec<Lane>,
    deadline: Instant,
) -> Result<(), ApiError> {
    let runs = pending.into_iter().map(|lane| async move {
        run_lane(app, db, work, sources, count, lane, deadline)
            .await
            .map(|_| ())
    });
    futures::future::try_join_all(runs).await.map(|_| ())
}

/// How many lanes to plan for a walk of `sources`: the operator's `asked` for this operation, else
/// `LIFECYCLE_LANES`; one when the walk began before the operation ran in lanes (`position`: it goes
/// on as lane 0, from where it was).
fn lanes_to_plan(app: &App, position: &Option<ItemKey>, asked: Option<u32>, sources: usize) -> u32 {
    let asked = match position {
        Some(_) => 1,
        None => asked.unwrap_or(app.settings.lifecycle_lanes),
    };
    lanes::lane_count(asked, sources)
}

/// The lanes an operator asks an operation to run in (`?lanes=`, taken when it starts): 1 to
/// [`lanes::MAX_LANES`], or 400.
pub fn asked_lanes(req: &lambda_http::Request) -> Result<Option<u32>, ApiError> {
    let Some(text) = shared::service::http::query_param(req, "lanes")? else {
        return Ok(None);
    };
    match text.parse::<u32>() {
        Ok(n) if (1..=lanes::MAX_LANES).contains(&n) => Ok(Some(n)),
        _ => Err(ApiError::bad_request(
            "lanes",
            format!(
                "lanes is a whole number from 1 to {}: how many lanes the operation runs in",
                lanes::MAX_LANES
            ),
        )),
    }
}

/// Sends every lane of a plan of `count` lanes of `work` to the queue, then notes each as sent
/// (`lanes::mark_sent`): a lane planned and never noted was never sent (the send failed), and is
/// sent again after [`UNSENT_AFTER_MS`], not [`LOST_AFTER_MS`].
async fn send_all(
    app: &App,
    runner: &Lanes,
    db: &TenantDb,
    work: &LaneWork,
    count: u32,
) -> Result<(), ApiError> {
    let all: Vec<LaneMessage> = (0..count)
        .map(|lane| LaneMessage::new(&db.tenant, work.operation(), lane, 0))
        .collect();
    runner.send(&*app.cursor_keys()?, &all).await?;
    if runner.queued() {
        let kept = work.lanes_db(db);
        let noted = (0..count).map(|lane| lanes::mark_sent(&kept, work.operation(), lane, 0));
        futures::future::try_join_all(noted).await?;
    }
    Ok(())
}

/// A lane planned this long ago, never stepped and never noted sent, was not sent: its plan's send
/// failed (SQS refused it, or its caller died first). Long enough for a planner's own send and note.
pub const UNSENT_AFTER_MS: u64 = 10 * 1000;

/// A lane not stepped for this long has lost its message (a worker failed it past the queue's
/// receive limit, or died before sending its next one): it is sent again. Longer than a message's
/// turn takes to come round the queue but in a crowded hour; a lane sent again while its message
/// was only slow has two messages of one step number, and the one delivered second is dropped.
pub const LOST_AFTER_MS: u64 = 5 * 60 * 1000;

/// Sends again each of `pending` not stepped for [`LOST_AFTER_MS`], or planned and not sent for
/// [`UNSENT_AFTER_MS`], once it is noted as sent (`lanes::touch`, conditioned on its step: a lane
/// stepped meanwhile is not lost), and notes its step number as the newest sent once it is on the
/// queue (`lanes::mark_sent`).
pub async fn resend_lost(
    app: &App,
    runner: &Lanes,
    db: &TenantDb,
    work: &LaneWork,
    pending: &[Lane],
) -> Result<(), ApiError> {
    let now_ms = app.clock.now_millis();
    let kept = work.lanes_db(db);
    let (mut lost, mut lost_lanes) = (Vec::new(), Vec::new());
    for lane in pending {
        let idle = now_ms.saturating_sub(lane.stepped_at_ms);
        let unsent = lane.steps == 0 && lane.sent_steps.is_none();
        if (idle >= LOST_AFTER_MS || unsent && idle >= UNSENT_AFTER_MS)
            && lanes::touch(&kept, lane, now_ms).await?
        {
            lost_lanes.push(lane);
            lost.push(LaneMessage::new(
                &db.tenant,
                work.operation(),
                lane.lane,
                lane.steps,
            ));
        }
    }
    if !lost.is_empty() {
        tracing::warn!(tenant = %db.tenant, lanes = lost.len(), "lanes never sent, or not stepped for 5 minutes, are sent again");
        runner.send(&*app.cursor_keys()?, &lost).await?;
        for lane in lost_lanes {
            lanes::mark_sent(&kept, work.operation(), lane.lane, lane.steps).await?;
        }
    }
    Ok(())
}

/// Steps or sends `work`'s lanes not yet done, as `runner` says (on the queue: only the lost ones
/// are sent again; else all are stepped here until `deadline`), then reads every lane again.
pub async fn advance_lanes(
    app: &App,
    runner: &Lanes,
    db: &TenantDb,
    work: &LaneWork,
    sources: &[Source],
    count: u32,
    deadline: Instant,
) -> Result<Vec<Lane>, ApiError> {
    let kept = work.lanes_db(db);
    let pending: Vec<Lane> = lanes::read(&kept, work.operation(), count)
        .await?
        .into_iter()
        .filter(|lane| !lane.done)
        .collect();
    if runner.queued() {
        resend_lost(app, runner, db, work, &pending).await?;
    } else if !pending.is_empty() {
        run_lanes(app, db, work, sources, count, pending, deadline).await?;
    }
    Ok(lanes::read(&kept, work.operation(), count).await?)
}

/// What an operation's lanes come to after [`walk`].
#[derive(Debug)]
pub enum LanesNow {
    /// Another caller planned them, or ended them, first: read the record again.
    Raced,
    /// Some are not done: every lane, as read after the call's work.
    Running(Vec<Lane>),
    /// Every lane planned is done: the operation (or a restore's phase) can end with them.
    AllDone(Vec<Lane>),
}

/// An operation's walk in lanes, as [`walk`] takes it.
pub struct Walk<'a> {
    /// What its lanes' steps do.
    pub work: &'a LaneWork,
    /// The partitions its lanes are dealt.
    pub sources: &'a [Source],
    /// Its lanes, once planned.
    pub planned: Option<u32>,
    /// Where a walk begun before the operation ran in lanes stands (it goes on as lane 0).
    pub position: &'a Option<ItemKey>,
    /// The lanes its operator asked for, else `LIFECYCLE_LANES`.
    pub asked: Option<u32>,
}

/// What every operation's call, driver run and last lane worker do with its lanes: plans them
/// unless they are (`plan`: the operation's transaction of the lanes with its record's note of
/// their number, `false` when another caller planned first) and sends them to the queue; then, on
/// the queue, sends again those nobody stepped for a while, or, with none, steps every lane not
/// yet done side by side until `deadline` ([`advance_lanes`]); and says where they stand.
pub async fn walk<Planning>(
    app: &App,
    runner: &Lanes,
    db: &TenantDb,
    walk: Walk<'_>,
    deadline: Instant,
    plan: impl FnOnce(u32) -> Planning,
) -> Result<LanesNow, ApiError>
where
    Planning: std::future::Future<Output = Result<bool, ApiError>>,
{
    let count = match walk.planned {
        Some(count) => count,
        None => {
            let count = lanes_to_plan(app, walk.position, walk.asked, walk.sources.len());
            if !plan(count).await? {
                return Ok(LanesNow::Raced);
            }
            send_all(app, runner, db, walk.work, count).await?;
            count
        }
    };
    let all = advance_lanes(app, runner, db, walk.work, walk.sources, count, deadline).await?;
    let every = all.iter().all(|lane| lane.done);
    Ok(match (all.len() == count as usize, every) {
        (true, true) => LanesNow::AllDone(all),
        // Fewer than planned, every one done: another call ended the operation meanwhile.
        (false, true) => LanesNow::Raced,
        _ => LanesNow::Running(all),
    })
}
