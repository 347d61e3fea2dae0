//! Lifecycle events locally: the table's stream on DynamoDB Local, read the way a DynamoDB event
//! source mapping reads it (every shard, in order, handed over as the Lambda event), and a bus on
//! moto's EventBridge whose rule delivers what `publish-lifecycle-events` puts to an SQS queue.

use std::collections::BTreeMap;

use aws_lambda_events::dynamodb::{Event, EventRecord};
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use serde_json::{json, Value};

/// A table's stream, read from its beginning.
pub struct StreamTap {
    client: aws_sdk_dynamodbstreams::Client,
    arn: String,
    /// Each shard's next iterator; `None` once the shard is closed and read to its end.
    iterators: BTreeMap<String, Option<String>>,
}

impl StreamTap {
    pub async fn open(admin: &aws_sdk_dynamodb::Client, table: &str) -> Self {
        let sdk = shared::service::app::load_sdk_config().await;
        let endpoint = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
            .expect("AWS_ENDPOINT_URL_DYNAMODB is not set: run the tests with ./scripts/test.sh");
        let client = aws_sdk_dynamodbstreams::Client::from_conf(
            aws_sdk_dynamodbstreams::config::Builder::from(&sdk)
                .endpoint_url(endpoint)
                .build(),
        );
        let arn = admin
            .describe_table()
            .table_name(table)
            .send()
            .await
            .expect("describe the test table")
            .table
            .and_then(|t| t.latest_stream_arn)
            .expect("the table has a stream (template.yaml's StreamSpecification)");
        Self {
            client,
            arn,
            iterators: BTreeMap::new(),
        }
    }

    /// Every record committed since the last call, shard by shard in order, as the Lambda event.
    pub async fn take(&mut self) -> Event {
        let shards = self
            .client
            .describe_stream()
            .stream_arn(&self.arn)
            .send()
            .await
            .expect("describe the table's stream")
            .stream_description
            .map(|d| d.shards.unwrap_or_default())
            .unwrap_or_default();
        for shard in shards {
            let Some(id) = shard.shard_id else { continue };
            if self.iterators.contains_key(&id) {
                continue;
            }
            let iterator = self
                .client
                .get_shard_iterator()
                .stream_arn(&self.arn)
                .shard_id(&id)
                .shard_iterator_type(ShardIteratorType::TrimHorizon)
                .send()
                .await
                .expect("a shard iterator")
                .shard_iterator;
            self.iterators.insert(id, iterator);
        }
        let mut event = Event::default();
        for iterator in self.iterators.values_mut() {
            while let Some(current) = iterator.clone() {
                let out = self
                    .client
                    .get_records()
                    .shard_iterator(current)
                    .send()
                    .await
                    .expect("read the table's stream");
                let records = out.records.unwrap_or_default();
                let read = records.len();
                event.records.extend(records.into_iter().map(lambda_record));
                *iterator = out.next_shard_iterator;
                if read == 0 {
                    break;
                }
            }
        }
        event
    }
}

/// A stream record as Lambda hands it to the function.
fn lambda_record(record: aws_sdk_dynamodbstreams::types::Record) -> EventRecord {
    let mut out = EventRecord::default();
    out.event_id = record.event_id.unwrap_or_default();
    out.event_name = record
        .event_name
        .map(|n| n.as_str().to_owned())
        .unwrap_or_default();
    out.event_source = Some("aws:dynamodb".into());
    out.aws_region = "us-east-1".into();
    if let Some(change) = record.dynamodb {
        let item = |i: Option<std::collections::HashMap<_, _>>| {
            serde_dynamo::Item::from(i.unwrap_or_default())
        };
        out.change.keys = item(change.keys);
        out.change.new_image = item(change.new_image);
        out.change.old_image = item(change.old_image);
        out.change.sequence_number = change.sequence_number;
        if let Some(at) = change.approximate_creation_date_time {
            out.change.approximate_creation_date_time =
                chrono_from_secs(at.secs()).unwrap_or_default();
        }
    }
    out
}

fn chrono_from_secs(secs: i64) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(secs, 0)
}

/// A bus on moto's EventBridge with one rule (by default `source` = `pooltable`) delivering to a
/// queue.
pub struct LifecycleBus {
    pub events: aws_sdk_eventbridge::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub name: String,
    pub queue_url: String,
}

impl LifecycleBus {
    /// template.yaml's `LifecycleEventBus`, subscribed to pooltable's events.
    pub async fn create() -> Self {
        let bus = Self::subscribed("lifecycle", &[tenants::publish_events::DEFAULT_SOURCE]).await;
        crate::judge::stands_for(&bus.name, "arn:test:LifecycleEventBus");
        bus
    }

    /// A bus (named from `prefix`) whose rule delivers every event of `sources` to its queue. The
    /// events the functions put through `events` are judged (the test's own setup and puts are
    /// not): the caller names which of the template's buses this one stands for
    /// ([`crate::judge::stands_for`]).
    pub async fn subscribed(prefix: &str, sources: &[&str]) -> Self {
        for name in ["AWS_ENDPOINT_URL_EVENTBRIDGE", "AWS_ENDPOINT_URL_SQS"] {
            std::env::var(name).unwrap_or_else(|_| {
                panic!("{name} is not set: run the tests with ./scripts/test.sh (moto)")
            });
        }
        let sdk = shared::service::app::load_sdk_config().await;
        let events = aws_sdk_eventbridge::Client::from_conf(
            aws_sdk_eventbridge::config::Builder::from(&sdk)
                .interceptor(crate::judge::Judged)
                .build(),
        );
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let name = crate::unique(prefix);
        events
            .create_event_bus()
            .name(&name)
            .send()
            .await
            .expect("create a bus on moto's EventBridge");
        let queue_url = crate::import_queue::create_queue(&sqs, &name, []).await;
        let queue_arn = crate::import_queue::queue_arn(&sqs, &queue_url).await;
        events
            .put_rule()
            .name("subscriber")
            .event_bus_name(&name)
            .event_pattern(json!({ "source": sources }).to_string())
            .send()
            .await
            .expect("put the subscriber's rule");
        events
            .put_targets()
            .rule("subscriber")
            .event_bus_name(&name)
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id("queue")
                    .arn(queue_arn)
                    .build()
                    .expect("a target"),
            )
            .send()
            .await
            .expect("put the subscriber's target");
        Self {
            events,
            sqs,
            name,
            queue_url,
        }
    }

    pub fn publisher(&self) -> tenants::publish_events::Publisher {
        tenants::publish_events::Publisher::new(
            self.events.clone(),
            &self.name,
            tenants::publish_events::DEFAULT_SOURCE,
        )
    }

    /// Hands `batch` to `publisher` as `publish-lifecycle-events` does (its own requests judged
    /// against its role: [`crate::judge`]).
    pub async fn publish(
        publisher: &tenants::publish_events::Publisher,
        batch: Event,
    ) -> aws_lambda_events::streams::DynamoDbEventResponse {
        crate::judge::as_function("publish-lifecycle-events", publisher.publish(batch)).await
    }

    /// Every event delivered so far (the EventBridge envelope: `detail-type`, `source`, `detail`),
    /// removed from the queue.
    pub async fn delivered(&self) -> Vec<Value> {
        let mut events = Vec::new();
        for m in crate::import_queue::receive_all(&self.sqs, &self.queue_url).await {
            events.push(
                serde_json::from_str(m.body.as_deref().unwrap_or_default())
                    .expect("an EventBridge event"),
            );
            self.sqs
                .delete_message()
                .queue_url(&self.queue_url)
                .receipt_handle(m.receipt_handle.unwrap_or_default())
                .send()
                .await
                .expect("delete the delivered event");
        }
        events
    }
}
