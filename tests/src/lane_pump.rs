//! The lane queue locally: a queue on moto's SQS and a pump that does what the lane worker's event
//! source mapping does (BatchSize 1, at most `concurrency` invocations at once): it receives
//! messages, hands each to `tenants::work_lanes::work` as a batch of one, and deletes those not
//! reported in `batchItemFailures`. A delivery can be made to fail the way deliveries fail: twice at
//! once, or its worker killed part-way or just before answering (its message not deleted: it comes
//! back after the queue's visibility timeout).

use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_sqs::types::Message;
use futures::StreamExt;
use shared::App;

use crate::import_queue::ImportQueues;

/// What happens to one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Handed to one worker, deleted unless it fails.
    Once,
    /// Handed to two workers at once (SQS's at-least-once delivery), deleted unless both fail.
    Twice,
    /// Its worker killed after this many milliseconds: not deleted.
    Killed(u64),
    /// Deleted without being handed to any worker: the lane's message is lost.
    Lost,
    /// Its worker's turn ran to its end (the lane's next turn sent) but the worker died before
    /// answering: not deleted, so the message comes back beside the next turn.
    Undeleted,
}

/// The lane queue of one test and the lanes that send to it.
pub struct LanePump {
    pub queues: ImportQueues,
    pub lanes: tenants::Lanes,
}

impl LanePump {
    /// A new queue (messages back `visibility_seconds` after a delivery that did not delete them;
    /// dead letters after 5), each turn stepping its lane for `turn`.
    pub async fn new(visibility_seconds: u32, turn: Duration) -> Self {
        let queues = ImportQueues::create(5, visibility_seconds).await;
        crate::judge::name_queue(&queues.url, "LaneQueue");
        let lanes = tenants::Lanes::on_queue(tenants::LaneQueue {
            client: queues.sqs.clone(),
            url: queues.url.clone(),
        })
        .with_turn(turn);
        Self { queues, lanes }
    }

    /// One receive of up to `batch` messages, each delivered as `fate` says for its index, at most
    /// `concurrency` workers at once; answers how many messages it received.
    pub async fn round(
        &self,
        app: &App,
        batch: usize,
        concurrency: usize,
        fate: impl Fn(usize) -> Delivery,
    ) -> usize {
        let messages = self.queues.receive(batch).await;
        let received = messages.len();
        let deliveries = messages.into_iter().enumerate().map(|(i, m)| {
            let fate = fate(i);
            async move { self.deliver(app, m, fate).await }
        });
        futures::stream::iter(deliveries)
            .buffer_unordered(concurrency)
            .collect::<Vec<()>>()
            .await;
        received
    }

    /// Rounds until the queue is empty (nothing visible, in flight or delayed), every delivery once.
    pub async fn drain(&self, app: &App, concurrency: usize) -> usize {
        let mut handled = 0;
        loop {
            let got = self.round(app, 10, concurrency, |_| Delivery::Once).await;
            handled += got;
            if got == 0 && self.queues.backlog(&self.queues.url).await == 0 {
                return handled;
            }
        }
    }

    async fn deliver(&self, app: &App, message: Message, fate: Delivery) {
        let batch = std::slice::from_ref(&message);
        let event: SqsEvent =
            serde_json::from_value(self.queues.event(batch)).expect("an SQS event");
        let work = || {
            crate::judge::as_function(
                "work-lanes",
                tenants::work_lanes::work(app, &self.lanes, event.clone()),
            )
        };
        let answer = match fate {
            Delivery::Lost => Some(serde_json::json!({"batchItemFailures": []})),
            Delivery::Once => Some(serde_json::to_value(Box::pin(work()).await).expect("json")),
            Delivery::Twice => {
                let (a, b) = tokio::join!(Box::pin(work()), Box::pin(work()));
                // Deleted unless both failed it (the second delivery would have deleted it).
                let failed = |r: &aws_lambda_events::event::sqs::SqsBatchResponse| {
                    !r.batch_item_failures.is_empty()
                };
                Some(serde_json::to_value(if failed(&a) { b } else { a }).expect("json"))
            }
            Delivery::Undeleted => {
                Box::pin(work()).await;
                None
            }
            Delivery::Killed(ms) => {
                let _ = tokio::time::timeout(Duration::from_millis(ms), Box::pin(work())).await;
                None
            }
        };
        self.queues.settle(batch, answer.as_ref()).await;
    }
}
