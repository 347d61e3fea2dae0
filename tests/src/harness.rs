//! One test's world ([`Harness`]): its own table on DynamoDB Local, an `App` on it with a test clock,
//! a request counter and fault injection, and raw reads for checks.

use aws_sdk_dynamodb::config::SharedInterceptor;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use serde_json::Value;
use shared::identity::clock::Clock;
use shared::isolation::claims::AuthMode;
use shared::service::app::{load_sdk_config, Settings};

use crate::{
    endpoints, Faults, RequestCounter, StsFaults, TestClock, TestInterceptor, OPERATOR_ROLE_ARN,
    ROLE_ARN,
};
use shared::App;

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
    /// A keyed world's key table and platform key ([`Harness::keyed`]).
    pub keys: Option<TestKeys>,
}

/// A keyed test world's key parts (`Harness::keyed`, in `keys`).
#[derive(Clone)]
pub struct TestKeys {
    pub kms: aws_sdk_kms::Client,
    /// The platform key's ARN.
    pub platform_key: String,
    pub table: String,
    /// KMS unreachable for every container of this world while set (`keys::EnforcedKeyStates`).
    pub outage: Arc<AtomicBool>,
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
        Self::build(
            admin,
            table,
            session_ttl_seconds,
            sts_endpoint,
            None,
            Default::default(),
        )
        .await
    }

    /// Another container on this harness's table: its own `App`, credential cache, clock and
    /// counter.
    pub async fn another_container(&self) -> Self {
        Self::on_table(&self.admin, &self.table, 3600, &self.sts_endpoint).await
    }

    /// Another container on this harness's table whose sessions of the platform's partition are
    /// narrowed to `access`, as a function's `PLATFORM_SESSION_ACCESS` narrows them.
    pub async fn another_container_narrowed(
        &self,
        access: shared::isolation::policy::PlatformAccess,
    ) -> Self {
        Self::build(
            &self.admin,
            &self.table,
            3600,
            &self.sts_endpoint,
            None,
            access,
        )
        .await
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
        Self::build(
            &admin,
            table,
            3600,
            &sts_endpoint,
            Some(dynamodb_endpoint),
            Default::default(),
        )
        .await
    }

    async fn build(
        admin: &aws_sdk_dynamodb::Client,
        table: &str,
        session_ttl_seconds: u64,
        sts_endpoint: &str,
        dynamodb_endpoint: Option<&str>,
        platform_access: shared::isolation::policy::PlatformAccess,
    ) -> Self {
        let sdk = load_sdk_config().await;
        let clock = Arc::new(TestClock(AtomicU64::new(real_now_millis())));
        let requests = Arc::new(RequestCounter::default());
        let faults = Arc::new(Faults::default());
        let sts_faults = StsFaults::default();
        let settings = Settings {
            tenant_keys: None,
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
            platform_access,
            tenant_scope: shared::isolation::policy::Scope::Tenant,
            lifecycle_lanes: shared::store::lifecycle::lanes::DEFAULT_LANES,
            dry_run_seconds: shared::service::app::DRY_RUN_SECONDS,
        };
        // A harness is one container, and a container is one process. The SDK keeps its retry
        // token bucket per process and retry partition (by default the service's name), so the
        // harnesses of one test binary would share one: a test that throttles on purpose would
        // spend the retries of the tests beside it. Each harness gets partitions of its own, one
        // a service as by default.
        let container = unique("container");
        let partition = |service: &str| {
            aws_sdk_dynamodb::config::retry::RetryPartition::new(format!("{container}-{service}"))
        };
        let sts = aws_sdk_sts::Client::from_conf(
            aws_sdk_sts::config::Builder::from(&sdk)
                .interceptor(sts_faults.clone())
                .interceptor(crate::judge::Judged)
                .retry_partition(partition("sts"))
                .build(),
        );
        let mut dynamodb =
            aws_sdk_dynamodb::config::Builder::from(&sdk).retry_partition(partition("dynamodb"));
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
            keys: None,
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

    /// A table an operator made as `tenant`'s own table, with other keys than the pool's (a hash
    /// key `id`, nothing else): its name.
    pub async fn own_table_of_other_keys(&self, tenant: &str) -> String {
        use aws_sdk_dynamodb::types::{
            AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
        };
        let name = format!("{}-tenant-{tenant}", self.table);
        self.admin
            .create_table()
            .table_name(&name)
            .billing_mode(BillingMode::PayPerRequest)
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name("id")
                    .key_type(KeyType::Hash)
                    .build()
                    .expect("a key schema"),
            )
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name("id")
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .expect("an attribute definition"),
            )
            .send()
            .await
            .expect("create a table of other keys");
        name
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
        use shared::identity::ids::TenantId;
        // (the platform's partition has a reserved id, which no request may name)
        let tenant = match tenant {
            TenantId::PLATFORM => TenantId::platform(),
            other => TenantId::parse(other).unwrap(),
        };
        let session = shared::isolation::credentials::role_session_name(&tenant);
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

/// A minimal HTTP/1.0 GET on loopback, for moto's introspection API. moto builds that answer from
/// every object it holds while other threads change them, so an answer that is not a 200 with JSON
/// is asked again, a few times, before the test fails naming what moto said.
pub async fn http_get_json(url: &str) -> Value {
    let mut last = String::new();
    for attempt in 0..5u64 {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(200 * attempt)).await;
        }
        match http_get(url).await {
            Ok((200, body)) => match serde_json::from_str(&body) {
                Ok(value) => return value,
                Err(e) => last = format!("200 that is not JSON ({e})"),
            },
            Ok((status, body)) => {
                last = format!("{status}: {}", body.chars().take(300).collect::<String>())
            }
            Err(e) => last = format!("no answer: {e}"),
        }
    }
    panic!("moto did not answer {url} with JSON in five tries; last: {last}")
}

async fn http_get(url: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .expect("a url with a path");
    let mut stream = tokio::net::TcpStream::connect(host).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await?;
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_owned()))
}
