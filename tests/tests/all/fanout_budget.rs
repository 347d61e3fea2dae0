//! The fan-out budget: no API request has more DynamoDB requests in flight than its tenant client's
//! budget (16 by default; `DYNAMODB_MAX_IN_FLIGHT`), so a 64-shard listing runs in waves. The
//! request meter's in-flight counter is the witness.

use integration::api::NO_PATH;
use integration::{onboarded_on_shards, Auth, Harness};
use serde_json::json;
use shared::store::client::meter::with_request_meta;

#[tokio::test]
async fn a_64_shard_listing_never_has_more_than_the_budget_in_flight() {
    for budget in [shared::store::client::scoped::DEFAULT_MAX_IN_FLIGHT, 4] {
        // GIVEN a tenant with 64 shards and 40 products, and tenant clients with this budget
        let mut h = Harness::new().await;
        h.app.tenants = h.app.tenants.with_max_in_flight(budget);
        let tenant = onboarded_on_shards(&h, "wide", 64).await;
        let auth = Auth::Tenant(tenant.clone());
        for i in 0..40 {
            let id = format!("p-{i}");
            let r = h.caller(&auth).put_product(&id, json!({"n": i})).await;
            assert_eq!(r.status, 201, "{}", r.body);
        }
        // WHEN one page of 25 is listed (64 partitions to read)
        let ev = h.caller(&auth).query(&[("limit", "25")]).request(
            "query-tenant-products",
            &NO_PATH,
            None,
        );
        let (response, meta) =
            with_request_meta(integration::dispatch(&h.app, "query-tenant-products", ev)).await;
        // THEN the page is whole, every partition was read, and never more than the budget at once
        assert_eq!(response.unwrap().status(), 200);
        assert!(
            meta.dynamodb_requests() >= 64,
            "{}",
            meta.dynamodb_requests()
        );
        assert!(
            meta.max_in_flight() as usize <= budget,
            "budget {budget}: {} in flight",
            meta.max_in_flight()
        );
        assert!(
            meta.max_in_flight() >= 2,
            "the partitions were read concurrently"
        );
    }
}
