//! The `App`s the figures are served by, configured as production configures them, and the targets
//! (straight to DynamoDB Local, or through the latency model) figures 1–5 run against.

use std::sync::Arc;

use shared::identity::clock::SystemClock;
use shared::isolation::claims::AuthMode;
use shared::service::app::Settings;
use shared::App;

pub(crate) const ROLE_ARN: &str = integration::ROLE_ARN;

pub(crate) fn production_app(sdk: &aws_types::SdkConfig, table: &str) -> App {
    production_app_with_budget(
        sdk,
        table,
        shared::store::client::scoped::DEFAULT_MAX_IN_FLIGHT,
    )
}

/// [`production_app`] with fan-out budget `max_in_flight` (`DYNAMODB_MAX_IN_FLIGHT`).
pub(crate) fn production_app_with_budget(
    sdk: &aws_types::SdkConfig,
    table: &str,
    max_in_flight: usize,
) -> App {
    let settings = Settings {
        tenant_keys: None,
        table_name: table.to_owned(),
        tenant_role_arn: ROLE_ARN.into(),
        tenant_operator_role_arn: Some(integration::OPERATOR_ROLE_ARN.into()),
        platform_access: Default::default(),
        tenant_scope: shared::isolation::policy::Scope::Tenant,
        session_ttl_seconds: 3600,
        credentials_seconds: 900,
        auth: AuthMode::Authorizer,
        // The benchmark signs cursors like production, with the key the local stack generated.
        signing: shared::service::app::KeySource::Fixed(
            shared::identity::cursor::CursorKeys::new(
                std::env::var("CURSOR_SIGNING_KEY")
                    .expect("CURSOR_SIGNING_KEY: run the benchmark through scripts/bench.sh")
                    .as_bytes(),
                None,
            )
            .expect("a 32-byte key"),
        ),
        max_in_flight,
        read_cache_ms: 0,
        list_cache: None,
        lifecycle_lanes: shared::store::lifecycle::lanes::DEFAULT_LANES,
        dry_run_seconds: shared::service::app::DRY_RUN_SECONDS,
    };
    App::new(settings, sdk, Arc::new(SystemClock)).expect("app")
}

/// [`production_app`] whose lifecycle operations run in `lanes` lanes (`LIFECYCLE_LANES`).
pub(crate) fn production_app_with_lanes(
    sdk: &aws_types::SdkConfig,
    table: &str,
    lanes: u32,
) -> App {
    let mut app = production_app(sdk, table);
    app.settings.lifecycle_lanes = lanes;
    app
}

/// Where figures 1–5 send their DynamoDB requests: straight to DynamoDB Local, or through the
/// latency model (`proxy`).
pub(crate) struct Target {
    /// Appended to every figure's name: empty for the plain pass.
    pub(crate) tag: &'static str,
    pub(crate) app: App,
    /// The same with the largest fan-out budget (`DYNAMODB_MAX_IN_FLIGHT=64`): a 64-shard page in
    /// one wave instead of four.
    pub(crate) wide: App,
    pub(crate) raw: aws_sdk_dynamodb::Client,
    /// The DynamoDB endpoint spawned functions and the Python baseline are given.
    pub(crate) dynamodb_url: String,
}

/// The SDK's endpoint lookup with DynamoDB sent to `url` (the proxy); every other service as the
/// environment says (`AWS_ENDPOINT_URL_<SERVICE>`, then `AWS_ENDPOINT_URL`).
#[derive(Debug)]
pub(crate) struct DynamoDbAt(pub(crate) String);

impl aws_types::service_config::LoadServiceConfig for DynamoDbAt {
    fn load_config(&self, key: aws_types::service_config::ServiceConfigKey<'_>) -> Option<String> {
        let service = key.service_id().to_ascii_uppercase().replace(' ', "_");
        if key.env() == "AWS_ENDPOINT_URL" && service == "DYNAMODB" {
            return Some(self.0.clone());
        }
        std::env::var(format!("{}_{service}", key.env()))
            .or_else(|_| std::env::var(key.env()))
            .ok()
    }
}

impl Target {
    /// The target whose DynamoDB is where `sdk` sends it (`dynamodb_url`, for spawned processes),
    /// its figures named with `tag` appended.
    pub(crate) fn new(
        tag: &'static str,
        sdk: &aws_types::SdkConfig,
        table: &str,
        dynamodb_url: String,
    ) -> Self {
        Target {
            tag,
            app: production_app(sdk, table),
            wide: production_app_with_budget(sdk, table, 64),
            raw: aws_sdk_dynamodb::Client::new(sdk),
            dynamodb_url,
        }
    }
}
