//! Figure 12: neighbours under a capacity attack. One basic tenant (25 requests/s, 50 capacity
//! units/s) sends expensive requests, whole pages of 24 KB products and 48 KB puts, from 8 containers
//! (8 `App`s, each its own limiter) at about 20× its capacity quota; a premium neighbour's GetItem
//! is timed before and during. The figure reports the noisy tenant's consumed units against its
//! quota (target: at most 1.2 × the quota over the run, plus the limiter's stated bound of one
//! largest request per container) and the neighbour's p50 and p99 (target: p99 at most 1.5× its
//! value with no attack).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use integration::routes::{call, params};
use integration::{event, unique, Auth, Harness};
use serde_json::{json, Value};
use shared::identity::clock::Clock;
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{entity_sk, kind, shard_pk};
use shared::App;

use crate::{stat, status_of, time_ms, Report};

const CONTAINERS: usize = 8;
const QUOTA_UNITS: f64 = 50.0;
const OVERLOAD: f64 = 20.0;
const PRODUCTS: usize = 48;
const PRODUCT_KB: usize = 24;
const PUT_KB: usize = 48;

/// Seeds `count` products of `kb` kilobytes for `tenant` over `shards`, straight into the table
/// (the seeding is not the tenant's traffic).
async fn seed_large_products(h: &Harness, tenant: &str, shards: u32, count: usize, kb: usize) {
    let t = TenantId::parse(tenant).unwrap();
    let mut requests = Vec::new();
    for i in 0..count {
        let id = EntityId::parse(&format!("p-{i:05}")).unwrap();
        let pk = shard_pk(
            &t,
            kind::PRODUCT,
            shared::identity::shard::shard_for(id.as_str(), shards),
        );
        let item: HashMap<String, AttributeValue> = HashMap::from([
            ("PK".into(), AttributeValue::S(pk)),
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
                    "blob".into(),
                    AttributeValue::S("x".repeat(kb * 1024)),
                )])),
            ),
            (
                "updatedAt".into(),
                AttributeValue::S("2026-11-24T00:00:00Z".into()),
            ),
        ]);
        requests.push(
            WriteRequest::builder()
                .put_request(PutRequest::builder().set_item(Some(item)).build().unwrap())
                .build(),
        );
    }
    for chunk in requests.chunks(10) {
        let mut pending = chunk.to_vec();
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

async fn onboard(h: &Harness, body: Value) {
    let r = call(
        &h.app,
        "onboard-tenant",
        &params(&[]),
        &[],
        Some(body),
        &Auth::Operator("platform".into()),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
}

/// One expensive request of the noisy tenant, served as the runtime serves it (quota first): the
/// `n`th of a container is a whole page, every fourth a large put. Answers (status, ms).
async fn expensive(app: &App, auth: &Auth, n: usize) -> (u16, f64) {
    let (ms, r) = if n % 4 == 3 {
        let id = format!("put-{n}");
        let ev = event(
            "PUT",
            "/products/{productId}",
            &[("productId", &id)],
            &[],
            Some(json!({"blob": "y".repeat(PUT_KB * 1024)})),
            auth,
        );
        time_ms(Box::pin(shared::service::runtime::respond_admitted(
            app,
            "put-product",
            "bench".into(),
            ev,
            |req| products::put_product::handle(app, req),
        )))
        .await
    } else {
        let limit = PRODUCTS.to_string();
        let ev = event("GET", "/products", &[], &[("limit", &limit)], None, auth);
        time_ms(Box::pin(shared::service::runtime::respond_admitted(
            app,
            "query-tenant-products",
            "bench".into(),
            ev,
            |req| products::query_tenant_products::handle(app, req),
        )))
        .await
    };
    (status_of(&r), ms)
}

/// The neighbour's GetItem, as the runtime serves it.
async fn neighbour_get(app: &App, auth: &Auth) -> f64 {
    let ev = event(
        "GET",
        "/products/{productId}",
        &[("productId", "p-00000")],
        &[],
        None,
        auth,
    );
    let (ms, r) = time_ms(Box::pin(shared::service::runtime::respond_admitted(
        app,
        "get-product",
        "bench".into(),
        ev,
        |req| products::get_product::handle(app, req),
    )))
    .await;
    assert_eq!(status_of(&r), 200, "the neighbour was refused");
    ms
}

/// The units the usage meter recorded for `tenant` today, every route, read + write.
async fn units_used(h: &Harness, apps: &[App], tenant: &str) -> f64 {
    for app in apps {
        app.flush_usage().await.expect("flush usage");
    }
    let today = shared::store::usage::utc_date(shared::identity::clock::SystemClock.now_millis());
    let r = call(
        &h.app,
        "get-tenant-usage",
        &params(&[("tenantId", tenant)]),
        &[("from", &today), ("to", &today)],
        None,
        &Auth::Operator("platform".into()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["days"][0]["capacityUnits"]
        .as_object()
        .map_or(0.0, |routes| {
            routes
                .values()
                .map(|u| u["read"].as_f64().unwrap_or(0.0) + u["write"].as_f64().unwrap_or(0.0))
                .sum()
        })
}

pub async fn attack_figure(
    h: &Harness,
    new_app: impl Fn() -> App,
    neighbour_app: &App,
    report: &mut Report,
) {
    let seconds: u64 = std::env::var("BENCH_ATTACK_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let (noisy, neighbour) = (unique("noisy"), unique("neighbour"));
    onboard(
        h,
        json!({"tenantId": noisy, "tier": "basic", "shardCount": 4}),
    )
    .await;
    onboard(
        h,
        json!({"tenantId": neighbour, "tier": "premium", "shardCount": 4}),
    )
    .await;
    seed_large_products(h, &noisy, 4, PRODUCTS, PRODUCT_KB).await;
    seed_large_products(h, &neighbour, 4, 1, 1).await;
    let (noisy_auth, neighbour_auth) = (Auth::Tenant(noisy.clone()), Auth::Tenant(neighbour));

    // The neighbour alone.
    let mut before = Vec::new();
    for _ in 0..300 {
        before.push(neighbour_get(neighbour_app, &neighbour_auth).await);
    }
    // One page's cost, measured on a container of its own (not counted in the attack's window),
    // sets the pace: the 8 containers together offer 20 × the quota.
    let probe = new_app();
    let (status, _) = expensive(&probe, &noisy_auth, 0).await;
    assert_eq!(status, 200);
    let page_units = units_used(h, std::slice::from_ref(&probe), &noisy)
        .await
        .max(1.0);
    let interval =
        Duration::from_secs_f64(CONTAINERS as f64 * page_units / (OVERLOAD * QUOTA_UNITS));
    // Let the probe's debt be repaid before the attack starts.
    tokio::time::sleep(Duration::from_secs_f64(page_units / QUOTA_UNITS + 2.0)).await;
    let baseline_used = units_used(h, std::slice::from_ref(&probe), &noisy).await;

    // The attack, with the neighbour's reads beside it.
    let apps: Vec<App> = (0..CONTAINERS).map(|_| new_app()).collect();
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let attackers = apps.iter().map(|app| {
        let auth = &noisy_auth;
        async move {
            let mut statuses: HashMap<u16, usize> = HashMap::new();
            let mut n = 0;
            let mut next = Instant::now();
            while Instant::now() < until {
                let (status, _) = Box::pin(expensive(app, auth, n)).await;
                *statuses.entry(status).or_default() += 1;
                n += 1;
                next += interval;
                tokio::time::sleep_until(next.into()).await;
            }
            statuses
        }
    });
    let neighbour_loop = async {
        let mut during = Vec::new();
        while Instant::now() < until {
            during.push(neighbour_get(neighbour_app, &neighbour_auth).await);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        during
    };
    let (statuses, during) = tokio::join!(futures::future::join_all(attackers), neighbour_loop);
    let elapsed = started.elapsed().as_secs_f64();
    let used = units_used(h, &apps, &noisy).await - baseline_used;
    let mut totals: HashMap<u16, usize> = HashMap::new();
    for s in statuses {
        for (k, v) in s {
            *totals.entry(k).or_default() += v;
        }
    }
    let offered = totals.values().sum::<usize>();
    let quota = QUOTA_UNITS * elapsed;
    // The stated bound: one largest request (a whole page, or a large put with its GSI1 copy) per
    // container beyond the quota of T + 1 seconds.
    let largest = page_units.max((PUT_KB as f64 + 1.0) * 2.0);
    let allowed = 1.2 * quota + QUOTA_UNITS + CONTAINERS as f64 * largest;
    let (before, during) = (stat(before), stat(during));
    report.add(
        "12a. neighbour GetItem, no attack [quota path]",
        &before,
        String::new(),
    );
    report.add(
        "12b. neighbour GetItem, during a capacity attack",
        &during,
        format!(
            "p99 {:.2}× the no-attack p99 (target <= 1.5×)",
            during.p99 / before.p99
        ),
    );
    report.fact(
        "12c. noisy tenant's consumed units vs its quota",
        json!(format!("{used:.0} of {quota:.0} CU")),
        &format!(
            "{:.2}× its quota over {elapsed:.0} s (target <= 1.2× plus one largest request of \
             {largest:.0} CU per container: <= {allowed:.0} CU); {offered} requests from \
             {CONTAINERS} containers (a page {page_units:.0} CU; offered ~{OVERLOAD}× the quota); \
             answers {totals:?}",
            used / quota
        ),
    );
}
