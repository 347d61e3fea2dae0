//! Usage metering: every tenant call is counted (per tenant, route and day, over 8 counter shards),
//! concurrently with the call, and a metering failure never fails the call.

use std::sync::Arc;

use futures::StreamExt;

use integration::{event, onboard, resp, unique, Auth, Harness, Phase, Resp};
use serde_json::json;
use shared::service::runtime::respond_metered;

async fn metered_create(h: &Harness, tenant: &str) -> u16 {
    let ev = event(
        "POST",
        "/sessions",
        &[],
        &[],
        Some(json!({"customerId": "c"})),
        &Auth::Tenant(tenant.into()),
    );
    let r = respond_metered(
        Some((&h.app, "create-session")),
        "r".into(),
        "POST /sessions".into(),
        sessions::create_session::handle(&h.app, ev),
    )
    .await;
    r.status().as_u16()
}

async fn metered_get(h: &Harness, tenant: &str) -> u16 {
    let ev = event(
        "GET",
        "/sessions/{sessionId}",
        &[("sessionId", "01a1fcba-9139-7bdd-8e68-8992306e0b9d")],
        &[],
        None,
        &Auth::Tenant(tenant.into()),
    );
    let r = respond_metered(
        Some((&h.app, "get-session-by-session-id")),
        "r".into(),
        "GET /sessions/{sessionId}".into(),
        sessions::get_session_by_session_id::handle(&h.app, ev),
    )
    .await;
    r.status().as_u16()
}

async fn usage(h: &Harness, tenant: &str) -> Resp {
    let today = shared::store::usage::utc_date(h.app.clock.now_millis());
    resp(
        users::get_usage::handle(
            &h.app,
            event(
                "GET",
                "/usage",
                &[],
                &[("from", &today), ("to", &today)],
                None,
                &Auth::Tenant(tenant.into()),
            ),
        )
        .await,
    )
}

#[tokio::test]
async fn usage_counts_equal_the_calls_made_after_520_concurrent_calls() {
    // GIVEN two tenants
    let h = Arc::new(Harness::new().await);
    let (a, b) = (unique("meter"), unique("other"));
    onboard(&h, &a, 4).await;
    // AND a warm DynamoDB Local: its JVM answers its first requests slowly, and the meter's budget is
    // 200 ms (a count that misses it is dropped, by design)
    let warm = unique("warm");
    for _ in 0..100 {
        metered_get(&h, &warm).await;
    }
    // WHEN 520 calls run, 32 at a time (DynamoDB Local on 2 cores queues past that, and its answers
    // would pass the SDK's attempt timeout): 300 creates and 200 reads for A, and 20 reads for B
    let calls = futures::stream::iter((0..520).map(|i| {
        let (h, a, b) = (h.clone(), a.clone(), b.clone());
        async move {
            match i {
                0..300 => metered_create(&h, &a).await,
                300..500 => metered_get(&h, &a).await,
                _ => metered_get(&h, &b).await,
            }
        }
    }))
    .buffer_unordered(32)
    .collect::<Vec<u16>>()
    .await;
    for status in calls {
        assert!(status == 201 || status == 404, "{status}");
    }
    // THEN get-usage reports exactly those counts, per tenant and route
    let r = usage(&h, &a).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let routes = &r.body["days"][0]["routes"];
    assert_eq!(routes["create-session"], 300, "{}", r.body);
    assert_eq!(routes["get-session-by-session-id"], 200, "{}", r.body);
    // (the usage reads themselves are not metered here: they were called without the meter)
    assert_eq!(
        usage(&h, &b).await.body["days"][0]["routes"]["get-session-by-session-id"],
        20
    );
    // AND the counters are spread over the 8 shards, under the tenant's prefix
    let counters: Vec<_> = h
        .all_items()
        .await
        .into_iter()
        .filter(|i| {
            i["PK"]
                .as_s()
                .unwrap()
                .starts_with(&format!("TENANT#{a}#USAGE#"))
        })
        .collect();
    assert_eq!(counters.len(), 16, "8 shards × 2 routes");
    // AND each expires by TTL 400 days after its first count
    use shared::identity::clock::Clock;
    let ttl = h.clock.now_seconds() + shared::store::usage::COUNTER_TTL_SECONDS;
    for c in &counters {
        assert_eq!(c["expiresAt"].as_n().unwrap(), &ttl.to_string());
    }
}

#[tokio::test]
async fn a_metering_failure_never_fails_the_call_and_a_caller_without_tenant_is_not_metered() {
    let h = Harness::new().await;
    let t = unique("meterfail");
    // warm the tenant's credentials so the only UpdateItem is the meter's
    assert_eq!(metered_create(&h, &t).await, 201);
    h.faults.arm("UpdateItem", Phase::BeforeSend);
    assert_eq!(
        metered_create(&h, &t).await,
        201,
        "the call succeeds although its metering failed"
    );
    let r = usage(&h, &t).await;
    assert_eq!(
        r.body["days"][0]["routes"]["create-session"], 1,
        "{}",
        r.body
    );
    // no tenant claim: 401, and nothing metered
    h.requests.reset();
    let ev = event(
        "POST",
        "/sessions",
        &[],
        &[],
        Some(json!({"customerId": "c"})),
        &Auth::NoTenant,
    );
    let r = respond_metered(
        Some((&h.app, "create-session")),
        "r".into(),
        "POST /sessions".into(),
        sessions::create_session::handle(&h.app, ev),
    )
    .await;
    assert_eq!(r.status(), 401);
    assert_eq!(h.requests.total(), 0);
}
