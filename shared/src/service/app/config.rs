//! Configuration from the environment, and the AWS SDK's configuration for a Lambda container.

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

use crate::identity::cursor::CursorKeys;
use crate::isolation::claims::{AuthMode, DEV_AUTH_ENV};
use crate::isolation::policy::PolicyError;
use crate::service::signing::{SecretSource, SigningError};
use crate::store::client::scoped::DEFAULT_MAX_IN_FLIGHT;
use crate::store::tenancy::tenants::Tier;

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

/// How long a restore's dry run may walk (both tables) within its call: under the function's 30 s
/// timeout ([`crate::store::tenancy::tenants::LONGEST_FUNCTION_TIMEOUT_SECONDS`]).
pub const DRY_RUN_SECONDS: u64 = 25;

/// Values read from the environment. Nothing here is pinned in Cargo metadata.
#[derive(Debug, Clone)]
pub struct Settings {
    pub table_name: String,
    pub tenant_role_arn: String,
    /// `TENANT_OPERATOR_ROLE_ARN`: the role the operator paths' sessions assume, the only ones that
    /// write a tenant's record (set on the operator functions only; unset, `TENANT_ROLE_ARN`).
    pub tenant_operator_role_arn: Option<String>,
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
    /// ([`crate::store::tenancy::read_cache`]).
    pub read_cache_ms: u64,
    /// `LIST_CACHE_MS` (0 to 10,000; default 0: off) and `LIST_CACHE_TIERS` (default
    /// `premium,custom`): the list-page cache's staleness bound and the tiers it serves
    /// ([`crate::store::client::pages`]).
    pub list_cache: Option<ListCacheSettings>,
    /// `PLATFORM_SESSION_ACCESS` (`all`, `usage`, `read` or `imports-due`; default `all`): what this
    /// function's sessions of the platform's partition may do; the template sets it on the
    /// functions whose roles the tenant-access role's trust narrows.
    pub platform_access: crate::isolation::policy::PlatformAccess,
    /// The scope of the sessions its routes' tenant clients take: a tenant route's, or a read-only
    /// route's (`Scope::Reader`, set by a read-only route's `main`: `runtime::start_read_only`).
    pub tenant_scope: crate::isolation::policy::Scope,
    /// `LIFECYCLE_LANES`, 1 to 64 (default 16): the lanes an offboarding's or a re-sharding's walk
    /// is split into
    /// ([`crate::store::lifecycle::lanes`]), each paced at a partition's rate.
    pub lifecycle_lanes: u32,
    /// How long a restore's dry run may walk within its call: [`DRY_RUN_SECONDS`]. Not read from
    /// the environment (the function's 30 s timeout bounds it); a test on a slow machine raises it.
    pub dry_run_seconds: u64,
    /// `TENANT_KEYS_TABLE` and `TENANT_KEY_ID` (both or neither), with `KEY_CACHE_SECONDS` (1 to
    /// 3,600; default 300): a key per tenant ([`crate::store::keys`]). Unset: no tenant is keyed.
    pub tenant_keys: Option<crate::store::keys::KeySettings>,
}

/// The list-page cache's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCacheSettings {
    pub staleness_ms: u64,
    pub tiers: Vec<Tier>,
}

impl ListCacheSettings {
    /// The tiers the cache serves unless `LIST_CACHE_TIERS` names others: the ones whose limits
    /// let a tenant's lists outgrow a partition.
    pub const DEFAULT_TIERS: [Tier; 2] = [Tier::Premium, Tier::Custom];

    fn from_env() -> Result<Option<Self>, ConfigError> {
        let staleness_ms = env_var_or("LIST_CACHE_MS", 0u64)?;
        if staleness_ms > crate::store::client::pages::MAX_STALENESS_MS {
            return Err(ConfigError::Invalid(
                "LIST_CACHE_MS",
                "must be 0 (off) to 10000".into(),
            ));
        }
        let tiers = match std::env::var("LIST_CACHE_TIERS") {
            Ok(names) if !names.trim().is_empty() => names
                .split(',')
                .map(|name| {
                    serde_json::from_value::<Tier>(serde_json::Value::String(
                        name.trim().to_owned(),
                    ))
                    .map_err(|_| {
                        ConfigError::Invalid(
                            "LIST_CACHE_TIERS",
                            format!("{name:?} is not a tier (basic, standard, premium or custom)"),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            _ => Self::DEFAULT_TIERS.to_vec(),
        };
        Ok((staleness_ms > 0).then_some(Self {
            staleness_ms,
            tiers,
        }))
    }
}

/// Environment variable `name`; [`ConfigError::Missing`] when it is unset or empty.
pub fn env_var(name: &'static str) -> Result<String, ConfigError> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(ConfigError::Missing(name))
}

/// Environment variable `name` as a `T`, or `default` when it is unset or empty.
pub fn env_var_or<T: std::str::FromStr>(name: &'static str, default: T) -> Result<T, ConfigError> {
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
            env_var_or("TENANT_CREDENTIALS_SECONDS", DEFAULT_CREDENTIALS_SECONDS)?;
        if !(900..=3600).contains(&credentials_seconds) {
            return Err(ConfigError::Invalid(
                "TENANT_CREDENTIALS_SECONDS",
                "must be 900 to 3600".into(),
            ));
        }
        let max_in_flight = env_var_or("DYNAMODB_MAX_IN_FLIGHT", DEFAULT_MAX_IN_FLIGHT)?;
        if !(1..=64).contains(&max_in_flight) {
            return Err(ConfigError::Invalid(
                "DYNAMODB_MAX_IN_FLIGHT",
                "must be 1 to 64".into(),
            ));
        }
        let lifecycle_lanes = env_var_or(
            "LIFECYCLE_LANES",
            crate::store::lifecycle::lanes::DEFAULT_LANES,
        )?;
        if !(1..=crate::store::lifecycle::lanes::MAX_LANES).contains(&lifecycle_lanes) {
            return Err(ConfigError::Invalid(
                "LIFECYCLE_LANES",
                "must be 1 to 64".into(),
            ));
        }
        let read_cache_ms = env_var_or("READ_CACHE_MS", 0u64)?;
        if read_cache_ms > crate::store::tenancy::read_cache::MAX_STALENESS_MS {
            return Err(ConfigError::Invalid(
                "READ_CACHE_MS",
                "must be 0 (off) to 10000".into(),
            ));
        }
        let list_cache = ListCacheSettings::from_env()?;
        let session_ttl_seconds = env_var_or("SESSION_TTL_SECONDS", DEFAULT_SESSION_TTL_SECONDS)?;
        if session_ttl_seconds == 0 {
            return Err(ConfigError::Invalid(
                "SESSION_TTL_SECONDS",
                "must be positive".into(),
            ));
        }
        let table_name = env_var("TABLE_NAME")?;
        let access = std::env::var("PLATFORM_SESSION_ACCESS").unwrap_or_default();
        let platform_access = crate::isolation::policy::PlatformAccess::parse(&access).ok_or(
            ConfigError::Invalid(
                "PLATFORM_SESSION_ACCESS",
                format!("{access:?} is not all, usage, read or imports-due"),
            ),
        )?;
        let tenant_role_arn = env_var("TENANT_ROLE_ARN")?;
        let tenant_operator_role_arn = optional_env("TENANT_OPERATOR_ROLE_ARN");
        let signing = match std::env::var("SIGNING_KEYS_SECRET_ARN")
            .ok()
            .filter(|v| !v.is_empty())
        {
            Some(id) => {
                let refresh_seconds = env_var_or(
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
            tenant_keys: key_settings_from_env()?,
            signing,
            max_in_flight,
            read_cache_ms,
            list_cache,
            table_name,
            tenant_role_arn,
            tenant_operator_role_arn,
            platform_access,
            tenant_scope: crate::isolation::policy::Scope::Tenant,
            lifecycle_lanes,
            dry_run_seconds: DRY_RUN_SECONDS,
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

/// The variable `name`, unless it is unset or empty.
fn optional_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn key_settings_from_env() -> Result<Option<crate::store::keys::KeySettings>, ConfigError> {
    let keys = (
        optional_env("TENANT_KEYS_TABLE"),
        optional_env("TENANT_KEY_ID"),
    );
    let (table, kms_key_id) = match keys {
        (Some(table), Some(kms_key_id)) => (table, kms_key_id),
        (None, None) => return Ok(None),
        (Some(_), None) => return Err(ConfigError::Missing("TENANT_KEY_ID")),
        (None, Some(_)) => return Err(ConfigError::Missing("TENANT_KEYS_TABLE")),
    };
    let cache_seconds = env_var_or(
        "KEY_CACHE_SECONDS",
        crate::store::keys::DEFAULT_KEY_CACHE_SECONDS,
    )?;
    if !(1..=3600).contains(&cache_seconds) {
        let why = "must be 1 to 3600".into();
        return Err(ConfigError::Invalid("KEY_CACHE_SECONDS", why));
    }
    Ok(Some(crate::store::keys::KeySettings {
        table,
        kms_key_id,
        cache_seconds,
    }))
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
        env_var("CURSOR_SIGNING_KEY")?.as_bytes(),
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
