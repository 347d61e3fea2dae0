//! Figure 5, scatter-gather: a tenant's 2,000 products on 1, 4, 16 and 64 shards, every page
//! (limit 100) walked in parallel and in sequence, against the slowest single shard, the SDK alone
//! and a Python boto3 baseline.

use std::time::Instant;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::process::json_output;
use integration::{event, Auth, Harness};
use serde_json::Value;
use shared::identity::ids::TenantId;
use shared::identity::keys::{kind, shard_pk};
use shared::store::scatter::Fanout;
use shared::App;

use crate::apps::{Target, ROLE_ARN};
use crate::fixtures::Fixture;
use crate::report::{stat, time_ms, Report, Stat};
use crate::runtime::body_json;

/// Figure 5 against one target, for each of the fixture's scatter tenants. Returns the Python
/// baseline's cold start (measured with the first tenant).
pub(crate) async fn scatter_figures(
    h: &Harness,
    target: &Target,
    fx: &Fixture,
    report: &mut Report,
) -> Option<f64> {
    let python = std::env::var("BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut python_cold = None;
    for (shards, tenant) in &fx.scatter_tenants {
        let cold = scatter_figure(h, target, *shards, tenant, &python, report).await;
        python_cold.get_or_insert(cold);
    }
    python_cold
}

/// Figure 5 for `tenant`, whose 2,000 products are on `shards` shards. Returns the Python
/// baseline's cold start.
async fn scatter_figure(
    h: &Harness,
    target: &Target,
    shards: u32,
    tenant: &str,
    python: &str,
    report: &mut Report,
) -> f64 {
    let tag = target.tag;
    let auth = Auth::Tenant(tenant.to_owned());
    let tid = TenantId::parse(tenant).unwrap();
    let (par, seq) = walk_parallel_and_sequential(&target.app, &auth).await;
    let slowest = slowest_single_shard(&target.raw, &h.table, &tid, shards).await;
    let together = raw_queries_at_once(&target.raw, &h.table, &tid, shards).await;
    let baseline = python_baseline(h, target, python, tenant, &tid, shards).await;
    let (par, seq, pys) = (stat(par), stat(seq), stat(baseline.page_ms));
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
        wide_budget_figure(target, &auth, slowest, scatter_target, report).await;
    }
    report.add(
        &format!("5. scatter {shards:>2} shards: the SDK alone, {shards} raw Queries at once{tag}"),
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
    baseline.cold_ms
}

/// Every page walked three times each way, after a walk that warms the container: the parallel
/// pages' times, and the sequential pages'.
async fn walk_parallel_and_sequential(app: &App, auth: &Auth) -> (Vec<f64>, Vec<f64>) {
    let _ = walk_pages(app, auth, Fanout::Parallel).await; // warm
    let (mut par, mut seq) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let (p, n) = walk_pages(app, auth, Fanout::Parallel).await;
        assert_eq!(n, 2000);
        par.extend(p);
        let (s, n) = walk_pages(app, auth, Fanout::Sequential).await;
        assert_eq!(n, 2000);
        seq.extend(s);
    }
    (par, seq)
}

/// The slowest single shard: one Query of a page (limit 100) on each shard, the worst median.
async fn slowest_single_shard(
    raw: &aws_sdk_dynamodb::Client,
    table: &str,
    tid: &TenantId,
    shards: u32,
) -> f64 {
    let mut slowest = 0.0f64;
    for s in 0..shards {
        let mut samples = Vec::new();
        for _ in 0..10 {
            let (ms, out) =
                time_ms(product_shard_query(raw, table, tid, s).limit(100).send()).await;
            out.unwrap();
            samples.push(ms);
        }
        slowest = slowest.max(stat(samples).median);
    }
    slowest
}

/// The SDK alone: one raw Query per shard, all at once, each asking for what the handler's first
/// round asks (twice the fair share plus two): what the client and server cost without any of
/// pooltable's code.
async fn raw_queries_at_once(
    raw: &aws_sdk_dynamodb::Client,
    table: &str,
    tid: &TenantId,
    shards: u32,
) -> Stat {
    let want = shared::store::scatter::first_round_want(100, shards as usize) as i32;
    let mut together = Vec::new();
    for _ in 0..20 {
        let queries =
            (0..shards).map(|s| product_shard_query(raw, table, tid, s).limit(want).send());
        let (ms, outs) = time_ms(futures::future::join_all(queries)).await;
        assert!(outs.iter().all(Result::is_ok));
        together.push(ms);
    }
    stat(together)
}

/// What the Python boto3 baseline measured: each page's time, and its cold start (imports and
/// first request).
struct PythonBaseline {
    page_ms: Vec<f64>,
    cold_ms: f64,
}

/// The Python boto3 baseline: the same items, the same page size, every page, AssumeRole per
/// request (with the session policy pooltable scopes the tenant's credentials to).
async fn python_baseline(
    h: &Harness,
    target: &Target,
    python: &str,
    tenant: &str,
    tid: &TenantId,
    shards: u32,
) -> PythonBaseline {
    let policy = shared::isolation::policy::session_policy(
        tid,
        &shared::isolation::policy::TableLocation::from_role_arn(ROLE_ARN, "us-east-1", &h.table)
            .unwrap(),
    )
    .unwrap();
    let policy_file = std::env::temp_dir().join(format!("{tenant}-policy.json"));
    std::fs::write(&policy_file, &policy).unwrap();
    let py = json_output(
        tokio::process::Command::new(python)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/baseline/query_tenant_products.py"
            ))
            .args([
                &h.table,
                tenant,
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
    PythonBaseline {
        page_ms: py["latencies_ms"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_f64)
            .collect(),
        cold_ms: py["cold_ms"].as_f64().unwrap_or(0.0),
    }
}

/// Figure 5 at 64 shards with the largest fan-out budget (`DYNAMODB_MAX_IN_FLIGHT=64`): every
/// page's Queries in one wave.
async fn wide_budget_figure(
    target: &Target,
    auth: &Auth,
    slowest: f64,
    scatter_target: &str,
    report: &mut Report,
) {
    let tag = target.tag;
    let mut wide = Vec::new();
    for _ in 0..3 {
        let (p, n) = walk_pages(&target.wide, auth, Fanout::Parallel).await;
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

/// One raw Query of product shard `shard` of tenant `t`: the key condition the handlers send.
pub(crate) fn product_shard_query(
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

/// The floor of a full walk: every product of `t` on `shards` shards read raw, one paginated Query
/// (Limit 1,000) per shard, one shard after another. Its time (ms), Queries, and the RCU DynamoDB
/// reported (0 unless `capacity` asks for it).
pub(crate) async fn raw_walk(
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
