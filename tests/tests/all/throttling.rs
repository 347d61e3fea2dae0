//! Hot-partition telemetry: a throttled DynamoDB attempt is logged with the tenant, the route, the
//! table or index, and the shape of the throttled key (its kind and shard, never an id), and counted
//! in the tenant's usage.

use integration::Harness;
use serde_json::{json, Value};

#[tokio::test(flavor = "current_thread")]
async fn a_throttled_request_is_logged_by_shape_and_counted_in_usage() {
    // GIVEN logs captured in the production JSON format, and a tenant with a product
    let (logs, _guard) = integration::CapturedLogs::install();
    let (h, tenant) = Harness::with_tenant("hot", 4).await;
    let product = "sku-secret-4711";
    h.tenant(&tenant)
        .put_new_products([(product.to_owned(), json!({"name": "hot"}))])
        .await;
    // WHEN DynamoDB throttles the product read once (the SDK retries and the call succeeds). Only
    // the GetItem is refused: the usage meter's own write may be due in the same request.
    h.faults.refuse_once_with_throttling("GetItem");
    let read = h
        .tenant(&tenant)
        .metered_call("get-product", &[("productId", product)], None)
        .await;
    assert_eq!(read, 200);

    // THEN one warning names where and for whom, by shape only
    let text = logs.text();
    let throttled: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["message"] == "DynamoDB throttled a request")
        .collect();
    assert_eq!(throttled.len(), 1, "{text}");
    let line = &throttled[0];
    assert_eq!(line["level"], "WARN");
    assert_eq!(line["tenant"], tenant.as_str());
    assert_eq!(line["route"], "GET /products/{productId}");
    assert_eq!(line["target"], h.table.as_str());
    let shape = line["key_shape"].as_str().unwrap();
    assert!(
        shape.starts_with("PRODUCT#") && shape[8..].parse::<u32>().unwrap() < 4,
        "{shape}"
    );
    assert!(!text.contains(product), "an id reached the log: {text}");
    // AND the request's summary line counts it
    let summary = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["message"] == "request" && l["function_request_id"] == "req")
        .unwrap();
    assert_eq!(summary["throttles"], 1);

    // AND the tenant's usage counts it, once the container writes its counts
    h.app.flush_usage().await.unwrap();
    let db = h
        .app
        .db(&shared::identity::ids::TenantId::parse(&tenant).unwrap())
        .await
        .unwrap();
    let today = shared::store::quota::usage::utc_date(h.app.clock.now_millis());
    let days = shared::store::quota::usage::read(&db, &today, &today)
        .await
        .unwrap();
    assert_eq!(days[&today]["get-product"].throttles, 1);
}
