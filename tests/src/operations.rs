//! Operations the tests start and take to their end through the real handlers: onboarding at a
//! tier, offboarding, export pages, steps with kills, lifecycle driver runs.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use serde_json::{json, Value};

use crate::{unique, Auth, Harness, Resp};
use shared::App;

/// Where most tests start: a new harness with tenants onboarded (here, beside [`onboard`], so that
/// the harness's own module needs none of the operations).
impl Harness {
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
        if drive_once(app).await == 0 {
            return;
        }
    }
    panic!("the lifecycle driver does not finish");
}

/// Runs the lifecycle driver on `app` `runs` times, whatever is left pending (an operation that
/// waits for its time).
pub async fn drive_runs(app: &App, runs: usize) {
    for _ in 0..runs {
        drive_once(app).await;
    }
}

/// One run of the lifecycle driver on `app` with `lanes`, as the function runs it (its own
/// credentials' requests judged against its role: [`crate::judge`]).
pub async fn drive(
    app: &App,
    lanes: &tenants::Lanes,
) -> Result<tenants::drive_lifecycle::Driven, shared::ApiError> {
    // Boxed: the driver's future overflows a test thread's stack in debug.
    Box::pin(crate::judge::as_function(
        "drive-lifecycle",
        tenants::drive_lifecycle::drive(app, lanes),
    ))
    .await
}

/// One run of the lifecycle driver on `app`: what it left pending.
async fn drive_once(app: &App) -> usize {
    let run = drive(app, &tenants::Lanes::in_process()).await;
    run.expect("a lifecycle run").pending
}

/// Runs the lifecycle driver on `app` once for each of `lives`, each killed after that many
/// milliseconds (a timeout or a crash part-way through its work).
pub async fn drive_killed_after(app: &App, lives: &[u64]) {
    let lanes = tenants::Lanes::in_process();
    for ms in lives {
        let run = drive(app, &lanes);
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
