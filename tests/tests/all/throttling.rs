//! Hot-partition telemetry: a throttled DynamoDB attempt is logged with the tenant, the route, the
//! table or index, and the shape of the throttled key (its kind and shard, never an id), and counted
//! in the tenant's usage.

use integration::{onboard, unique, Harness};
use serde_json::{json, Value};
use shared::service::runtime::respond_metered;

async fn get_product(h: &Harness, tenant: &str, id: &str) -> u16 {
    let ev = h
        .tenant(tenant)
        .request("get-product", &[("productId", id)], None);
    respond_metered(
        Some((&h.app, "get-product")),
        "req-throttled".into(),
        "GET /products/{productId}".into(),
        products::get_product::handle(&h.app, ev),
    )
    .await
    .status()
    .as_u16()
}

#[tokio::test(flavor = "current_thread")]
async fn a_throttled_request_is_logged_by_shape_and_counted_in_usage() {
    // GIVEN logs captured in the production JSON format, and a tenant with a product
    let logs = integration::CapturedLogs::default();
    let _guard =
        tracing::subscriber::set_default(shared::service::runtime::json_subscriber(logs.clone()));
    let h = Harness::new().await;
    let tenant = unique("hot");
    onboard(&h, &tenant, 4).await;
    let product = "sku-secret-4711";
    let put = h.tenant(&tenant).request(
        "put-product",
        &[("productId", product)],
        Some(json!({"name": "hot"})),
    );
    assert_eq!(
        products::put_product::handle(&h.app, put)
            .await
            .unwrap()
            .status(),
        201
    );
    // WHEN DynamoDB throttles the product read once (the SDK retries and the call succeeds). Only
    // the GetItem is refused: the usage meter's own write may be due in the same request.
    h.faults.refuse_once_with_throttling("GetItem");
    assert_eq!(get_product(&h, &tenant, product).await, 200);

    // THEN one warning names where and for whom, by shape only
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
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
        .find(|l| l["message"] == "request" && l["function_request_id"] == "req-throttled")
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
