//! The opt-in read cache (`READ_CACHE_MS`, `shared::store::tenancy::read_cache`): a single-item read served
//! from the container's memory within the staleness bound, per tenant, and dropped by the
//! container's own writes.

use integration::{Harness, Resp};
use serde_json::json;

async fn get(h: &Harness, tenant: &str, id: &str) -> Resp {
    h.tenant(tenant).get_product(id).await
}

async fn put(h: &Harness, tenant: &str, id: &str, v: u64) {
    let r = h.tenant(tenant).put_product(id, json!({"v": v})).await;
    assert!(r.status < 300, "{}", r.body);
}

fn get_items(h: &Harness) -> usize {
    h.requests
        .by_operation()
        .get("GetItem")
        .copied()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_cached_read_is_at_most_the_bound_stale_and_never_another_tenants() {
    // GIVEN container A with a 1 s read cache, container B without one, and two tenants
    let (a, [t, other]) = Harness::with_tenants([("cached", 4), ("uncached", 4)]).await;
    let b = a.another_container().await;
    a.app.read_cache.set_staleness_ms(1000);
    put(&a, &t, "p-1", 1).await;

    // WHEN A reads the product twice
    assert_eq!(get(&a, &t, "p-1").await.body["document"]["v"], 1);
    a.requests.reset();
    let again = get(&a, &t, "p-1").await;
    // THEN the second read sends no GetItem
    assert_eq!(again.body["document"]["v"], 1);
    assert_eq!(get_items(&a), 0, "{:?}", a.requests.by_operation());

    // WHEN B writes it: A serves the cached version until the bound has passed, then the new one
    put(&b, &t, "p-1", 2).await;
    assert_eq!(get(&a, &t, "p-1").await.body["document"]["v"], 1);
    a.clock.advance_seconds(1);
    assert_eq!(get(&a, &t, "p-1").await.body["document"]["v"], 2);

    // WHEN A itself writes or deletes it (one container serving both routes, as here): at once
    put(&a, &t, "p-1", 3).await;
    assert_eq!(get(&a, &t, "p-1").await.body["document"]["v"], 3);
    let gone = a.tenant(&t).delete_product("p-1").await;
    assert_eq!(gone.status, 204);
    get(&a, &t, "p-1").await.assert_problem(404);

    // AND another tenant never gets this tenant's cached item
    put(&a, &t, "p-2", 7).await;
    assert_eq!(get(&a, &t, "p-2").await.body["document"]["v"], 7);
    get(&a, &other, "p-2").await.assert_problem(404);
}
