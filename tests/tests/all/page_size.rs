//! Every list page stays under Lambda's 6 MB response limit: a page whose items would pass 5 MB stops
//! early, with a cursor to the rest.

use std::collections::BTreeMap;

use integration::{Auth, Harness, Resp};
use serde_json::json;
use shared::service::http::MAX_PAGE_BYTES;

const LIST: &str = "query-tenant-products";

/// A tenant on 4 shards with `n` products of about 60 KB each, and their ids in order.
async fn large_products(name: &str, n: usize) -> (Harness, String, Vec<String>) {
    let h = Harness::new().await;
    let tenant = integration::unique(name);
    // At the most an operator may set: a metered page is never shrunk by the tenant's quota
    integration::onboard_at_max_limits(&h, &tenant, 4).await;
    let auth = Auth::Tenant(tenant.clone());
    let blob = "x".repeat(60 * 1024);
    let ids: Vec<String> = (0..n).map(|i| format!("p-{i:03}")).collect();
    for id in &ids {
        let params = BTreeMap::from([("productId".to_owned(), id.clone())]);
        let r = h
            .caller(&auth)
            .call("put-product", &params, Some(json!({"blob": blob})))
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    (h, tenant, ids)
}

/// The ids of `pages`, asserting that no page body passes 5 MB.
fn ids_of_pages_within_5_mb(pages: &[Resp]) -> Vec<String> {
    let mut seen = Vec::new();
    for r in pages {
        assert_eq!(r.status, 200, "{}", r.body);
        let size = r.body.to_string().len();
        assert!(size <= MAX_PAGE_BYTES, "{size} bytes");
        seen.extend(r.ids("productId"));
    }
    seen
}

#[tokio::test]
async fn a_page_of_large_products_stops_before_5_mb_and_the_rest_follows() {
    // GIVEN 100 products of about 60 KB each (6 MB in all) over 4 shards
    let (h, tenant, expected) = large_products("big", 100).await;
    // WHEN the list is walked at the largest page size
    let pages = h
        .caller(&Auth::Tenant(tenant))
        .pages(&[("limit", "100")], |c| c.query_tenant_products())
        .await;
    // THEN no page body passes 5 MB, and every product came back exactly once, in order, over
    // more than one page
    assert_eq!(ids_of_pages_within_5_mb(&pages), expected);
    assert!(pages.len() > 1);
}

/// The read units of `bytes` bytes read at once: 4 KB a unit, half that eventually consistent.
fn units_of(bytes: usize, consistent: bool) -> f64 {
    let units = bytes as f64 / 4096.0;
    if consistent {
        units
    } else {
        units / 2.0
    }
}

#[tokio::test]
async fn pages_of_large_products_read_about_their_5_mb_in_id_order_and_while_a_walk_goes_on_through_a_resharding(
) {
    // GIVEN 200 products of about 60 KB each (12 MB in all) over 4 shards, and a walk's first page
    // of 5, read on 4 shards
    let (h, tenant, expected) = large_products("bigwalk", 200).await;
    let apps = [&h.app];
    let units_so_far = || integration::units_used(&h, &apps, &tenant, Some(LIST));
    let page = |cursor: Option<String>, order: &'static str| {
        let (h, tenant) = (&h, &tenant);
        let limit = if cursor.is_none() && order == "unordered" {
            "5"
        } else {
            "100"
        };
        async move {
            let mut query = vec![("limit", limit), ("order", order)];
            if let Some(c) = cursor.as_deref() {
                query.push(("cursor", c));
            }
            // Served as the runtime serves it: metered, never shrunk by the quota
            h.tenant(tenant)
                .query(&query)
                .admitted()
                .call(LIST, &integration::api::NO_PATH, None)
                .await
        }
    };
    let mut pages = vec![page(None, "unordered").await];
    // WHEN a first page in id order is read at the largest page size (a container that has not
    // seen these items' size)
    let before = units_so_far().await;
    let by_id = page(None, "id").await;
    assert_eq!(by_id.status, 200, "{}", by_id.body);
    // THEN it reads within 30 % of its 5 MB (each shard's Query stops at 1 MB; one that stops
    // short of the shard's share goes on for what the share still holds, not for another 1 MB)
    let units = units_so_far().await - before;
    let page_units = units_of(MAX_PAGE_BYTES, false);
    assert!(
        units <= 1.3 * page_units,
        "{units} units, 5 MB is {page_units}"
    );
    // WHEN a re-sharding to 8 begins, so the walk's cursor goes on in id order after its frontier
    // (both layouts read, consistently), and the walk goes on at the largest page size
    let started = h.operator().reshard(&tenant, 8).await;
    assert_eq!(started.status, 202, "{}", started.body);
    while let Some(c) = pages.last().and_then(|r| r.body["nextCursor"].as_str()) {
        let before = units_so_far().await;
        let next = page(Some(c.to_owned()), "unordered").await;
        // THEN no page reads more than within 30 % of its 5 MB in each layout (the rest is 11.7 MB)
        let units = units_so_far().await - before;
        let two_pages = 2.0 * units_of(MAX_PAGE_BYTES, true);
        assert!(
            units <= 1.3 * two_pages,
            "{units} units, 5 MB in both layouts is {two_pages}"
        );
        pages.push(next);
    }
    // AND no page body passes 5 MB, and every product came back exactly once
    let mut seen = ids_of_pages_within_5_mb(&pages);
    seen.sort();
    assert_eq!(seen, expected);
    assert!(pages.len() > 3, "{} pages", pages.len());
}
