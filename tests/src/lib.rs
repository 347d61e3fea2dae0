//! The test harness: a fresh table (created from template.yaml) per test on the DynamoDB Local and
//! moto started by `scripts/test.sh`, an `App` wired to them with a controllable clock and a request
//! counter, and API Gateway v2 events built the way API Gateway sends them.
//!
//! A missing local stack is a failure, never a skip.

pub mod api;
pub mod client;
pub mod dispatch;
pub mod fixtures;
pub mod iam;
pub mod import_queue;
pub mod lane_pump;
pub mod lifecycle_bus;
pub mod process;
pub mod routes;
pub mod runtime_api;
pub mod state;
pub mod template;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::SharedInterceptor;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use lambda_http::{Body, Request, Response};
use serde_json::{json, Value};
use shared::identity::clock::Clock;
use shared::isolation::claims::AuthMode;
use shared::service::app::{load_sdk_config, Settings};
use shared::store::client::hooks::{
    Bag, HookResult, Intercept, Parts, RequestMut, RequestRef, ResponseMut, ResponseRef,
};
use shared::{ApiError, App};

pub use api::{operator, Client};

pub const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/pooltable-test-tenant-access";
/// The role the operator paths' sessions assume (`TENANT_OPERATOR_ROLE_ARN`).
pub const OPERATOR_ROLE_ARN: &str = "arn:aws:iam::123456789012:role/pooltable-test-tenant-operator";

/// The local stack's endpoints, from the environment `scripts/test.sh` sets.
pub fn endpoints() -> (String, String) {
    let get = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!(
                "{name} is not set: integration tests need DynamoDB Local and moto. \
                 Run them with ./scripts/test.sh, which starts both."
            )
        })
    };
    (
        get("AWS_ENDPOINT_URL_DYNAMODB"),
        get("AWS_ENDPOINT_URL_STS"),
    )
}

/// A clock the test moves by hand.
#[derive(Debug)]
pub struct TestClock(AtomicU64);

impl TestClock {
    pub fn set_millis(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
    pub fn advance_seconds(&self, s: u64) {
        self.0.fetch_add(s * 1000, Ordering::SeqCst);
    }
    pub fn advance_millis(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now_millis(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Counts DynamoDB requests that actually went on the wire, by operation, and the peak in flight.
#[derive(Debug, Default)]
pub struct RequestCounter {
    sent: Mutex<HashMap<String, usize>>,
    in_flight: AtomicUsize,
    pub peak_in_flight: AtomicUsize,
}

impl RequestCounter {
    pub fn total(&self) -> usize {
        self.sent.lock().unwrap().values().sum()
    }
    pub fn by_operation(&self) -> HashMap<String, usize> {
        self.sent.lock().unwrap().clone()
    }
    pub fn reset(&self) {
        self.sent.lock().unwrap().clear();
        self.peak_in_flight.store(0, Ordering::SeqCst);
    }
}

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
    /// The next requests whose body holds the text (while the count lasts) are refused with
    /// throttling that gives DynamoDB's reason, unapplied.
    throttle_containing: Mutex<Option<ThrottleWithReason>>,
}

/// A throttle answered with its reason: to requests holding `marker`, `attempts` more times.
#[derive(Debug)]
struct ThrottleWithReason {
    marker: String,
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

    /// The next `attempts` requests whose body holds `marker` are answered with
    /// ProvisionedThroughputExceededException giving `reason` as DynamoDB's `ThrottlingReasons`
    /// (e.g. `TableWriteKeyRangeThroughputExceeded`), and never take effect.
    pub fn throttle_containing_with_reason(&self, marker: &str, reason: &str, attempts: usize) {
        *self.throttle_containing.lock().unwrap() = Some(ThrottleWithReason {
            marker: marker.to_owned(),
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
                && body
                    .windows(t.marker.len())
                    .any(|w| w == t.marker.as_bytes())
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

    fn refuses_body(&self, body: &[u8]) -> bool {
        let marker = self.refuse_containing.lock().unwrap();
        marker
            .as_deref()
            .is_some_and(|m| body.windows(m.len()).any(|w| w == m.as_bytes()))
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

    /// An injected transaction answer: the request becomes a ListTables, so nothing is written.
    fn modify_before_transmit(&self, ctx: RequestMut, _: &Parts, cfg: &mut Bag) -> HookResult {
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

/// One test's world: its own table, an `App` on it, an admin client for raw checks.
pub struct Harness {
    pub app: App,
    pub clock: Arc<TestClock>,
    pub requests: Arc<RequestCounter>,
    pub faults: Arc<Faults>,
    /// The STS faults the test switches on and off.
    pub sts: StsFaults,
    pub admin: aws_sdk_dynamodb::Client,
    pub table: String,
    pub sts_endpoint: String,
}

/// The cursor signing keys of every test `App`: a fresh random key per process, as local runs do.
pub fn test_cursor_keys() -> shared::identity::cursor::CursorKeys {
    shared::identity::cursor::CursorKeys::new(test_cursor_key().as_bytes(), None)
        .expect("a 32-byte key")
}

/// The key behind [`test_cursor_keys`], for a function binary a test starts.
pub fn test_cursor_key() -> &'static str {
    static KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEY.get_or_init(|| uuid::Uuid::new_v4().simple().to_string())
}

pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

pub fn real_now_millis() -> u64 {
    shared::identity::clock::SystemClock.now_millis()
}

impl Harness {
    pub async fn new() -> Self {
        Self::with_ttl(3600).await
    }

    pub async fn with_ttl(session_ttl_seconds: u64) -> Self {
        Self::create(session_ttl_seconds, false).await
    }

    /// A harness on a table with template.yaml's stream, which the test reads
    /// ([`crate::lifecycle_bus::StreamTap`]); other tables have none
    /// ([`devtools::TableDefinition::without_stream`]).
    pub async fn with_stream() -> Self {
        Self::create(3600, true).await
    }

    async fn create(session_ttl_seconds: u64, stream: bool) -> Self {
        let (_, sts_endpoint) = endpoints();
        let sdk = load_sdk_config().await;
        let admin = aws_sdk_dynamodb::Client::new(&sdk);
        let table = unique("pooltable-test");
        let mut def = devtools::table_from_template(&devtools::default_template_path())
            .expect("template.yaml defines the table");
        if !stream {
            def = def.without_stream();
        }
        devtools::create_table(&admin, &table, &def)
            .await
            .unwrap_or_else(|e| panic!("cannot create a table on DynamoDB Local: {e:?}"));
        Self::on_table(&admin, &table, session_ttl_seconds, &sts_endpoint).await
    }

    /// Another `App` (its own credential cache, clock and counter) on an existing table.
    pub async fn on_table(
        admin: &aws_sdk_dynamodb::Client,
        table: &str,
        session_ttl_seconds: u64,
        sts_endpoint: &str,
    ) -> Self {
        Self::build(admin, table, session_ttl_seconds, sts_endpoint, None).await
    }

    /// A new harness and a fresh tenant named after `prefix` ([`unique`]), onboarded with
    /// `shard_count` shards ([`onboard`]): where most tests start.
    pub async fn with_tenant(prefix: &str, shard_count: u32) -> (Self, String) {
        let (h, [tenant]) = Self::with_tenants([(prefix, shard_count)]).await;
        (h, tenant)
    }

    /// A new harness and a fresh tenant for each of `tenants` (a name prefix and a shard count),
    /// onboarded in order.
    pub async fn with_tenants<const N: usize>(tenants: [(&str, u32); N]) -> (Self, [String; N]) {
        let h = Self::new().await;
        let mut names = Vec::with_capacity(N);
        for (prefix, shard_count) in tenants {
            let tenant = unique(prefix);
            onboard(&h, &tenant, shard_count).await;
            names.push(tenant);
        }
        let names = names.try_into().expect("one name per tenant");
        (h, names)
    }

    /// A new harness and a pooled neighbour named after `prefix` (2 shards) holding `products`
    /// products, `n0`, `n1`..., each `{"v": i}`: the tenant a test about another's table checks
    /// was left alone.
    pub async fn with_neighbour(prefix: &str, products: usize) -> (Self, String) {
        let (h, neighbour) = Self::with_tenant(prefix, 2).await;
        h.tenant(&neighbour)
            .put_new_products((0..products).map(|i| (format!("n{i}"), json!({ "v": i }))))
            .await;
        (h, neighbour)
    }

    /// Another container on this harness's table: its own `App`, credential cache, clock and
    /// counter.
    pub async fn another_container(&self) -> Self {
        Self::on_table(&self.admin, &self.table, 3600, &self.sts_endpoint).await
    }

    /// A harness whose tenant clients reach DynamoDB at `dynamodb_endpoint` (a dead port, or a
    /// DynamoDB Local of the test's own); STS stays the shared moto.
    pub async fn with_dynamodb_at(dynamodb_endpoint: &str, table: &str) -> Self {
        let (_, sts_endpoint) = endpoints();
        let sdk = load_sdk_config().await;
        let admin = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&sdk)
                .endpoint_url(dynamodb_endpoint)
                .build(),
        );
        Self::build(&admin, table, 3600, &sts_endpoint, Some(dynamodb_endpoint)).await
    }

    async fn build(
        admin: &aws_sdk_dynamodb::Client,
        table: &str,
        session_ttl_seconds: u64,
        sts_endpoint: &str,
        dynamodb_endpoint: Option<&str>,
    ) -> Self {
        let sdk = load_sdk_config().await;
        let clock = Arc::new(TestClock(AtomicU64::new(real_now_millis())));
        let requests = Arc::new(RequestCounter::default());
        let faults = Arc::new(Faults::default());
        let sts_faults = StsFaults::default();
        let settings = Settings {
            table_name: table.to_owned(),
            tenant_role_arn: ROLE_ARN.into(),
            tenant_operator_role_arn: Some(OPERATOR_ROLE_ARN.into()),
            session_ttl_seconds,
            credentials_seconds: 900,
            auth: AuthMode::Authorizer,
            signing: shared::service::app::KeySource::Fixed(test_cursor_keys()),
            max_in_flight: shared::store::client::scoped::DEFAULT_MAX_IN_FLIGHT,
            read_cache_ms: 0,
            list_cache: None,
            platform_access: Default::default(),
            tenant_scope: shared::isolation::policy::Scope::Tenant,
            lifecycle_lanes: shared::store::lifecycle::lanes::DEFAULT_LANES,
        };
        let sts = aws_sdk_sts::Client::from_conf(
            aws_sdk_sts::config::Builder::from(&sdk)
                .interceptor(sts_faults.clone())
                .build(),
        );
        let mut dynamodb = aws_sdk_dynamodb::config::Builder::from(&sdk);
        if let Some(endpoint) = dynamodb_endpoint {
            dynamodb = dynamodb.endpoint_url(endpoint);
        }
        let tenants = shared::store::client::scoped::TenantClients::new(
            sts,
            dynamodb.build(),
            shared::isolation::credentials::CredentialSettings {
                role_arn: ROLE_ARN.into(),
                operator_role_arn: Some(OPERATOR_ROLE_ARN.into()),
                platform_access: settings.platform_access,
                table: shared::isolation::policy::TableLocation::from_role_arn(
                    ROLE_ARN,
                    "us-east-1",
                    table,
                )
                .unwrap(),
                duration_seconds: 900,
            },
            clock.clone(),
        )
        .with_interceptor(SharedInterceptor::new(TestInterceptor {
            requests: requests.clone(),
            faults: faults.clone(),
        }));
        // Metrics lines are kept in memory, where `tests/tests/all/metrics.rs` reads them.
        let app = App::with_clients(settings, tenants, clock.clone())
            .with_metrics(shared::service::metrics::MetricsSink::memory());
        Self {
            app,
            clock,
            requests,
            faults,
            sts: sts_faults,
            admin: admin.clone(),
            table: table.to_owned(),
            sts_endpoint: sts_endpoint.to_owned(),
        }
    }

    /// This container with the list-page cache on for the premium and custom tiers, trusting a
    /// page for `staleness_ms` (what `LIST_CACHE_MS` sets).
    pub fn with_list_cache(self, staleness_ms: u64) -> Self {
        let list_cache = shared::service::app::ListCacheSettings {
            staleness_ms,
            tiers: shared::service::app::ListCacheSettings::DEFAULT_TIERS.to_vec(),
        };
        Self {
            app: self.app.with_list_cache(Some(list_cache)),
            ..self
        }
    }

    /// This container with its signing keys from `signing` (a secret on moto, in the key tests).
    pub fn with_signing(self, signing: shared::service::signing::SigningKeys) -> Self {
        Self {
            app: self.app.with_signing(signing),
            ..self
        }
    }

    /// Every item in this test's table (the admin client may Scan; tenants never can).
    pub async fn all_items(&self) -> Vec<HashMap<String, AttributeValue>> {
        self.admin_scan(&self.table).await
    }

    /// A copy of the whole table, as a point-in-time restore would make it: a table named
    /// `<table>-restore-<suffix>` with the template's definition (no stream), holding every item.
    pub async fn snapshot(&self, suffix: &str) -> String {
        let name = format!("{}-restore-{suffix}", self.table);
        let def = devtools::table_from_template(&devtools::default_template_path())
            .expect("template.yaml defines the table")
            .without_stream();
        devtools::create_table(&self.admin, &name, &def)
            .await
            .expect("create the snapshot table");
        for item in self.all_items().await {
            self.put_raw(&name, item).await;
        }
        name
    }

    /// Writes `item` into `table` with the admin client, past every handler and guard: a copied
    /// item, a stale or forged one, state other containers would have left.
    pub async fn put_raw(&self, table: &str, item: HashMap<String, AttributeValue>) {
        self.admin
            .put_item()
            .table_name(table)
            .set_item(Some(item))
            .send()
            .await
            .expect("put an item with the admin client");
    }

    /// Every item in `table` (another table on the same DynamoDB: a restore's source).
    pub async fn admin_scan(&self, table: &str) -> Vec<HashMap<String, AttributeValue>> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .admin
                .scan()
                .table_name(table)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .expect("scan");
            items.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key.filter(|k| !k.is_empty());
            if start.is_none() {
                return items;
            }
        }
    }

    /// Every item but tenant records: what the tests' routes wrote.
    pub async fn data_items(&self) -> Vec<HashMap<String, AttributeValue>> {
        self.all_items()
            .await
            .into_iter()
            .filter(|i| {
                let pk = i["PK"].as_s().map(String::as_str).unwrap_or_default();
                !(pk.ends_with("#TENANT") && i.get("SK") == i.get("PK"))
            })
            .collect()
    }

    /// Every item whose `PK` starts with `prefix` (a raw read, for tests).
    pub async fn items_under(&self, prefix: &str) -> Vec<HashMap<String, AttributeValue>> {
        self.all_items()
            .await
            .into_iter()
            .filter(|i| i["PK"].as_s().is_ok_and(|pk| pk.starts_with(prefix)))
            .collect()
    }

    /// The session policies moto recorded for `tenant`'s AssumeRole calls of the tenant-access role
    /// (the tenant routes' sessions), in order.
    pub async fn recorded_policies(&self, tenant: &str) -> Vec<String> {
        self.recorded_policies_of(tenant, ROLE_ARN).await
    }

    /// The session policies moto recorded for `tenant`'s AssumeRole calls of the tenant-operator
    /// role (the operator paths' sessions), in order.
    pub async fn recorded_operator_policies(&self, tenant: &str) -> Vec<String> {
        self.recorded_policies_of(tenant, OPERATOR_ROLE_ARN).await
    }

    async fn recorded_policies_of(&self, tenant: &str, role_arn: &str) -> Vec<String> {
        let data = http_get_json(&format!("{}/moto-api/data.json", self.sts_endpoint)).await;
        let session = shared::isolation::credentials::role_session_name(
            &shared::identity::ids::TenantId::parse(tenant).unwrap(),
        );
        data["sts"]["AssumedRole"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["session_name"] == session.as_str() && r["role_arn"] == role_arn)
            .map(|r| r["policy"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// A minimal HTTP/1.0 GET on loopback, for moto's introspection API.
pub async fn http_get_json(url: &str) -> Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap();
    let mut stream = tokio::net::TcpStream::connect(host)
        .await
        .expect("connect to moto");
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    serde_json::from_str(body).expect("moto answers JSON")
}

/// Who a test request claims to be.
#[derive(Debug, Clone)]
pub enum Auth {
    Tenant(String),
    /// A tenant user who wrote `custom:role = <role>` into their own profile: a writable custom
    /// attribute, which never makes an operator.
    TenantWithRole(String, String),
    /// An operator of tenant `t`: the access token carries the `pooltable/admin` scope, which the
    /// HTTP API's JWT authorizer verified (`requestContext.authorizer.jwt.scopes`).
    Operator(String),
    /// An operator by group: `cognito:groups` holds `platform-admin` (as HTTP API flattens it).
    OperatorByGroup(String),
    /// An authorizer block with no tenant claim.
    NoTenant,
    /// What an HTTP API's JWT authorizer passes for a token it verified: its claims (each value a
    /// string, arrays flattened to `"[a b]"`) and, for an access token, its scopes.
    Verified {
        claims: Value,
        scopes: Value,
    },
}

/// What an API Gateway event is made into: the JSON the Lambda service delivers (for a function
/// binary on a Runtime API), or the request `lambda_http` makes of it (for a handler).
pub trait FromEvent {
    fn from_event(json: Value) -> Self;
}

impl FromEvent for Value {
    fn from_event(json: Value) -> Self {
        json
    }
}

impl FromEvent for Request {
    fn from_event(json: Value) -> Self {
        lambda_http::request::from_str(&json.to_string()).expect("a valid API Gateway v2 event")
    }
}

/// An API Gateway HTTP API (v2) event, as API Gateway sends it after the JWT authorizer ran.
pub fn event<T: FromEvent>(
    method: &str,
    route: &str,
    path_params: &[(&str, &str)],
    query: &[(&str, &str)],
    body: Option<Value>,
    auth: &Auth,
) -> T {
    let mut path = route.to_owned();
    for (k, v) in path_params {
        path = path.replace(&format!("{{{k}}}"), v);
    }
    let raw_query = query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let claims = match auth {
        Auth::Tenant(t) => json!({"sub": "user-1", "custom:tenantId": t}),
        Auth::TenantWithRole(t, r) => {
            json!({"sub": "user-1", "custom:tenantId": t, "custom:role": r})
        }
        Auth::Operator(t) => {
            json!({"sub": "user-1", "custom:tenantId": t, "scope": "pooltable/admin"})
        }
        Auth::OperatorByGroup(t) => {
            json!({"sub": "user-1", "custom:tenantId": t, "cognito:groups": "[platform-admin]"})
        }
        Auth::NoTenant => json!({"sub": "user-1"}),
        Auth::Verified { claims, .. } => claims.clone(),
    };
    let scopes = match auth {
        Auth::Operator(_) => json!(["pooltable/admin"]),
        Auth::Verified { scopes, .. } => scopes.clone(),
        _ => Value::Null,
    };
    T::from_event(json!({
        "version": "2.0",
        "routeKey": format!("{method} {route}"),
        "rawPath": path,
        "rawQueryString": raw_query,
        "headers": {"content-type": "application/json", "host": "api.example.com"},
        "queryStringParameters": query.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "pathParameters": path_params.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "requestContext": {
            "accountId": "123456789012", "apiId": "api", "domainName": "api.example.com",
            "domainPrefix": "api", "requestId": "req-1", "routeKey": format!("{method} {route}"),
            "stage": "$default", "time": "20/Nov/2026:06:00:00 +0000", "timeEpoch": 1795154400000u64,
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "tests"},
            "authorizer": {"jwt": {"claims": claims, "scopes": scopes}}
        },
        "body": body.map(|b| b.to_string()),
        "isBase64Encoded": false
    }))
}

/// A response, decoded for assertions.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub content_type: String,
    pub retry_after: Option<String>,
    /// The `Link` header (export pages).
    pub link: Option<String>,
    /// The `Location` header (an accepted import).
    pub location: Option<String>,
    /// Whether `Idempotent-Replayed: true` was sent.
    pub replayed: bool,
    pub body: Value,
    /// The body as sent (NDJSON pages are not one JSON value).
    pub text: String,
}

pub fn resp(result: Result<Response<Body>, ApiError>) -> Resp {
    let r = result.unwrap_or_else(ApiError::into_response);
    let content_type = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let retry_after = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let header = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let link = header("link");
    let location = header("location");
    let replayed = header("idempotent-replayed").as_deref() == Some("true");
    let text = match r.body() {
        Body::Text(t) => t.clone(),
        Body::Binary(b) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    };
    let body = match r.body() {
        Body::Text(t) => serde_json::from_str(t).unwrap_or(Value::String(t.clone())),
        Body::Binary(b) => serde_json::from_slice(b).unwrap_or(Value::Null),
        _ => Value::Null,
    };
    Resp {
        status: r.status().as_u16(),
        content_type,
        retry_after,
        link,
        location,
        replayed,
        body,
        text,
    }
}

impl Resp {
    /// The `field` of each item of a list page's `items`, in order.
    pub fn ids(&self, field: &str) -> Vec<String> {
        self.body["items"]
            .as_array()
            .expect("a list page")
            .iter()
            .map(|item| item[field].as_str().expect("an id").to_owned())
            .collect()
    }

    /// The cursor of the next page, from a `Link: <…&cursor=…>; rel="next"` header (an export
    /// page); None on the last page.
    pub fn next_cursor(&self) -> Option<String> {
        self.link.as_deref().map(|link| {
            let from = link.find("cursor=").expect("a cursor in the Link header") + "cursor=".len();
            let to = from + link[from..].find('>').expect("a Link header's <url>");
            link[from..to].to_owned()
        })
    }

    /// Asserts a problem+json of `status` whose `detail` holds `words`, and returns self.
    pub fn assert_problem_naming(&self, status: u16, words: &str) -> &Self {
        self.assert_problem(status);
        let detail = self.body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(words),
            "not naming {words:?}: {}",
            self.body
        );
        self
    }

    /// Asserts a 4xx problem+json and returns self.
    pub fn assert_problem(&self, status: u16) -> &Self {
        assert_eq!(self.status, status, "body: {}", self.body);
        assert_eq!(self.content_type, "application/problem+json");
        assert_eq!(self.body["status"], status);
        self
    }
}

/// Onboards `tenant` with `shard_count` shards through the real handler, as an operator (tier
/// standard).
pub async fn onboard(h: &Harness, tenant: &str, shard_count: u32) {
    onboard_tier(h, tenant, shard_count, "standard").await
}

/// A fresh tenant id (`unique(prefix)`), onboarded with 1 shard: every tenant route needs a record.
pub async fn onboarded(h: &Harness, prefix: &str) -> String {
    onboarded_on_shards(h, prefix, 1).await
}

/// A fresh tenant id (`unique(prefix)`), onboarded with `shard_count` shards.
pub async fn onboarded_on_shards(h: &Harness, prefix: &str, shard_count: u32) -> String {
    let tenant = unique(prefix);
    onboard(h, &tenant, shard_count).await;
    tenant
}

/// Onboards `tenant` in a table of its own (tier standard, `shard_count` shards), as an operator:
/// the table's name.
pub async fn onboard_own(h: &Harness, tenant: &str, shard_count: u32) -> String {
    let r = h
        .operator()
        .onboard_tenant(json!({
            "tenantId": tenant, "tier": "standard", "shardCount": shard_count, "placement": "own"
        }))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let own_table = format!("{}-tenant-{tenant}", h.table);
    assert_eq!(r.body["placement"], "own");
    assert_eq!(r.body["ownTable"], own_table.as_str());
    own_table
}

/// Raw items as text, each with its attributes in name order, sorted: a view of a set of items
/// that compares byte for byte.
pub fn sorted_text(items: Vec<HashMap<String, AttributeValue>>) -> Vec<String> {
    let mut out: Vec<String> = items
        .into_iter()
        .map(|i| {
            format!(
                "{:?}",
                i.into_iter().collect::<std::collections::BTreeMap<_, _>>()
            )
        })
        .collect();
    out.sort();
    out
}

/// [`onboard`] in tier `tier`.
pub async fn onboard_tier(h: &Harness, tenant: &str, shard_count: u32, tier: &str) {
    onboard_with(
        h,
        json!({"tenantId": tenant, "tier": tier, "shardCount": shard_count}),
    )
    .await
}

/// [`onboard`] with custom limits at the maxima an operator may set: for measurements (the
/// benchmark's overhead figures) that must never be refused by a quota they are not measuring,
/// however fast the machine sends.
pub async fn onboard_at_max_limits(h: &Harness, tenant: &str, shard_count: u32) {
    use shared::store::tenancy::tenants::{MAX_CAPACITY_UNITS_PER_SECOND, MAX_REQUESTS_PER_SECOND};
    onboard_with(
        h,
        json!({
            "tenantId": tenant,
            "tier": "custom",
            "limits": {
                "requestsPerSecond": MAX_REQUESTS_PER_SECOND,
                "capacityUnitsPerSecond": MAX_CAPACITY_UNITS_PER_SECOND,
            },
            "shardCount": shard_count,
        }),
    )
    .await
}

/// [`onboard`] with custom limits: `rps` requests and `cu` capacity units a second.
pub async fn onboard_custom(h: &Harness, tenant: &str, shard_count: u32, rps: u32, cu: u32) {
    onboard_with(
        h,
        json!({
            "tenantId": tenant,
            "tier": "custom",
            "limits": {"requestsPerSecond": rps, "capacityUnitsPerSecond": cu},
            "shardCount": shard_count,
        }),
    )
    .await
}

/// The capacity units (read + write) the usage meter recorded today for `tenant`, on `route` or on
/// every route, once each of `apps` has written its counts; read by an operator through `ops`.
pub async fn units_used(ops: &Harness, apps: &[&App], tenant: &str, route: Option<&str>) -> f64 {
    for app in apps {
        app.flush_usage().await.expect("flush usage");
    }
    let today = shared::store::quota::usage::utc_date(ops.app.clock.now_millis());
    let r = ops
        .operator()
        .query(&[("from", &today), ("to", &today)])
        .get_tenant_usage(tenant)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let units = |u: &Value| u["read"].as_f64().unwrap_or(0.0) + u["write"].as_f64().unwrap_or(0.0);
    let routes = &r.body["days"][0]["capacityUnits"];
    match route {
        Some(route) => units(&routes[route]),
        None => routes
            .as_object()
            .map_or(0.0, |all| all.values().map(units).sum()),
    }
}

/// Offboards `tenant` to its end from `h`'s container as `operator`: the first call, then, once
/// deletion may start (the test clock moved on), calls until the report (200).
pub async fn offboard_to_end(h: &Harness, tenant: &str, operator: &Auth) -> Resp {
    let client = h.caller(operator);
    let delay = shared::store::lifecycle::offboarding::DELETION_DELAY_SECONDS;
    let what = format!("the offboarding of {tenant}");
    step_to_end(h, &what, delay, 50, || client.offboard_tenant(tenant)).await
}

/// One page of `tenant`'s export by `operator` through `h`'s container, asked with `query`.
pub async fn export_page(
    h: &Harness,
    operator: &Auth,
    tenant: &str,
    query: &[(&str, &str)],
) -> Resp {
    h.caller(operator).query(query).export_tenant(tenant).await
}

/// Every page of `tenant`'s export by `operator`, `limit` items a page, following each page's
/// `Link` header to the last; each must answer 200.
pub async fn export_pages(h: &Harness, operator: &Auth, tenant: &str, limit: &str) -> Vec<Resp> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("limit", limit)];
        if let Some(c) = cursor.as_deref() {
            query.push(("cursor", c));
        }
        let page = export_page(h, operator, tenant, &query).await;
        assert_eq!(page.status, 200, "{}", page.body);
        cursor = page.next_cursor();
        pages.push(page);
        if cursor.is_none() {
            return pages;
        }
        assert!(pages.len() < 100, "the export does not end");
    }
}

/// Runs an operator's change that works in steps (an offboarding, a move, a re-sharding) to its
/// end: `step`'s first call starts it (202), the test clock passes `delay_seconds`, then calls go
/// on, each 202 until one answers 200 (that answer; `what` fails after `attempts` more calls).
pub async fn step_to_end<Step: std::future::Future<Output = Resp>>(
    h: &Harness,
    what: &str,
    delay_seconds: u64,
    attempts: usize,
    mut step: impl FnMut() -> Step,
) -> Resp {
    let first = step().await;
    assert_eq!(first.status, 202, "{what}: {}", first.body);
    h.clock.advance_seconds(delay_seconds);
    for _ in 0..attempts {
        let r = step().await;
        if r.status == 200 {
            return r;
        }
        assert_eq!(r.status, 202, "{what}: {}", r.body);
    }
    panic!("{what} does not end");
}

async fn onboard_with(h: &Harness, body: Value) {
    let tenant = body["tenantId"].as_str().unwrap_or_default().to_owned();
    let r = h.operator().onboard_tenant(body).await;
    assert_eq!(r.status, 201, "onboarding {tenant}: {}", r.body);
}

/// Runs the lifecycle driver on `app` until it reports nothing pending (60 runs at the most).
pub async fn drive_to_end(app: &App) {
    for _ in 0..60 {
        // Boxed: the driver's future overflows a test thread's stack in debug.
        let run = Box::pin(tenants::drive_lifecycle::drive(
            app,
            &tenants::Lanes::in_process(),
        ))
        .await;
        if run.expect("a lifecycle run").pending == 0 {
            return;
        }
    }
    panic!("the lifecycle driver does not finish");
}

/// Runs the lifecycle driver on `app` once for each of `lives`, each killed after that many
/// milliseconds (a timeout or a crash part-way through its work).
pub async fn drive_killed_after(app: &App, lives: &[u64]) {
    let lanes = tenants::Lanes::in_process();
    for ms in lives {
        let run = Box::pin(tenants::drive_lifecycle::drive(app, &lanes));
        let _ = tokio::time::timeout(std::time::Duration::from_millis(*ms), run).await;
    }
}

/// Calls `step` (a route that works in steps: 202 with a Retry-After until it is done, then 200)
/// until it answers 200, each call cut off after `budget(attempt)` as if its function were killed
/// part-way; `what` fails after `attempts` calls. How many calls were cut off.
pub async fn step_to_end_with_kills<Step: std::future::Future<Output = Resp>>(
    what: &str,
    attempts: u64,
    budget: impl Fn(u64) -> std::time::Duration,
    mut step: impl FnMut() -> Step,
) -> usize {
    let mut killed = 0;
    for attempt in 0..attempts {
        match tokio::time::timeout(budget(attempt), step()).await {
            Err(_) => killed += 1,
            Ok(r) if r.status == 200 => return killed,
            Ok(r) => {
                assert_eq!(r.status, 202, "{}", r.body);
                assert!(r.retry_after.is_some());
            }
        }
    }
    panic!("{what} never finished");
}

/// Log output captured in memory: a `MakeWriter` for the production JSON subscriber in log tests.
#[derive(Clone, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// Captures this thread's logs in the production JSON format until the guard is dropped (a
    /// thread's default, never the process's: other tests run on other threads).
    pub fn install() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let guard = tracing::subscriber::set_default(shared::service::runtime::json_subscriber(
            logs.clone(),
        ));
        (logs, guard)
    }

    /// Every line captured so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLogs {
    type Writer = tracing_subscriber::fmt::writer::MutexGuardWriter<'a, Vec<u8>>;
    fn make_writer(&'a self) -> Self::Writer {
        self.0.make_writer()
    }
}

/// Declares `struct Tenant<'a> { h, auth }` in a test file, with `new(h, prefix)` (a fresh tenant)
/// and `name()`; each file adds its own route methods to it.
#[macro_export]
macro_rules! tenant_client {
    () => {
        struct Tenant<'a> {
            h: &'a $crate::Harness,
            auth: $crate::Auth,
        }

        impl<'a> Tenant<'a> {
            /// A fresh tenant, onboarded (1 shard): every tenant route needs a tenant record.
            async fn new(h: &'a $crate::Harness, prefix: &str) -> Self {
                Self::with_shards(h, prefix, 1).await
            }

            /// A fresh tenant, onboarded with `shards` shards.
            async fn with_shards(h: &'a $crate::Harness, prefix: &str, shards: u32) -> Self {
                let name = $crate::unique(prefix);
                $crate::onboard(h, &name, shards).await;
                Self {
                    h,
                    auth: $crate::Auth::Tenant(name),
                }
            }

            /// Two fresh tenants on `h` (1 shard each): the isolation tests' owner and other.
            #[allow(dead_code)]
            async fn two(h: &'a $crate::Harness, prefixes: [&str; 2]) -> (Self, Self) {
                let [a, b] = prefixes;
                (Self::new(h, a).await, Self::new(h, b).await)
            }

            /// The tenant's client, for its route methods.
            #[allow(dead_code)]
            fn client(&self) -> $crate::Client<'a> {
                self.h.caller(&self.auth)
            }

            #[allow(dead_code)]
            fn name(&self) -> String {
                match &self.auth {
                    $crate::Auth::Tenant(t) => t.clone(),
                    _ => unreachable!(),
                }
            }
        }
    };
}
