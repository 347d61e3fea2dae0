//! The biggest tenants (issue 44), through the latency model:
//! - figure 8L: a whole-collection walk of 2,000 items on 16 shards, its partitions read side by
//!   side, against the sequential raw floor (one paginated Query per shard, one after another) and
//!   against the walk with a fan-out budget of 1 (one partition at a time, as walks read before);
//! - figure 14: a hot tenant's list pages at [`RATE`] a second over [`CONTAINERS`] containers with
//!   the list-page cache (`LIST_CACHE_MS`), against the same pages uncached: the Queries and RCU each
//!   shard partition gets a second, the list latency, and a neighbour's GetItem p99 beside it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use futures::StreamExt;
use integration::{event, unique, Auth, Harness};
use serde_json::{json, Value};
use shared::identity::ids::TenantId;
use shared::service::app::ListCacheSettings;
use shared::store::client::meter::{scope, RequestMeta};
use shared::store::scatter::PageAsk;
use shared::App;

use crate::fixtures::{seed_products, seed_products_with};
use crate::neighbour;
use crate::report::{stat, time_ms, Report, Stat};
use crate::scatter::raw_walk;

const SHARDS: u32 = 16;
const WALK_ITEMS: usize = 2_000;
/// The containers the hot tenant's lists spread over.
const CONTAINERS: usize = 10;
/// Lists a second the hot tenant is sent: 100 a second to each container (with most lists
/// answered from memory, a list takes a few milliseconds on average).
const RATE: u64 = 100 * CONTAINERS as u64;
const SECONDS: u64 = 5;
/// Distinct pages the hot tenant's clients read: the first three of the list, 25 items each.
const PAGES: usize = 3;
const STALENESS_MS: u64 = 1_000;
/// DynamoDB's per-partition read budget.
const PARTITION_RCU: f64 = 3_000.0;

pub async fn walk_figure(
    h: &Harness,
    app: &App,
    one_at_a_time: &App,
    raw: &aws_sdk_dynamodb::Client,
    report: &mut Report,
) {
    let tenant = unique("walked");
    integration::onboard_at_max_limits(h, &tenant, SHARDS).await;
    seed_products(h, &tenant, SHARDS, WALK_ITEMS).await;
    let t = TenantId::parse(&tenant).unwrap();
    walk(app, &t, SHARDS).await; // warm
    walk(one_at_a_time, &t, SHARDS).await;
    let (mut side_by_side, mut sequential, mut floors) = (Vec::new(), Vec::new(), Vec::new());
    let (mut queries, mut rcu) = (0, 0.0);
    for _ in 0..7 {
        let (ms, q, r) = walk(app, &t, SHARDS).await;
        side_by_side.push(ms);
        (queries, rcu) = (q, r);
        sequential.push(walk(one_at_a_time, &t, SHARDS).await.0);
        floors.push(raw_walk(raw, &h.table, &t, SHARDS, None).await.0);
    }
    let (side_by_side, sequential, floors) = (stat(side_by_side), stat(sequential), stat(floors));
    report.add(
        "8L. floor: 16 raw Queries one after another, 2,000 items [latency model]",
        &floors,
        String::new(),
    );
    report.add(
        "8L. full walk 16 shards, one partition at a time (budget 1) [latency model]",
        &sequential,
        format!(
            "{:.2}x the sequential floor at p50",
            sequential.median / floors.median
        ),
    );
    report.add(
        "8L. full walk 16 shards, partitions side by side [latency model]",
        &side_by_side,
        format!(
            "{:.2}x the sequential floor at p50 (target <= 0.5x); {queries} Queries, {rcu:.1} RCU",
            side_by_side.median / floors.median
        ),
    );
}

/// Every page (1,000 items) of `t`'s products on `shards` shards walked unordered from `app`: the
/// time, and the Queries and RCU it sent.
pub(crate) async fn walk(app: &App, t: &TenantId, shards: u32) -> (f64, u32, f64) {
    let db = app.db(t).await.unwrap();
    let mut listing = products::query_tenant_products::LIST.over(t, shards);
    listing.route = format!("{}?order=unordered", listing.route);
    let keys = app.cursor_keys().unwrap();
    let meta = Arc::new(RequestMeta::default());
    let started = Instant::now();
    let (mut cursor, mut items) = (None::<String>, 0);
    loop {
        let ask = PageAsk::new(&keys, 1000, cursor.as_deref())
            .within_bytes(shared::service::http::MAX_PAGE_BYTES);
        let page = scope(
            meta.clone(),
            shared::store::scatter::walk(&db, &listing, ask),
        )
        .await
        .unwrap();
        items += page.items.len();
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(items, WALK_ITEMS);
    (
        started.elapsed().as_secs_f64() * 1000.0,
        meta.dynamodb_requests(),
        meta.read_capacity_units(),
    )
}

/// An `App` as a list function's container runs it with `LIST_CACHE_MS` (or without, `None`).
fn list_container(sdk: &aws_types::SdkConfig, table: &str, staleness_ms: Option<u64>) -> App {
    let mut app = crate::apps::production_app(sdk, table);
    if let Some(staleness_ms) = staleness_ms {
        app = app.with_list_cache(Some(ListCacheSettings {
            staleness_ms,
            tiers: ListCacheSettings::DEFAULT_TIERS.to_vec(),
        }));
    }
    app
}

/// One list page (`cursor` None: the first) of the hot tenant from `app`: its time, and what it
/// sent to DynamoDB.
async fn list_page(app: &App, auth: &Auth, cursor: Option<&str>) -> (f64, Value, Arc<RequestMeta>) {
    let mut query = vec![("limit", "25")];
    if let Some(c) = cursor {
        query.push(("cursor", c));
    }
    let ev = event("GET", "/products", &[], &query, None, auth);
    let meta = Arc::new(RequestMeta::default());
    let (ms, r) = time_ms(scope(
        meta.clone(),
        products::query_tenant_products::handle(app, ev),
    ))
    .await;
    match r {
        Ok(r) if r.status().as_u16() == 200 => (ms, crate::runtime::body_json(&r), meta),
        // DynamoDB Local refused or timed out (a 503 to a client): counted, never a figure
        Ok(_) | Err(_) => (ms, Value::Null, meta),
    }
}

/// A list page as figure 14b serves it: the handler alone, or with `BENCH_HOTLIST_METERED=1` through
/// the runtime's usage meter (`respond_metered`), whose writes go through the tenant's client every
/// 100 ms per container as in production. Never through the quota's shared
/// window: at 1,000 requests a second its own reads and writes overload DynamoDB Local (a run with
/// it served 135 lists a second), which is not what this figure measures. Its time, and whether it
/// was answered 200.
async fn served_list_page(app: &App, auth: &Auth, cursor: Option<&str>) -> (f64, bool) {
    let mut query = vec![("limit", "25")];
    if let Some(c) = cursor {
        query.push(("cursor", c));
    }
    let ev = event("GET", "/products", &[], &query, None, auth);
    let handler = products::query_tenant_products::handle(app, ev);
    if !metered() {
        let (ms, r) = time_ms(handler).await;
        return (ms, r.is_ok_and(|r| r.status().as_u16() == 200));
    }
    let (ms, r) = time_ms(Box::pin(shared::service::runtime::respond_metered(
        Some((app, "query-tenant-products")),
        "bench".into(),
        "query-tenant-products".into(),
        handler,
    )))
    .await;
    (ms, r.status().as_u16() == 200)
}

/// `BENCH_HOTLIST_METERED=1`: figure 14b's lists go through the runtime's usage meter.
fn metered() -> bool {
    std::env::var("BENCH_HOTLIST_METERED").is_ok_and(|v| v == "1")
}

/// Figure 14: the hot tenant's list pages, uncached one at a time and then cached at [`RATE`] a
/// second over [`CONTAINERS`] containers, with a premium neighbour's GetItem timed before and
/// beside them.
pub async fn hot_list_figure(
    h: &Harness,
    sdk: &aws_types::SdkConfig,
    neighbour_app: &App,
    report: &mut Report,
) {
    let (hot, neighbour) = (unique("hot"), unique("neighbour"));
    seed_hot_list(h, &hot, &neighbour).await;
    let auth = Auth::Tenant(hot.clone());
    let neighbour_auth = Auth::Tenant(neighbour);

    // The pages the clients read: the first PAGES of the list, their cursors from one walk.
    let uncached_app = list_container(sdk, &h.table, None);
    let cursors = first_pages(&uncached_app, &auth).await;
    let uncached = uncached_cost(&uncached_app, &auth, &cursors).await;

    let before = neighbour::alone(neighbour_app, &neighbour_auth).await;

    let t = TenantId::parse(&hot).unwrap();
    let cached = cached_lists(
        sdk,
        &h.table,
        &t,
        &auth,
        &cursors,
        neighbour_app,
        &neighbour_auth,
    )
    .await;
    report_hot_list(&uncached, cached, stat(before), report);
}

/// The hot tenant's [`WALK_ITEMS`] products on [`SHARDS`] shards, and its premium neighbour's one
/// product on 4.
async fn seed_hot_list(h: &Harness, hot: &str, neighbour: &str) {
    integration::onboard_at_max_limits(h, hot, SHARDS).await;
    integration::onboard_tier(h, neighbour, 4, "premium").await;
    // Documents of about 4 KB: a first-round Query of a 25-item page (6 items a shard) reads
    // about 25 KB, 3.5 RCU, so RATE lists a second would put 3,500 RCU on every partition.
    let document = "x".repeat(4_000);
    seed_products_with(h, hot, SHARDS, WALK_ITEMS, |i| {
        AttributeValue::M(HashMap::from([
            ("name".into(), AttributeValue::S(format!("product {i}"))),
            ("text".into(), AttributeValue::S(document.clone())),
        ]))
    })
    .await;
    seed_products(h, neighbour, 4, 1).await;
}

/// The cursors of the first [`PAGES`] pages of the list (`None`: the first page).
async fn first_pages(app: &App, auth: &Auth) -> Vec<Option<String>> {
    let mut cursors: Vec<Option<String>> = vec![None];
    while cursors.len() < PAGES {
        let (_, body, _) = list_page(app, auth, cursors.last().unwrap().as_deref()).await;
        assert!(!body.is_null(), "a list page");
        cursors.push(Some(body["nextCursor"].as_str().unwrap().to_owned()));
    }
    cursors
}

/// What a list page costs without the cache: its latency one at a time, and what it sends.
struct UncachedCost {
    stat: Stat,
    queries_per_page: f64,
    rcu_per_page: f64,
}

impl UncachedCost {
    /// The RCU each shard partition would get a second at [`RATE`] uncached lists a second.
    fn partition_rcu(&self) -> f64 {
        RATE as f64 * self.rcu_per_page / f64::from(SHARDS)
    }
}

/// Without the cache: every page reads every shard. Its cost per page, and its latency one at a
/// time (the machine cannot send RATE a second of them: that is RATE × 16 Queries).
async fn uncached_cost(app: &App, auth: &Auth, cursors: &[Option<String>]) -> UncachedCost {
    let (mut times, mut queries, mut rcu) = (Vec::new(), 0u64, 0.0f64);
    for n in 0..300 {
        let (ms, _, meta) = list_page(app, auth, cursors[n % PAGES].as_deref()).await;
        times.push(ms);
        queries += u64::from(meta.dynamodb_requests());
        rcu += meta.read_capacity_units();
    }
    UncachedCost {
        stat: stat(times),
        queries_per_page: queries as f64 / 300.0,
        rcu_per_page: rcu / 300.0,
    }
}

/// What the cached lists and the neighbour's reads beside them saw.
struct CachedRun {
    /// Lists sent.
    total: usize,
    times: Vec<f64>,
    /// Lists not answered 200.
    failed: usize,
    seconds: f64,
    /// Pages read from DynamoDB rather than a container's cache (the warm-ups excluded).
    page_reads: u64,
    neighbour_during: Vec<f64>,
    neighbour_refused: usize,
}

/// With the cache: [`RATE`] lists a second for [`SECONDS`], round-robin over [`CONTAINERS`]
/// containers, the neighbour's GetItem beside them.
async fn cached_lists(
    sdk: &aws_types::SdkConfig,
    table: &str,
    t: &TenantId,
    auth: &Auth,
    cursors: &[Option<String>],
    neighbour_app: &App,
    neighbour_auth: &Auth,
) -> CachedRun {
    let containers: Vec<App> = (0..CONTAINERS)
        .map(|_| list_container(sdk, table, Some(STALENESS_MS)))
        .collect();
    for app in &containers {
        list_page(app, auth, None).await; // a warm container: credentials and record cached
    }
    let done = AtomicBool::new(false);
    let failures = Mutex::new(0usize);
    let started = Instant::now();
    let total = (RATE * SECONDS) as usize;
    let lists = futures::stream::iter(0..total)
        .map(|n| {
            // every container serves every page in turn
            let app = &containers[n % CONTAINERS];
            let cursor = cursors[(n / CONTAINERS) % PAGES].as_deref();
            let failures = &failures;
            async move {
                let at = started + Duration::from_micros(n as u64 * 1_000_000 / RATE);
                tokio::time::sleep_until(at.into()).await;
                let (ms, ok) = served_list_page(app, auth, cursor).await;
                *failures.lock().unwrap() += usize::from(!ok);
                ms
            }
        })
        .buffer_unordered(512)
        .collect::<Vec<f64>>();
    let neighbour_loop = neighbour::beside(neighbour_app, neighbour_auth, || {
        done.load(Ordering::SeqCst)
    });
    let (times, (neighbour_during, neighbour_refused)) = tokio::join!(
        async {
            let times = lists.await;
            done.store(true, Ordering::SeqCst);
            times
        },
        neighbour_loop
    );
    let seconds = started.elapsed().as_secs_f64();
    let failed = *failures.lock().unwrap();
    let page_reads: u64 = containers
        .iter()
        .filter_map(|app| app.page_cache().map(|c| c.stats(t).reads.saturating_sub(1)))
        .sum();
    CachedRun {
        total,
        times,
        failed,
        seconds,
        page_reads,
        neighbour_during,
        neighbour_refused,
    }
}

/// Adds figure 14: the uncached page, the cached run, and the neighbour before (`before`) and
/// during it.
fn report_hot_list(uncached: &UncachedCost, run: CachedRun, before: Stat, report: &mut Report) {
    let UncachedCost {
        queries_per_page,
        rcu_per_page,
        ..
    } = *uncached;
    let uncached_partition_rcu = uncached.partition_rcu();
    let failed = run.failed;
    let neighbour_refused = run.neighbour_refused;
    // The pages read from DynamoDB, from each container's cache, each costing what an uncached
    // page was measured to cost.
    let (sent_queries, sent_rcu) = (
        run.page_reads as f64 * queries_per_page,
        run.page_reads as f64 * rcu_per_page,
    );
    let achieved = run.total as f64 / run.seconds;
    let (per_partition_queries, per_partition_rcu) = (
        sent_queries / f64::from(SHARDS) / run.seconds,
        sent_rcu / f64::from(SHARDS) / run.seconds,
    );
    let read_fraction = run.page_reads as f64 / run.total as f64;
    let (cached, during) = (stat(run.times), stat(run.neighbour_during));
    report.add(
        "14a. hot list page, 16 shards, no cache, one at a time [latency model]",
        &uncached.stat,
        format!(
            "{queries_per_page:.1} Queries, {rcu_per_page:.1} RCU a page: at {RATE} lists/s each of 16 partitions would get {RATE} Queries and {uncached_partition_rcu:.0} RCU a second (budget {PARTITION_RCU:.0})"
        ),
    );
    report.add(
        if metered() {
            "14b. hot list page, usage metered, list cache 1 s, 1,000 lists/s, 10 containers [latency model]"
        } else {
            "14b. hot list page, list cache 1 s, 1,000 lists/s over 10 containers [latency model]"
        },
        &cached,
        format!(
            "{achieved:.0} lists/s sent, {failed} refused; each partition got {per_partition_queries:.0} Queries and {per_partition_rcu:.0} RCU a second ({:.1}% of pages read DynamoDB; target < {PARTITION_RCU:.0} RCU)",
            100.0 * read_fraction
        ),
    );
    report.add(
        "14c. neighbour GetItem, no hot lists [latency model]",
        &before,
        String::new(),
    );
    report.add(
        "14d. neighbour GetItem, during the hot lists [latency model]",
        &during,
        format!(
            "p99 {:.2}x the quiet p99; {neighbour_refused} refused (503: DynamoDB Local overloaded)",
            during.p99 / before.p99
        ),
    );
    report.fact(
        "14e. hot list: per-partition read load (RCU/s) without and with the list cache",
        json!({
            "without": uncached_partition_rcu.round(),
            "with": per_partition_rcu.round(),
        }),
        &format!("at {RATE} lists/s; queries per partition per second {RATE} vs {per_partition_queries:.0}"),
    );
}
