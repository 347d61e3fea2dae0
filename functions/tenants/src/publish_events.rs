//! `publish-lifecycle-events`: the table's stream → EventBridge.
//!
//! A DynamoDB stream event source mapping (`ReportBatchItemFailures`, filtered to tenant records and
//! the notes of imports' ends on the driver's deadline list) hands this function the changes in commit order; each record becomes the lifecycle
//! events [`shared::store::lifecycle::events::events_of`] reads in it, put on the bus
//! (`EVENT_BUS_NAME`) with source `EVENT_SOURCE` (default `pooltable`). A change is published
//! only once it committed (the stream holds nothing else), and never lost: when a put fails, the
//! answer names the first record not fully published, and Lambda hands it (and every record after
//! it) over again, for as long as the stream keeps it (24 hours). An event can then go out twice;
//! its `detail.eventId` (the stream record's id and the detail-type) is the same both times, for a
//! subscriber that must not count one twice. A record whose images cannot be read (only a bug
//! writes one) would fail the same way forever and hold up every later record of its shard: it is
//! logged with its keys, counted (`UnreadableLifecycleRecords`, which an alarm watches) and passed.

use aws_lambda_events::dynamodb::{Event, EventRecord};
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use aws_sdk_eventbridge::primitives::DateTime;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use shared::service::app::{env_var, env_var_or, lambda_sdk_config, ConfigError};
use shared::service::metrics::{event_line, MetricsSink};
use shared::store::lifecycle::events::{events_of, Change, LifecycleEvent};

/// PutEvents takes at most 10 entries.
const ENTRIES_PER_PUT: usize = 10;

/// The source every event carries unless `EVENT_SOURCE` names another.
pub const DEFAULT_SOURCE: &str = "pooltable";

pub struct Publisher {
    client: aws_sdk_eventbridge::Client,
    bus: String,
    source: String,
    metrics: MetricsSink,
}

impl Publisher {
    pub fn new(client: aws_sdk_eventbridge::Client, bus: &str, source: &str) -> Self {
        Self {
            client,
            bus: bus.to_owned(),
            source: source.to_owned(),
            metrics: MetricsSink::from_env(),
        }
    }

    /// The same publisher, writing its metrics lines to `metrics` (tests read them).
    pub fn with_metrics(self, metrics: MetricsSink) -> Self {
        Self { metrics, ..self }
    }

    pub fn metrics(&self) -> &MetricsSink {
        &self.metrics
    }

    /// `EVENT_BUS_NAME` (required) and `EVENT_SOURCE`, with the functions' SDK settings.
    pub fn from_env() -> Result<Self, ConfigError> {
        let bus = env_var("EVENT_BUS_NAME")?;
        let source = env_var_or("EVENT_SOURCE", DEFAULT_SOURCE.to_owned())?;
        let client = aws_sdk_eventbridge::Client::new(&lambda_sdk_config()?);
        Ok(Self::new(client, &bus, &source))
    }

    /// Publishes the batch's events in order; answers which record to resume from when a put
    /// failed (none: all published).
    pub async fn publish(&self, batch: Event) -> DynamoDbEventResponse {
        let mut pending: Vec<(usize, PutEventsRequestEntry)> = Vec::new();
        for (index, record) in batch.records.iter().enumerate() {
            match self.entries(record) {
                Ok(entries) => pending.extend(entries.into_iter().map(|e| (index, e))),
                Err(e) => self.pass_unreadable(record, &e),
            }
        }
        let mut failed_at = None;
        for chunk in pending.chunks(ENTRIES_PER_PUT) {
            if let Some(index) = self.put(chunk).await {
                failed_at = Some(index);
                break;
            }
        }
        let mut response = DynamoDbEventResponse::default();
        if let Some(index) = failed_at {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = batch.records[index].change.sequence_number.clone();
            response.batch_item_failures.push(failure);
        }
        response
    }

    fn pass_unreadable(
        &self,
        record: &EventRecord,
        error: &shared::store::lifecycle::events::ImageError,
    ) {
        let keys = serde_json::to_string(&record.change.keys).unwrap_or_default();
        tracing::error!(%error, event_id = %record.event_id, sequence_number = ?record.change.sequence_number, keys, "a stream record could not be read; passed without its events");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.metrics.emit(event_line(
            &self.metrics.publisher,
            now,
            &[("UnreadableLifecycleRecords", 1.0)],
            &[("eventId", &record.event_id)],
        ));
    }

    fn entries(
        &self,
        record: &EventRecord,
    ) -> Result<Vec<PutEventsRequestEntry>, shared::store::lifecycle::events::ImageError> {
        let Some(change) = Change::parse(&record.event_name) else {
            return Ok(Vec::new());
        };
        let image = |i: &serde_dynamo::Item| (!i.is_empty()).then_some(i.clone());
        let (old, new) = (
            image(&record.change.old_image),
            image(&record.change.new_image),
        );
        let events = events_of(change, &record.event_id, old.as_ref(), new.as_ref())?;
        let at = DateTime::from_millis(
            record
                .change
                .approximate_creation_date_time
                .timestamp_millis(),
        );
        Ok(events.into_iter().map(|e| self.entry(e, at)).collect())
    }

    fn entry(&self, event: LifecycleEvent, at: DateTime) -> PutEventsRequestEntry {
        PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus)
            .source(&self.source)
            .detail_type(event.detail_type)
            .detail(event.detail.to_string())
            .time(at)
            .build()
    }

    /// Puts one chunk; `Some(record index)` of the first entry not put.
    async fn put(&self, chunk: &[(usize, PutEventsRequestEntry)]) -> Option<usize> {
        let entries = chunk.iter().map(|(_, e)| e.clone()).collect();
        match self
            .client
            .put_events()
            .set_entries(Some(entries))
            .send()
            .await
        {
            Ok(out) if out.failed_entry_count() == 0 => None,
            Ok(out) => {
                let first = out
                    .entries()
                    .iter()
                    .position(|e| e.error_code().is_some())
                    .unwrap_or(0);
                let error = out.entries().get(first).and_then(|e| e.error_message());
                tracing::warn!(
                    failed = out.failed_entry_count(),
                    ?error,
                    "PutEvents refused entries; the batch resumes from the first"
                );
                Some(chunk[first].0)
            }
            Err(e) => {
                tracing::warn!(error = %aws_sdk_eventbridge::error::DisplayErrorContext(&e), "PutEvents failed; the batch resumes from its first entry");
                Some(chunk[0].0)
            }
        }
    }
}
