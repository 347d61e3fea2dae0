//! Every list page stays under Lambda's 6 MB response limit: a page whose items would pass 5 MB stops
//! early, with a cursor to the rest.

use std::collections::BTreeMap;

use integration::{Auth, Harness};
use serde_json::json;

#[tokio::test]
async fn a_page_of_large_products_stops_before_5_mb_and_the_rest_follows() {
    // GIVEN 100 products of about 60 KB each (6 MB in all) over 4 shards
    let (h, tenant) = Harness::with_tenant("big", 4).await;
    let auth = Auth::Tenant(tenant);
    let blob = "x".repeat(60 * 1024);
    for i in 0..100 {
        let id = format!("p-{i:03}");
        let params = BTreeMap::from([("productId".to_owned(), id)]);
        let r = h
            .caller(&auth)
            .call("put-product", &params, Some(json!({"blob": blob})))
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    // WHEN the list is walked at the largest page size
    let pages = h
        .caller(&auth)
        .pages(&[("limit", "100")], |c| c.query_tenant_products())
        .await;
    let mut seen = Vec::new();
    for r in &pages {
        // THEN no page body passes 5 MB
        let size = r.body.to_string().len();
        assert!(
            size <= shared::service::http::MAX_PAGE_BYTES,
            "{size} bytes"
        );
        seen.extend(r.ids("productId"));
    }
    // AND every product came back exactly once, in order, over more than one page
    let expected: Vec<String> = (0..100).map(|i| format!("p-{i:03}")).collect();
    assert_eq!(seen, expected);
    assert!(pages.len() > 1);
}
