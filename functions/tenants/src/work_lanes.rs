//! workLanes: the lane queue's consumer (`crate::lane_queue`). Each message is one lane's turn of
//! an offboarding, a re-sharding, a move or a restore's phase: the lane is stepped for its turn (`Lanes::turn`, 10 s unless
//! told otherwise; paced at a partition's rate), then its next turn goes to the back of the queue.
//! The worker that finds every lane done ends the operation, as a call would. Charged to the
//! platform's account, like the calls.
//!
//! A message not signed with the platform's signing keys steps nothing (`crate::lane_queue`): it
//! is delivered again, and ends in the lane dead-letter queue unless a worker comes to know its
//! key. A message of a tenant with no such operation running (finished, or offboarded and onboarded
//! again) is dropped. A failure (a throttle, a timeout) leaves the message for redelivery after the
//! queue's visibility timeout: the lane resumes from its last committed step.

use std::time::Instant;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use shared::identity::ids::TenantId;
use shared::isolation::policy::Scope;
use shared::store::lifecycle::lanes;
use shared::store::lifecycle::tenant_items::Source;
use shared::store::lifecycle::{moving, offboarding, resharding, restoring};
use shared::store::tenancy::tenants::{read_record_consistent, TenantRecord};
use shared::{ApiError, App};

use crate::lane_walk::{run_lane, LaneRun, LaneWork};
use crate::offboard_tenant;
use crate::operation::Operation;
use crate::restore_tenant::Stepper;
use crate::{LaneMessage, Lanes, LANE_SIGNATURE_ATTRIBUTE};

/// What became of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// The lane was stepped and has more: its next message is on the queue.
    Sent,
    /// The lane is done (and, when it was the last, the operation folded or finished).
    Done,
    /// Another delivery of the lane stepped it first or since this one was sent (a stale copy),
    /// the lane was done already, or nothing of it runs: dropped.
    Dropped,
}

/// The batch's messages, each one lane's turn, side by side; those that failed are delivered again.
pub async fn work(app: &App, runner: &Lanes, event: SqsEvent) -> SqsBatchResponse {
    let keys = match app.cursor_keys() {
        Ok(keys) => keys,
        Err(e) => {
            tracing::warn!(error = %e, "the signing keys are unavailable; the batch is delivered again");
            let mut response = SqsBatchResponse::default();
            for message in &event.records {
                response.add_failure(message.message_id.clone().unwrap_or_default());
            }
            return response;
        }
    };
    let keys = &*keys;
    let turns = event.records.iter().map(|message| async move {
        let id = message.message_id.clone().unwrap_or_default();
        let signature = message
            .message_attributes
            .get(LANE_SIGNATURE_ATTRIBUTE)
            .and_then(|a| a.string_value.as_deref());
        let verified = message
            .body
            .as_deref()
            .and_then(|body| LaneMessage::verified(keys, body, signature));
        let Some(lane) = verified else {
            // Never stepped, and never deleted at once: it may be signed with a key this container
            // does not know yet (a rotation that reached the sender first). Delivered again, it
            // is stepped once a worker knows the key; otherwise it ends in the lane dead-letter
            // queue for a person, and its lane, if it is one, is sent again (`LOST_AFTER_MS`).
            tracing::error!(
                alarm = "forged_lane_message",
                message_id = %id,
                "a lane message whose signature does not verify (forged, or a key this worker does not know yet): not stepped, delivered again"
            );
            app.emit_event(&[("ForgedLaneMessages", 1.0)], &[("messageId", &id)]);
            return Some(id);
        };
        // Charged to the platform's account under the route a call of the operation is.
        let operation = operation_of(&lane);
        match operation.charged(app, turn(app, runner, &lane)).await {
            Ok(turn) => {
                tracing::info!(tenant = %lane.tenant, operation = %lane.operation, lane = lane.lane, ?turn, "a lane's turn");
                None
            }
            Err(e) => {
                tracing::warn!(tenant = %lane.tenant, operation = %lane.operation, lane = lane.lane, error = %e, "a lane's turn failed; it is delivered again");
                Some(id)
            }
        }
    });
    let failed = futures::future::join_all(turns).await;
    app.flush_platform_usage().await;
    let mut response = SqsBatchResponse::default();
    for id in failed.into_iter().flatten() {
        response.add_failure(id);
    }
    response
}

/// The operation whose lane `message` is.
fn operation_of(message: &LaneMessage) -> Operation {
    match message.operation.as_str() {
        resharding::OPERATION => Operation::Resharding,
        moving::OPERATION => Operation::Moving,
        restoring::lanes::PUTTING | restoring::lanes::DELETING => Operation::Restoring,
        _ => Operation::Offboarding,
    }
}

/// One turn of `message`'s lane.
pub async fn turn(app: &App, runner: &Lanes, message: &LaneMessage) -> Result<Turn, ApiError> {
    let deadline = Instant::now() + runner.turn();
    let Ok(tenant) = TenantId::parse(&message.tenant) else {
        return Ok(Turn::Dropped);
    };
    let Some(db) = app.operator_db(&tenant, Scope::Operator).await? else {
        return Ok(Turn::Dropped);
    };
    let Some(record) = read_record_consistent(&db).await? else {
        return Ok(Turn::Dropped);
    };
    // The operation the message names, running in lanes, and what its lanes walk.
    let (work, count, sources) = match in_lanes(app, &tenant, &record, message).await? {
        InLanes::Walking(work, count, sources) => (work, count, sources),
        InLanes::Nothing => return Ok(Turn::Dropped),
        // A restore's source replaced or deleted since it began: the call below ends it
        // (abandoned) before anything more is read from it.
        InLanes::SourceChanged => {
            crate::restore_tenant::advance(app, runner, &db, record, Stepper::LaneWorker).await?;
            return Ok(Turn::Dropped);
        }
    };
    let lanes_db = work.lanes_db(&db);
    let Some(lane) = lanes::read_one(&lanes_db, work.operation(), message.lane).await? else {
        return Ok(Turn::Dropped);
    };
    // A copy older than the lane's newest turn sent (SQS delivering it again, a worker that died
    // after sending the next turn, a lane sent again while its message was only slow): that turn
    // goes round, and this one is dropped, so copies never pile up. A lane stepped with no turn
    // sent after (a worker that died between its steps and its next turn, a caller with no
    // queue) keeps its newest message live.
    if lane.done || message.is_stale_for(lane.sent_steps) {
        return Ok(Turn::Dropped);
    }
    // A turn ahead of its lane's committed steps was sent for an earlier lane of this key: an
    // operation of the same kind ended and began again (a re-sharding after another, a restore
    // aborted and started again), and this copy outlived it. Its lane is not this one's.
    if message.steps.is_some_and(|steps| steps > lane.steps) {
        return Ok(Turn::Dropped);
    }
    // A turn newer than its lane notes (its sender's note not yet written, or lost): noted here,
    // and the lane read again, so that the sender's note landing during this turn cannot cancel
    // its steps as a stale copy's and leave the lane with no message at all.
    let lane = match message.steps {
        Some(steps) if lane.sent_steps.is_none_or(|sent| sent < steps) => {
            lanes::mark_sent(&lanes_db, work.operation(), message.lane, steps).await?;
            match lanes::read_one(&lanes_db, work.operation(), message.lane).await? {
                Some(lane) if !lane.done && !message.is_stale_for(lane.sent_steps) => lane,
                _ => return Ok(Turn::Dropped),
            }
        }
        _ => lane,
    };
    // The tenant's key refuses (revoked): the lane is left as it is, and its turn waits on the
    // queue (as a throttled table's does) until the key is usable again.
    if !operation_of(message).may_go_on(app, &tenant).await {
        return wait_a_turn(app, runner, &lanes_db, &lane, message).await;
    }
    let before = lane.clone();
    match run_lane(app, &db, &work, &sources, count, lane, deadline).await? {
        LaneRun::Raced => Ok(Turn::Dropped),
        LaneRun::OutOfTime { steps } => {
            let next = LaneMessage::new(&tenant, work.operation(), message.lane, steps);
            send_turn(app, runner, &lanes_db, &next, None).await?;
            Ok(Turn::Sent)
        }
        // Its table is throttled: its next turn waits on the queue, so every lane backs off.
        // (A turn that committed steps before the throttle has noted its lane alive with them.)
        LaneRun::Throttled { steps } => {
            let next = LaneMessage::new(&tenant, work.operation(), message.lane, steps);
            if steps > before.steps {
                send_turn(app, runner, &lanes_db, &next, Some(runner.throttle_wait())).await?;
                return Ok(Turn::Sent);
            }
            wait_a_turn(app, runner, &lanes_db, &before, &next).await
        }
        LaneRun::Done => {
            // The last lane done ends the operation, as a call would (a lane still running
            // elsewhere makes this a 202: its own last turn ends it).
            match work {
                LaneWork::Delete => offboard_tenant::advance(app, runner, &db, record).await?,
                LaneWork::Move { .. } => {
                    crate::reshard_tenant::migrate(app, runner, &db, record, deadline).await?
                }
                LaneWork::Relocate { .. } => {
                    crate::move_tenant::advance(app, runner, &db, record, deadline).await?
                }
                LaneWork::Restore { .. } => {
                    crate::restore_tenant::advance(app, runner, &db, record, Stepper::LaneWorker)
                        .await?
                }
            };
            Ok(Turn::Done)
        }
    }
}

/// Puts `lane`'s turn `next` back on the queue after the throttle wait, the lane left as it is (its
/// key refuses, or its table is throttled): first noted as alive (`lanes::touch`), so the driver
/// never takes a lane that only waits for lost and sends a copy of it every
/// [`crate::lane_walk::LOST_AFTER_MS`]. A lane stepped or noted alive meanwhile by another copy of
/// the same turn (an SQS duplicate, one sent again while this one was only slow) is that copy's:
/// this one is dropped.
async fn wait_a_turn(
    app: &App,
    runner: &Lanes,
    lanes_db: &shared::store::client::scoped::TenantDb,
    lane: &lanes::Lane,
    next: &LaneMessage,
) -> Result<Turn, ApiError> {
    match lanes::touch(lanes_db, lane, app.clock.now_millis()).await {
        Ok(true) => {}
        Ok(false) => return Ok(Turn::Dropped),
        // The lanes' table throttled too, most likely: the turn is kept all the same (at worst the
        // driver sends a copy of a lane it takes as lost, which one step drops).
        Err(e) => {
            tracing::warn!(tenant = %next.tenant, lane = next.lane, error = %e, "a waiting lane could not be noted alive; its turn is sent all the same")
        }
    }
    send_turn(app, runner, lanes_db, next, Some(runner.throttle_wait())).await?;
    Ok(Turn::Sent)
}

/// Puts `next` on the queue (after `wait`, when given), then notes it as its lane's newest turn
/// sent. A failed send fails the turn, whose own message is then delivered again: the lane never
/// has none. A failed note does not: `next` notes itself when delivered (a turn newer than its lane
/// notes), where failing would bring the turn's own message back beside `next`, one copy more for
/// every turn whose note fails (the lanes' table throttled, as it is when its lanes back off).
async fn send_turn(
    app: &App,
    runner: &Lanes,
    lanes_db: &shared::store::client::scoped::TenantDb,
    next: &LaneMessage,
    wait: Option<std::time::Duration>,
) -> Result<(), ApiError> {
    let keys = app.cursor_keys()?;
    let sent = std::slice::from_ref(next);
    match wait {
        Some(wait) => runner.send_after(&keys, sent, wait).await?,
        None => runner.send(&keys, sent).await?,
    }
    if let Some(steps) = next.steps {
        if let Err(e) = lanes::mark_sent(lanes_db, &next.operation, next.lane, steps).await {
            tracing::warn!(tenant = %next.tenant, lane = next.lane, error = %e,
                "a lane's next turn was sent but not noted; it notes itself when delivered");
        }
    }
    Ok(())
}

/// What the operation a lane message names is doing in `record`.
enum InLanes {
    /// It runs in lanes: their work, their count, and what they walk.
    Walking(LaneWork, u32, Vec<Source>),
    /// It does not run in lanes (finished, or another tenant of this id): the message is dropped.
    Nothing,
    /// A restore whose source was replaced or deleted since it began: to be ended, not stepped.
    SourceChanged,
}

/// What `message`'s operation is doing in `tenant`'s `record`, as [`InLanes`] tells it.
async fn in_lanes(
    app: &App,
    tenant: &TenantId,
    record: &TenantRecord,
    message: &LaneMessage,
) -> Result<InLanes, ApiError> {
    Ok(match message.operation.as_str() {
        offboarding::OPERATION => match record.offboarding.as_ref() {
            Some(o) if !o.walked && o.lanes.is_some() => InLanes::Walking(
                LaneWork::Delete,
                o.lanes.unwrap_or(1),
                offboard_tenant::walk_sources(record)?,
            ),
            _ => InLanes::Nothing,
        },
        resharding::OPERATION => match record.migration.as_ref() {
            Some(m) if m.lanes.is_some() => InLanes::Walking(
                LaneWork::Move { to: m.to },
                m.lanes.unwrap_or(1),
                resharding::sharded_sources(tenant, m.from),
            ),
            _ => InLanes::Nothing,
        },
        moving::OPERATION => match record.moving.as_ref() {
            Some(m) if m.lanes.is_some() => InLanes::Walking(
                LaneWork::Relocate { to: m.to },
                m.lanes.unwrap_or(1),
                moving::sources(tenant, record),
            ),
            _ => InLanes::Nothing,
        },
        restoring::lanes::PUTTING | restoring::lanes::DELETING => {
            restore_in_lanes(app, tenant, record, message).await?
        }
        _ => InLanes::Nothing,
    })
}

/// [`in_lanes`] for a restore's walking phase: the phase the message names must be the one
/// running, and its source the one the restore began with.
async fn restore_in_lanes(
    app: &App,
    tenant: &TenantId,
    record: &TenantRecord,
    message: &LaneMessage,
) -> Result<InLanes, ApiError> {
    let Some(state) = record.restore.as_ref().filter(|r| r.lanes.is_some()) else {
        return Ok(InLanes::Nothing);
    };
    let Some(walk) = restoring::lanes::Walk::of(state, record.shard_count)
        .filter(|walk| walk.operation() == message.operation)
    else {
        return Ok(InLanes::Nothing);
    };
    // The source is checked at each turn: one replaced or deleted since the restore began ends it
    // (abandoned, by `turn`) before anything more is read from it.
    let source = app.tenants.source_reader(tenant, &state.source_table);
    let manager = app.tenants.table_manager();
    let tables = restoring::Tables {
        source: &source,
        manager: &manager,
        pool: app.tenants.table_name(),
        may_start_copy: false,
    };
    if restoring::source_changed(&tables, &record.tenant_id, state)
        .await?
        .is_some()
    {
        return Ok(InLanes::SourceChanged);
    }
    Ok(InLanes::Walking(
        LaneWork::Restore {
            source: Box::new(source.clone()),
            walk: walk.clone(),
        },
        state.lanes.unwrap_or(1),
        walk.sources(tenant),
    ))
}
