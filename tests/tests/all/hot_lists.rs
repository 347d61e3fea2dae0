//! The list-page cache (`LIST_CACHE_MS`, `shared::store::client::pages`): a hot tenant's list page
//! read from DynamoDB once per staleness bound per container, per tenant, for the tiers it serves;
//! dropped by the container's own writes; every list contract held through it (exactly once across
//! pages while others write, while the tenant is re-sharded, beside another tenant's load).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};

use integration::{onboard_tier, unique, Harness, Resp};
use serde_json::json;
use shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS;
use shared::store::tenancy::tenants::RECORD_TTL_SECONDS;

const LIST: &str = "query-tenant-products";

async fn page(h: &Harness, tenant: &str, limit: u32, cursor: Option<&str>) -> Resp {
    let limit = limit.to_string();
    let mut query = vec![("limit", limit.as_str())];
    if let Some(c) = cursor {
        query.push(("cursor", c));
    }
    let r = h
        .tenant(tenant)
        .query(&query)
        .call(LIST, &integration::api::NO_PATH, None)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r
}

fn ids(r: &Resp) -> Vec<String> {
    r.ids("productId")
}

fn queries(h: &Harness) -> usize {
    h.requests
        .by_operation()
        .get("Query")
        .copied()
        .unwrap_or_default()
}

fn stats(h: &Harness, tenant: &str) -> shared::store::client::pages::PageStats {
    let tenant = shared::identity::ids::TenantId::parse(tenant).unwrap();
    h.app
        .page_cache()
        .expect("the list cache is on")
        .stats(&tenant)
}

async fn put(h: &Harness, tenant: &str, id: &str) {
    let r = h.tenant(tenant).put_product(id, json!({"v": 1})).await;
    assert!(r.status < 300, "{}", r.body);
}

/// Every page of the list from the start, from container `h`: the ids in the order returned.
async fn walk(h: &Harness, tenant: &str, limit: u32) -> Vec<String> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let r = page(h, tenant, limit, cursor.as_deref()).await;
        seen.extend(ids(&r));
        match r.body["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return seen,
        }
    }
}

/// Container A, with a 1 s list cache, and container B, without one, on one table; and a fresh
/// tenant of each of `tenants` (a name prefix and a tier) on `shards` shards, onboarded through A.
async fn containers<const N: usize>(
    shards: u32,
    tenants: [(&str, &str); N],
) -> (Harness, Harness, [String; N]) {
    let a = Harness::new().await.with_list_cache(1000);
    let b = a.another_container().await;
    let mut names = Vec::new();
    for (prefix, tier) in tenants {
        let t = unique(prefix);
        onboard_tier(&a, &t, shards, tier).await;
        names.push(t);
    }
    let names = names.try_into().expect("one name per tenant");
    (a, b, names)
}

#[tokio::test]
async fn a_list_page_is_read_once_per_bound_for_the_tiers_served_and_dropped_by_own_writes() {
    // GIVEN container A with a 1 s list cache, container B without one, a premium tenant on 8
    // shards and a standard one (not served by the cache)
    let (a, b, [hot, plain]) = containers(8, [("hot", "premium"), ("plain", "standard")]).await;
    for i in 0..30 {
        put(&b, &hot, &format!("p-{i:03}")).await;
        put(&b, &plain, &format!("p-{i:03}")).await;
    }

    // WHEN A serves the hot tenant's first page twice
    let first = page(&a, &hot, 10, None).await;
    a.requests.reset();
    let again = page(&a, &hot, 10, None).await;
    // THEN the second is the same page, with no Query sent
    assert_eq!(again.body, first.body);
    assert_eq!(queries(&a), 0, "{:?}", a.requests.by_operation());
    // AND the runtime's own metering writes for the tenant (its usage counters and quota window,
    // written by a request served as the Lambda runtime serves it) do not drop the page: no list
    // reads them
    a.requests.reset();
    let served = a.tenant(&hot).admitted().get_product("p-001").await;
    assert_eq!(served.status, 200, "{}", served.body);
    let ops = a.requests.by_operation();
    assert!(ops.get("UpdateItem").copied().unwrap_or(0) >= 1, "{ops:?}");
    let before = stats(&a, &hot);
    let served = a
        .tenant(&hot)
        .admitted()
        .query(&[("limit", "10")])
        .call(LIST, &integration::api::NO_PATH, None)
        .await;
    assert_eq!(served.body, first.body);
    let after = stats(&a, &hot);
    assert_eq!((after.hits, after.reads), (before.hits + 1, before.reads));
    // AND the standard tenant's pages are read every time
    page(&a, &plain, 10, None).await;
    a.requests.reset();
    page(&a, &plain, 10, None).await;
    assert_eq!(queries(&a), 8, "{:?}", a.requests.by_operation());

    // WHEN B (another container) adds an item that sorts first: A serves its page until the bound
    put(&b, &hot, "a-000").await;
    assert_eq!(ids(&page(&a, &hot, 10, None).await)[0], "p-000");
    a.clock.advance_millis(1000);
    assert_eq!(ids(&page(&a, &hot, 10, None).await)[0], "a-000");

    // WHEN A itself writes (one container serving both routes, as here): at once
    put(&a, &hot, "a-001").await;
    assert_eq!(
        ids(&page(&a, &hot, 10, None).await)[..2],
        ["a-000", "a-001"]
    );
    let gone = a.tenant(&hot).delete_product("a-000").await;
    assert_eq!(gone.status, 204);
    assert_eq!(ids(&page(&a, &hot, 10, None).await)[0], "a-001");

    // AND another tenant's identical request never gets the hot tenant's page
    let other = page(&a, &plain, 10, None).await;
    assert_eq!(ids(&other)[0], "p-000");
    assert!(!ids(&other).contains(&"a-001".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walks_through_the_cache_see_each_item_once_during_writes_a_resharding_and_a_neighbours_load(
) {
    // GIVEN container A (1 s list cache) serving a hot premium tenant's lists and a neighbour's
    // load, and container B writing and re-sharding; 150 products, 30 of them doomed
    let (a, b, [hot, neighbour]) =
        containers(4, [("hot", "premium"), ("neighbour", "premium")]).await;
    for i in 0..150 {
        put(&b, &hot, &format!("p-{i:04}")).await;
    }
    // the model: what must be in every walk, exactly once (present from before the walk to after
    // it); everything else (doomed, new) at most once
    let stable: BTreeSet<String> = (0..120).map(|i| format!("p-{i:04}")).collect();
    let done = AtomicBool::new(false);

    let writer = async {
        for i in 0..60 {
            put(&b, &hot, &format!("n-{i:04}")).await;
            if i < 30 {
                let r = b
                    .tenant(&hot)
                    .delete_product(&format!("p-{:04}", 120 + i))
                    .await;
                assert_eq!(r.status, 204, "{}", r.body);
            }
            tokio::task::yield_now().await;
        }
    };
    let resharding = async {
        let operator = b.operator();
        let r = operator.reshard(&hot, 8).await;
        assert_eq!(r.status, 202, "{}", r.body);
        // both containers' clocks: B's moves writes to the new layout, A's expires its pages
        b.clock.advance_seconds(MOVES_DELAY_SECONDS);
        a.clock.advance_seconds(MOVES_DELAY_SECONDS);
        for attempt in 0.. {
            assert!(attempt < 500, "the re-sharding never finished");
            let r = operator.reshard(&hot, 8).await;
            if r.status == 200 {
                break;
            }
            assert_eq!(r.status, 202, "{}", r.body);
        }
    };
    let neighbour_load = async {
        let mut n = 0;
        while !done.load(Ordering::SeqCst) {
            put(&a, &neighbour, &format!("o-{n:04}")).await;
            // its own write shows at once in its own list (this container wrote it)
            let listed = walk(&a, &neighbour, 50).await;
            assert!(listed.contains(&format!("o-{n:04}")), "{listed:?}");
            assert!(listed.iter().all(|id| id.starts_with("o-")), "{listed:?}");
            n += 1;
        }
    };
    let walks = async {
        let (mut walks, mut walks_after, mut pages_cached) = (0, 0, 0);
        // on through the re-sharding, and 5 walks after it
        while walks_after < 5 {
            walks_after += usize::from(done.load(Ordering::SeqCst));
            let seen = walk(&a, &hot, 25).await;
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for id in &seen {
                *counts.entry(id).or_default() += 1;
            }
            // THEN no item comes twice, every stable item comes once, none of the neighbour's
            let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
            assert!(twice.is_empty(), "walk {walks}: seen twice: {twice:?}");
            let missing: Vec<_> = stable
                .iter()
                .filter(|id| !counts.contains_key(id.as_str()))
                .collect();
            assert!(missing.is_empty(), "walk {walks}: missing {missing:?}");
            assert!(seen.iter().all(|id| !id.starts_with("o-")));
            // the same first page again within the bound: from the cache, unless a re-sharding
            // is under way (its consistent reads bypass it)
            let before = stats(&a, &hot);
            page(&a, &hot, 25, None).await;
            pages_cached += usize::from(stats(&a, &hot).hits > before.hits);
            a.clock.advance_millis(400);
            walks += 1;
        }
        (walks, pages_cached)
    };
    let ((walks, pages_cached), ..) = tokio::join!(
        walks,
        async {
            tokio::join!(writer, resharding);
            // A's cached record learns the re-sharding ended (its reads use the cache again)
            a.clock.advance_seconds(RECORD_TTL_SECONDS);
            done.store(true, Ordering::SeqCst);
        },
        neighbour_load
    );
    // AND the cache served (while no re-sharding was under way: its reads bypass the cache)
    assert!(walks >= 3);
    assert!(
        pages_cached >= 1,
        "{pages_cached} of {walks} first pages from the cache"
    );
    // AND after it all, a fresh walk holds exactly the live items
    a.clock.advance_millis(1000);
    let last: BTreeSet<String> = walk(&a, &hot, 25).await.into_iter().collect();
    let live: BTreeSet<String> = stable
        .iter()
        .cloned()
        .chain((0..60).map(|i| format!("n-{i:04}")))
        .collect();
    assert_eq!(last, live);
}
