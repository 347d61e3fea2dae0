//! Usage metering: every tenant call is counted (per tenant, route and day, over 8 counter shards),
//! concurrently with the call, and a metering failure never fails the call.

use shared::identity::keys::raw_key;
use std::sync::Arc;

use futures::StreamExt;

use integration::api::NO_PATH;
use integration::{onboard, unique, Harness, Phase, Resp};
use serde_json::json;

async fn metered_create(h: &Harness, tenant: &str) -> u16 {
    h.tenant(tenant)
        .metered_call("create-session", &NO_PATH, Some(json!({"customerId": "c"})))
        .await
}

async fn metered_get(h: &Harness, tenant: &str) -> u16 {
    h.tenant(tenant)
        .metered_call(
            "get-session-by-session-id",
            &[("sessionId", "01a1fcba-9139-7bdd-8e68-8992306e0b9d")],
            None,
        )
        .await
}

/// The tenant's usage today, once the container has written what it holds.
async fn usage(h: &Harness, tenant: &str) -> Resp {
    h.app.flush_usage().await.unwrap();
    let today = shared::store::quota::usage::utc_date(h.app.clock.now_millis());
    h.tenant(tenant)
        .query(&[("from", &today), ("to", &today)])
        .get_usage()
        .await
}

#[tokio::test]
async fn usage_counts_equal_the_calls_made_after_520_concurrent_calls() {
    // GIVEN two tenants
    let h = Arc::new(Harness::new().await);
    let (a, b) = (unique("meter"), integration::onboarded(&h, "other").await);
    onboard(&h, &a, 4).await;
    // AND a warm DynamoDB Local: its JVM answers its first requests slowly, and the meter's budget is
    // 200 ms (a count that misses it is dropped, by design)
    let warm = integration::onboarded(&h, "warm").await;
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
        .filter(|i| i["PK"].as_s().unwrap().starts_with(&raw_key(&a, "USAGE#")))
        .collect();
    // (batched: the container wrote them in a few UpdateItems, round-robin over the 8 shards)
    assert!((2..=16).contains(&counters.len()), "{}", counters.len());
    // AND each expires by TTL 400 days after its first count
    use shared::identity::clock::Clock;
    let ttl = h.clock.now_seconds() + shared::store::quota::usage::COUNTER_TTL_SECONDS;
    for c in &counters {
        assert_eq!(c["expiresAt"].as_n().unwrap(), &ttl.to_string());
    }
}

#[tokio::test]
async fn a_metering_failure_never_fails_the_call_and_a_caller_without_tenant_is_not_metered() {
    let (h, t) = Harness::with_tenant("meterfail", 1).await;
    // warm the tenant's credentials so the only UpdateItem is the meter's
    assert_eq!(metered_create(&h, &t).await, 201);
    // (a second later, so the next call's counts are due to be written)
    h.clock.advance_seconds(1);
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
    let status = h
        .anonymous()
        .metered_call("create-session", &NO_PATH, Some(json!({"customerId": "c"})))
        .await;
    assert_eq!(status, 401);
    assert_eq!(h.requests.total(), 0);
}

#[tokio::test]
async fn counts_dynamodb_refuses_stay_pending_and_counts_with_a_lost_answer_are_never_counted_twice(
) {
    use shared::identity::clock::Clock;
    use shared::store::quota::usage::{
        read, utc_date, Pending, RouteUsage, UsageMeter, DRAIN_TIMEOUT,
    };
    let h = Harness::new().await;
    let t =
        shared::identity::ids::TenantId::parse(&integration::onboarded(&h, "units").await).unwrap();
    let db = h.app.db(&t).await.unwrap();
    let (today, now) = (utc_date(h.clock.now_millis()), h.clock.now_millis());
    let meter = UsageMeter::default();
    let counts = |calls, read_milli, write_milli, throttles, limited| Pending {
        calls,
        read_milli,
        write_milli,
        throttles,
        limited,
    };
    // A drain's budget (2 s), not a request's (200 ms): a loaded DynamoDB Local must not time out a
    // write this test means to succeed.
    // GIVEN a call, 1.5 read and 2 write units, a throttled attempt and 3 refusals pending for route r
    meter.add(&t, "r", counts(1, 1500, 2000, 1, 3));
    // WHEN DynamoDB refuses the flush (throttled: nothing was added)
    h.faults.refuse_once_with_throttling("UpdateItem");
    assert!(meter.flush(&db, now, DRAIN_TIMEOUT).await.is_err());
    // THEN the counts stay pending, and the next flush carries them, once
    meter.add(&t, "r", counts(1, 0, 0, 0, 0));
    meter.flush(&db, now, DRAIN_TIMEOUT).await.unwrap();
    meter.flush(&db, now, DRAIN_TIMEOUT).await.unwrap();
    // What the table holds for `route` today must be `calls`, the units, throttles and refusals.
    let assert_usage =
        |route: &'static str, calls, read_milli_units, write_milli_units, throttles, limited| {
            let (db, today) = (&db, &today);
            async move {
                let days = read(db, today, today).await.unwrap();
                let expected = RouteUsage {
                    calls,
                    read_milli_units,
                    write_milli_units,
                    throttles,
                    limited,
                };
                assert_eq!(days[today][route], expected, "{route}");
            }
        };
    assert_usage("r", 2, 1500, 2000, 1, 3).await;
    // AND a flush whose answer is lost (it was applied) does not leave its counts pending: they are
    // counted once, by the write that carried them
    meter.add(&t, "s", counts(1, 500, 0, 0, 0));
    h.faults.arm("UpdateItem", Phase::AfterSend);
    assert!(meter.flush(&db, now, DRAIN_TIMEOUT).await.is_err());
    meter.add(&t, "s", counts(1, 0, 0, 0, 0));
    meter.flush(&db, now, DRAIN_TIMEOUT).await.unwrap();
    assert_usage("s", 2, 500, 0, 0, 0).await;
}

#[tokio::test]
async fn get_usage_reports_the_capacity_units_of_metered_calls() {
    // GIVEN a tenant that creates two sessions (each a PutItem with its GSI1 copy)
    let (h, t) = Harness::with_tenant("capusage", 1).await;
    assert_eq!(metered_create(&h, &t).await, 201);
    assert_eq!(metered_create(&h, &t).await, 201);
    // WHEN it reads its usage
    let r = usage(&h, &t).await;
    // THEN both calls are counted, and the write units of at least the first (which rode on the
    // second call's metering write) are there: a PutItem on the table and on GSI1
    assert_eq!(
        r.body["days"][0]["routes"]["create-session"], 2,
        "{}",
        r.body
    );
    let units = &r.body["days"][0]["capacityUnits"]["create-session"];
    assert!(units["write"].as_f64().unwrap() >= 2.0, "{}", r.body);
    assert_eq!(units["read"].as_f64(), Some(0.0), "{}", r.body);
}

#[tokio::test]
async fn plan_usage_reads_tenants_usage_from_the_table_with_operator_credentials_and_recommends() {
    use shared::identity::clock::Clock;
    use shared::store::quota::usage::{utc_date, Pending};
    // GIVEN a quiet tenant (one call) and a busy one whose counters hold a day of heavy writes,
    // throttled attempts and quota refusals
    let (h, [quiet, busy]) = Harness::with_tenants([("quiet", 1), ("busy", 1)]).await;
    let (today, now) = (utc_date(h.clock.now_millis()), h.clock.now_millis());
    for (t, pending) in [
        (
            &quiet,
            Pending {
                calls: 1,
                ..Pending::default()
            },
        ),
        (
            &busy,
            Pending {
                calls: 1,
                read_milli: 0,
                write_milli: 8_640_000_000,
                throttles: 12,
                limited: 3,
            },
        ),
    ] {
        let t = shared::identity::ids::TenantId::parse(t).unwrap();
        let db = h.app.db(&t).await.unwrap();
        h.app.usage.add(&t, "put-product", pending);
        h.app
            .usage
            .flush(&db, now, shared::store::quota::usage::DRAIN_TIMEOUT)
            .await
            .unwrap();
    }
    // WHEN the planner reads their usage with the operator's (admin) client
    let tenants: Vec<_> = [&quiet, &busy]
        .iter()
        .map(|t| shared::identity::ids::TenantId::parse(t).unwrap())
        .collect();
    let usage = devtools::usage_plan::read_from_table(&h.admin, &h.table, &tenants, &today, &today)
        .await
        .unwrap();
    let recs: Vec<_> = usage
        .iter()
        .map(|u| devtools::usage_plan::recommend(u, &Default::default()))
        .collect();
    // THEN the quiet tenant stays basic on one shard, and the busy one (1,000 WCU/s at its peak)
    // needs shards and a premium tier, with its throttles and refusals reported
    assert_eq!(recs[0].tier, shared::store::tenancy::tenants::Tier::Basic);
    assert_eq!(recs[0].shards, 1);
    assert_eq!(recs[1].tier, shared::store::tenancy::tenants::Tier::Premium);
    assert!(recs[1].shards >= 2, "{:?}", recs[1]);
    assert_eq!((recs[1].throttles, recs[1].limited), (12, 3));
    let report = devtools::usage_plan::report(&recs);
    assert!(
        report.contains("throttled") && report.contains(&busy),
        "{report}"
    );
}
