//! Faults a test injects into the SDK's requests: a DynamoDB operation failed once before or after
//! it is sent, throttling (with or without DynamoDB's reason), a request held before it is sent
//! while another goes first, and STS failures.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::client::orchestrator::Metadata;

use serde_json::{json, Value};

mod answer;
mod hold;

pub use hold::Held;
use hold::Hold;

use crate::RequestCounter;
use shared::store::client::hooks::{
    Bag, HookResult, Intercept, Parts, RequestMut, RequestRef, ResponseMut, ResponseRef,
};

/// Where an injected fault strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The request never reaches DynamoDB.
    BeforeSend,
    /// DynamoDB executed the request, but its answer is lost.
    AfterSend,
}

/// Fails the next request of one operation, once, at the chosen phase; or throttles attempts.
#[derive(Debug, Default)]
pub struct Faults {
    armed: Mutex<Option<(String, Phase)>>,
    /// How many more DynamoDB attempts answer ProvisionedThroughputExceededException.
    throttle: AtomicUsize,
    /// The next attempt of this operation is throttled as DynamoDB does it: never applied.
    refuse_once: Mutex<Option<String>>,
    /// The next attempt of this operation is answered with this error body, never applied.
    answer_once: Mutex<Option<(String, String)>>,
    /// How many more attempts are executed by DynamoDB but answered with a 500, so the SDK retries
    /// a request that already took effect (as after a timeout on the way back).
    lost_after_success: AtomicUsize,
    /// Only attempts of this operation lose their answer, when set.
    lost_operation: Mutex<Option<String>>,
    /// The next TransactWriteItems attempts never reach the table and are answered with this error
    /// body (DynamoDB's wire format), while the count lasts.
    cancel: Mutex<Option<(String, usize)>>,
    /// While set, every request whose body holds this text is refused with throttling, unapplied.
    refuse_containing: Mutex<Option<String>>,
    /// While set, every request whose body (as text) this answers true for is refused likewise.
    refuse_matching: Mutex<Option<BodyMatch>>,
    /// The next requests whose body holds the text (while the count lasts) are refused with
    /// throttling that gives DynamoDB's reason, unapplied.
    throttle_containing: Mutex<Option<ThrottleWithReason>>,
    /// The next request whose body matches is held before it is sent, until released.
    hold: Mutex<Option<Hold>>,
}

/// Tells a request by its body, as text.
pub type BodyMatch = fn(&str) -> bool;

/// A throttle answered with its reason: to requests holding every one of `markers`, `attempts`
/// more times.
#[derive(Debug)]
struct ThrottleWithReason {
    markers: Vec<String>,
    reason: String,
    attempts: usize,
}

impl Faults {
    /// The next `attempts` DynamoDB attempts (retries included) are throttled; `usize::MAX` = always.
    pub fn throttle(&self, attempts: usize) {
        self.throttle.store(attempts, Ordering::SeqCst);
    }

    /// The next `attempts` attempts take effect in DynamoDB, then answer 500 (retryable).
    pub fn lose_successes(&self, attempts: usize) {
        *self.lost_operation.lock().unwrap() = None;
        self.lost_after_success.store(attempts, Ordering::SeqCst);
    }

    /// The next `attempts` attempts of `operation` (only) take effect, then answer 500.
    pub fn lose_successes_of(&self, operation: &str, attempts: usize) {
        *self.lost_operation.lock().unwrap() = Some(operation.to_owned());
        self.lost_after_success.store(attempts, Ordering::SeqCst);
    }

    /// How many of the answers [`Self::lose_successes_of`] was told to lose are not lost yet.
    pub fn lost_successes_left(&self) -> usize {
        self.lost_after_success.load(Ordering::SeqCst)
    }

    fn take_lost_success(&self, operation: &str) -> bool {
        if self
            .lost_operation
            .lock()
            .unwrap()
            .as_deref()
            .is_some_and(|op| op != operation)
        {
            return false;
        }
        self.lost_after_success
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// The next attempt of `operation` is answered with ProvisionedThroughputExceededException and
    /// never takes effect (it is turned into a harmless ListTables before it is sent), as real
    /// throttling. (`throttle` answers throttling after the attempt reached DynamoDB.)
    pub fn refuse_once_with_throttling(&self, operation: &str) {
        *self.refuse_once.lock().unwrap() = Some(operation.to_owned());
    }

    /// Every request whose body holds `marker` (a key fragment such as `#RATE#`) is answered with
    /// ProvisionedThroughputExceededException and never takes effect, until cleared with `None`.
    pub fn refuse_requests_containing(&self, marker: Option<&str>) {
        *self.refuse_containing.lock().unwrap() = marker.map(str::to_owned);
    }

    /// Every request whose body `matches` (one write of many alike, told by its shape) is answered
    /// with ProvisionedThroughputExceededException and never takes effect, until cleared with
    /// `None`.
    pub fn refuse_requests_matching(&self, matches: Option<BodyMatch>) {
        *self.refuse_matching.lock().unwrap() = matches;
    }

    /// The next `attempts` requests whose body holds `marker` are answered with
    /// ProvisionedThroughputExceededException giving `reason` as DynamoDB's `ThrottlingReasons`
    /// (e.g. `TableWriteKeyRangeThroughputExceeded`), and never take effect.
    pub fn throttle_containing_with_reason(&self, marker: &str, reason: &str, attempts: usize) {
        self.throttle_containing_all_with_reason(&[marker], reason, attempts)
    }

    /// [`Faults::throttle_containing_with_reason`], for the requests whose body holds every one
    /// of `markers` (a key that both a read and a transaction name, and `TransactItems`).
    pub fn throttle_containing_all_with_reason(
        &self,
        markers: &[&str],
        reason: &str,
        attempts: usize,
    ) {
        *self.throttle_containing.lock().unwrap() = Some(ThrottleWithReason {
            markers: markers.iter().map(|m| (*m).to_owned()).collect(),
            reason: reason.to_owned(),
            attempts,
        });
    }

    /// How many throttles with a reason are still to answer.
    pub fn throttles_with_reason_left(&self) -> usize {
        self.throttle_containing
            .lock()
            .unwrap()
            .as_ref()
            .map_or(0, |t| t.attempts)
    }

    /// The throttle answer with its reason for a request of `body`, if one is due.
    fn take_throttle_with_reason(&self, body: &[u8]) -> Option<String> {
        let mut armed = self.throttle_containing.lock().unwrap();
        let due = armed.as_mut().filter(|t| {
            t.attempts > 0
                && t.markers
                    .iter()
                    .all(|marker| body.windows(marker.len()).any(|w| w == marker.as_bytes()))
        })?;
        due.attempts -= 1;
        let answer = json!({
            "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
            "message": "injected throttling with its reason, not applied",
            "ThrottlingReasons": [{
                "reason": due.reason,
                "resource": "arn:aws:dynamodb:us-east-1:000000000000:table/injected",
            }],
        });
        Some(answer.to_string())
    }

    /// Holds the next request whose body (as text) `matches` before it is sent, blocking the thread
    /// that sends it until [`Held::release`]: the sender must run on a thread and runtime of its
    /// own ([`crate::aside`]), so that the test goes on meanwhile and no task of the test's runtime
    /// waits behind the blocked thread. Held after signing, for at most two minutes: well inside
    /// SigV4's five minutes of clock skew.
    pub fn hold_next_matching(&self, matches: BodyMatch) -> Held {
        let (hold, held) = hold::pair(matches);
        *self.hold.lock().unwrap() = Some(hold);
        held
    }

    /// Holds this request if it is the one to hold (see [`Faults::hold_next_matching`]).
    fn hold_if_matching(&self, body: &[u8]) {
        let hold = {
            let mut hold = self.hold.lock().unwrap();
            let matching = hold
                .as_ref()
                .is_some_and(|h| std::str::from_utf8(body).is_ok_and(h.matches));
            if !matching {
                return;
            }
            hold.take()
        };
        if let Some(hold) = hold {
            hold.wait();
        }
    }

    fn refuses_body(&self, body: &[u8]) -> bool {
        let marker = self.refuse_containing.lock().unwrap();
        let matches = *self.refuse_matching.lock().unwrap();
        marker
            .as_deref()
            .is_some_and(|m| body.windows(m.len()).any(|w| w == m.as_bytes()))
            || matches.is_some_and(|f| std::str::from_utf8(body).is_ok_and(f))
    }

    fn take_refusal(&self, operation: &str) -> bool {
        let mut refuse = self.refuse_once.lock().unwrap();
        if refuse.as_deref() == Some(operation) {
            *refuse = None;
            return true;
        }
        false
    }

    fn take_throttle(&self) -> bool {
        self.throttle
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
                0 => None,
                usize::MAX => Some(usize::MAX),
                n => Some(n - 1),
            })
            .is_ok()
    }

    /// The next `attempts` TransactWriteItems attempts (`usize::MAX`: all) are answered with
    /// DynamoDB's `TransactionCanceledException` carrying these per-action `codes`, and never take
    /// effect: the request is turned into a harmless ListTables before it is sent.
    pub fn cancel_transactions(&self, codes: &[&str], attempts: usize) {
        let reasons: Vec<Value> = codes
            .iter()
            .map(|c| json!({"Code": c, "Message": format!("injected {c}")}))
            .collect();
        let body = json!({
            "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "message": format!("Transaction cancelled, please refer cancellation reasons for specific reasons {codes:?}"),
            "CancellationReasons": reasons,
        });
        *self.cancel.lock().unwrap() = Some((body.to_string(), attempts));
    }

    /// The next `attempts` TransactWriteItems attempts answer `TransactionInProgressException`
    /// (not a cancellation) and never take effect.
    pub fn transactions_in_progress(&self, attempts: usize) {
        let body = json!({
            "__type": "com.amazonaws.dynamodb.v20120810#TransactionInProgressException",
            "message": "injected: transaction in progress",
        });
        *self.cancel.lock().unwrap() = Some((body.to_string(), attempts));
    }

    fn take_cancel(&self) -> Option<String> {
        let mut cancel = self.cancel.lock().unwrap();
        let (body, left) = cancel.as_mut()?;
        let body = body.clone();
        match *left {
            0 => None,
            usize::MAX => Some(body),
            _ => {
                *left -= 1;
                Some(body)
            }
        }
    }

    pub fn arm(&self, operation: &str, phase: Phase) {
        *self.armed.lock().unwrap() = Some((operation.to_owned(), phase));
    }

    /// The armed fault's error, once, when it is for `operation` at `phase`.
    fn strike(&self, operation: &str, phase: Phase) -> HookResult {
        let mut armed = self.armed.lock().unwrap();
        if armed
            .as_ref()
            .is_some_and(|(op, p)| op == operation && *p == phase)
        {
            *armed = None;
            return Err(match phase {
                Phase::BeforeSend => "injected fault: connection refused",
                Phase::AfterSend => "injected fault: response lost",
            }
            .into());
        }
        Ok(())
    }
}

/// The harness's hook on every attempt of a tenant DynamoDB client: counts it in `requests`, and
/// injects the faults armed in `faults`.
#[derive(Debug, Clone)]
pub struct TestInterceptor {
    pub requests: Arc<RequestCounter>,
    pub faults: Arc<Faults>,
}

/// The error body an injected fault answers this attempt with (set before transmit).
#[derive(Debug, Clone)]
struct InjectedAnswer(String);

impl aws_smithy_types::config_bag::Storable for InjectedAnswer {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

fn operation_of(cfg: &Bag) -> String {
    cfg.load::<Metadata>()
        .map(|m| m.name().to_owned())
        .unwrap_or_default()
}

impl Intercept for TestInterceptor {
    fn name(&self) -> &'static str {
        "TestInterceptor"
    }

    /// Counts the attempt as sent, then fails it if a fault is armed before its send (counted all
    /// the same: the SDK runs every interceptor's hook, whichever fails).
    fn read_before_transmit(&self, _: RequestRef, _: &Parts, cfg: &mut Bag) -> HookResult {
        let operation = operation_of(cfg);
        let requests = &self.requests;
        *requests
            .sent
            .lock()
            .unwrap()
            .entry(operation.clone())
            .or_default() += 1;
        let now = requests.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        requests.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        self.faults.strike(&operation, Phase::BeforeSend)
    }

    fn read_before_deserialization(&self, _: ResponseRef, _: &Parts, cfg: &mut Bag) -> HookResult {
        self.requests.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.faults.strike(&operation_of(cfg), Phase::AfterSend)
    }

    /// The signed request judged against its function's role when it goes on the function's own
    /// credentials ([`crate::judge`]); then an injected answer: the request becomes a ListTables,
    /// so nothing is written.
    fn modify_before_transmit(&self, ctx: RequestMut, _: &Parts, cfg: &mut Bag) -> HookResult {
        let header = |name: &str| ctx.request().headers().get(name);
        crate::judge::judge(
            header("authorization"),
            header("x-amz-target"),
            ctx.request().body().bytes(),
        );
        if let Some(body) = ctx.request().body().bytes() {
            self.faults.hold_if_matching(body);
        }
        let operation = operation_of(cfg);
        let body_refused = ctx
            .request()
            .body()
            .bytes()
            .is_some_and(|b| self.faults.refuses_body(b));
        let with_reason = ctx
            .request()
            .body()
            .bytes()
            .and_then(|b| self.faults.take_throttle_with_reason(b));
        let answer = if with_reason.is_some() {
            with_reason
        } else if body_refused || self.faults.take_refusal(&operation) {
            Some(
                r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"injected throttling, not applied"}"#
                    .to_owned(),
            )
        } else if let Some(body) = self.faults.take_answer(&operation) {
            Some(body)
        } else if operation == "TransactWriteItems" {
            // The state lives across the operation's retry attempts: set or clear it on each one.
            self.faults.take_cancel()
        } else {
            None
        };
        if answer.is_some() {
            let request = ctx.request_mut();
            request
                .headers_mut()
                .insert("x-amz-target", "DynamoDB_20120810.ListTables");
            request.headers_mut().insert("content-length", "2");
            *request.body_mut() = aws_smithy_types::body::SdkBody::from("{}");
        }
        cfg.interceptor_state()
            .store_or_unset(answer.map(InjectedAnswer));
        Ok(())
    }

    /// Throttling, as DynamoDB answers it: HTTP 400 with ProvisionedThroughputExceededException.
    fn modify_before_deserialization(
        &self,
        ctx: ResponseMut,
        _: &Parts,
        cfg: &mut Bag,
    ) -> HookResult {
        if let Some(InjectedAnswer(body)) = cfg.load::<InjectedAnswer>().cloned() {
            answer_with(ctx, 400, DYNAMODB_JSON, body)?;
        } else if self.faults.take_lost_success(&operation_of(cfg)) {
            answer_with(
                ctx,
                500,
                DYNAMODB_JSON,
                r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected: answer lost"}"#,
            )?;
        } else if self.faults.take_throttle() {
            answer_with(
                ctx,
                400,
                DYNAMODB_JSON,
                r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"injected throttling"}"#,
            )?;
        }
        Ok(())
    }
}

/// The content type of DynamoDB's answers, errors included.
const DYNAMODB_JSON: &str = "application/x-amz-json-1.0";

/// Replaces the answer an attempt got with `status`, `content_type` and `body`: what the SDK then
/// reads is the injected fault, as the service would have sent it.
fn answer_with(
    ctx: ResponseMut,
    status: u16,
    content_type: &'static str,
    body: impl Into<aws_smithy_types::body::SdkBody>,
) -> HookResult {
    let response = ctx.response_mut();
    *response.status_mut() = aws_smithy_runtime_api::http::StatusCode::try_from(status)?;
    response.headers_mut().insert("content-type", content_type);
    *response.body_mut() = body.into();
    Ok(())
}

/// STS faults, each while its flag is set: `down`, STS is unreachable (the request fails before it
/// is sent); `refuses`, STS answers AssumeRole with HTTP 403 `AccessDenied`, in STS's XML (not
/// retryable). Clones share their flags.
#[derive(Debug, Clone, Default)]
pub struct StsFaults {
    pub down: Arc<AtomicBool>,
    pub refuses: Arc<AtomicBool>,
}

impl Intercept for StsFaults {
    fn name(&self) -> &'static str {
        "StsFaults"
    }

    fn read_before_transmit(&self, _: RequestRef, _: &Parts, _: &mut Bag) -> HookResult {
        if self.down.load(Ordering::SeqCst) {
            return Err("injected fault: STS unreachable".into());
        }
        Ok(())
    }

    fn modify_before_deserialization(
        &self,
        ctx: ResponseMut,
        _: &Parts,
        _: &mut Bag,
    ) -> HookResult {
        if self.refuses.load(Ordering::SeqCst) {
            answer_with(
                ctx,
                403,
                "text/xml",
                r#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>injected: not authorized to perform sts:AssumeRole</Message></Error><RequestId>injected</RequestId></ErrorResponse>"#,
            )?;
        }
        Ok(())
    }
}
