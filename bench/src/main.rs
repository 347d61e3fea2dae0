//! `scripts/bench.sh` (or, with the local stack's environment, `cargo run -p bench --release`): every
//! figure of the benchmark in one run, each with its baseline measured in the same run. Prints a
//! table, writes `target/bench/results.json` and `target/bench/latency.svg`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use integration::process::{built_bin, json_output, start_function};
use integration::routes::params;
use integration::{event, onboard_at_max_limits as onboard, unique, Auth, Harness};
use serde_json::{json, Value};
use shared::identity::clock::{Clock, SystemClock};
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{entity_sk, kind, shard_pk};
use shared::isolation::claims::AuthMode;
use shared::service::app::{load_sdk_config, Settings};
use shared::store::scatter::Fanout;
use shared::App;

mod attack;
mod big_tenants;
mod cache;
mod lanes;
mod moving;
mod neighbour;
mod proxy;
mod queue;
mod requests;
mod restore;

const ROLE_ARN: &str = integration::ROLE_ARN;

#[derive(Debug, Clone)]
struct Stat {
    median: f64,
    p99: f64,
    count: usize,
}

fn stat(mut ms: Vec<f64>) -> Stat {
    if ms.is_empty() {
        // Nothing answered (a figure reports its failures beside it).
        return Stat {
            median: f64::NAN,
            p99: f64::NAN,
            count: 0,
        };
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    Stat {
        median: at(0.5),
        p99: at(0.99),
        count: ms.len(),
    }
}

struct Report {
    rows: Vec<(String, Stat, String)>,
    json: BTreeMap<String, Value>,
}

impl Report {
    fn add(&mut self, name: &str, s: &Stat, note: String) {
        println!(
            "{:<58} {:>9.3} {:>9.3} {:>6}  {}",
            name, s.median, s.p99, s.count, note
        );
        self.json.insert(
            name.to_owned(),
            json!({"median_ms": s.median, "p99_ms": s.p99, "count": s.count, "note": note}),
        );
        self.rows.push((name.to_owned(), s.clone(), note));
    }
    fn fact(&mut self, name: &str, value: Value, note: &str) {
        println!("{:<58} {:>26}  {}", name, value.to_string(), note);
        self.json
            .insert(name.to_owned(), json!({"value": value, "note": note}));
    }
    /// The p50 of figure `name`, added earlier in this run.
    fn median(&self, name: &str) -> f64 {
        self.rows
            .iter()
            .find(|(n, _, _)| n == name)
            .map_or(f64::NAN, |(_, s, _)| s.median)
    }
}

async fn time_ms<F: std::future::Future>(f: F) -> (f64, F::Output) {
    let t = Instant::now();
    let out = f.await;
    (t.elapsed().as_secs_f64() * 1000.0, out)
}

fn production_app(sdk: &aws_types::SdkConfig, table: &str) -> App {
    production_app_with_budget(
        sdk,
        table,
        shared::store::client::scoped::DEFAULT_MAX_IN_FLIGHT,
    )
}

/// [`production_app`] with fan-out budget `max_in_flight` (`DYNAMODB_MAX_IN_FLIGHT`).
fn production_app_with_budget(
    sdk: &aws_types::SdkConfig,
    table: &str,
    max_in_flight: usize,
) -> App {
    let settings = Settings {
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
    };
    App::new(settings, sdk, Arc::new(SystemClock)).expect("app")
}

/// [`production_app`] whose lifecycle operations run in `lanes` lanes (`LIFECYCLE_LANES`).
fn production_app_with_lanes(sdk: &aws_types::SdkConfig, table: &str, lanes: u32) -> App {
    let mut app = production_app(sdk, table);
    app.settings.lifecycle_lanes = lanes;
    app
}

fn status_of(r: &lambda_http::Response<lambda_http::Body>) -> u16 {
    r.status().as_u16()
}

async fn seed_products(h: &Harness, tenant: &str, shards: u32, count: usize) {
    seed_products_with(h, tenant, shards, count, |i| {
        AttributeValue::M(HashMap::from([(
            "name".into(),
            AttributeValue::S(format!("product {i}")),
        )]))
    })
    .await
}

/// Seeds `count` products of `tenant` over `shards` straight into the table (the seeding is not the
/// tenant's traffic), product `i` with `document(i)`.
async fn seed_products_with(
    h: &Harness,
    tenant: &str,
    shards: u32,
    count: usize,
    document: impl Fn(usize) -> AttributeValue,
) {
    let t = TenantId::parse(tenant).unwrap();
    let mut batch = Vec::new();
    for i in 0..count {
        let id = EntityId::parse(&format!("p-{i:05}")).unwrap();
        let item: HashMap<String, AttributeValue> = HashMap::from([
            (
                "PK".into(),
                AttributeValue::S(shard_pk(
                    &t,
                    kind::PRODUCT,
                    shared::identity::shard::shard_for(id.as_str(), shards),
                )),
            ),
            (
                "SK".into(),
                AttributeValue::S(entity_sk(&t, kind::PRODUCT, &id)),
            ),
            ("kind".into(), AttributeValue::S("PRODUCT".into())),
            ("tenantId".into(), AttributeValue::S(tenant.into())),
            ("productId".into(), AttributeValue::S(id.to_string())),
            ("document".into(), document(i)),
            (
                "updatedAt".into(),
                AttributeValue::S("2026-11-21T00:00:00Z".into()),
            ),
        ]);
        batch.push(
            WriteRequest::builder()
                .put_request(PutRequest::builder().set_item(Some(item)).build().unwrap())
                .build(),
        );
        if batch.len() == 25 || i + 1 == count {
            let mut pending = std::mem::take(&mut batch);
            while !pending.is_empty() {
                let out = h
                    .admin
                    .batch_write_item()
                    .request_items(&h.table, pending)
                    .send()
                    .await
                    .expect("seed");
                pending = out
                    .unprocessed_items
                    .and_then(|mut m| m.remove(&h.table))
                    .unwrap_or_default();
            }
        }
    }
}

fn spawn_function(bin: &str, table: &str, api: &str, dynamodb_url: &str) -> tokio::process::Child {
    let mut env = integration::runtime_api::function_env(table, api, bin);
    env.push(("AWS_ENDPOINT_URL_DYNAMODB".into(), dynamodb_url.into()));
    let bin_path = built_bin("release", bin);
    start_function(&bin_path, env, Stdio::null(), "scripts/bench.sh builds it")
}

fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn api_event(
    method: &str,
    route: &str,
    params: &[(&str, &str)],
    query: &[(&str, &str)],
    tenant: &str,
) -> String {
    let raw = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../events/get-product.json"
    ))
    .unwrap();
    let mut ev: Value = serde_json::from_str(&raw).unwrap();
    let mut path = route.to_owned();
    for (k, v) in params {
        path = path.replace(&format!("{{{k}}}"), v);
    }
    ev["routeKey"] = json!(format!("{method} {route}"));
    ev["rawPath"] = json!(path);
    ev["requestContext"]["http"]["method"] = json!(method);
    ev["requestContext"]["http"]["path"] = json!(path);
    ev["requestContext"]["authorizer"]["jwt"]["claims"]["custom:tenantId"] = json!(tenant);
    ev["pathParameters"] = json!(params
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect::<serde_json::Map<_, _>>());
    ev["queryStringParameters"] = json!(query
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect::<serde_json::Map<_, _>>());
    ev["rawQueryString"] = json!(query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&"));
    ev.to_string()
}

/// Where figures 1–5 send their DynamoDB requests: straight to DynamoDB Local, or through the
/// latency model (`proxy`).
struct Target {
    /// Appended to every figure's name: empty for the plain pass.
    tag: &'static str,
    app: App,
    /// The same with the largest fan-out budget (`DYNAMODB_MAX_IN_FLIGHT=64`): a 64-shard page in
    /// one wave instead of four.
    wide: App,
    raw: aws_sdk_dynamodb::Client,
    /// The DynamoDB endpoint spawned functions and the Python baseline are given.
    dynamodb_url: String,
}

/// What figures 1–5 read, created once and shared by both passes.
struct Fixture {
    tenant: String,
    auth: Auth,
    session_id: String,
    product_key: HashMap<String, AttributeValue>,
    session_pk: String,
    /// (shard count, tenant) holding 2,000 products each.
    scatter_tenants: Vec<(u32, String)>,
}

/// The SDK's endpoint lookup with DynamoDB sent to `url` (the proxy); every other service as the
/// environment says (`AWS_ENDPOINT_URL_<SERVICE>`, then `AWS_ENDPOINT_URL`).
#[derive(Debug)]
struct DynamoDbAt(String);

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

#[tokio::main]
async fn main() {
    let iterations: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let one_way_ms: u64 = std::env::var("BENCH_PROXY_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let h = Harness::new().await;
    let sdk = load_sdk_config().await;
    let dynamodb_url = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .expect("AWS_ENDPOINT_URL_DYNAMODB: run the benchmark through scripts/bench.sh");
    let latency = proxy::LatencyProxy::start(
        proxy::socket_of(&dynamodb_url),
        Duration::from_millis(one_way_ms),
    )
    .await;
    let proxied = sdk
        .to_builder()
        .service_config(DynamoDbAt(latency.url.clone()))
        .build();
    let mut report = Report {
        rows: Vec::new(),
        json: BTreeMap::new(),
    };
    println!(
        "{:<58} {:>9} {:>9} {:>6}  note",
        "figure (ms)", "p50", "p99", "n"
    );
    let plain = Target {
        tag: "",
        app: production_app(&sdk, &h.table),
        wide: production_app_with_budget(&sdk, &h.table, 64),
        raw: aws_sdk_dynamodb::Client::new(&sdk),
        dynamodb_url,
    };
    let through_proxy = Target {
        tag: " [latency model]",
        app: production_app(&proxied, &h.table),
        wide: production_app_with_budget(&proxied, &h.table, 64),
        raw: aws_sdk_dynamodb::Client::new(&proxied),
        dynamodb_url: latency.url.clone(),
    };
    report.fact(
        "latency model: delay added each way",
        json!(format!("{one_way_ms} ms")),
        "figures marked [latency model] run through it; BENCH_PROXY_DELAY_MS",
    );
    // BENCH_ONLY=cache, =queue, =restore, =attack, =walk, =hotlist, =move, =lanes or =lifecycle
    // runs figure 10, 11, 13, 12, 8L, 14, 15, 16 or 17-19 alone (none needs another's fixture);
    // BENCH_ONLY=latency runs figures 1-5, plain and through the latency model.
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    if only.is_empty() {
        all_but_cache(&h, &sdk, &plain, &through_proxy, iterations, &mut report).await;
    }
    if only == "latency" {
        let fixture = fixture(&h, &sdk).await;
        latency_figures(&h, &plain, &fixture, iterations, &mut report).await;
        latency_figures(&h, &through_proxy, &fixture, iterations, &mut report).await;
    }
    if only.is_empty() || only == "cache" {
        cache_figure(&h, &through_proxy, &mut report).await;
    }
    if only.is_empty() || only == "queue" {
        queue_figure(&h, &through_proxy, &mut report).await;
    }
    if only.is_empty() || only == "walk" {
        let one_at_a_time = production_app_with_budget(&proxied, &h.table, 1);
        big_tenants::walk_figure(
            &h,
            &through_proxy.app,
            &one_at_a_time,
            &through_proxy.raw,
            &mut report,
        )
        .await;
    }
    if only.is_empty() || only == "hotlist" {
        big_tenants::hot_list_figure(&h, &proxied, &through_proxy.app, &mut report).await;
    }
    let app = &through_proxy.app;
    if only.is_empty() || only == "restore" {
        restore::restore_figure(&h, app, app, "13", "", &mut report).await;
    }
    if only.is_empty() || only == "move" {
        moving::move_figure(&h, app, app, "15", "", &mut report).await;
    }
    if only.is_empty() || only == "lanes" {
        lanes::lanes_figure(&h, app, &through_proxy.raw, &mut report).await;
    }
    // BENCH_ONLY=lifecycle: figures 17-19, a move, a restore and a re-sharding at each lane count.
    if only.is_empty() || only == "lifecycle" {
        let in_lanes = |lanes| production_app_with_lanes(&proxied, &h.table, lanes);
        for lanes in lanes::LANES {
            let label = format!(" in {lanes} lanes");
            let lanes_app = in_lanes(lanes);
            moving::move_figure(&h, app, &lanes_app, "17", &label, &mut report).await;
            restore::restore_figure(&h, app, &lanes_app, "18", &label, &mut report).await;
        }
        lanes::resharding_figure(&h, app, &through_proxy.raw, in_lanes, &mut report).await;
    }
    // BENCH_ONLY=rawmoves: figure 19d alone (DynamoDB Local's ceiling for relocations).
    if only == "rawmoves" {
        lanes::raw_relocations_figure(&h, &through_proxy.raw, &mut report).await;
    }
    if only.is_empty() || only == "attack" {
        let new_app = || production_app(&proxied, &h.table);
        attack::attack_figure(&h, new_app, &through_proxy.app, &mut report).await;
    }
    write_outputs(&report);
}

/// Figure 11: a burst of writes by one tenant, straight and through the import queue, against
/// another tenant's steady reads.
async fn queue_figure(h: &Harness, target: &Target, report: &mut Report) {
    let (quiet, bulk) = (unique("quiet"), unique("bulk"));
    onboard(h, &quiet, 4).await;
    onboard(h, &bulk, 16).await;
    seed_products(h, &quiet, 4, 1_000).await;
    queue::queue_figures(
        h,
        &target.app,
        &TenantId::parse(&quiet).unwrap(),
        1_000,
        &bulk,
        &built_bin("release", "import-consumer"),
        &target.dynamodb_url,
        report,
    )
    .await;
}

/// Figure 10: a tenant of [`cache::PRODUCTS`] products on 4 shards, read with a Zipf popularity.
async fn cache_figure(h: &Harness, target: &Target, report: &mut Report) {
    let tenant = unique("cache");
    onboard(h, &tenant, 4).await;
    seed_products(h, &tenant, 4, cache::PRODUCTS).await;
    let t = TenantId::parse(&tenant).unwrap();
    let db = target.app.db(&t).await.expect("the tenant's client");
    let reads = cache::zipf_reads(
        std::env::var("BENCH_CACHE_READS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3_000),
    );
    let redis_delay_us: u64 = std::env::var("BENCH_REDIS_DELAY_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let redis_url = std::env::var("BENCH_REDIS_URL").ok();
    let rate: f64 = std::env::var("BENCH_CACHE_RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500.0);
    cache::cache_figures(
        &db,
        4,
        &reads,
        rate,
        redis_url.as_deref(),
        Duration::from_micros(redis_delay_us),
        report,
    )
    .await;
}

async fn all_but_cache(
    h: &Harness,
    sdk: &aws_types::SdkConfig,
    plain: &Target,
    through_proxy: &Target,
    iterations: usize,
    report: &mut Report,
) {
    let report = &mut *report;
    let fixture = fixture(h, sdk).await;

    let python_cold = latency_figures(h, plain, &fixture, iterations, report).await;
    latency_figures(h, through_proxy, &fixture, iterations, report).await;
    if let Some(py) = python_cold {
        report.fact(
            "4. cold start: Python baseline (imports + first request)",
            json!(format!("{py:.1} ms")),
            &format!(
                "Rust is {:.1}% of it (target <= 10%)",
                report.median("4. cold start: query-tenant-products, spawn to first answer") / py
                    * 100.0
            ),
        );
    }
    walk_and_page_costs(h, plain, &fixture, report).await;
    list_route_costs(h, plain, report).await;
    sts_figures(h, sdk, &fixture, report).await;
    bootstrap_sizes(report);
}

fn write_outputs(report: &Report) {
    let out_dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/bench"));
    std::fs::create_dir_all(out_dir).unwrap();
    std::fs::write(
        out_dir.join("results.json"),
        serde_json::to_string_pretty(&report.json).unwrap(),
    )
    .unwrap();
    std::fs::write(out_dir.join("latency.svg"), svg(&report.rows)).unwrap();
    println!("\nwrote target/bench/results.json and target/bench/latency.svg");
}

/// A tenant with a product and a session, and the scatter tenants. Every tenant the benchmark
/// onboards has custom limits at the maxima (`onboard_at_max_limits`): an overhead figure is never
/// refused by a quota it is not measuring, however fast the machine (figure 3 alone sends ~2,000
/// requests a second on a fast one, over the premium tier's quota).
async fn fixture(h: &Harness, sdk: &aws_types::SdkConfig) -> Fixture {
    let tenant = unique("bench");
    onboard(h, &tenant, 4).await;
    let app = production_app(sdk, &h.table);
    let auth = Auth::Tenant(tenant.clone());
    let put = requests::put_product(&auth, "p-1", json!({"name": "bench"}));
    assert!(matches!(
        status_of(&products::put_product::handle(&app, put).await.unwrap()),
        200 | 201
    ));
    let created = sessions::create_session::handle(
        &app,
        event(
            "POST",
            "/sessions",
            &[],
            &[],
            Some(json!({"customerId": "c1"})),
            &auth,
        ),
    )
    .await
    .unwrap();
    let session: Value = body_json(&created);
    let session_id = session["sessionId"].as_str().unwrap().to_owned();
    let t = TenantId::parse(&tenant).unwrap();
    let product_key = products::product_key(&t, &EntityId::parse("p-1").unwrap(), 4)
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let session_pk = shared::identity::keys::session_pk(
        &t,
        &shared::identity::ids::SessionId::parse(&session_id).unwrap(),
    );
    let mut scatter_tenants = Vec::new();
    for shards in [1u32, 4, 16, 64] {
        let st = unique(&format!("sg{shards}"));
        onboard(h, &st, shards).await;
        seed_products(h, &st, shards, 2000).await;
        scatter_tenants.push((shards, st));
    }
    Fixture {
        tenant,
        auth,
        session_id,
        product_key,
        session_pk,
        scatter_tenants,
    }
}

fn body_json(r: &lambda_http::Response<lambda_http::Body>) -> Value {
    match r.body() {
        lambda_http::Body::Text(t) => serde_json::from_str(t).unwrap(),
        _ => panic!("a text body"),
    }
}

/// Figures 1–5 against one target. Returns the Python baseline's cold start.
async fn latency_figures(
    h: &Harness,
    target: &Target,
    fx: &Fixture,
    iterations: usize,
    report: &mut Report,
) -> Option<f64> {
    let (app, raw, tag) = (&target.app, &target.raw, target.tag);
    let auth = &fx.auth;
    let t = TenantId::parse(&fx.tenant).unwrap();

    // ---- 1 & 2. the floor (raw SDK, same process and client settings) and the warm handlers for
    // the same request, interleaved so that both see the same server and machine state
    let (mut get_floor, mut query_floor, mut warm_get, mut warm_query, mut governed_get) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..iterations + 20 {
        let (ms, out) = time_ms(
            raw.get_item()
                .table_name(&h.table)
                .set_key(Some(fx.product_key.clone()))
                .send(),
        )
        .await;
        out.expect("raw get");
        let ev = requests::get_product(auth, "p-1");
        let (hms, r) = time_ms(products::get_product::handle(app, ev)).await;
        assert_eq!(status_of(&r.unwrap()), 200);
        // the same request served as the runtime serves it: quota decided first, then the
        // handler beside the usage meter's and the quota counter's UpdateItems
        let (gms, status) = requests::get_product_admitted(app, auth, "p-1").await;
        assert_eq!(status, 200);
        // the very request the handler sends: its key condition, expiry filter and Limit 1
        let (qms, out) = time_ms(
            raw.query()
                .table_name(&h.table)
                .key_condition_expression("PK = :pk AND begins_with(SK, :root)")
                .expression_attribute_values(":pk", AttributeValue::S(fx.session_pk.clone()))
                .expression_attribute_values(
                    ":root",
                    AttributeValue::S(shared::identity::keys::customer_sk_prefix(&t)),
                )
                .filter_expression("#live_exp > :live_now")
                .expression_attribute_names("#live_exp", shared::identity::keys::EXPIRES_AT)
                .expression_attribute_values(
                    ":live_now",
                    AttributeValue::N(SystemClock.now_seconds().to_string()),
                )
                .limit(1)
                .send(),
        )
        .await;
        out.expect("raw query");
        let ev = requests::get_session(auth, &fx.session_id);
        let (hqms, r) = time_ms(sessions::get_session_by_session_id::handle(app, ev)).await;
        assert_eq!(status_of(&r.unwrap()), 200);
        if i >= 20 {
            get_floor.push(ms);
            warm_get.push(hms);
            governed_get.push(gms);
            query_floor.push(qms);
            warm_query.push(hqms);
        }
    }
    let (get_floor, query_floor, warm_get, warm_query, governed_get) = (
        stat(get_floor),
        stat(query_floor),
        stat(warm_get),
        stat(warm_query),
        stat(governed_get),
    );
    let warm_target = if tag.is_empty() { "1.10x" } else { "1.05x" };
    report.add(
        &format!("1. floor: raw SDK GetItem{tag}"),
        &get_floor,
        String::new(),
    );
    report.add(
        &format!("1. floor: raw SDK Query{tag}"),
        &query_floor,
        String::new(),
    );
    report.add(
        &format!("2. warm handler: get-product (1 GetItem){tag}"),
        &warm_get,
        format!(
            "{:.2}x floor at p50 (target <= {warm_target})",
            warm_get.median / get_floor.median
        ),
    );
    report.add(
        &format!("2b. warm get-product + usage meter + quota{tag}"),
        &governed_get,
        format!(
            "{:.2}x floor at p50 (target <= 1.15x)",
            governed_get.median / get_floor.median
        ),
    );
    report.add(
        &format!("2. warm handler: get-session-by-session-id (1 Query){tag}"),
        &warm_query,
        format!(
            "{:.2}x floor at p50 (target <= {warm_target})",
            warm_query.median / query_floor.median
        ),
    );
    idempotent_create(h, target, fx, iterations, report).await;

    // ---- 3 & 7. through the Lambda runtime: the release binary on a local Runtime API
    // BENCH_PACE=k (default 1) runs k function processes on the Runtime API and k loops at once, so
    // the tenant sees k times the request rate: a check that no figure depends on the machine's
    // speed (a machine twice as fast sends twice as many). The figure is each loop's latency.
    let pace: usize = std::env::var("BENCH_PACE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&k| k >= 1)
        .unwrap_or(1);
    let api = integration::runtime_api::RuntimeApi::start().await;
    let mut children: Vec<_> = (0..pace)
        .map(|_| spawn_function("get-product", &h.table, &api.addr, &target.dynamodb_url))
        .collect();
    let ev = api_event(
        "GET",
        "/products/{productId}",
        &[("productId", "p-1")],
        &[],
        &fx.tenant,
    );
    let started = Instant::now();
    let loops = (0..pace).map(|_| {
        let (api, ev) = (api.clone(), ev.clone());
        async move {
            let mut samples = Vec::new();
            for i in 0..1000 + 20 {
                let (ms, body) = time_ms(api.invoke(&ev)).await;
                assert!(body.contains("\"statusCode\":200"), "{body}");
                if i >= 20 && samples.len() < iterations {
                    samples.push(ms);
                }
            }
            samples
        }
    });
    let through: Vec<f64> = futures::future::join_all(loops)
        .await
        .into_iter()
        .flatten()
        .collect();
    let rate = (1020 * pace) as f64 / started.elapsed().as_secs_f64();
    let rss = children[0].id().and_then(rss_kb);
    for child in &mut children {
        let _ = child.kill().await;
    }
    report.fact(
        &format!("3. runtime loop's request rate (BENCH_PACE={pace}){tag}"),
        json!(format!("{rate:.0} requests/s")),
        "all answered 200",
    );
    let through = stat(through);
    report.add(
        &format!("3. through the runtime: get-product{tag}"),
        &through,
        format!("{:.2}x floor at p50", through.median / get_floor.median),
    );
    if tag.is_empty() {
        report.fact(
            "7. RSS after 1,020 invocations (get-product)",
            json!(rss.map(|kb| format!("{:.1} MB", kb as f64 / 1024.0))),
            "target <= 32 MB",
        );
    }

    // ---- 4. cold start: spawn, first invocation answered (init + AssumeRole + request)
    let mut cold = Vec::new();
    for _ in 0..20 {
        cold.push(cold_start(h, target, &fx.tenant, None).await);
    }
    let cold = stat(cold);
    report.add(
        &format!("4. cold start: query-tenant-products, spawn to first answer{tag}"),
        &cold,
        "incl. AssumeRole".into(),
    );

    // ---- 4b. tenant isolation mode: every tenant gets its own execution environment, so each new
    // (or idle) tenant pays a cold start. 20 tenants, each a fresh process on a Runtime API that
    // sends the tenant id; the function checks it against the claim and assumes that tenant's role.
    let mut per_tenant = Vec::new();
    for i in 0..20 {
        let tn = unique(&format!("iso{i}"));
        onboard(h, &tn, 4).await;
        per_tenant.push(cold_start(h, target, &tn, Some(&tn)).await);
    }
    let per_tenant = stat(per_tenant);
    report.add(
        &format!("4b. cold start per tenant (tenant isolation mode): query-tenant-products, new tenant, spawn to first answer{tag}"),
        &per_tenant,
        format!(
            "{:.2}x the pooled cold start at p50; paid once per tenant per environment",
            per_tenant.median / cold.median
        ),
    );

    // ---- 5. scatter-gather: 2,000 products, walking every page (limit 100)
    let python = std::env::var("BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut python_cold = None;
    for (shards, st) in &fx.scatter_tenants {
        let shards = *shards;
        let auth = Auth::Tenant(st.clone());
        let _ = walk_pages(app, &auth, Fanout::Parallel).await; // warm
        let (mut par, mut seq) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let (p, n) = walk_pages(app, &auth, Fanout::Parallel).await;
            assert_eq!(n, 2000);
            par.extend(p);
            let (s, n) = walk_pages(app, &auth, Fanout::Sequential).await;
            assert_eq!(n, 2000);
            seq.extend(s);
        }
        // the slowest single shard: one Query of a page (limit 100) on each shard, the worst median
        let tid = TenantId::parse(st).unwrap();
        let mut slowest = 0.0f64;
        for s in 0..shards {
            let mut samples = Vec::new();
            for _ in 0..10 {
                let (ms, out) = time_ms(
                    product_shard_query(raw, &h.table, &tid, s)
                        .limit(100)
                        .send(),
                )
                .await;
                out.unwrap();
                samples.push(ms);
            }
            slowest = slowest.max(stat(samples).median);
        }
        // the SDK alone: one raw Query per shard, all at once, each asking for what the handler's
        // first round asks (twice the fair share plus two): what the client and server cost
        // without any of pooltable's code
        let want = shared::store::scatter::first_round_want(100, shards as usize) as i32;
        let mut together = Vec::new();
        for _ in 0..20 {
            let queries = (0..shards).map(|s| {
                product_shard_query(raw, &h.table, &tid, s)
                    .limit(want)
                    .send()
            });
            let (ms, outs) = time_ms(futures::future::join_all(queries)).await;
            assert!(outs.iter().all(Result::is_ok));
            together.push(ms);
        }
        let together = stat(together);
        // the Python boto3 baseline: same items, same page size, all pages, AssumeRole per request
        let policy = shared::isolation::policy::session_policy(
            &tid,
            &shared::isolation::policy::TableLocation::from_role_arn(
                ROLE_ARN,
                "us-east-1",
                &h.table,
            )
            .unwrap(),
        )
        .unwrap();
        let policy_file = std::env::temp_dir().join(format!("{st}-policy.json"));
        std::fs::write(&policy_file, &policy).unwrap();
        let py = json_output(
            tokio::process::Command::new(&python)
                .arg(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/baseline/query_tenant_products.py"
                ))
                .args([
                    &h.table,
                    st,
                    &shards.to_string(),
                    "100",
                    "3",
                    ROLE_ARN,
                    policy_file.to_str().unwrap(),
                ])
                .env("AWS_ENDPOINT_URL_DYNAMODB", &target.dynamodb_url),
            "the python baseline",
        )
        .await;
        assert_eq!(
            py["items"], 2000,
            "the baseline must walk the same 2,000 items"
        );
        let py_pages: Vec<f64> = py["latencies_ms"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        python_cold.get_or_insert(py["cold_ms"].as_f64().unwrap_or(0.0));
        let (par, seq, pys) = (stat(par), stat(seq), stat(py_pages));
        let scatter_target = match (tag.is_empty(), shards) {
            (false, 16) => " (target <= 1.5x)",
            (false, 64) => " (target <= 2x)",
            _ => "",
        };
        report.add(
            &format!("5. scatter {shards:>2} shards: parallel, per page{tag}"),
            &par,
            format!(
                "{:.2}x slowest single shard ({slowest:.2} ms){scatter_target}; {:.1}x Python throughput",
                par.median / slowest,
                pys.median / par.median
            ),
        );
        if shards == 64 {
            let mut wide = Vec::new();
            for _ in 0..3 {
                let (p, n) = walk_pages(&target.wide, &auth, Fanout::Parallel).await;
                assert_eq!(n, 2000);
                wide.extend(p);
            }
            let wide = stat(wide);
            report.add(
                &format!("5. scatter 64 shards: parallel, DYNAMODB_MAX_IN_FLIGHT=64, per page{tag}"),
                &wide,
                format!(
                    "{:.2}x slowest single shard{scatter_target}; one wave of 64 Queries instead of four of 16 (the default budget)",
                    wide.median / slowest
                ),
            );
        }
        report.add(
            &format!(
                "5. scatter {shards:>2} shards: the SDK alone, {shards} raw Queries at once{tag}"
            ),
            &together,
            format!(
                "{:.2}x slowest single shard; the handler's page is {:.2}x this",
                together.median / slowest,
                par.median / together.median
            ),
        );
        report.add(
            &format!("5. scatter {shards:>2} shards: sequential, per page{tag}"),
            &seq,
            String::new(),
        );
        report.add(
            &format!("5. scatter {shards:>2} shards: Python boto3 baseline, per page{tag}"),
            &pys,
            "threads + AssumeRole per request".into(),
        );
    }
    python_cold
}

/// A cold start of `query-tenant-products`: a fresh process on a fresh Runtime API, from its spawn
/// to its first answer (init, AssumeRole and a page of 25 of `tenant`'s products), in ms.
/// `isolated_for`: the Runtime API sends this tenant id (tenant isolation mode).
async fn cold_start(h: &Harness, target: &Target, tenant: &str, isolated_for: Option<&str>) -> f64 {
    let api = integration::runtime_api::RuntimeApi::start().await;
    let started = Instant::now();
    let mut child = spawn_function(
        "query-tenant-products",
        &h.table,
        &api.addr,
        &target.dynamodb_url,
    );
    let body = api
        .invoke_for_tenant(
            &api_event("GET", "/products", &[], &[("limit", "25")], tenant),
            isolated_for,
        )
        .await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    assert!(body.contains("\"statusCode\":200"), "{body}");
    let _ = child.kill().await;
    ms
}

/// One raw Query of product shard `shard` of tenant `t`: the key condition the handlers send.
fn product_shard_query(
    raw: &aws_sdk_dynamodb::Client,
    table: &str,
    t: &TenantId,
    shard: u32,
) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
    raw.query()
        .table_name(table)
        .key_condition_expression("PK = :pk AND begins_with(SK, :k)")
        .expression_attribute_values(":pk", AttributeValue::S(shard_pk(t, kind::PRODUCT, shard)))
        .expression_attribute_values(
            ":k",
            AttributeValue::S(shared::identity::keys::entity_sk_prefix(t, kind::PRODUCT)),
        )
}

/// The floor of a full walk: every product of `t` on `shards` shards read raw, one paginated Query
/// (Limit 1,000) per shard, one shard after another. Its time (ms), Queries, and the RCU DynamoDB
/// reported (0 unless `capacity` asks for it).
async fn raw_walk(
    raw: &aws_sdk_dynamodb::Client,
    table: &str,
    t: &TenantId,
    shards: u32,
    capacity: Option<aws_sdk_dynamodb::types::ReturnConsumedCapacity>,
) -> (f64, u32, f64) {
    let started = Instant::now();
    let (mut queries, mut rcu) = (0u32, 0.0f64);
    for s in 0..shards {
        let mut start = None;
        loop {
            let out = product_shard_query(raw, table, t, s)
                .limit(1000)
                .set_exclusive_start_key(start)
                .set_return_consumed_capacity(capacity.clone())
                .send()
                .await
                .unwrap();
            queries += 1;
            rcu += out
                .consumed_capacity()
                .and_then(|c| c.capacity_units())
                .unwrap_or(0.0);
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
    }
    (started.elapsed().as_secs_f64() * 1000.0, queries, rcu)
}

/// Every page (limit 100) of `GET /products` for `auth`'s tenant: each page's time, and the items.
async fn walk_pages(app: &App, auth: &Auth, fanout: Fanout) -> (Vec<f64>, usize) {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    let mut items = 0;
    loop {
        let mut q = vec![("limit", "100")];
        if let Some(c) = &cursor {
            q.push(("cursor", c.as_str()));
        }
        let ev = event("GET", "/products", &[], &q, None, auth);
        let (ms, r) = time_ms(products::query_tenant_products::handle_with(
            app, ev, fanout,
        ))
        .await;
        let body = body_json(&r.unwrap());
        pages.push(ms);
        items += body["items"].as_array().unwrap().len();
        match body["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return (pages, items),
        }
    }
}

/// 2c. A keyed create (`POST /sessions` with an `Idempotency-Key`) served as the runtime serves it:
/// quota, usage meter and the idempotency layer all active. Its floor is the same DynamoDB work sent
/// raw: the consistent read of the key's record, and one transaction putting the session and the
/// record (the items are copies, re-keyed, of what the handler wrote in a warm-up call).
async fn idempotent_create(
    h: &Harness,
    target: &Target,
    fx: &Fixture,
    iterations: usize,
    report: &mut Report,
) {
    use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
    let (app, raw, tag) = (&target.app, &target.raw, target.tag);
    let t = TenantId::parse(&fx.tenant).unwrap();
    let keyed_request = |key: String| {
        let mut req: lambda_http::Request = event(
            "POST",
            "/sessions",
            &[],
            &[],
            Some(json!({"customerId": "c-keyed"})),
            &fx.auth,
        );
        req.headers_mut().insert(
            shared::service::idempotent::HEADER,
            key.parse().expect("a header value"),
        );
        req
    };
    let create = |key: String| {
        let req = keyed_request(key);
        shared::service::runtime::respond_admitted(
            app,
            sessions::create_session::ROUTE,
            "bench".into(),
            req,
            |req| sessions::create_session::handle(app, req),
        )
    };
    let record_pk = |key: &str| {
        shared::store::idempotency::record_key(
            &t,
            sessions::create_session::ROUTE,
            &shared::identity::ids::IdempotencyKey::parse(key).unwrap(),
        )
    };
    let warm_key = unique("warm");
    let created = create(warm_key.clone()).await;
    assert_eq!(status_of(&created), 201);
    let session_id = body_json(&created)["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let session_item = raw
        .query()
        .table_name(&h.table)
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(
            ":pk",
            AttributeValue::S(shared::identity::keys::session_pk(
                &t,
                &shared::identity::ids::SessionId::parse(&session_id).unwrap(),
            )),
        )
        .send()
        .await
        .unwrap()
        .items
        .unwrap()
        .remove(0);
    let record_item = raw
        .get_item()
        .table_name(&h.table)
        .key("PK", AttributeValue::S(record_pk(&warm_key)))
        .key("SK", AttributeValue::S(record_pk(&warm_key)))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    let put = |item: HashMap<String, AttributeValue>| {
        TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name(&h.table)
                    .set_item(Some(item))
                    .condition_expression("attribute_not_exists(PK)")
                    .build()
                    .unwrap(),
            )
            .build()
    };
    let (mut floor, mut keyed, mut handler_only) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..iterations + 20 {
        let floor_key = unique("floor");
        let (ms, out) = time_ms(async {
            raw.get_item()
                .table_name(&h.table)
                .key("PK", AttributeValue::S(record_pk(&floor_key)))
                .key("SK", AttributeValue::S(record_pk(&floor_key)))
                .consistent_read(true)
                .send()
                .await
                .expect("raw consistent get");
            let mut session = session_item.clone();
            if let Some(AttributeValue::S(pk)) = session.get_mut("PK") {
                pk.push_str(&format!("-{floor_key}"));
            }
            let mut record = record_item.clone();
            for k in ["PK", "SK"] {
                record.insert(k.into(), AttributeValue::S(record_pk(&floor_key)));
            }
            raw.transact_write_items()
                .transact_items(put(session))
                .transact_items(put(record))
                .send()
                .await
        })
        .await;
        out.expect("raw transaction");
        let (kms, r) = time_ms(create(unique("key"))).await;
        assert_eq!(status_of(&r), 201);
        let (hms, r) = time_ms(sessions::create_session::handle(
            app,
            keyed_request(unique("key")),
        ))
        .await;
        assert_eq!(status_of(&r.unwrap()), 201);
        if i >= 20 {
            floor.push(ms);
            keyed.push(kms);
            handler_only.push(hms);
        }
    }
    let (floor, keyed, handler_only) = (stat(floor), stat(keyed), stat(handler_only));
    report.add(
        &format!("2c. keyed create-session, handler + idempotency only{tag}"),
        &handler_only,
        format!("{:.2}x floor at p50", handler_only.median / floor.median),
    );
    report.add(
        &format!("1. floor: raw consistent GetItem + 2-Put transaction{tag}"),
        &floor,
        String::new(),
    );
    report.add(
        &format!("2c. keyed create-session + idempotency + usage meter + quota{tag}"),
        &keyed,
        format!(
            "{:.2}x floor at p50 (target <= 1.15x)",
            keyed.median / floor.median
        ),
    );
}

/// 8 and 9, products: the full walk against one raw paginated Query per shard, and the RCU of one
/// ordered page against the same page unsharded.
async fn walk_and_page_costs(h: &Harness, target: &Target, fx: &Fixture, report: &mut Report) {
    let (app, raw) = (&target.app, &target.raw);
    let mut unsharded_page_rcu: BTreeMap<u32, f64> = BTreeMap::new();
    for (shards, st) in &fx.scatter_tenants {
        let shards = *shards;
        let tid = TenantId::parse(st).unwrap();
        let auth = Auth::Tenant(st.clone());
        // ---- 8. full walk: every item through `?order=unordered` in pages of 1,000, against the
        // floor: one raw paginated Query per shard with the same Limit (Queries and RCU from
        // ConsumedCapacity, both in this run)
        let (walk_stat, walk_queries, walk_rcu) = {
            let mut times = Vec::new();
            let (mut queries, mut rcu) = (0u32, 0.0f64);
            for run in 0..4 {
                let (ms, q, r) = big_tenants::walk(app, &tid, shards).await;
                if run > 0 {
                    times.push(ms);
                }
                (queries, rcu) = (q, r);
            }
            (stat(times), queries, rcu)
        };
        let (floor_ms, floor_queries, floor_rcu) = raw_walk(
            raw,
            &h.table,
            &tid,
            shards,
            Some(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total),
        )
        .await;
        report.add(
            &format!("8. full walk {shards:>2} shards: 2,000 items, ?order=unordered, pages of 1,000"),
            &walk_stat,
            format!(
                "{walk_queries} Queries vs floor {floor_queries} ({:.2}x), {walk_rcu:.1} RCU vs floor {floor_rcu:.1} ({:.2}x) (targets <= 1.25x); floor (sequential raw Queries) {floor_ms:.1} ms",
                f64::from(walk_queries) / f64::from(floor_queries),
                walk_rcu / floor_rcu
            ),
        );
        // ---- 9. cost per page: the RCU DynamoDB reports (ConsumedCapacity) for the first ordered
        // page of 25 and of 100 products, next to the same page read unsharded (one raw Query of
        // one partition holding every item: the 1-shard tenant's, measured in its iteration)
        for page in [25u32, 100] {
            let (rcu, queries) = page_rcu(app, "query-tenant-products", page, &[], &auth).await;
            if shards == 1 {
                let unsharded = raw_page_rcu(
                    raw,
                    &h.table,
                    None,
                    ("PK", shard_pk(&tid, kind::PRODUCT, 0)),
                    Some(shared::identity::keys::entity_sk_prefix(
                        &tid,
                        kind::PRODUCT,
                    )),
                    page,
                )
                .await;
                unsharded_page_rcu.insert(page, unsharded);
            }
            let unsharded = unsharded_page_rcu.get(&page).copied().unwrap_or(f64::NAN);
            report.fact(
                &format!(
                    "9. cost per ordered page of {page:>3}, {shards:>2} shards (RCU): products"
                ),
                json!(rcu),
                &format!(
                    "{queries} Queries; unsharded page {unsharded:.1} RCU ({:.2}x)",
                    rcu / unsharded
                ),
            );
        }
    }
}

/// The RCU (and requests) of the first page of `limit` items of list route `bin`, from the
/// ConsumedCapacity DynamoDB returned for the handler's own requests.
async fn page_rcu(
    app: &App,
    bin: &str,
    limit: u32,
    extra: &[(&str, &str)],
    auth: &Auth,
) -> (f64, u32) {
    page_rcu_at(app, bin, &[], limit, extra, auth).await
}

async fn page_rcu_at(
    app: &App,
    bin: &str,
    path: &[(&str, &str)],
    limit: u32,
    extra: &[(&str, &str)],
    auth: &Auth,
) -> (f64, u32) {
    let meta = Arc::new(shared::store::client::meter::RequestMeta::default());
    let limit = limit.to_string();
    let mut query = vec![("limit", limit.as_str())];
    query.extend_from_slice(extra);
    let r = shared::store::client::meter::scope(
        meta.clone(),
        integration::Client::new(app, auth.clone())
            .query(&query)
            .call(bin, &params(path), None),
    )
    .await;
    assert_eq!(r.status, 200, "{bin}: {}", r.body);
    let items = r.body["items"].as_array().map_or(0, Vec::len);
    // a full page, but a session has at most MAX_CHILDREN children
    let full = (limit.parse::<usize>().unwrap()).min(sessions::model::MAX_CHILDREN as usize);
    assert!(items >= full, "{bin}: a page of {items} items, not {full}");
    (meta.read_capacity_units(), meta.dynamodb_requests())
}

/// The RCU of one raw Query of `limit` items from one partition (`index`'s when given), optionally
/// narrowed to sort keys beginning with `prefix`, newest first like the list routes.
async fn raw_page_rcu(
    raw: &aws_sdk_dynamodb::Client,
    table: &str,
    index: Option<&str>,
    (key_attr, key): (&str, String),
    prefix: Option<String>,
    limit: u32,
) -> f64 {
    let sort_attr = if key_attr == "PK" { "SK" } else { "PK" };
    let mut q = raw
        .query()
        .table_name(table)
        .set_index_name(index.map(str::to_owned))
        .expression_attribute_names("#k", key_attr)
        .expression_attribute_values(":k", AttributeValue::S(key))
        .limit(limit as i32)
        .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total);
    q = match prefix {
        Some(p) => q
            .key_condition_expression("#k = :k AND begins_with(#s, :p)")
            .expression_attribute_names("#s", sort_attr)
            .expression_attribute_values(":p", AttributeValue::S(p)),
        None => q.key_condition_expression("#k = :k"),
    };
    let out = q.send().await.unwrap();
    assert_eq!(out.count as u32, limit, "the raw page is full");
    out.consumed_capacity()
        .and_then(|c| c.capacity_units())
        .unwrap_or(0.0)
}

/// A sharded list route, and where the 1-shard tenant holds the same items in one partition.
struct ListCost {
    name: &'static str,
    bin: &'static str,
    query: &'static [(&'static str, &'static str)],
    index: Option<&'static str>,
    partition: (&'static str, String),
    prefix: Option<String>,
}

/// 9b. Cost per page of the other list routes: employees, departments and orders at 1/4/16/64
/// shards next to the same page unsharded; the single-partition lists (a customer's sessions, a
/// session's children, a department's members) once, as shards do not apply to them.
async fn list_route_costs(h: &Harness, target: &Target, report: &mut Report) {
    let (app, raw) = (&target.app, &target.raw);
    const ITEMS: usize = 120;
    let mut unsharded: BTreeMap<(&str, u32), f64> = BTreeMap::new();
    for shards in [1u32, 4, 16, 64] {
        let tn = unique(&format!("cost{shards}"));
        onboard(h, &tn, shards).await;
        let t = TenantId::parse(&tn).unwrap();
        let auth = Auth::Tenant(tn.clone());
        seed_lists(app, &auth, ITEMS, shards == 1).await;
        let month = shared::identity::keys::tenant_prefix(&t) + "ORDERS#2026-11#0";
        let routes = [
            ListCost {
                name: "employees",
                bin: "list-employees",
                query: &[],
                index: None,
                partition: ("PK", shard_pk(&t, kind::HR, 0)),
                prefix: Some(shared::identity::keys::entity_sk_prefix(&t, kind::EMPLOYEE)),
            },
            ListCost {
                name: "departments",
                bin: "list-departments",
                query: &[],
                index: None,
                partition: ("PK", shard_pk(&t, kind::HR, 0)),
                prefix: Some(shared::identity::keys::entity_sk_prefix(
                    &t,
                    kind::DEPARTMENT,
                )),
            },
            ListCost {
                name: "orders",
                bin: "list-tenant-orders",
                query: &[("from", "2026-11-01"), ("to", "2026-11-30")],
                index: Some(shared::identity::keys::GSI1),
                partition: ("SK", month),
                prefix: None,
            },
        ];
        for ListCost {
            name,
            bin,
            query: extra,
            index,
            partition: key,
            prefix,
        } in routes
        {
            for page in [25u32, 100] {
                let (rcu, queries) = page_rcu(app, bin, page, extra, &auth).await;
                if shards == 1 {
                    let one =
                        raw_page_rcu(raw, &h.table, index, key.clone(), prefix.clone(), page).await;
                    unsharded.insert((name, page), one);
                }
                let one = unsharded.get(&(name, page)).copied().unwrap_or(f64::NAN);
                report.fact(
                    &format!(
                        "9. cost per ordered page of {page:>3}, {shards:>2} shards (RCU): {name}"
                    ),
                    json!(rcu),
                    &format!(
                        "{queries} Queries; unsharded page {one:.1} RCU ({:.2}x)",
                        rcu / one
                    ),
                );
            }
        }
        if shards == 1 {
            for page in [25u32, 100] {
                for (name, bin, path) in [
                    (
                        "sessions of a customer",
                        "get-sessions-by-customer-id",
                        vec![("customerId", "c-cost")],
                    ),
                    (
                        "children of a session",
                        "get-child-sessions-by-session-id",
                        vec![("sessionId", "")],
                    ),
                    (
                        "members of a department",
                        "list-department-employees",
                        vec![("departmentId", "d-000")],
                    ),
                ] {
                    let parent = parent_session(app, &auth).await;
                    let path: Vec<(&str, &str)> = path
                        .into_iter()
                        .map(|(k, v)| {
                            if k == "sessionId" {
                                (k, parent.as_str())
                            } else {
                                (k, v)
                            }
                        })
                        .collect();
                    let (rcu, queries) = page_rcu_at(app, bin, &path, page, &[], &auth).await;
                    report.fact(
                        &format!("9. cost per page of {page:>3} (RCU): {name}"),
                        json!(rcu),
                        &format!("{queries} Queries; one partition at any shard count"),
                    );
                }
            }
        }
    }
}

/// The parent session `seed_lists` created (the customer `c-parent`'s only session).
async fn parent_session(app: &App, auth: &Auth) -> String {
    let r = integration::Client::new(app, auth.clone())
        .query(&[("limit", "1")])
        .call(
            "get-sessions-by-customer-id",
            &[("customerId", "c-parent")],
            None,
        )
        .await;
    r.body["items"][0]["sessionId"]
        .as_str()
        .expect("c-parent has a session")
        .to_owned()
}

/// `items` departments (`d-000`…), `items` employees all in `d-000`, and `items` orders of one user
/// dated in November 2026; with `sessions`, also `items` sessions of customer `c-cost` and
/// as many children as a session may have (99) under one session of `c-parent`.
async fn seed_lists(app: &App, auth: &Auth, items: usize, with_sessions: bool) {
    let client = integration::Client::new(app, auth.clone());
    let ok = |r: integration::Resp| assert!(matches!(r.status, 200 | 201), "{}", r.body);
    for i in 0..items {
        let d = format!("d-{i:03}");
        ok(client
            .call(
                "put-department",
                &params(&[("departmentId", &d)]),
                Some(json!({"name": d})),
            )
            .await);
    }
    for i in 0..items {
        let e = format!("e-{i:03}");
        ok(client.call("put-employee", &params(&[("employeeId", &e)]), Some(
                json!({"name": e, "departmentId": "d-000", "email": format!("{e}@bench.example")}),
            ))
        .await);
    }
    ok(client
        .call(
            "put-user",
            &params(&[("userId", "u-1")]),
            Some(json!({"name": "u", "email": "u@bench.example"})),
        )
        .await);
    for i in 0..items {
        ok(client
            .call(
                "create-order",
                &params(&[("userId", "u-1")]),
                Some(json!({
                    "orderId": format!("o-{i:03}"),
                    "date": format!("2026-11-{:02}", 1 + i % 28),
                    "amount": 1.0,
                    "items": [{"itemId": "l-1", "sku": "S", "qty": 1, "price": 1.0}]
                })),
            )
            .await);
    }
    if with_sessions {
        for _ in 0..items {
            ok(client
                .call(
                    "create-session",
                    &params(&[]),
                    Some(json!({"customerId": "c-cost"})),
                )
                .await);
        }
        let parent = client
            .call(
                "create-session",
                &params(&[]),
                Some(json!({"customerId": "c-parent"})),
            )
            .await;
        ok(parent.clone());
        let parent = parent.body["sessionId"].as_str().unwrap().to_owned();
        for _ in 0..sessions::model::MAX_CHILDREN {
            ok(client
                .call(
                    "create-session",
                    &params(&[]),
                    Some(json!({"customerId": "c-parent", "parentSessionId": parent})),
                )
                .await);
        }
    }
}

/// 6. STS: AssumeRole calls per 1,000 warm requests across 10 tenants, and what caching saves.
async fn sts_figures(h: &Harness, sdk: &aws_types::SdkConfig, fx: &Fixture, report: &mut Report) {
    let fresh = production_app(sdk, &h.table);
    // Onboarded first: a tenant with no record is refused (403) before any AssumeRole.
    let mut tenants = Vec::new();
    for _ in 0..10 {
        let tn = unique("sts");
        onboard(h, &tn, 1).await;
        tenants.push(tn);
    }
    // Onboarding writes with the new tenant's own scoped credentials: one AssumeRole each, not
    // the figure's.
    let mut by_onboarding = 0;
    for tn in &tenants {
        by_onboarding += h.recorded_policies(tn).await.len();
    }
    let mut cold_first = Vec::new();
    let mut warm_rest = Vec::new();
    for (i, tn) in tenants.iter().cycle().take(1000).enumerate() {
        let ev = requests::get_session(&Auth::Tenant(tn.clone()), &fx.session_id);
        let (ms, r) = time_ms(sessions::get_session_by_session_id::handle(&fresh, ev)).await;
        assert_eq!(
            status_of(&r.unwrap_or_else(shared::ApiError::into_response)),
            404
        );
        if i < 10 {
            cold_first.push(ms)
        } else {
            warm_rest.push(ms)
        }
    }
    let mut assumed = 0;
    for tn in &tenants {
        assumed += h.recorded_policies(tn).await.len();
    }
    report.fact(
        "6. STS: AssumeRole calls per 1,000 requests over 10 tenants",
        json!(assumed - by_onboarding),
        "target 10 (1 per tenant per container)",
    );
    let (c, w) = (stat(cold_first), stat(warm_rest));
    report.fact(
        "6. STS: latency caching saves per request",
        json!(format!("{:.2} ms", c.median - w.median)),
        &format!(
            "first request {:.2} ms (AssumeRole and the tenant record), warm {:.2} ms",
            c.median, w.median
        ),
    );
}

/// 7. Bootstrap sizes, from `cargo lambda build --release --arm64` (scripts/package.sh).
fn bootstrap_sizes(report: &mut Report) {
    let lambda_dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/lambda"));
    let mut sizes = BTreeMap::new();
    if let Ok(dirs) = std::fs::read_dir(lambda_dir) {
        for d in dirs.flatten() {
            if let Ok(m) = std::fs::metadata(d.path().join("bootstrap")) {
                sizes.insert(d.file_name().to_string_lossy().into_owned(), m.len());
            }
        }
    }
    if sizes.is_empty() {
        report.fact(
            "7. bootstrap size (arm64, stripped)",
            json!(null),
            "no target/lambda/*/bootstrap: scripts/bench.sh builds them first",
        );
        return;
    }
    for (function, bytes) in &sizes {
        report.fact(
            &format!("7. bootstrap: {function}"),
            json!(format!("{:.2} MB", *bytes as f64 / 1_048_576.0)),
            "",
        );
    }
    let max = sizes.values().copied().max().unwrap_or(0);
    let over = sizes.values().filter(|b| **b > 4 * 1_048_576).count();
    report.fact(
        "7. bootstrap size (arm64, stripped), largest",
        json!(format!("{:.2} MB", max as f64 / 1_048_576.0)),
        &format!(
            "{} functions measured, {over} over the target of 4 MB",
            sizes.len()
        ),
    );
    report
        .json
        .insert("7. bootstrap sizes".into(), json!(sizes));
}

/// A horizontal bar chart of every latency figure: p50 bar, p99 tick.
fn svg(rows: &[(String, Stat, String)]) -> String {
    let max = rows.iter().map(|r| r.1.p99).fold(1.0, f64::max);
    let (w, row_h, left) = (900.0, 22.0, 430.0);
    let mut out = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{}' font-family='sans-serif' font-size='11'>\n<text x='4' y='14' font-weight='bold'>pooltable benchmark: p50 (bar) and p99 (tick), ms</text>\n",
        rows.len() as f64 * row_h + 30.0
    );
    for (i, (name, s, _)) in rows.iter().enumerate() {
        let y = 24.0 + i as f64 * row_h;
        let scale = (w - left - 60.0) / max;
        out += &format!(
            "<text x='4' y='{:.1}'>{}</text><rect x='{left}' y='{:.1}' width='{:.1}' height='14' fill='#4a78c2'/><line x1='{:.1}' x2='{:.1}' y1='{:.1}' y2='{:.1}' stroke='#c24a4a' stroke-width='2'/><text x='{:.1}' y='{:.1}'>{:.2}</text>\n",
            y + 11.0,
            name.replace('&', "&amp;").replace('<', "&lt;"),
            y,
            s.median * scale,
            left + s.p99 * scale,
            left + s.p99 * scale,
            y,
            y + 14.0,
            left + s.p99 * scale + 4.0,
            y + 11.0,
            s.median
        );
    }
    out + "</svg>\n"
}
