//! The capacity-unit quota binds: requests are charged an estimate before they run and corrected to
//! what DynamoDB reported after, debt is carried until it is repaid, pages shrink to the budget,
//! and imports draw from the same bucket. Containers are separate `App`s on one table; their test
//! clocks are stepped together, so every step falls in one known second.

use aws_sdk_dynamodb::types::AttributeValue;
use integration::routes::params;
use integration::{onboard_custom, unique, Auth, Harness, Resp};
use serde_json::{json, Value};
use shared::identity::keys::raw_key;
use shared::store::quota::limiter::{window_pk, window_sk, MAX_WINDOW_SHARDS, REQUESTS_PER_SHARD};

/// A product of about `kb` kilobytes.
fn product_of(kb: usize) -> Value {
    json!({"name": "widget", "price": 1, "blob": "x".repeat(kb * 1024)})
}

async fn put(h: &Harness, tenant: &str, id: &str, body: Value) -> Resp {
    h.tenant(tenant).admitted().put_product(id, body).await
}

/// A new table with a tenant of `count` products of `kb` KB over `shards`, written under generous
/// limits, then held to `cu` capacity units (and 250 requests) a second.
async fn seeded_then_limited(
    prefix: &str,
    shards: u32,
    count: usize,
    kb: usize,
    cu: u32,
) -> (Harness, String) {
    let h = Harness::new().await;
    let t = unique(prefix);
    onboard_custom(&h, &t, shards, 250, 1_000_000).await;
    for i in 0..count {
        let r = put(&h, &t, &format!("p-{i:02}"), product_of(kb)).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let r = h
        .operator()
        .update_tenant(
            &t,
            json!({"limits": {"requestsPerSecond": 250, "capacityUnitsPerSecond": cu}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    (h, t)
}

async fn list(h: &Harness, tenant: &str, query: &[(&str, &str)]) -> Resp {
    h.tenant(tenant)
        .query(query)
        .admitted()
        .query_tenant_products()
        .await
}

/// `GET /products/{id}` for `tenant` through container `h`, served as the runtime serves it.
async fn get(h: &Harness, tenant: &str, id: &str) -> Resp {
    h.tenant(tenant).admitted().get_product(id).await
}

/// Two more containers on `h`'s table, their clocks set to the start of the second `ahead`
/// seconds after the first one's now: the containers, and that second.
async fn containers_at(h: &Harness, ahead: u64) -> (Harness, Harness, u64) {
    let a = h.another_container().await;
    let b = h.another_container().await;
    let s = a.app.clock.now_seconds() + ahead;
    at_second(&[&a, &b], s);
    (a, b, s)
}

/// The seconds a 429's `Retry-After` tells the caller to wait.
fn retry_after(r: &Resp) -> u64 {
    let header = r.retry_after.as_deref().expect("a Retry-After");
    header.parse().expect("whole seconds")
}

/// Asserts `r` is a 429 refused on capacity units: the seconds it tells the caller to wait.
fn refused_on_units(r: &Resp) -> u64 {
    assert_eq!(r.status, 429, "{}", r.body);
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("capacity units"), "{}", r.body);
    retry_after(r)
}

/// Sets every clock to the start of second `second`.
fn at_second(clocks: &[&Harness], second: u64) {
    for h in clocks {
        h.clock.set_millis(second * 1000);
    }
}

#[tokio::test]
async fn a_tenant_whose_every_request_is_expensive_is_held_to_its_capacity_quota_across_containers()
{
    // GIVEN a tenant of 40 capacity units a second (and 250 requests, so only units bind) with
    // 24 products of 24 KB over 4 shards: one page of them reads about 70 units
    let (seed, t) = seeded_then_limited("heavy", 4, 24, 24, 40).await;
    // (two fresh containers: neither has the old limits cached)
    let (a, b, start) = containers_at(&seed, 1).await;
    // WHEN, for 10 seconds, each container asks for every product, 5 times a second, in turn
    let seconds = 10;
    let mut answers = Vec::new();
    for s in 0..seconds {
        at_second(&[&a, &b], start + s);
        for _ in 0..5 {
            for c in [&a, &b] {
                answers.push(list(c, &t, &[("limit", "24")]).await);
            }
        }
    }
    // THEN every answer is a page or a 429 whose Retry-After is at least a second
    for r in &answers {
        assert!(
            r.status == 200 || r.status == 429,
            "{} {}",
            r.status,
            r.body
        );
        if r.status == 429 {
            assert!(retry_after(r) >= 1, "{}", r.body);
        }
    }
    let admitted = answers.iter().filter(|r| r.status == 200).count();
    assert!(admitted >= 2, "nothing ran: {admitted}");
    // AND the refusals were on capacity units (the 250 requests a second never bound)
    let refused = answers.iter().filter(|r| r.status == 429);
    assert!(refused.clone().count() > 50, "the quota hardly refused");
    assert!(refused.into_iter().all(|r| r.body["detail"]
        .as_str()
        .is_some_and(|d| d.contains("capacity units"))));
    // AND the units consumed stay within the stated bound: quota × (T + 1), plus per container one
    // request in flight of at most a full page (about 70 units), learned once before pages shrink
    let used =
        integration::units_used(&a, &[&a.app, &b.app], &t, Some("query-tenant-products")).await;
    let bound = 40.0 * (seconds as f64 + 1.0) + 2.0 * 2.0 * 80.0;
    assert!(
        used <= bound,
        "consumed {used} units in {seconds} s against 40 a second (bound {bound}); {admitted} of {} pages ran",
        answers.len()
    );
    // (unbounded, the 100 pages would have read about 7,000 units)
}

#[tokio::test]
async fn a_tenant_in_debt_is_refused_everywhere_until_it_is_repaid_and_told_when() {
    // GIVEN a tenant of 50 capacity units a second (and 250 requests: one counter shard, so every
    // answer holds the whole window), served by containers A and B
    let seed = Harness::new().await;
    let t = unique("debtor");
    onboard_custom(&seed, &t, 1, 250, 50).await;
    let (a, b, s) = containers_at(&seed, 1).await;
    // WHEN A writes one 60 KB product: estimated at one unit, it costs about 120 (table and GSI1)
    assert_eq!(put(&a, &t, "big", product_of(60)).await.status, 201);
    // THEN B, which reads the shared window before its first admission of the tenant, refuses the
    // tenant at once, with a Retry-After that names the second the debt is repaid
    let wait = refused_on_units(&get(&b, &t, "small").await);
    assert!(
        wait >= 2,
        "120 units at 50 a second take more than a second: {wait}"
    );
    // AND in every second before then, in either container, it is refused again (never too short)
    for k in 1..wait {
        at_second(&[&a, &b], s + k);
        for c in [&a, &b] {
            let r = get(c, &t, "small").await;
            assert_eq!(r.status, 429, "second {k} of {wait}: {}", r.body);
            let told = retry_after(&r);
            assert!(
                k + told >= wait,
                "second {k}: told {told}, repaid at {wait}"
            );
        }
    }
    // AND at the second it named, it is served again
    at_second(&[&a, &b], s + wait);
    let again = get(&b, &t, "big").await;
    assert_eq!(again.status, 200, "{}", again.body);
}

#[tokio::test]
async fn a_page_under_a_nearly_empty_budget_is_short_and_has_a_cursor() {
    // GIVEN a tenant of 97 capacity units a second with 20 products of 8 KB on one shard
    let (h, t) = seeded_then_limited("budget", 1, 20, 8, 97).await;
    let (c, _, s) = containers_at(&h, 1).await;
    // WHEN, within one second, it asks for all 20 again and again
    let mut pages = Vec::new();
    for _ in 0..12 {
        let page = list(&c, &t, &[("limit", "20")]).await;
        let stop = page.status != 200;
        pages.push(page);
        if stop {
            break;
        }
    }
    // THEN the first page is whole; as the bucket empties, a page shrinks to what the budget left
    // pays, with a cursor, before any request is refused
    let sizes: Vec<usize> = pages
        .iter()
        .map(|p| p.body["items"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(sizes[0], 20, "{sizes:?}");
    let short = pages
        .iter()
        .position(|p| p.status == 200 && p.body["items"].as_array().unwrap().len() < 20)
        .unwrap_or_else(|| panic!("no short page: {sizes:?}"));
    assert!(pages[..short].iter().all(|p| p.status == 200));
    let got = sizes[short];
    assert!(got >= 1);
    let cursor = pages[short].body["nextCursor"]
        .as_str()
        .expect("a short page has a cursor")
        .to_owned();
    // AND the cursor leads on to the rest, in order, once the bucket has refilled
    at_second(&[&c], s + 10);
    let rest = list(&c, &t, &[("limit", "20"), ("cursor", &cursor)]).await;
    assert_eq!(rest.status, 200, "{}", rest.body);
    let ids: Vec<&str> = pages[short].body["items"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest.body["items"].as_array().unwrap())
        .map(|p| p["productId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 20, "{ids:?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
}

#[tokio::test]
async fn a_page_cut_short_by_its_bytes_teaches_its_cost_per_item_returned_and_a_last_page_per_item_asked(
) {
    const ROUTE: &str = "query-tenant-products";
    // GIVEN a tenant with 100 products of 60 KB on one shard (6 MB: a page of 100 stops before
    // 5 MB), and a container that has not read its list
    let (h, t) = seeded_then_limited("cutcost", 1, 100, 60, 1_000_000).await;
    let c = h.another_container().await;
    let tenant = shared::identity::ids::TenantId::parse(&t).unwrap();
    let consumed_milli = || async {
        let units = integration::units_used(&h, &[&c.app], &t, Some(ROUTE)).await;
        (units * 1000.0).round() as u64
    };

    // WHEN it reads a page of 100, cut short by its bytes
    let first = list(&c, &t, &[("limit", "100")]).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let returned = first.body["items"].as_array().unwrap().len() as u64;
    assert!(returned < 100, "{returned} items");
    let cursor = first.body["nextCursor"]
        .as_str()
        .expect("a cursor")
        .to_owned();
    let first_cost = consumed_milli().await;
    // THEN the route's cost is learned per item it returned (before the mend: per item asked, so
    // the next page under a nearly empty budget shrank too little and read into debt)
    let per_item = c.app.limiter.cost_per_item(&tenant, ROUTE).unwrap();
    assert_eq!(
        per_item,
        first_cost.div_ceil(returned),
        "{first_cost} milli, {returned} items"
    );

    // WHEN it reads the rest, a last page short of its limit because the list ended
    let last = list(&c, &t, &[("limit", "100"), ("cursor", &cursor)]).await;
    assert_eq!(last.status, 200, "{}", last.body);
    assert!(last.body["nextCursor"].is_null(), "{}", last.body);
    let last_cost = consumed_milli().await - first_cost;
    // THEN its cost is learned per item asked: the list ended, nothing was cut
    let per_item = c.app.limiter.cost_per_item(&tenant, ROUTE).unwrap();
    assert_eq!(per_item, last_cost.div_ceil(100), "{last_cost} milli");
}

#[tokio::test]
async fn at_the_maximum_custom_rate_no_counter_item_takes_more_than_its_share_and_the_window_decides(
) {
    // GIVEN a tenant at the maximum custom rate (100,000 requests a second: 400 counter shards),
    // whose other containers have already admitted 249 requests on each shard this second
    let h = Harness::new().await;
    let t = unique("max");
    integration::onboard_at_max_limits(&h, &t, 1).await;
    let s = h.app.clock.now_seconds() + 1;
    at_second(&[&h], s);
    let tenant = shared::identity::ids::TenantId::parse(&t).unwrap();
    for shard in 0..MAX_WINDOW_SHARDS {
        let counter = std::collections::HashMap::from([
            (
                "PK".to_owned(),
                AttributeValue::S(window_pk(&tenant, shard)),
            ),
            (
                "SK".to_owned(),
                AttributeValue::S(window_sk(&tenant, s, shard)),
            ),
            (
                "requests".to_owned(),
                AttributeValue::N((REQUESTS_PER_SHARD - 1).to_string()),
            ),
            ("milliUnits".to_owned(), AttributeValue::N("0".into())),
            ("carriedMilli".to_owned(), AttributeValue::N("0".into())),
        ]);
        h.put_raw(&h.table, counter).await;
    }
    // WHEN this container serves 10 requests in that second
    let mut answers = Vec::new();
    for _ in 0..10 {
        answers.push(get(&h, &t, "p").await);
    }
    // THEN it admits until its counter's answer shows the second full, then refuses
    let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    assert_eq!(statuses[0], 404, "{statuses:?}");
    assert!(
        statuses.contains(&429),
        "the window never decided: {statuses:?}"
    );
    // AND no counter item took more than its share of the second's requests (250) plus the
    // admissions one answer late
    let items = h.items_under(&raw_key(&t, "RATE#")).await;
    assert_eq!(items.len() as u32, MAX_WINDOW_SHARDS);
    for item in items {
        let n: u32 = item["requests"].as_n().unwrap().parse().unwrap();
        assert!(n <= REQUESTS_PER_SHARD + 1, "{item:?}");
    }
}

#[tokio::test]
async fn an_export_is_charged_to_the_exported_tenant_not_to_the_operator() {
    // GIVEN a tenant of 20 capacity units a second with 40 products of 24 KB (an export of them reads
    // about 120 units: six seconds of its quota), and containers A (the operator's) and B (the
    // tenant's), on a second after the seeding's windows are forgotten
    let (seed, t) = seeded_then_limited("exported", 1, 40, 24, 20).await;
    let (a, b, s) = containers_at(&seed, 120).await;
    assert_eq!(get(&b, &t, "p-00").await.status, 200);
    // WHEN an operator exports it, page by page, through A
    let pages = integration::export_pages(&a, &integration::operator(), &t, "1000").await;
    let lines: usize = pages.iter().map(|p| p.text.lines().count()).sum();
    assert!(lines > 40, "{lines} lines");
    // THEN the export's reads count in the tenant's usage, under export-tenant
    let exported = integration::units_used(&seed, &[&a.app], &t, Some("export-tenant")).await;
    assert!(exported >= 100.0, "the export read {exported} units");
    // AND, from the next second, the tenant's own requests are refused on capacity units until the
    // export is repaid. (B's own answer of the second before showed the tenant idle, so B writes
    // the next second assuming no debt; the debt A ran up must reach it all the same.)
    at_second(&[&a, &b], s + 1);
    let _ = get(&b, &t, "p-00").await;
    let wait = refused_on_units(&get(&b, &t, "p-00").await);
    assert!(wait >= 3, "{exported} units at 20 a second: told {wait} s");
}

/// The milli-units the tenant's quota windows hold (every shard, every second).
async fn window_milli_units(h: &Harness, tenant: &str) -> i64 {
    h.items_under(&raw_key(tenant, "RATE#"))
        .await
        .iter()
        .filter_map(|item| item.get("milliUnits")?.as_n().ok()?.parse::<i64>().ok())
        .sum()
}

#[tokio::test]
async fn writes_refused_by_their_condition_are_charged_in_usage_and_in_the_quota() {
    // GIVEN a tenant under limits that never bind
    let h = Harness::new().await;
    let t = unique("refused-writes");
    onboard_custom(&h, &t, 1, 2_000, 100_000).await;
    // WHEN it deletes a product that is not there 100 times (a write refused by its condition)
    for _ in 0..100 {
        let r = h.tenant(&t).admitted().delete_product("missing").await;
        assert_eq!(r.status, 404, "{}", r.body);
    }
    // THEN the route's usage holds at least a write unit per refused write
    let used = integration::units_used(&h, &[&h.app], &t, Some("delete-product")).await;
    assert!(used >= 100.0, "{used} units for 100 refused writes");
    // AND the quota windows were charged the same
    let tenant = shared::identity::ids::TenantId::parse(&t).unwrap();
    h.app.count_quota(&tenant).await.unwrap();
    let charged = window_milli_units(&h, &t).await;
    assert!(
        charged >= 100_000,
        "the quota was charged {charged} milli-units"
    );
}

#[tokio::test]
async fn an_operators_offboarding_and_re_sharding_of_another_tenant_are_charged_to_the_platform_not_to_its_tenant(
) {
    // GIVEN an operator of a basic tenant (50 capacity units a second), a tenant of 300 products to
    // offboard, and one of 100 to re-shard from 1 to 4 shards by the lifecycle driver
    let h = Harness::new().await;
    let ops = unique("ops-basic");
    integration::onboard_tier(&h, &ops, 1, "basic").await;
    let operator = Auth::Operator(ops.clone());
    let gone = unique("gone");
    let moved = unique("moved");
    onboard_custom(&h, &gone, 1, 2_000, 100_000).await;
    onboard_custom(&h, &moved, 1, 2_000, 100_000).await;
    for (t, n) in [(&gone, 300), (&moved, 100)] {
        h.tenant(t)
            .put_new_products((0..n).map(|i| (format!("p-{i:03}"), product_of(1))))
            .await;
    }
    let platform_before = integration::units_used(&h, &[&h.app], "_platform", None).await;
    // WHEN the operator offboards the first to its end, every call served as the runtime serves it
    let path = params(&[("tenantId", &gone)]);
    let first = h
        .caller(&operator)
        .admitted()
        .call("offboard-tenant", &path, None)
        .await;
    assert_eq!(first.status, 202, "{}", first.body);
    h.clock
        .advance_seconds(shared::store::lifecycle::offboarding::DELETION_DELAY_SECONDS);
    let mut last = first;
    for _ in 0..50 {
        last = h
            .caller(&operator)
            .admitted()
            .call("offboard-tenant", &path, None)
            .await;
        if last.status != 202 {
            break;
        }
    }
    assert_eq!(last.status, 200, "{}", last.body);
    // AND starts the second's re-sharding, which the lifecycle driver runs to its end
    let r = h.caller(&operator).admitted().reshard(&moved, 4).await;
    assert_eq!(r.status, 202, "{}", r.body);
    h.clock
        .advance_seconds(shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS + 1);
    for _ in 0..30 {
        let driven = Box::pin(integration::drive(&h.app, &tenants::Lanes::in_process()))
            .await
            .unwrap();
        if driven.pending == 0 {
            break;
        }
    }
    let record = h.caller(&operator).get_tenant(&moved).await;
    assert_eq!(record.body["shardCount"], 4, "{}", record.body);
    // THEN the operator's tenant was charged nothing of either: its usage holds no lifecycle units
    let charged_to_ops = integration::units_used(&h, &[&h.app], &ops, None).await;
    assert!(
        charged_to_ops < 10.0,
        "the operator's tenant was charged {charged_to_ops} units"
    );
    // AND its users are served at once (its quota holds no debt of the deletion)
    let r = integration::api::get_product_admitted(&h.app, &ops).await;
    assert_eq!(r.status, 404, "{}", r.body);
    // AND the platform's account holds the deletion's and the moves' units, under the routes a
    // call would name, whether a call or the driver ran the step
    let deleted =
        integration::units_used(&h, &[&h.app], "_platform", Some("offboard-tenant")).await;
    let resharded =
        integration::units_used(&h, &[&h.app], "_platform", Some("update-tenant")).await;
    assert!(deleted >= 100.0, "the offboarding consumed {deleted} units");
    assert!(
        resharded >= 50.0,
        "the re-sharding consumed {resharded} units"
    );
    assert!(deleted + resharded > platform_before);
}

#[tokio::test]
async fn ten_fresh_containers_each_putting_a_large_product_admit_no_more_than_the_quota_and_one_request(
) {
    // GIVEN a tenant of 50 capacity units a second (one counter shard), put in debt by one 60 KB
    // product written through container A (about 120 units: table and GSI1)
    let seed = Harness::new().await;
    let t = unique("fresh-burst");
    onboard_custom(&seed, &t, 1, 250, 50).await;
    let a = seed.another_container().await;
    let start = a.app.clock.now_seconds() + 1;
    at_second(&[&a], start);
    assert_eq!(put(&a, &t, "first", product_of(60)).await.status, 201);
    // WHEN ten fresh containers (a Lambda burst: none has served the tenant) each put a 60 KB
    // product, in that second and in each of the next ten
    let mut fresh = Vec::new();
    for _ in 0..10 {
        fresh.push(seed.another_container().await);
    }
    let seconds = 11;
    let mut answers = Vec::new();
    for s in 0..seconds {
        let all: Vec<&Harness> = fresh.iter().chain([&a]).collect();
        at_second(&all, start + s);
        for (i, c) in fresh.iter().enumerate() {
            answers.push(put(c, &t, &format!("p-{s}-{i}"), product_of(60)).await);
        }
    }
    // THEN no fresh container admits into the debt it has not seen: none in the first second
    assert!(
        answers[..10].iter().all(|r| r.status == 429),
        "{:?}",
        answers[..10].iter().map(|r| r.status).collect::<Vec<_>>()
    );
    // AND over the 11 seconds the tenant consumed no more than its quota for them, plus one
    // request's cost beyond its estimate: the bound has no term for the number of containers
    let apps: Vec<&shared::App> = fresh.iter().map(|c| &c.app).chain([&a.app]).collect();
    let used = integration::units_used(&seed, &apps, &t, Some("put-product")).await;
    let bound = 50.0 * (seconds as f64 + 1.0) + 130.0;
    let admitted = answers.iter().filter(|r| r.status == 201).count();
    assert!(
        used <= bound,
        "consumed {used} units in {seconds} s against 50 a second (bound {bound}); {admitted} of {} puts ran",
        answers.len()
    );
    assert!(admitted >= 1, "the quota never let the tenant write");
}
