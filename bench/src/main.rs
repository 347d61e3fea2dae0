//! `scripts/bench.sh` (or, with the local stack's environment, `cargo run -p bench --release`): every
//! figure of the benchmark in one run, each with its baseline measured in the same run. Prints a
//! table, writes `target/bench/results.json` and `target/bench/latency.svg`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use integration::{event, onboard, unique, Auth, Harness};
use serde_json::{json, Value};
use shared::identity::clock::{Clock, SystemClock};
use shared::identity::keys::{entity_sk, kind, shard_pk};
use shared::isolation::claims::AuthMode;
use shared::service::app::{load_sdk_config, Settings};
use shared::store::scatter::Fanout;
use shared::App;

const ROLE_ARN: &str = integration::ROLE_ARN;

#[derive(Debug, Clone)]
struct Stat {
    median: f64,
    p99: f64,
    count: usize,
}

fn stat(mut ms: Vec<f64>) -> Stat {
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
}

async fn time_ms<F: std::future::Future>(f: F) -> (f64, F::Output) {
    let t = Instant::now();
    let out = f.await;
    (t.elapsed().as_secs_f64() * 1000.0, out)
}

fn production_app(sdk: &aws_types::SdkConfig, table: &str) -> App {
    let settings = Settings {
        table_name: table.to_owned(),
        tenant_role_arn: ROLE_ARN.into(),
        session_ttl_seconds: 3600,
        credentials_seconds: 900,
        auth: AuthMode::Authorizer,
        // The benchmark signs cursors like production, with the key the local stack generated.
        cursor_keys: shared::identity::cursor::CursorKeys::new(
            std::env::var("CURSOR_SIGNING_KEY")
                .expect("CURSOR_SIGNING_KEY: run the benchmark through scripts/bench.sh")
                .as_bytes(),
            None,
        )
        .expect("a 32-byte key"),
        max_in_flight: shared::store::scoped::DEFAULT_MAX_IN_FLIGHT,
    };
    App::new(settings, sdk, Arc::new(SystemClock)).expect("app")
}

fn status_of(r: &lambda_http::Response<lambda_http::Body>) -> u16 {
    r.status().as_u16()
}

async fn seed_products(h: &Harness, tenant: &str, shards: u32, count: usize) {
    let t = shared::identity::ids::TenantId::parse(tenant).unwrap();
    let mut batch = Vec::new();
    for i in 0..count {
        let id = shared::identity::ids::EntityId::parse(&format!("p-{i:05}")).unwrap();
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
            (
                "document".into(),
                AttributeValue::M(HashMap::from([(
                    "name".into(),
                    AttributeValue::S(format!("product {i}")),
                )])),
            ),
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

fn release_bin(name: &str) -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../target").to_owned());
    Path::new(&target).join("release").join(name)
}

fn spawn_function(bin: &str, table: &str, api: &str) -> tokio::process::Child {
    tokio::process::Command::new(release_bin(bin))
        .env_clear()
        .envs(integration::runtime_api::function_env(table, api, bin))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {}: {e} (scripts/bench.sh builds it)",
                release_bin(bin).display()
            )
        })
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

#[tokio::main]
async fn main() {
    let iterations: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let h = Harness::new().await;
    let sdk = load_sdk_config().await;
    let raw = aws_sdk_dynamodb::Client::new(&sdk);
    let mut report = Report {
        rows: Vec::new(),
        json: BTreeMap::new(),
    };
    println!(
        "{:<58} {:>9} {:>9} {:>6}  note",
        "figure (ms)", "p50", "p99", "n"
    );

    // ---- setup: a tenant with a product and a session (premium: figure 3 sends ~300 requests a
    // second through the runtime, over the standard tier's quota)
    let tenant = unique("bench");
    integration::onboard_tier(&h, &tenant, 4, "premium").await;
    let app = production_app(&sdk, &h.table);
    let auth = Auth::Tenant(tenant.clone());
    let put = event(
        "PUT",
        "/products/{productId}",
        &[("productId", "p-1")],
        &[],
        Some(json!({"name": "bench"})),
        &auth,
    );
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
    let session: Value = match created.body() {
        lambda_http::Body::Text(t) => serde_json::from_str(t).unwrap(),
        _ => panic!(),
    };
    let session_id = session["sessionId"].as_str().unwrap().to_owned();
    let t = shared::identity::ids::TenantId::parse(&tenant).unwrap();
    let product_key = products::product_key(
        &t,
        &shared::identity::ids::EntityId::parse("p-1").unwrap(),
        4,
    );
    let session_pk = shared::identity::keys::session_pk(
        &t,
        &shared::identity::ids::SessionId::parse(&session_id).unwrap(),
    );

    // ---- 1 & 2. the floor (raw SDK, same process and client settings) and the warm handlers for
    // the same request, interleaved so that both see the same server and machine state
    let (mut get_floor, mut query_floor, mut warm_get, mut warm_query, mut governed_get) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..iterations + 20 {
        let (ms, out) = time_ms(
            raw.get_item()
                .table_name(&h.table)
                .set_key(Some(
                    product_key
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .collect(),
                ))
                .send(),
        )
        .await;
        out.expect("raw get");
        let ev = event(
            "GET",
            "/products/{productId}",
            &[("productId", "p-1")],
            &[],
            None,
            &auth,
        );
        let (hms, r) = time_ms(products::get_product::handle(&app, ev)).await;
        assert_eq!(status_of(&r.unwrap()), 200);
        // the same request served as the runtime serves it: quota decided first, then the
        // handler beside the usage meter's and the quota counter's UpdateItems
        let ev = event(
            "GET",
            "/products/{productId}",
            &[("productId", "p-1")],
            &[],
            None,
            &auth,
        );
        let (gms, r) = time_ms(shared::service::runtime::respond_admitted(
            &app,
            "get-product",
            "bench".into(),
            ev,
            |req| products::get_product::handle(&app, req),
        ))
        .await;
        assert_eq!(status_of(&r), 200);
        // the very request the handler sends: its key condition, expiry filter and Limit 1
        let (qms, out) = time_ms(
            raw.query()
                .table_name(&h.table)
                .key_condition_expression("PK = :pk AND begins_with(SK, :root)")
                .expression_attribute_values(":pk", AttributeValue::S(session_pk.clone()))
                .expression_attribute_values(
                    ":root",
                    AttributeValue::S(shared::identity::keys::customer_sk_prefix(&t)),
                )
                .filter_expression("#live_exp > :live_now")
                .expression_attribute_names("#live_exp", shared::identity::keys::EXPIRES_AT)
                .expression_attribute_values(
                    ":live_now",
                    AttributeValue::N(
                        shared::identity::clock::SystemClock
                            .now_seconds()
                            .to_string(),
                    ),
                )
                .limit(1)
                .send(),
        )
        .await;
        out.expect("raw query");
        let ev = event(
            "GET",
            "/sessions/{sessionId}",
            &[("sessionId", &session_id)],
            &[],
            None,
            &auth,
        );
        let (hqms, r) = time_ms(sessions::get_session_by_session_id::handle(&app, ev)).await;
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
    report.add("1. floor: raw SDK GetItem", &get_floor, String::new());
    report.add("1. floor: raw SDK Query", &query_floor, String::new());
    report.add(
        "2. warm handler: get-product (1 GetItem)",
        &warm_get,
        format!(
            "{:.2}x floor at p50 (target <= 1.10x)",
            warm_get.median / get_floor.median
        ),
    );
    report.add(
        "2b. warm get-product + usage meter + quota",
        &governed_get,
        format!(
            "{:.2}x floor at p50 (target <= 1.15x)",
            governed_get.median / get_floor.median
        ),
    );
    report.add(
        "2. warm handler: get-session-by-session-id (1 Query)",
        &warm_query,
        format!(
            "{:.2}x floor at p50 (target <= 1.10x)",
            warm_query.median / query_floor.median
        ),
    );

    // ---- 3 & 7. through the Lambda runtime: the release binary on a local Runtime API
    let api = integration::runtime_api::RuntimeApi::start().await;
    let mut child = spawn_function("get-product", &h.table, &api.addr);
    let ev = api_event(
        "GET",
        "/products/{productId}",
        &[("productId", "p-1")],
        &[],
        &tenant,
    );
    let mut through = Vec::new();
    for i in 0..1000 + 20 {
        let (ms, body) = time_ms(api.invoke(&ev)).await;
        assert!(body.contains("\"statusCode\":200"), "{body}");
        if i >= 20 && through.len() < iterations {
            through.push(ms);
        }
    }
    let rss = child.id().and_then(rss_kb);
    let _ = child.kill().await;
    let through = stat(through);
    report.add(
        "3. through the runtime: get-product",
        &through,
        format!("{:.2}x floor at p50", through.median / get_floor.median),
    );
    report.fact(
        "7. RSS after 1,020 invocations (get-product)",
        json!(rss.map(|kb| format!("{:.1} MB", kb as f64 / 1024.0))),
        "target <= 32 MB",
    );

    // ---- 4. cold start: spawn, first invocation answered (init + AssumeRole + request)
    let mut cold = Vec::new();
    for _ in 0..20 {
        let api = integration::runtime_api::RuntimeApi::start().await;
        let started = Instant::now();
        let mut child = spawn_function("query-tenant-products", &h.table, &api.addr);
        let body = api
            .invoke(&api_event(
                "GET",
                "/products",
                &[],
                &[("limit", "25")],
                &tenant,
            ))
            .await;
        cold.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(body.contains("\"statusCode\":200"), "{body}");
        let _ = child.kill().await;
    }
    let cold = stat(cold);
    report.add(
        "4. cold start: query-tenant-products, spawn to first answer",
        &cold,
        "incl. AssumeRole".into(),
    );

    // ---- 4b. tenant isolation mode: every tenant gets its own execution environment, so each new
    // (or idle) tenant pays a cold start. 20 tenants, each a fresh process on a Runtime API that
    // sends the tenant id; the function checks it against the claim and assumes that tenant's role.
    let mut per_tenant = Vec::new();
    for i in 0..20 {
        let t = unique(&format!("iso{i}"));
        onboard(&h, &t, 4).await;
        let api = integration::runtime_api::RuntimeApi::start().await;
        let started = Instant::now();
        let mut child = spawn_function("query-tenant-products", &h.table, &api.addr);
        let body = api
            .invoke_for_tenant(
                &api_event("GET", "/products", &[], &[("limit", "25")], &t),
                Some(&t),
            )
            .await;
        per_tenant.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(body.contains("\"statusCode\":200"), "{body}");
        let _ = child.kill().await;
    }
    let per_tenant = stat(per_tenant);
    report.add(
        "4b. cold start per tenant (tenant isolation mode): query-tenant-products, new tenant, spawn to first answer",
        &per_tenant,
        format!(
            "{:.2}x the pooled cold start at p50; paid once per tenant per environment",
            per_tenant.median / cold.median
        ),
    );

    // ---- 5. scatter-gather: 2,000 products, walking every page (limit 100)
    let python = std::env::var("BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut python_cold = None;
    let mut unsharded_page_rcu: BTreeMap<u32, f64> = BTreeMap::new();
    for shards in [1u32, 4, 16, 64] {
        let st = unique(&format!("sg{shards}"));
        onboard(&h, &st, shards).await;
        seed_products(&h, &st, shards, 2000).await;
        let auth = Auth::Tenant(st.clone());
        let walk = |fanout: Fanout| {
            let (app, auth) = (&app, auth.clone());
            async move {
                let mut pages = Vec::new();
                let mut cursor: Option<String> = None;
                let mut items = 0;
                loop {
                    let mut q = vec![("limit", "100")];
                    if let Some(c) = &cursor {
                        q.push(("cursor", c.as_str()));
                    }
                    let ev = event("GET", "/products", &[], &q, None, &auth);
                    let (ms, r) = time_ms(products::query_tenant_products::handle_with(
                        app, ev, fanout,
                    ))
                    .await;
                    let body: Value = match r.unwrap().body() {
                        lambda_http::Body::Text(t) => serde_json::from_str(t).unwrap(),
                        _ => panic!(),
                    };
                    pages.push(ms);
                    items += body["items"].as_array().unwrap().len();
                    match body["nextCursor"].as_str() {
                        Some(c) => cursor = Some(c.to_owned()),
                        None => return (pages, items),
                    }
                }
            }
        };
        let _ = walk(Fanout::Parallel).await; // warm
        let (mut par, mut seq) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let (p, n) = walk(Fanout::Parallel).await;
            assert_eq!(n, 2000);
            par.extend(p);
            let (s, n) = walk(Fanout::Sequential).await;
            assert_eq!(n, 2000);
            seq.extend(s);
        }
        // the slowest single shard: one Query of a page (limit 100) on each shard, the worst median
        let tid = shared::identity::ids::TenantId::parse(&st).unwrap();
        let mut slowest = 0.0f64;
        for s in 0..shards {
            let mut samples = Vec::new();
            for _ in 0..10 {
                let (ms, out) = time_ms(
                    raw.query()
                        .table_name(&h.table)
                        .key_condition_expression("PK = :pk AND begins_with(SK, :k)")
                        .expression_attribute_values(
                            ":pk",
                            AttributeValue::S(shard_pk(&tid, kind::PRODUCT, s)),
                        )
                        .expression_attribute_values(
                            ":k",
                            AttributeValue::S(shared::identity::keys::entity_sk_prefix(
                                &tid,
                                kind::PRODUCT,
                            )),
                        )
                        .limit(100)
                        .send(),
                )
                .await;
                out.unwrap();
                samples.push(ms);
            }
            slowest = slowest.max(stat(samples).median);
        }
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
        let out = tokio::process::Command::new(&python)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/baseline/query_tenant_products.py"
            ))
            .args([
                &h.table,
                &st,
                &shards.to_string(),
                "100",
                "3",
                ROLE_ARN,
                policy_file.to_str().unwrap(),
            ])
            .output()
            .await
            .expect("python3 runs the baseline");
        assert!(
            out.status.success(),
            "python baseline failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let py: Value = serde_json::from_slice(&out.stdout).expect("baseline prints JSON");
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
        report.add(
            &format!("5. scatter {shards:>2} shards: parallel, per page"),
            &par,
            format!(
                "{:.2}x slowest single shard ({slowest:.2} ms); {:.1}x Python throughput",
                par.median / slowest,
                pys.median / par.median
            ),
        );
        // ---- 8. full walk: every item through `?order=unordered` in pages of 1,000, against the
        // floor: one raw paginated Query per shard with the same Limit (Queries and RCU from
        // ConsumedCapacity, both in this run)
        let (walk_stat, walk_queries, walk_rcu) = {
            let db = app.db(&tid).await.unwrap();
            let mut listing = products::query_tenant_products::LIST.over(&tid, shards);
            listing.route = format!("{}?order=unordered", listing.route);
            let keys = &app.settings.cursor_keys;
            let mut times = Vec::new();
            let (mut queries, mut rcu) = (0u32, 0.0f64);
            for run in 0..4 {
                let meta = std::sync::Arc::new(shared::store::meter::RequestMeta::default());
                let started = Instant::now();
                let mut cursor: Option<String> = None;
                let mut items = 0;
                loop {
                    let page = shared::store::meter::scope(
                        meta.clone(),
                        shared::store::scatter::walk(
                            &db,
                            &listing,
                            keys,
                            1000,
                            shared::service::http::MAX_PAGE_BYTES,
                            cursor.as_deref(),
                        ),
                    )
                    .await
                    .unwrap();
                    items += page.items.len();
                    match page.next_cursor {
                        Some(c) => cursor = Some(c),
                        None => break,
                    }
                }
                assert_eq!(items, 2000);
                if run > 0 {
                    times.push(started.elapsed().as_secs_f64() * 1000.0);
                }
                queries = meta.dynamodb_requests();
                rcu = meta.read_capacity_units();
            }
            (stat(times), queries, rcu)
        };
        let (floor_queries, floor_rcu, floor_ms) = {
            let started = Instant::now();
            let (mut queries, mut rcu) = (0u32, 0.0f64);
            for s in 0..shards {
                let mut start = None;
                loop {
                    let out = raw
                        .query()
                        .table_name(&h.table)
                        .key_condition_expression("PK = :pk AND begins_with(SK, :k)")
                        .expression_attribute_values(
                            ":pk",
                            AttributeValue::S(shard_pk(&tid, kind::PRODUCT, s)),
                        )
                        .expression_attribute_values(
                            ":k",
                            AttributeValue::S(shared::identity::keys::entity_sk_prefix(
                                &tid,
                                kind::PRODUCT,
                            )),
                        )
                        .limit(1000)
                        .set_exclusive_start_key(start)
                        .return_consumed_capacity(
                            aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total,
                        )
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
            (queries, rcu, started.elapsed().as_secs_f64() * 1000.0)
        };
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
            let meta = Arc::new(shared::store::meter::RequestMeta::default());
            let limit = page.to_string();
            let ev = event("GET", "/products", &[], &[("limit", &limit)], None, &auth);
            let r = shared::store::meter::scope(
                meta.clone(),
                products::query_tenant_products::handle(&app, ev),
            )
            .await
            .unwrap();
            assert_eq!(status_of(&r), 200);
            let out = raw
                .query()
                .table_name(&h.table)
                .key_condition_expression("PK = :pk AND begins_with(SK, :k)")
                .expression_attribute_values(
                    ":pk",
                    AttributeValue::S(shard_pk(&tid, kind::PRODUCT, 0)),
                )
                .expression_attribute_values(
                    ":k",
                    AttributeValue::S(shared::identity::keys::entity_sk_prefix(
                        &tid,
                        kind::PRODUCT,
                    )),
                )
                .limit(page as i32)
                .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total)
                .send()
                .await
                .unwrap();
            if shards == 1 {
                unsharded_page_rcu.insert(
                    page,
                    out.consumed_capacity()
                        .and_then(|c| c.capacity_units())
                        .unwrap_or(0.0),
                );
            }
            let unsharded = unsharded_page_rcu.get(&page).copied().unwrap_or(f64::NAN);
            let rcu = meta.read_capacity_units();
            report.fact(
                &format!("9. cost per ordered page of {page:>3}, {shards:>2} shards (RCU)"),
                json!(rcu),
                &format!(
                    "{} Queries; unsharded page {unsharded:.1} RCU ({:.2}x)",
                    meta.dynamodb_requests(),
                    rcu / unsharded
                ),
            );
        }
        report.add(
            &format!("5. scatter {shards:>2} shards: sequential, per page"),
            &seq,
            String::new(),
        );
        report.add(
            &format!("5. scatter {shards:>2} shards: Python boto3 baseline, per page"),
            &pys,
            "threads + AssumeRole per request".into(),
        );
    }
    if let Some(py) = python_cold {
        report.fact(
            "4. cold start: Python baseline (imports + first request)",
            json!(format!("{py:.1} ms")),
            &format!(
                "Rust is {:.1}% of it (target <= 10%)",
                cold.median / py * 100.0
            ),
        );
    }

    // ---- 6. STS: AssumeRole calls per 1,000 warm requests across 10 tenants, and what caching saves
    let fresh = production_app(&sdk, &h.table);
    let tenants: Vec<String> = (0..10).map(|_| unique("sts")).collect();
    let mut cold_first = Vec::new();
    let mut warm_rest = Vec::new();
    for (i, tn) in tenants.iter().cycle().take(1000).enumerate() {
        let ev = event(
            "GET",
            "/sessions/{sessionId}",
            &[("sessionId", &session_id)],
            &[],
            None,
            &Auth::Tenant(tn.clone()),
        );
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
        json!(assumed),
        "target 10 (1 per tenant per container)",
    );
    let (c, w) = (stat(cold_first), stat(warm_rest));
    report.fact(
        "6. STS: latency caching saves per request",
        json!(format!("{:.2} ms", c.median - w.median)),
        &format!("first request {:.2} ms, warm {:.2} ms", c.median, w.median),
    );

    // ---- 7. bootstrap sizes, from `cargo lambda build --release --arm64` (scripts/package.sh)
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
    } else {
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

    // ---- outputs
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
