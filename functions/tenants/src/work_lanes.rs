//! workLanes: the lane queue's consumer (`crate::lane_queue`). Each message is one lane's turn:
//! the lane is stepped for up to [`WORK_PER_MESSAGE`] (paced at a partition's rate), then its next
//! turn goes to the back of the queue. The worker that finds every lane done folds them and
//! finishes the operation, as a call would. Charged to the platform's account, like the calls.
//!
//! A message of a tenant with no such operation running (finished, or offboarded and onboarded
//! again) is dropped. A failure (a throttle, a timeout) leaves the message for redelivery after the
//! queue's visibility timeout: the lane resumes from its last committed step.

use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use shared::identity::ids::TenantId;
use shared::isolation::policy::Scope;
use shared::store::lifecycle::lanes;
use shared::store::lifecycle::offboarding::OPERATION;
use shared::store::tenancy::tenants::read_record_consistent;
use shared::{ApiError, App};

use crate::offboard_tenant::{self, run_lane, walk_sources, LaneRun};
use crate::operation::Operation;
use crate::{LaneMessage, Lanes};

/// How long one message steps its lane unless told otherwise (the function's timeout is 30 s).
pub const WORK_PER_MESSAGE: Duration = Duration::from_secs(10);

/// What became of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// The lane was stepped and has more: its next message is on the queue.
    Sent,
    /// The lane is done (and, when it was the last, the operation folded or finished).
    Done,
    /// Another delivery of the lane stepped it first, the lane was done already, or nothing of it
    /// runs: dropped.
    Dropped,
}

/// The batch's messages, each one lane's turn, side by side; those that failed are delivered again.
pub async fn work(app: &App, runner: &Lanes, event: SqsEvent) -> SqsBatchResponse {
    let turns = event.records.iter().map(|message| async move {
        let id = message.message_id.clone().unwrap_or_default();
        let parsed = message
            .body
            .as_deref()
            .map(serde_json::from_str::<LaneMessage>);
        let Some(Ok(lane)) = parsed else {
            tracing::error!(message_id = %id, "a lane message that is not one is dropped");
            return None;
        };
        match Operation::Offboarding.charged(app, turn(app, runner, &lane)).await {
            Ok(turn) => {
                tracing::info!(tenant = %lane.tenant, lane = lane.lane, ?turn, "a lane's turn");
                None
            }
            Err(e) => {
                tracing::warn!(tenant = %lane.tenant, lane = lane.lane, error = %e, "a lane's turn failed; it is delivered again");
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

/// One turn of `message`'s lane.
pub async fn turn(app: &App, runner: &Lanes, message: &LaneMessage) -> Result<Turn, ApiError> {
    let deadline = Instant::now() + runner.turn();
    let Ok(tenant) = TenantId::parse(&message.tenant) else {
        return Ok(Turn::Dropped);
    };
    if message.operation != OPERATION {
        return Ok(Turn::Dropped);
    }
    let Some(db) = app.operator_db(&tenant, Scope::Operator).await? else {
        return Ok(Turn::Dropped);
    };
    let Some(record) = read_record_consistent(&db).await? else {
        return Ok(Turn::Dropped);
    };
    let Some(count) = record
        .offboarding
        .as_ref()
        .filter(|o| !o.walked)
        .and_then(|o| o.lanes)
    else {
        return Ok(Turn::Dropped);
    };
    let all = lanes::read(&db, OPERATION).await?;
    let Some(lane) = all.into_iter().find(|l| l.lane == message.lane) else {
        return Ok(Turn::Dropped);
    };
    if lane.done {
        return Ok(Turn::Dropped);
    }
    let sources = walk_sources(&record)?;
    match run_lane(app, &db, &sources, count, lane, deadline).await? {
        LaneRun::Raced => Ok(Turn::Dropped),
        LaneRun::OutOfTime => {
            runner
                .send(std::slice::from_ref(&LaneMessage::new(
                    &tenant,
                    OPERATION,
                    message.lane,
                )))
                .await?;
            Ok(Turn::Sent)
        }
        LaneRun::Done => {
            // The last lane done folds the lanes and finishes, as a call would (a lane still
            // running elsewhere makes this a 202: its own last turn finishes).
            offboard_tenant::advance(app, runner, &db, record).await?;
            Ok(Turn::Done)
        }
    }
}
