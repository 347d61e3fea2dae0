//! Everything a function builds once per container, in `main`: configuration from the environment,
//! the AWS clients, the tenant credential cache and the clock.

use std::sync::Arc;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_async::rt::sleep::{SharedAsyncSleep, TokioSleep};
use aws_smithy_async::time::SharedTimeSource;
use aws_smithy_http_client::tls;
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use aws_types::service_config::{LoadServiceConfig, ServiceConfigKey};
use std::time::Duration;
use thiserror::Error;

use crate::identity::clock::{Clock, SystemClock};
use crate::identity::cursor::CursorKeys;
use crate::identity::ids::TenantId;
use crate::isolation::claims::{caller, check_execution_tenant, AuthMode, Caller, DEV_AUTH_ENV};
use crate::isolation::credentials::CredentialSettings;
use crate::isolation::policy::{PolicyError, TableLocation};
use crate::service::error::ApiError;
use crate::service::metrics::MetricsSink;
use crate::service::signing::{SecretSource, SigningError, SigningKeys};
use crate::store::limiter::{Admission, Charge, RateLimiter};
use crate::store::meter::note_tenant;
use crate::store::read_cache::ReadCache;
use crate::store::scoped::{TenantClients, TenantDb, DEFAULT_MAX_IN_FLIGHT};
use crate::store::tenants::{Limits, TenantDirectory, TenantStatus};
use crate::store::usage::UsageMeter;

pub const DEFAULT_SESSION_TTL_SECONDS: u64 = 3600;
pub const DEFAULT_CREDENTIALS_SECONDS: i32 = 900;

/// Why a function cannot start. `main` returns it, and Rust prints a returned error with `Debug`,
/// so `Debug` shows the message.
#[derive(Error)]
pub enum ConfigError {
    #[error("environment variable {0} is not set")]
    Missing(&'static str),
    #[error("environment variable {0} is invalid: {1}")]
    Invalid(&'static str, String),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("{DEV_AUTH_ENV} is set inside AWS Lambda: unsigned development tokens are never accepted in AWS")]
    DevAuthInAws,
    #[error(transparent)]
    Signing(#[from] SigningError),
}

impl std::fmt::Debug for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Values read from the environment. Nothing here is pinned in Cargo metadata.
#[derive(Debug, Clone)]
pub struct Settings {
    pub table_name: String,
    pub tenant_role_arn: String,
    pub session_ttl_seconds: u64,
    pub credentials_seconds: i32,
    pub auth: AuthMode,
    /// Where the cursor and import signing keys come from: the secret `SIGNING_KEYS_SECRET_ARN`
    /// (read again every `SIGNING_KEYS_REFRESH_SECONDS`), else `CURSOR_SIGNING_KEY` (and, during a
    /// rotation, `CURSOR_SIGNING_KEY_NEXT` then `CURSOR_SIGNING_KEY_PREVIOUS`), at least 32 bytes
    /// each ([`crate::service::signing`]).
    pub signing: KeySource,
    /// `DYNAMODB_MAX_IN_FLIGHT`, 1 to 64 (default 16): the fan-out budget of one API request.
    pub max_in_flight: usize,
    /// `READ_CACHE_MS`, 0 to 10,000 (default 0: off): how stale a cached single-item read may be
    /// ([`crate::store::read_cache`]).
    pub read_cache_ms: u64,
}

fn var(name: &'static str) -> Result<String, ConfigError> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(ConfigError::Missing(name))
}

fn var_or<T: std::str::FromStr>(name: &'static str, default: T) -> Result<T, ConfigError> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v
            .parse()
            .map_err(|_| ConfigError::Invalid(name, format!("{v:?} is not a number"))),
        _ => Ok(default),
    }
}

/// Whether the process runs inside the AWS Lambda service (or its container image emulator). The
/// service sets `LAMBDA_TASK_ROOT` and `AWS_LAMBDA_INITIALIZATION_TYPE` for every runtime, and
/// `AWS_EXECUTION_ENV` (`AWS_Lambda_…`) for managed ones; it is not set for OS-only runtimes such as
/// provided.al2023, so it cannot be the only signal. `cargo lambda watch` sets none of them.
/// `sam local` runs the function in a container with the same variables, plus `AWS_SAM_LOCAL=true`,
/// which SAM CLI sets and the Lambda service never does.
pub fn running_in_aws_lambda() -> bool {
    let set = |name| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    set("LAMBDA_TASK_ROOT")
        || set("AWS_LAMBDA_INITIALIZATION_TYPE")
        || std::env::var("AWS_EXECUTION_ENV").is_ok_and(|v| v.starts_with("AWS_Lambda"))
}

/// Whether SAM CLI's emulator runs the process (`sam local invoke`, `start-api`). The development
/// JWT is accepted there, set through `sam local`'s env file: template.yaml declares neither that
/// variable nor `AWS_SAM_LOCAL` (a template test checks both), so a deployed function has neither.
pub fn running_in_sam_local() -> bool {
    std::env::var("AWS_SAM_LOCAL").is_ok_and(|v| v == "true")
}

impl Settings {
    pub fn from_env() -> Result<Self, ConfigError> {
        let dev_auth = std::env::var(DEV_AUTH_ENV).is_ok_and(|v| v == "1");
        let in_aws = running_in_aws_lambda() && !running_in_sam_local();
        if dev_auth && in_aws {
            return Err(ConfigError::DevAuthInAws);
        }
        let credentials_seconds =
            var_or("TENANT_CREDENTIALS_SECONDS", DEFAULT_CREDENTIALS_SECONDS)?;
        if !(900..=3600).contains(&credentials_seconds) {
            return Err(ConfigError::Invalid(
                "TENANT_CREDENTIALS_SECONDS",
                "must be 900 to 3600".into(),
            ));
        }
        let max_in_flight = var_or("DYNAMODB_MAX_IN_FLIGHT", DEFAULT_MAX_IN_FLIGHT)?;
        if !(1..=64).contains(&max_in_flight) {
            return Err(ConfigError::Invalid(
                "DYNAMODB_MAX_IN_FLIGHT",
                "must be 1 to 64".into(),
            ));
        }
        let read_cache_ms = var_or("READ_CACHE_MS", 0u64)?;
        if read_cache_ms > crate::store::read_cache::MAX_STALENESS_MS {
            return Err(ConfigError::Invalid(
                "READ_CACHE_MS",
                "must be 0 (off) to 10000".into(),
            ));
        }
        let session_ttl_seconds = var_or("SESSION_TTL_SECONDS", DEFAULT_SESSION_TTL_SECONDS)?;
        if session_ttl_seconds == 0 {
            return Err(ConfigError::Invalid(
                "SESSION_TTL_SECONDS",
                "must be positive".into(),
            ));
        }
        let table_name = var("TABLE_NAME")?;
        let tenant_role_arn = var("TENANT_ROLE_ARN")?;
        let signing = match std::env::var("SIGNING_KEYS_SECRET_ARN")
            .ok()
            .filter(|v| !v.is_empty())
        {
            Some(id) => {
                let refresh_seconds = var_or(
                    "SIGNING_KEYS_REFRESH_SECONDS",
                    crate::service::signing::DEFAULT_REFRESH_SECONDS,
                )?;
                if !(1..=3600).contains(&refresh_seconds) {
                    return Err(ConfigError::Invalid(
                        "SIGNING_KEYS_REFRESH_SECONDS",
                        "must be 1 to 3600".into(),
                    ));
                }
                KeySource::Secret(SecretSource {
                    id,
                    refresh_seconds,
                })
            }
            None => KeySource::Fixed(keys_from_env()?),
        };
        Ok(Self {
            signing,
            max_in_flight,
            read_cache_ms,
            table_name,
            tenant_role_arn,
            session_ttl_seconds,
            credentials_seconds,
            auth: if dev_auth {
                AuthMode::UnsignedDevJwt
            } else {
                AuthMode::Authorizer
            },
        })
    }
}

/// Where a container's signing keys come from.
#[derive(Debug, Clone)]
pub enum KeySource {
    /// Fixed keys (the environment's; tests').
    Fixed(CursorKeys),
    /// A Secrets Manager secret, read again when stale.
    Secret(SecretSource),
}

/// `CURSOR_SIGNING_KEY`, with `CURSOR_SIGNING_KEY_PREVIOUS` and `CURSOR_SIGNING_KEY_NEXT` when set.
fn keys_from_env() -> Result<CursorKeys, ConfigError> {
    let optional = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
    let previous = optional("CURSOR_SIGNING_KEY_PREVIOUS");
    let keys = CursorKeys::new(
        var("CURSOR_SIGNING_KEY")?.as_bytes(),
        previous.as_deref().map(str::as_bytes),
    )
    .map_err(|e| ConfigError::Invalid("CURSOR_SIGNING_KEY", e.to_string()))?;
    match optional("CURSOR_SIGNING_KEY_NEXT") {
        Some(next) => keys
            .with_next(next.as_bytes())
            .map_err(|e| ConfigError::Invalid("CURSOR_SIGNING_KEY_NEXT", e.to_string())),
        None => Ok(keys),
    }
}

/// The HTTPS client every AWS client shares: hyper with rustls on ring, trusting the system's root
/// certificates (provided.al2023 ships them). It is the SDK's default client with ring in place of
/// aws-lc, whose C code made up about a quarter of each bootstrap.
pub fn https_client() -> SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https()
}

/// Retries: the standard mode's exponential backoff with full jitter, 3 attempts, so a short burst
/// of throttling is absorbed and a persistent one becomes a 503 within about a second.
fn retry_config() -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(3)
        .with_initial_backoff(Duration::from_millis(25))
        .with_max_backoff(Duration::from_millis(500))
}

/// Timeouts keep a stalled dependency from eating the Lambda's whole budget.
fn timeout_config() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(2))
        .operation_attempt_timeout(Duration::from_secs(3))
        .operation_timeout(Duration::from_secs(8))
        .build()
}

/// SDK settings for tools and tests: the full default chain (profiles, SSO caches, IMDS, ...), so
/// an operator's `pooltable` runs with whatever credentials their shell has.
pub async fn load_sdk_config() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(https_client())
        .retry_config(retry_config())
        .timeout_config(timeout_config())
        .load()
        .await
}

/// SDK settings of a function: only what a Lambda environment provides. Lambda puts the execution
/// role's credentials and the region in environment variables, so the default chain's profile
/// parser, IMDS and container clients are never used there; leaving them out keeps them out of
/// every bootstrap (README, "Benchmark"). Endpoint overrides are read like the SDK reads
/// them (`AWS_ENDPOINT_URL_<SERVICE>`, then `AWS_ENDPOINT_URL`): the local stack and
/// `sam local` use them. FIPS and dual-stack endpoints follow `AWS_USE_FIPS_ENDPOINT` and
/// `AWS_USE_DUALSTACK_ENDPOINT`. Not read: shared config files, container credential endpoints and
/// the other `AWS_*` tuning variables (nothing in the template sets them).
pub fn lambda_sdk_config() -> Result<SdkConfig, ConfigError> {
    let region = ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .ok_or(ConfigError::Missing("AWS_REGION"))?;
    Ok(SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region))
        .credentials_provider(SharedCredentialsProvider::new(
            aws_config::environment::EnvironmentVariableCredentialsProvider::new(),
        ))
        .http_client(https_client())
        .retry_config(retry_config())
        .timeout_config(timeout_config())
        .sleep_impl(SharedAsyncSleep::new(TokioSleep::new()))
        .time_source(SharedTimeSource::default())
        .service_config(EndpointsFromEnv)
        .use_fips(env_flag("AWS_USE_FIPS_ENDPOINT"))
        .use_dual_stack(env_flag("AWS_USE_DUALSTACK_ENDPOINT"))
        .build())
}

/// A boolean setting the SDK reads from the environment: `true` (any case) turns it on.
fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

/// `AWS_ENDPOINT_URL_<SERVICE ID>` (upper case, spaces as `_`), then `AWS_ENDPOINT_URL`: the
/// environment half of the SDK's service-specific configuration (no shared config file in Lambda).
/// Like the SDK, `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true` turns the endpoint overrides off.
#[derive(Debug)]
struct EndpointsFromEnv;

impl LoadServiceConfig for EndpointsFromEnv {
    fn load_config(&self, key: ServiceConfigKey<'_>) -> Option<String> {
        service_setting(&key, |name| std::env::var(name).ok())
    }
}

fn service_setting(
    key: &ServiceConfigKey<'_>,
    var: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    if key.env() == "AWS_ENDPOINT_URL"
        && set("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return None;
    }
    let service = key.service_id().to_ascii_uppercase().replace(' ', "_");
    set(&format!("{}_{service}", key.env())).or_else(|| set(key.env()))
}

/// 403 unless the caller is an operator (scope `pooltable/admin` or group `platform-admin`).
pub fn require_operator(caller: &Caller) -> Result<(), ApiError> {
    if caller.operator {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!(
            "This route needs the OAuth scope {} or membership of the group {}.",
            crate::isolation::claims::OPERATOR_SCOPE,
            crate::isolation::claims::OPERATOR_GROUP
        )))
    }
}

/// What every handler borrows.
pub struct App {
    pub settings: Settings,
    pub tenants: TenantClients,
    /// Tenant records (tier, limits, shard count), cached per container.
    pub directory: TenantDirectory,
    /// This container's side of the tier quota.
    pub limiter: RateLimiter,
    /// This container's usage counts not yet written.
    pub usage: UsageMeter,
    /// Single-item reads, when `READ_CACHE_MS` turns the cache on.
    pub read_cache: ReadCache,
    pub clock: Arc<dyn Clock>,
    /// Where this container's EMF metrics lines go (stdout in Lambda).
    pub metrics: MetricsSink,
    /// The cursor and import signing keys ([`Self::cursor_keys`]).
    pub signing: SigningKeys,
    /// The `createdAt` of each tenant record this container counted for.
    incarnations: Incarnations,
}

/// Which tenant of an id this container's counts belong to: its record's `createdAt`. A new value
/// means the id was offboarded and onboarded again.
#[derive(Debug, Default)]
struct Incarnations(std::sync::Mutex<std::collections::HashMap<TenantId, String>>);

impl Incarnations {
    /// Records `created_at` for `tenant`; true when it replaced another value.
    fn changed(&self, tenant: &TenantId, created_at: &str) -> bool {
        let mut known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match known.get(tenant) {
            Some(seen) if seen == created_at => false,
            Some(_) => {
                known.insert(tenant.clone(), created_at.to_owned());
                true
            }
            None => {
                known.insert(tenant.clone(), created_at.to_owned());
                false
            }
        }
    }
}

impl App {
    /// Reads the environment and builds the clients. Called once, in `main`.
    pub async fn from_env() -> Result<Self, ConfigError> {
        let settings = Settings::from_env()?;
        let sdk = lambda_sdk_config()?;
        let app = Self::new(settings, &sdk, Arc::new(SystemClock))?;
        // A container that cannot read its keys fails at start, loudly, not on its first cursor.
        app.signing.refresh(app.clock.now_millis()).await?;
        Ok(app)
    }

    pub fn new(
        settings: Settings,
        sdk: &SdkConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ConfigError> {
        let region = sdk
            .region()
            .map(|r| r.to_string())
            .ok_or(ConfigError::Missing("AWS_REGION"))?;
        let table =
            TableLocation::from_role_arn(&settings.tenant_role_arn, &region, &settings.table_name)?;
        let tenants = TenantClients::new(
            aws_sdk_sts::Client::new(sdk),
            aws_sdk_dynamodb::config::Builder::from(sdk).build(),
            CredentialSettings {
                role_arn: settings.tenant_role_arn.clone(),
                table,
                duration_seconds: settings.credentials_seconds,
            },
            clock.clone(),
        )
        .with_max_in_flight(settings.max_in_flight);
        let signing = match &settings.signing {
            KeySource::Secret(source) => {
                SigningKeys::from_secret(aws_sdk_secretsmanager::Client::new(sdk), source.clone())
            }
            KeySource::Fixed(keys) => SigningKeys::fixed(keys.clone()),
        };
        Ok(Self::with_clients(settings, tenants, clock).with_signing(signing))
    }

    /// An `App` over clients built elsewhere (tests build theirs with fault injection).
    pub fn with_clients(settings: Settings, tenants: TenantClients, clock: Arc<dyn Clock>) -> Self {
        let directory =
            TenantDirectory::new(clock.clone(), tenants.record_reader(), tenants.table_name());
        let read_cache = ReadCache::new(settings.read_cache_ms);
        // A secret needs a client: `App::new` builds it (or a test, with `with_signing`).
        let signing = match &settings.signing {
            KeySource::Fixed(keys) => SigningKeys::fixed(keys.clone()),
            KeySource::Secret(_) => SigningKeys::none(),
        };
        Self {
            settings,
            tenants,
            directory,
            limiter: RateLimiter::default(),
            usage: UsageMeter::default(),
            read_cache,
            clock,
            metrics: MetricsSink::from_env(),
            signing,
            incarnations: Incarnations::default(),
        }
    }

    /// This `App` with its signing keys from `signing`.
    pub fn with_signing(self, signing: SigningKeys) -> Self {
        Self { signing, ..self }
    }

    /// The signing keys this container holds now; 503 when a secret was never read.
    pub fn cursor_keys(&self) -> Result<Arc<CursorKeys>, ApiError> {
        self.signing.current().ok_or_else(|| {
            ApiError::Unavailable("The signing keys are unavailable; retry later.".into())
        })
    }

    /// This `App` with its metrics lines sent to `sink` (tests keep them in memory).
    pub fn with_metrics(self, sink: MetricsSink) -> Self {
        Self {
            metrics: sink,
            ..self
        }
    }

    /// Emits an EMF line of `values` (counts) outside a request, with `properties`.
    pub fn emit_event(&self, values: &[(&str, f64)], properties: &[(&str, &str)]) {
        self.metrics.emit(crate::service::metrics::event_line(
            &self.metrics.service,
            self.clock.now_millis(),
            values,
            properties,
        ));
    }

    /// The name of `tenant`'s tier from the cached record (`none` without one).
    pub async fn tier_name(&self, tenant: &TenantId) -> &'static str {
        match self.directory.record(tenant).await {
            Ok(Some(record)) => record.tier.as_str(),
            _ => "none",
        }
    }

    /// Adds an interceptor to every tenant client (tests count requests and inject faults with it).
    pub fn with_dynamodb_interceptor(
        self,
        interceptor: aws_sdk_dynamodb::config::SharedInterceptor,
    ) -> Self {
        Self {
            tenants: self.tenants.with_interceptor(interceptor),
            ..self
        }
    }

    /// The verified caller of `req` (401/403 when there is none).
    pub fn caller(&self, req: &lambda_http::Request) -> Result<Caller, ApiError> {
        use lambda_http::RequestExt;
        let who = caller(req, self.settings.auth)?;
        let execution_tenant = req
            .lambda_context_ref()
            .and_then(|c| c.tenant_id.as_deref());
        if let Err(e) = check_execution_tenant(&who, execution_tenant) {
            // An alarm, not a client error: in tenant isolation mode the front door maps the
            // tenant from the same claim, so a mismatch means it is misconfigured or bypassed.
            tracing::error!(
                alarm = "tenant_environment_mismatch",
                execution_tenant,
                claimed_tenant = %who.tenant,
                "refused a request for another tenant than this execution environment's"
            );
            return Err(e.into());
        }
        note_tenant(&who.tenant);
        Ok(who)
    }

    /// The caller of `req` when it verifies, without logging: the runtime uses it to decide the
    /// quota before the handler runs, and the handler verifies (and reports) the caller itself.
    pub fn verified_caller(&self, req: &lambda_http::Request) -> Option<Caller> {
        use lambda_http::RequestExt;
        let who = caller(req, self.settings.auth).ok()?;
        let execution_tenant = req
            .lambda_context_ref()
            .and_then(|c| c.tenant_id.as_deref());
        check_execution_tenant(&who, execution_tenant).ok()?;
        Some(who)
    }

    /// Why `who` is refused before any route runs: its tenant is suspended or being offboarded, or
    /// has no record while `who` is no operator. An operator's own tenant may have no record only
    /// while it was never onboarded (operators onboard tenants, their own included, before any
    /// exists): once it has been offboarded, a report of that is in the platform's partition, and its
    /// operators are refused like its users, so offboarding never grants more than suspension. When
    /// that cannot be read, the operator is refused (fails closed). `None` also when the record
    /// cannot be read: the route's own `App::db` decides then.
    ///
    /// A refused tenant's counts held by this container are dropped, so none of them is written
    /// into a later tenant of the same id.
    pub async fn refusal(&self, who: &Caller) -> Option<ApiError> {
        match self.require_active(&who.tenant).await {
            // An operator's power comes with its own tenant's standing: when that cannot be read
            // (a throttle, a timeout past the cache), the operator is refused, never admitted.
            Err(unreadable) if who.operator => match unreadable {
                ApiError::Forbidden(_) => Box::pin(self.refused_operator(who, unreadable)).await,
                _ => Some(ApiError::Unavailable(
                    "This operator's tenant record cannot be read now; operator actions wait \
                     for it. Retry later."
                        .into(),
                )),
            },
            Err(refused @ ApiError::Forbidden(_)) => {
                self.forget_counts(&who.tenant);
                Some(refused)
            }
            _ => None,
        }
    }

    /// [`Self::refusal`] of an operator whose tenant is refused: `None` only when its tenant has no
    /// record and was never offboarded (operators bootstrapping).
    async fn refused_operator(&self, who: &Caller, refused: ApiError) -> Option<ApiError> {
        self.forget_counts(&who.tenant);
        let unrecorded = matches!(self.directory.record(&who.tenant).await, Ok(None));
        if !unrecorded {
            return Some(refused);
        }
        match self.operators_tenant_was_offboarded(&who.tenant).await {
            false => None,
            true => Some(ApiError::Forbidden(
                "This operator's tenant was offboarded: its operators act on no tenant.".into(),
            )),
        }
    }

    /// 403 unless `caller` is an operator ([`require_operator`]) whose own tenant may act now
    /// ([`Self::refusal`]: its tenant active, or never onboarded); 503 when its tenant's record cannot
    /// be read. Every operator route calls it, so an operator's power fails closed in the handler
    /// too, not only in the runtime's admission.
    pub async fn require_operator(&self, caller: &Caller) -> Result<(), ApiError> {
        require_operator(caller)?;
        match self.refusal(caller).await {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }

    /// Whether `tenant` was offboarded (true also when that cannot be read: the caller refuses).
    /// Read with the function's own credentials through a client that can read nothing but one
    /// tenant id's reports ([`crate::isolation::guard::report_reader`]): most functions may not
    /// assume the tenant-access role for the platform's partition at all.
    async fn operators_tenant_was_offboarded(&self, tenant: &TenantId) -> bool {
        let reports = TenantDb {
            client: crate::isolation::guard::report_reader(&self.tenants.record_reader()),
            tenant: TenantId::platform(),
            table: self.tenants.table_name().into(),
            max_in_flight: 1,
        };
        crate::store::offboarding::ever_offboarded(&reports, tenant)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "offboarding reports unreadable: refusing an operator without a tenant record");
                true
            })
    }

    /// Drops every count this container holds for `tenant` and has not written (usage, quota
    /// window): the tenant is refused, so they could only land in a later tenant of the same id.
    pub fn forget_counts(&self, tenant: &TenantId) {
        self.usage.forget(tenant);
        self.limiter.forget(tenant);
    }

    /// The limits in force for `tenant`: its record's (cached for
    /// [`crate::store::tenants::RECORD_TTL_SECONDS`]), the basic tier's when it has no record.
    pub async fn limits(&self, tenant: &TenantId) -> Result<Limits, ApiError> {
        let record = self.directory.record(tenant).await?;
        Ok(record.map_or(Limits::UNONBOARDED, |r| r.limits()))
    }

    /// 403 when `tenant` has no record (never onboarded, or offboarded), is suspended or is being
    /// offboarded (by its record, cached for [`crate::store::tenants::RECORD_TTL_SECONDS`], read
    /// without the tenant's credentials; an absence is trusted for a second).
    pub async fn require_active(&self, tenant: &TenantId) -> Result<(), ApiError> {
        let record = self.directory.onboarded_record(tenant).await?;
        match record.map(|r| r.status) {
            None => Err(ApiError::Forbidden("This tenant is not onboarded.".into())),
            Some(TenantStatus::Suspended) => {
                Err(ApiError::Forbidden("This tenant is suspended.".into()))
            }
            Some(TenantStatus::Offboarding) => Err(ApiError::Forbidden(
                "This tenant is being offboarded.".into(),
            )),
            Some(TenantStatus::Active) => Ok(()),
        }
    }

    /// Whether `tenant`'s request, estimated at `estimate_milli` thousandths of a capacity unit, may
    /// run now under its tier quota. Fails open: when the limits cannot be read, the request is
    /// admitted (with no budget to shrink its pages) and a warning logged.
    pub async fn admit(&self, tenant: &TenantId, estimate_milli: u64) -> Admission {
        match self.directory.record(tenant).await {
            Ok(record) => {
                if let Some(record) = &record {
                    // Counts held for an earlier tenant of this id (offboarded, then onboarded
                    // again) are never written into this one.
                    if self.incarnations.changed(tenant, &record.created_at) {
                        self.forget_counts(tenant);
                    }
                }
                let limits = record.map_or(Limits::UNONBOARDED, |r| r.limits());
                // Boxed: the shared window's reads and writes sit in every route's future.
                Box::pin(self.admit_shared(tenant, &limits, estimate_milli)).await
            }
            Err(e) => {
                tracing::warn!(tenant = %tenant, error = %e, "tenant limits unavailable: admitting (the quota fails open)");
                Admission::Admitted(Charge {
                    estimate_milli: 0,
                    budget_milli: u64::MAX,
                })
            }
        }
    }

    /// [`Self::admit`] once the limits are known. A container that has no recent answer of the
    /// tenant's shared window learns it (and the debt carried into it) first; then it decides on its
    /// own view only while that view is fresh and the tenant far from its limit
    /// ([`RateLimiter::admits_alone`]); otherwise the admission is reserved in the shared window
    /// ([`RateLimiter::reserve`]), so containers never give out the same room twice. When the
    /// window cannot be written, the container decides alone on its share (fail open).
    async fn admit_shared(&self, tenant: &TenantId, limits: &Limits, estimate: u64) -> Admission {
        let now = self.clock.now_seconds();
        // Without a client the runtime admits; the handler answers the refusal or outage itself.
        let Some(db) = self.db(tenant).await.ok() else {
            return self.limiter.decide(tenant, limits, now, estimate);
        };
        if !self.limiter.knows(tenant, now) {
            if let Err(e) = self.limiter.count(&db, limits, now).await {
                tracing::warn!(tenant = %tenant, error = %e, "the quota window could not be read before a first admission: deciding alone on a share (fail open)");
            }
        }
        for _ in 0..2 {
            let admission = self.limiter.decide(tenant, limits, now, estimate);
            let Admission::Admitted(_) = admission else {
                return admission;
            };
            if self.limiter.admits_alone(tenant, limits, now, estimate) {
                return admission;
            }
            match self.limiter.reserve(&db, limits, now, estimate).await {
                Ok(true) => return admission,
                // Refused by the shared window: decided again on what it said.
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(tenant = %tenant, error = %e, "the quota window could not be reserved: admitting on this container's view (fail open)");
                    return admission;
                }
            }
        }
        Admission::Limited {
            exceeded: crate::store::limiter::Exceeded::CapacityUnits,
            retry_after_seconds: self
                .limiter
                .wait_seconds(tenant, limits, now)
                .max(crate::store::limiter::LIMITED_RETRY_AFTER_SECONDS),
        }
    }

    /// Whole seconds until `tenant`'s capacity bucket, as this container knows it, holds something
    /// (0 when it does, or when its limits cannot be read).
    pub async fn quota_wait_seconds(&self, tenant: &TenantId) -> u32 {
        match self.limits(tenant).await {
            Ok(limits) => self
                .limiter
                .wait_seconds(tenant, &limits, self.clock.now_seconds()),
            Err(_) => 0,
        }
    }

    /// Bills `tenant` for work done on its behalf outside its own requests (an import's writes, an
    /// operator's export of it): one call of `route` with the capacity `meta` recorded, added to its
    /// usage and charged to its capacity quota (counted with [`Self::count_quota`]).
    pub fn bill(&self, tenant: &TenantId, route: &str, meta: &crate::store::meter::RequestMeta) {
        let (read_milli, write_milli) = meta.capacity_milli_units();
        let used = crate::store::usage::Pending {
            calls: 1,
            read_milli,
            write_milli,
            throttles: u64::from(meta.throttles()),
            ..Default::default()
        };
        self.usage.add(tenant, route, used);
        self.limiter
            .charge(tenant, self.clock.now_seconds(), read_milli + write_milli);
    }

    /// Runs `work`, an operator's lifecycle step on a tenant (a re-sharding or an offboarding, by
    /// a call or by the lifecycle driver), on the platform's account: what its DynamoDB requests
    /// consume is added to the platform's usage under `route` (one call) and written at once. It is
    /// never charged to the calling operator's tenant, in usage or in quota, nor to the target's
    /// quota (an operator's re-sharding must not throttle the tenant's own users; an offboarded
    /// tenant keeps no usage). `GET /tenants/_platform/usage` reports it.
    pub async fn on_platform_account<T>(
        &self,
        route: &str,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        // Boxed: a lifecycle step's future is large, and sits inside the route's or the driver's.
        let (out, meta) = Box::pin(crate::store::meter::with_request_meta(Box::pin(work))).await;
        let (read_milli, write_milli) = meta.capacity_milli_units();
        let platform = TenantId::platform();
        let used = crate::store::usage::Pending {
            calls: 1,
            read_milli,
            write_milli,
            throttles: u64::from(meta.throttles()),
            ..Default::default()
        };
        self.usage.add(&platform, route, used);
        out
    }

    /// Writes the platform's account's pending usage ([`Self::on_platform_account`]), if any: after
    /// an operator's call (by the runtime, once the handler has answered) and at the end of a
    /// lifecycle driver's run. Its writes are the platform's, never a request's.
    pub async fn flush_platform_usage(&self) {
        let platform = TenantId::platform();
        if !self.usage.tenants_pending().contains(&platform) {
            return;
        }
        let flushed = crate::store::meter::with_request_meta(async {
            let db = self.tenants.for_tenant(&platform).await?;
            self.usage.flush(&db, self.clock.now_millis()).await
        })
        .await
        .0;
        if let Err(e) = flushed {
            tracing::warn!(error = %e, "the platform's usage could not be written; it is kept for the next flush");
        }
    }

    /// Reads `tenant`'s shared quota window (and the debt carried into it) unless this container
    /// has had an answer of it within the last second: what a container does before it decides
    /// alone on work outside a request (an import's message). A failure is logged: the container
    /// then decides on what it knows.
    pub async fn learn_quota(&self, tenant: &TenantId) {
        if self.limiter.knows(tenant, self.clock.now_seconds()) {
            return;
        }
        if let Err(e) = self.count_quota(tenant).await {
            tracing::warn!(tenant = %tenant, error = %e, "the quota window could not be read; deciding on this container's view");
        }
    }

    /// Writes the units `tenant` consumed outside a request (an import's writes) to its quota
    /// window now, and learns the window's totals and debt from the answer.
    pub async fn count_quota(&self, tenant: &TenantId) -> Result<(), ApiError> {
        let limits = self.limits(tenant).await?;
        let db = self.db(tenant).await?;
        self.limiter
            .count(&db, &limits, self.clock.now_seconds())
            .await?;
        Ok(())
    }

    /// Writes every tenant's pending usage counts now (tests read usage right after their calls; a
    /// container would call it when told it is shutting down).
    pub async fn flush_usage(&self) -> Result<(), ApiError> {
        let now = self.clock.now_millis();
        for tenant in self.usage.tenants_pending() {
            // The platform's account (operators' lifecycle steps) has no record to be active by.
            let db = match tenant == TenantId::platform() {
                true => self
                    .tenants
                    .for_tenant(&tenant)
                    .await
                    .map_err(ApiError::from),
                false => self.db(&tenant).await,
            };
            let db = match db {
                Ok(db) => db,
                // A tenant refused its own data (no record, suspended, offboarding): its counts
                // cannot be written, and are dropped.
                Err(ApiError::Forbidden(_)) => {
                    self.forget_counts(&tenant);
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.usage.flush(&db, now).await?;
        }
        Ok(())
    }

    /// The scoped client for `tenant`; 403 when the tenant is suspended, before any credentials are
    /// vended.
    pub async fn db(&self, tenant: &TenantId) -> Result<TenantDb, ApiError> {
        self.require_active(tenant).await?;
        Ok(self.tenants.for_tenant(tenant).await?)
    }

    /// The scoped client for `tenant` for an operator's action on it (read its record or usage,
    /// change its tier, resume it), also while it is suspended. Only for operator routes, after
    /// [`require_operator`].
    pub async fn db_for_operator(&self, tenant: &TenantId) -> Result<TenantDb, ApiError> {
        Ok(self.tenants.for_tenant(tenant).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn endpoint_key(service_id: &str) -> ServiceConfigKey<'_> {
        ServiceConfigKey::builder()
            .service_id(service_id)
            .env("AWS_ENDPOINT_URL")
            .profile("endpoint_url")
            .build()
            .expect("a complete key")
    }

    fn environment(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.get(name).cloned()
    }

    #[test]
    fn a_service_endpoint_comes_from_its_own_variable_before_the_shared_one() {
        // GIVEN a shared override and one for DynamoDB
        let env = environment(&[
            ("AWS_ENDPOINT_URL", "http://shared:1"),
            ("AWS_ENDPOINT_URL_DYNAMODB", "http://own:2"),
        ]);
        // WHEN the SDK asks for each service's endpoint
        let own = service_setting(&endpoint_key("DynamoDB"), &env);
        let other = service_setting(&endpoint_key("STS"), &env);
        // THEN the service-specific variable wins, and the shared one serves the rest
        assert_eq!(own.as_deref(), Some("http://own:2"));
        assert_eq!(other.as_deref(), Some("http://shared:1"));
    }

    #[test]
    fn ignoring_configured_endpoints_turns_every_override_off() {
        // GIVEN overrides, and the SDK's switch that ignores them
        let env = environment(&[
            ("AWS_ENDPOINT_URL_DYNAMODB", "http://own:2"),
            ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"),
        ]);
        // WHEN / THEN the service's default endpoint is used
        assert_eq!(service_setting(&endpoint_key("DynamoDB"), &env), None);
    }

    #[test]
    fn a_service_id_with_spaces_names_its_variable_with_underscores() {
        let env = environment(&[("AWS_ENDPOINT_URL_API_GATEWAY", "http://gw:3")]);
        assert_eq!(
            service_setting(&endpoint_key("API Gateway"), &env).as_deref(),
            Some("http://gw:3")
        );
    }
}
