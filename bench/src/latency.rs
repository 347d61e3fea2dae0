//! Figures 1–4 against one target: the floor (the raw SDK, same process and client settings), the
//! warm handlers for the same requests, the same request through the Lambda runtime (and figure 7's
//! RSS after it), and cold starts, pooled and per tenant; then figures 2c (`idempotent`) and 5
//! (`scatter`).

use std::sync::Arc;
use std::time::Instant;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::runtime_api::RuntimeApi;
use integration::{onboard_at_max_limits as onboard, unique, Harness};
use serde_json::json;
use shared::identity::clock::{Clock, SystemClock};
use shared::identity::ids::TenantId;

use crate::apps::Target;
use crate::fixtures::Fixture;
use crate::report::{stat, time_ms, Report, Stat};
use crate::runtime::{api_event, rss_kb, spawn_function, status_of};
use crate::{idempotent, requests, scatter};

/// Figures 1–5 against one target. Returns the Python baseline's cold start.
pub(crate) async fn latency_figures(
    h: &Harness,
    target: &Target,
    fx: &Fixture,
    iterations: usize,
    report: &mut Report,
) -> Option<f64> {
    let samples = floor_and_warm_samples(h, target, fx, iterations).await;
    let get_floor = report_floor_and_warm(samples, target.tag, report);
    idempotent::idempotent_create(h, target, fx, iterations, report).await;
    runtime_figures(h, target, fx, iterations, &get_floor, report).await;
    cold_start_figures(h, target, fx, report).await;
    scatter::scatter_figures(h, target, fx, report).await
}

/// Figures 1 and 2's samples (the first 20 rounds, warming up, left out).
#[derive(Default)]
struct FloorAndWarm {
    get_floor: Vec<f64>,
    query_floor: Vec<f64>,
    warm_get: Vec<f64>,
    warm_query: Vec<f64>,
    governed_get: Vec<f64>,
}

/// 1 & 2. The floor and the warm handlers for the same request, interleaved so that both see the
/// same server and machine state.
async fn floor_and_warm_samples(
    h: &Harness,
    target: &Target,
    fx: &Fixture,
    iterations: usize,
) -> FloorAndWarm {
    let (app, raw) = (&target.app, &target.raw);
    let auth = &fx.auth;
    let t = TenantId::parse(&fx.tenant).unwrap();
    let mut samples = FloorAndWarm::default();
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
        let (qms, out) = time_ms(live_session_query(raw, &h.table, fx, &t).send()).await;
        out.expect("raw query");
        let ev = requests::get_session(auth, &fx.session_id);
        let (hqms, r) = time_ms(sessions::get_session_by_session_id::handle(app, ev)).await;
        assert_eq!(status_of(&r.unwrap()), 200);
        if i >= 20 {
            samples.get_floor.push(ms);
            samples.warm_get.push(hms);
            samples.governed_get.push(gms);
            samples.query_floor.push(qms);
            samples.warm_query.push(hqms);
        }
    }
    samples
}

/// The very request `get-session-by-session-id` sends for the fixture's session: its key
/// condition, expiry filter and Limit 1.
fn live_session_query(
    raw: &aws_sdk_dynamodb::Client,
    table: &str,
    fx: &Fixture,
    t: &TenantId,
) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
    raw.query()
        .table_name(table)
        .key_condition_expression("PK = :pk AND begins_with(SK, :root)")
        .expression_attribute_values(":pk", AttributeValue::S(fx.session_pk.clone()))
        .expression_attribute_values(
            ":root",
            AttributeValue::S(shared::identity::keys::customer_sk_prefix(t)),
        )
        .filter_expression("#live_exp > :live_now")
        .expression_attribute_names("#live_exp", shared::identity::keys::EXPIRES_AT)
        .expression_attribute_values(
            ":live_now",
            AttributeValue::N(SystemClock.now_seconds().to_string()),
        )
        .limit(1)
}

/// Adds figures 1, 2 and 2b. Returns the GetItem floor, which figure 3 is measured against.
fn report_floor_and_warm(samples: FloorAndWarm, tag: &str, report: &mut Report) -> Stat {
    let (get_floor, query_floor, warm_get, warm_query, governed_get) = (
        stat(samples.get_floor),
        stat(samples.query_floor),
        stat(samples.warm_get),
        stat(samples.warm_query),
        stat(samples.governed_get),
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
    get_floor
}

/// 3 & 7. Through the Lambda runtime: the release binary on a local Runtime API, against
/// `get_floor`; and (plain pass) the function's RSS after it.
async fn runtime_figures(
    h: &Harness,
    target: &Target,
    fx: &Fixture,
    iterations: usize,
    get_floor: &Stat,
    report: &mut Report,
) {
    let tag = target.tag;
    // BENCH_PACE=k (default 1) runs k function processes on the Runtime API and k loops at once, so
    // the tenant sees k times the request rate: a check that no figure depends on the machine's
    // speed (a machine twice as fast sends twice as many). The figure is each loop's latency.
    let pace: usize = crate::env_or("BENCH_PACE", 1).max(1);
    let api = RuntimeApi::start().await;
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
    let through = invocation_loops(&api, &ev, pace, iterations).await;
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
}

/// `pace` loops at once, each invoking `ev` 1,020 times one after another: the times of up to
/// `iterations` invocations of each loop after its first 20.
async fn invocation_loops(
    api: &Arc<RuntimeApi>,
    ev: &str,
    pace: usize,
    iterations: usize,
) -> Vec<f64> {
    let loops = (0..pace).map(|_| {
        let (api, ev) = (api.clone(), ev.to_owned());
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
    futures::future::join_all(loops)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// 4 & 4b. Cold starts: spawn, first invocation answered (init + AssumeRole + request).
async fn cold_start_figures(h: &Harness, target: &Target, fx: &Fixture, report: &mut Report) {
    let tag = target.tag;
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

    // 4b. Tenant isolation mode: every tenant gets its own execution environment, so each new (or
    // idle) tenant pays a cold start. 20 tenants, each a fresh process on a Runtime API that sends
    // the tenant id; the function checks it against the claim and assumes that tenant's role.
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
