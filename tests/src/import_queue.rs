//! The import queue locally: queues on moto's SQS, the consumer binary as a Lambda process on the
//! test Runtime API, and a poller that does what an event source mapping does. It receives messages,
//! delivers them as one SQS event (the `aws_lambda_events` JSON Lambda sends) to the consumer, then
//! deletes those the consumer did not report in `batchItemFailures`. After a failed or lost
//! invocation it deletes nothing, and the messages come back once their visibility timeout passes.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName, QueueAttributeName,
};
use serde_json::{json, Value};

use crate::runtime_api::{function_env, RuntimeApi};

/// A queue and its dead-letter queue, made for one test.
pub struct ImportQueues {
    pub sqs: aws_sdk_sqs::Client,
    pub url: String,
    pub arn: String,
    pub dlq_url: String,
    pub max_receives: u32,
}

impl ImportQueues {
    /// New queues: messages reach the dead-letter queue after `max_receives` deliveries, and come
    /// back `visibility_seconds` after a delivery that did not delete them.
    pub async fn create(max_receives: u32, visibility_seconds: u32) -> Self {
        let sdk = shared::service::app::load_sdk_config().await;
        std::env::var("AWS_ENDPOINT_URL_SQS").unwrap_or_else(|_| {
            panic!("AWS_ENDPOINT_URL_SQS is not set: run the tests with ./scripts/test.sh (moto's SQS)")
        });
        // The queues are the test's to make (never judged, even when made in a function's call);
        // the client kept is judged: the functions' messages go through it.
        let admin = aws_sdk_sqs::Client::new(&sdk);
        let sqs = aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::config::Builder::from(&sdk)
                .interceptor(crate::judge::Judged)
                .build(),
        );
        let name = crate::unique("imports");
        let dlq_url = create_queue(&admin, &format!("{name}-dlq"), []).await;
        let dlq_arn = queue_arn(&admin, &dlq_url).await;
        let redrive =
            json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receives.to_string()});
        let attributes = [
            (QueueAttributeName::RedrivePolicy, redrive.to_string()),
            (
                QueueAttributeName::VisibilityTimeout,
                visibility_seconds.to_string(),
            ),
        ];
        let url = create_queue(&admin, &name, attributes).await;
        // Its producer is create-import's (LanePump names it again for its lanes).
        crate::judge::name_queue(&url, "ImportQueue");
        let arn = queue_arn(&admin, &url).await;
        Self {
            sqs,
            url,
            arn,
            dlq_url,
            max_receives,
        }
    }

    /// New queues whose URL names none (`<queues' URL>-missing`): create-import's queue, gone.
    pub async fn unreachable(queues: &ImportQueues) -> Self {
        let url = format!("{}-missing", queues.url);
        crate::judge::name_queue(&url, "ImportQueue");
        Self {
            url,
            ..Self::create(3, 1).await
        }
    }

    /// The producer's side, for `create-import`.
    pub fn producer(&self) -> imports::ImportQueue {
        imports::ImportQueue {
            client: self.sqs.clone(),
            url: self.url.clone(),
        }
    }

    /// Messages on the queue, visible, in flight, or delayed (a copy the consumer deferred).
    pub async fn backlog(&self, url: &str) -> u64 {
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .expect("queue attributes");
        out.attributes()
            .map(|a| a.values().filter_map(|v| v.parse::<u64>().ok()).sum())
            .unwrap_or(0)
    }

    /// Every message on the dead-letter queue (received, not deleted).
    pub async fn dead_letters(&self) -> Vec<Message> {
        receive_all(&self.sqs, &self.dlq_url).await
    }

    /// Receives up to `batch_size` messages (in receives of up to 10, as an event source mapping's
    /// batching window gathers them) without waiting long for more.
    pub async fn receive(&self, batch_size: usize) -> Vec<Message> {
        let mut batch = Vec::new();
        while batch.len() < batch_size {
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.url)
                .max_number_of_messages((batch_size - batch.len()).min(10) as i32)
                .wait_time_seconds(if batch.is_empty() { 1 } else { 0 })
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .message_attribute_names("All")
                .send()
                .await
                .expect("receive from the import queue");
            let got = out.messages.unwrap_or_default();
            if got.is_empty() {
                break;
            }
            batch.extend(got);
        }
        batch
    }

    /// Deletes the messages of `batch` not named in the consumer's `answer`; with no answer (the
    /// invocation failed or was lost), none.
    pub async fn settle(&self, batch: &[Message], answer: Option<&Value>) -> usize {
        let Some(answer) = answer else { return 0 };
        let again: Vec<&str> = answer["batchItemFailures"]
            .as_array()
            .map(|f| {
                f.iter()
                    .filter_map(|f| f["itemIdentifier"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        let done: Vec<&Message> = batch
            .iter()
            .filter(|m| !again.contains(&m.message_id().unwrap_or_default()))
            .collect();
        for chunk in done.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(m.receipt_handle().unwrap_or_default())
                        .build()
                        .unwrap()
                })
                .collect();
            self.sqs
                .delete_message_batch()
                .queue_url(&self.url)
                .set_entries(Some(entries))
                .send()
                .await
                .expect("delete delivered messages");
        }
        done.len()
    }

    /// The SQS event Lambda would deliver for `batch`.
    pub fn event(&self, batch: &[Message]) -> Value {
        let records: Vec<Value> = batch
            .iter()
            .map(|m| {
                let attributes: serde_json::Map<String, Value> = m
                    .attributes()
                    .map(|a| {
                        a.iter()
                            .map(|(k, v)| (k.as_str().to_owned(), Value::String(v.clone())))
                            .collect()
                    })
                    .unwrap_or_default();
                let message_attributes: serde_json::Map<String, Value> = m
                    .message_attributes()
                    .map(|a| {
                        a.iter()
                            .map(|(k, v)| {
                                (
                                    k.clone(),
                                    json!({
                                        "stringValue": v.string_value(),
                                        "stringListValues": [],
                                        "binaryListValues": [],
                                        "dataType": v.data_type(),
                                    }),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                json!({
                    "messageId": m.message_id(),
                    "receiptHandle": m.receipt_handle(),
                    "body": m.body(),
                    "attributes": attributes,
                    "messageAttributes": message_attributes,
                    "md5OfBody": m.md5_of_body(),
                    "eventSource": "aws:sqs",
                    "eventSourceARN": self.arn,
                    "awsRegion": "us-east-1",
                })
            })
            .collect();
        json!({ "Records": records })
    }
}

/// A new queue on moto named `name`, with `attributes`: its URL.
pub(crate) async fn create_queue(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    attributes: impl IntoIterator<Item = (QueueAttributeName, String)>,
) -> String {
    sqs.create_queue()
        .queue_name(name)
        .set_attributes(Some(attributes.into_iter().collect()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("create queue {name} on moto: {e:?}"))
        .queue_url
        .expect("a queue URL")
}

/// Every message visible on the queue at `url`, with its attributes, received until a receive
/// comes back empty; hidden from other receivers for a minute, never deleted.
pub(crate) async fn receive_all(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<Message> {
    let mut all = Vec::new();
    loop {
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(60)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap_or_else(|e| panic!("receive from {url}: {e:?}"));
        let got = out.messages.unwrap_or_default();
        if got.is_empty() {
            return all;
        }
        all.extend(got);
    }
}

pub(crate) async fn queue_arn(sqs: &aws_sdk_sqs::Client, url: &str) -> String {
    sqs.get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("queue attributes")
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .expect("a queue ARN")
}

/// Hands `event` to the import consumer in this process, as the function runs it (its own
/// credentials' requests judged against its role: [`crate::judge`]).
pub async fn consume(
    app: &shared::service::app::App,
    settings: &imports::consume::ConsumerSettings,
    event: aws_lambda_events::sqs::SqsEvent,
) -> aws_lambda_events::sqs::SqsBatchResponse {
    // Boxed: the consumer's future is large, and a test thread's stack in debug is not.
    let consumed = Box::pin(imports::consume::consume(app, settings, event));
    crate::judge::as_function("import-consumer", consumed).await
}

/// The consumer binary, running as a Lambda process (one execution environment) on its own
/// Runtime API.
pub struct Consumer {
    api: Arc<RuntimeApi>,
    process: tokio::process::Child,
    pub log: PathBuf,
}

/// The debug build of the consumer (scripts/test.sh builds it before the tests).
pub fn consumer_bin() -> PathBuf {
    crate::process::built_bin("debug", "import-consumer")
}

impl Consumer {
    /// Starts the debug consumer for `table`, consuming `queues` (its `maxReceiveCount`, and the
    /// queue it defers messages to, as the template sets them), signing as the tests' `App`s do.
    pub async fn start(table: &str, queues: &ImportQueues) -> Self {
        let env = [
            ("CURSOR_SIGNING_KEY", crate::test_cursor_key().to_owned()),
            ("IMPORT_MAX_RECEIVES", queues.max_receives.to_string()),
            ("IMPORT_QUEUE_URL", queues.url.clone()),
        ];
        Self::start_bin(&consumer_bin(), table, &env).await
    }

    /// Starts the consumer binary `bin` for `table`, with the Lambda environment
    /// ([`function_env`]) and `env` over it.
    pub async fn start_bin(bin: &std::path::Path, table: &str, env: &[(&str, String)]) -> Self {
        let api = RuntimeApi::start().await;
        let log = std::env::temp_dir().join(format!("{}.log", crate::unique("import-consumer")));
        let stdout = std::fs::File::create(&log).expect("a log file");
        let mut vars = function_env(table, &api.addr, "import-consumer");
        vars.push(("RUST_LOG".into(), "info".into()));
        vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.clone())));
        let process = crate::process::start_function(
            bin,
            vars,
            Stdio::from(stdout),
            "cargo build --workspace --bin import-consumer; scripts/test.sh builds it",
        );
        Self { api, process, log }
    }

    /// Delivers `event` and waits for the answer, up to `limit`: `None` when the invocation fails
    /// (an error, not a batch answer) or does not answer in time.
    pub async fn invoke(&self, event: &Value, limit: Duration) -> Option<Value> {
        let answer = tokio::time::timeout(limit, self.api.invoke(&event.to_string()))
            .await
            .ok()?;
        let answer: Value = serde_json::from_str(&answer).ok()?;
        answer.get("batchItemFailures").is_some().then_some(answer)
    }

    /// Kills the process at once (SIGKILL), as a crash or a timeout would.
    pub async fn kill(&self) {
        if let Some(pid) = self.process.id() {
            let _ = tokio::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .await;
        }
    }

    /// What the consumer logged.
    pub fn logged(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Polls `queues` and delivers to each of `consumers` (one poller per consumer, as an event source
/// mapping runs up to `MaximumConcurrency` invocations at once) in batches of up to `batch_size`,
/// until the import queue is empty: every message deleted or moved to the dead-letter queue.
/// Returns the number of invocations.
pub async fn drain(queues: &ImportQueues, consumers: &[&Consumer], batch_size: usize) -> usize {
    let pollers = consumers.iter().map(|consumer| async move {
        let mut invocations = 0;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
        loop {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the import queue did not drain in 10 minutes"
            );
            let batch = queues.receive(batch_size).await;
            if batch.is_empty() {
                if queues.backlog(&queues.url).await == 0 {
                    return invocations;
                }
                // In flight elsewhere, or a deferred copy not due yet.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            invocations += 1;
            let answer = consumer
                .invoke(&queues.event(&batch), Duration::from_secs(60))
                .await;
            queues.settle(&batch, answer.as_ref()).await;
        }
    });
    futures::future::join_all(pollers).await.into_iter().sum()
}
