//! Where an operation's lanes run (`shared::store::lifecycle::lanes`): on the lane queue, or in the
//! call that advances the operation.
//!
//! With `LANE_QUEUE_URL` set (every deployment: template.yaml's `LaneQueue`), a request or the
//! driver only plans the lanes and puts one message a lane on the queue; `work-lanes` (its event
//! source mapping, at most `MaximumConcurrency` at once) steps a lane for up to
//! [`WORK_PER_MESSAGE`] and puts the lane's next message back at the end of the
//! queue, so every lane of every tenant gets its turn in order. A message holds the lane's step
//! number as its sender left it, and the lane notes the newest number sent (`Lane::sent_steps`):
//! a delivery of an older number is a stale copy (SQS's at-least-once delivery, a worker that died
//! after sending the next turn, a lane sent again while its message was only slow) and is dropped,
//! so one message a lane goes round. A worker that dies between its steps and its next turn sent
//! leaves its own message the newest: delivered again, it takes the lane up. Two copies delivered
//! at once both pass; one loses its step to the other (the checkpoint's condition) and ends there.
//! Without a queue (a local run with no SQS), the call that advances the operation steps every lane
//! itself, side by side.
//!
//! Each message is signed with the platform's signing keys (as import messages are), under a domain
//! of its own: the worker steps only a lane some function of ours sent. Any other message is
//! delivered again until it reaches the dead-letter queue, which loses nothing: a lane whose
//! message is gone is sent again once it has not been stepped for `lane_walk::LOST_AFTER_MS`.

use std::time::Duration;

use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use serde::{Deserialize, Serialize};
use shared::identity::cursor::CursorKeys;
use shared::identity::ids::TenantId;
use shared::service::app::ConfigError;
use shared::ApiError;

/// How long one message steps its lane unless told otherwise (the worker's timeout is 30 s).
pub const WORK_PER_MESSAGE: Duration = Duration::from_secs(10);

/// One lane's turn, as a message on the lane queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LaneMessage {
    pub tenant: String,
    /// The operation whose lane it is (`offboarding`).
    pub operation: String,
    pub lane: u32,
    /// The lane's committed steps when the message was sent; `None` in a message sent before
    /// messages held it (stepped whatever the lane's number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
}

/// What a lane message's signature is made for: no cursor's or import message's passes for one.
const SIGNING_DOMAIN: &str = "pooltable/lanes/v1";
/// The message attribute that holds a lane message's signature.
pub const LANE_SIGNATURE_ATTRIBUTE: &str = "signature";

impl LaneMessage {
    /// Lane `lane`'s turn, sent when it had committed `steps` steps.
    pub fn new(tenant: &TenantId, operation: &str, lane: u32, steps: u64) -> Self {
        Self {
            tenant: tenant.to_string(),
            operation: operation.to_owned(),
            lane,
            steps: Some(steps),
        }
    }

    /// Whether it is a stale copy for a lane whose newest turn sent was at `sent` steps
    /// (`Lane::sent_steps`): one of an older number. A message or a lane from before they held
    /// numbers is never stale.
    pub fn is_stale_for(&self, sent: Option<u64>) -> bool {
        matches!((self.steps, sent), (Some(steps), Some(sent)) if steps < sent)
    }

    /// The signature of a message whose body is `body`.
    pub fn sign(keys: &CursorKeys, body: &str) -> String {
        keys.sign_for(SIGNING_DOMAIN, body)
    }

    /// The message `body` holds, when `signature` is [`LaneMessage::sign`]'s for it; else `None`
    /// (sent by no function of ours, or not a lane message).
    pub fn verified(keys: &CursorKeys, body: &str, signature: Option<&str>) -> Option<Self> {
        let signed = signature.is_some_and(|s| keys.verify_for(SIGNING_DOMAIN, body, s));
        signed.then(|| serde_json::from_str(body).ok()).flatten()
    }
}

/// The lane queue and a client with the function's own credentials.
#[derive(Debug, Clone)]
pub struct LaneQueue {
    pub client: aws_sdk_sqs::Client,
    pub url: String,
}

/// Where lanes run: on the queue when there is one ([`Lanes::from_env`]), else in the caller.
#[derive(Debug, Clone)]
pub struct Lanes {
    queue: Option<LaneQueue>,
    /// How long one message steps its lane.
    turn: Duration,
    /// How long a lane that cannot go on now (its table throttled, its tenant's key refused) waits
    /// on the queue before its next turn.
    throttle_wait: Duration,
}

impl Default for Lanes {
    fn default() -> Self {
        Self {
            queue: None,
            turn: WORK_PER_MESSAGE,
            throttle_wait: shared::store::lifecycle::pacing::TABLE_THROTTLE_WAIT,
        }
    }
}

/// SQS's most entries a batch.
const BATCH: usize = 10;

impl Lanes {
    /// `LANE_QUEUE_URL` when set (and not empty): lanes on the queue; else in the caller.
    pub fn from_env() -> Result<Self, ConfigError> {
        use shared::service::app::lambda_sdk_config;
        let queue = match std::env::var("LANE_QUEUE_URL")
            .ok()
            .filter(|u| !u.is_empty())
        {
            Some(url) => Some(LaneQueue {
                client: aws_sdk_sqs::Client::new(&lambda_sdk_config()?),
                url,
            }),
            None => None,
        };
        Ok(Self {
            queue,
            ..Self::default()
        })
    }

    /// Lanes stepped by the caller itself.
    pub fn in_process() -> Self {
        Self::default()
    }

    /// Lanes on `queue`.
    pub fn on_queue(queue: LaneQueue) -> Self {
        Self {
            queue: Some(queue),
            ..Self::default()
        }
    }

    /// The same, each message stepping its lane for `turn` (tests make lanes outlast a turn).
    pub fn with_turn(self, turn: Duration) -> Self {
        Self { turn, ..self }
    }

    /// How long one message steps its lane.
    pub fn turn(&self) -> Duration {
        self.turn
    }

    /// The same, a lane whose table is throttled waiting `wait` on the queue (tests shorten it).
    pub fn with_throttle_wait(self, wait: Duration) -> Self {
        Self {
            throttle_wait: wait,
            ..self
        }
    }

    /// How long a lane whose table DynamoDB throttles waits on the queue before its next turn.
    pub fn throttle_wait(&self) -> Duration {
        self.throttle_wait
    }

    /// Whether lanes go on a queue (else the caller steps them).
    pub fn queued(&self) -> bool {
        self.queue.is_some()
    }

    /// Puts `messages` on the queue, signed with `keys`, ten a request; every one is sent or the
    /// call fails (503: a later call or driver run sends again the lanes that were not noted sent,
    /// `lane_walk::UNSENT_AFTER_MS` after their plan: a lane sent twice costs one contested step).
    pub async fn send(&self, keys: &CursorKeys, messages: &[LaneMessage]) -> Result<(), ApiError> {
        self.send_after(keys, messages, Duration::ZERO).await
    }

    /// [`Lanes::send`], each message delivered no sooner than `delay` from now (at most SQS's 15
    /// minutes): a lane whose table is throttled waits on the queue, not in a worker.
    pub async fn send_after(
        &self,
        keys: &CursorKeys,
        messages: &[LaneMessage],
        delay: Duration,
    ) -> Result<(), ApiError> {
        let delay_seconds = i32::try_from(delay.as_secs().min(900)).unwrap_or(900);
        let Some(queue) = &self.queue else {
            return Ok(());
        };
        for chunk in messages.chunks(BATCH) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let body = serde_json::to_string(m)
                        .map_err(|e| ApiError::Internal(format!("a lane message: {e}")))?;
                    let signature = MessageAttributeValue::builder()
                        .data_type("String")
                        .string_value(LaneMessage::sign(keys, &body))
                        .build()
                        .map_err(|e| ApiError::Internal(format!("a lane message: {e}")))?;
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_attributes(LANE_SIGNATURE_ATTRIBUTE, signature)
                        .message_body(body)
                        .delay_seconds(delay_seconds)
                        .build()
                        .map_err(|e| ApiError::Internal(format!("a lane message: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = queue
                .client
                .send_message_batch()
                .queue_url(&queue.url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| {
                    ApiError::Unavailable(format!(
                        "The lane queue did not take the lanes ({}); retry later.",
                        aws_sdk_sqs::error::DisplayErrorContext(e)
                    ))
                })?;
            if !out.failed.is_empty() {
                return Err(ApiError::Unavailable(format!(
                    "The lane queue refused {} lanes; retry later.",
                    out.failed.len()
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_message_is_its_tenant_operation_lane_and_step_number() {
        let tenant = TenantId::parse("acme").unwrap();
        let m = LaneMessage::new(&tenant, "offboarding", 7, 12);
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(
            text,
            r#"{"tenant":"acme","operation":"offboarding","lane":7,"steps":12}"#
        );
        assert_eq!(serde_json::from_str::<LaneMessage>(&text).unwrap(), m);
    }

    #[test]
    fn a_lane_message_is_stale_once_a_newer_turn_of_its_lane_was_sent_and_one_without_a_number_never_is(
    ) {
        let tenant = TenantId::parse("acme").unwrap();
        let m = LaneMessage::new(&tenant, "offboarding", 7, 12);
        assert!(!m.is_stale_for(Some(12)));
        assert!(m.is_stale_for(Some(13)));
        // Its lane stepped further with no turn sent after: still its lane's turn
        assert!(!m.is_stale_for(Some(3)));
        assert!(!m.is_stale_for(None));
        let before: LaneMessage =
            serde_json::from_str(r#"{"tenant":"acme","operation":"offboarding","lane":7}"#)
                .unwrap();
        assert_eq!(before.steps, None);
        assert!(!before.is_stale_for(Some(13)));
    }

    #[test]
    fn a_lane_message_is_taken_only_with_its_own_signature() {
        let keys = CursorKeys::new(&[7u8; 32], None).unwrap();
        let body = serde_json::to_string(&LaneMessage::new(
            &TenantId::parse("acme").unwrap(),
            "offboarding",
            7,
            0,
        ))
        .unwrap();
        let signature = LaneMessage::sign(&keys, &body);
        assert!(LaneMessage::verified(&keys, &body, Some(&signature)).is_some());
        // Unsigned, signed for another body, under another key, or as a cursor or import message
        assert!(LaneMessage::verified(&keys, &body, None).is_none());
        let other = body.replace(":7", ":8");
        assert!(LaneMessage::verified(&keys, &other, Some(&signature)).is_none());
        let stranger = CursorKeys::new(&[8u8; 32], None).unwrap();
        assert!(LaneMessage::verified(&stranger, &body, Some(&signature)).is_none());
        for domain in ["pooltable-import-message-v1", "cursor"] {
            let foreign = keys.sign_for(domain, &body);
            assert!(LaneMessage::verified(&keys, &body, Some(&foreign)).is_none());
        }
    }

    #[test]
    fn a_lane_signature_is_what_scripts_import_queue_py_sign_lane_event_makes() {
        // Golden: computed by scripts/import_queue.py's sign_lane_event for this key and body
        // (HMAC-SHA-256 of the domain, a newline and the body; base64url without padding).
        let keys = CursorKeys::new(b"0123456789abcdef0123456789abcdef", None).unwrap();
        let body = r#"{"tenant":"globex","operation":"offboarding","lane":3}"#;
        assert_eq!(
            LaneMessage::sign(&keys, body),
            "mlOvfnKJX1zKMyo1YOkBb7YYVs-mKpe5K_ha8ykzhEY"
        );
    }
}
