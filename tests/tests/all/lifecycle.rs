//! The tenant lifecycle: suspend and resume. A suspended tenant's requests get 403 once every
//! container's cached record has expired (`RECORD_TTL_SECONDS`), and no container vends its
//! credentials to find out: records are read with the functions' own, record-only client.

use integration::api::get_product_admitted;
use integration::routes::params;
use integration::{onboard, unique, Auth, Harness, Resp};
use serde_json::json;
use shared::identity::keys::raw_key;
use shared::store::tenancy::tenants::RECORD_TTL_SECONDS;

async fn set_status(ops: &Harness, tenant: &str, status: &str) -> Resp {
    ops.operator()
        .update_tenant(tenant, json!({ "status": status }))
        .await
}

#[tokio::test]
async fn a_suspended_tenant_gets_403_within_the_record_ttl_and_no_container_vends_its_credentials()
{
    // GIVEN an active tenant served by container A, and an operator working from another container
    let (a, t) = Harness::with_tenant("suspend", 4).await;
    let ops = a.another_container().await;
    let r = get_product_admitted(&a.app, &t).await;
    assert_eq!(r.status, 404, "served (no such product): {}", r.body);

    // WHEN the operator suspends it
    let r = set_status(&ops, &t, "suspended").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "suspended");

    // THEN container A serves it while its cached record is fresh
    let r = get_product_admitted(&a.app, &t).await;
    assert_eq!(r.status, 404, "{}", r.body);
    // AND refuses it once the record is RECORD_TTL_SECONDS old: 403 problem+json
    a.clock.advance_seconds(RECORD_TTL_SECONDS);
    let r = get_product_admitted(&a.app, &t).await;
    r.assert_problem_naming(403, "suspended");
    // AND a handler called directly refuses it too (App::db), for reads and writes
    let direct = a.tenant(&t).put_product("p-2", json!({"name": "x"})).await;
    assert_eq!(direct.status, 403, "{}", direct.body);

    // AND a container that never served it refuses it without ever assuming the tenant role
    let fresh = a.another_container().await;
    let assumed_before = fresh.recorded_policies(&t).await.len();
    for bin in ["get-product", "query-tenant-products", "create-session"] {
        let body = (bin == "create-session").then(|| json!({"customerId": "c"}));
        let r = fresh
            .tenant(&t)
            .admitted()
            .call(bin, &[("productId", "p-1")], body)
            .await;
        assert_eq!(r.status, 403, "{bin}: {}", r.body);
    }
    assert_eq!(
        fresh.recorded_policies(&t).await.len(),
        assumed_before,
        "credentials were vended for a suspended tenant"
    );
    // AND nothing was written for it while suspended
    let products = a.items_under(&raw_key(&t, "PRODUCT#")).await;
    assert!(products.is_empty());

    // WHEN the operator resumes it (an operator may act on a suspended tenant)
    let r = set_status(&ops, &t, "active").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "active");
    // THEN every container serves it again within RECORD_TTL_SECONDS
    fresh.clock.advance_seconds(RECORD_TTL_SECONDS);
    let r = get_product_admitted(&fresh.app, &t).await;
    assert_eq!(r.status, 404, "{}", r.body);
    a.clock.advance_seconds(RECORD_TTL_SECONDS);
    let r = get_product_admitted(&a.app, &t).await;
    assert_eq!(r.status, 404, "{}", r.body);
}

#[tokio::test]
async fn only_an_operator_suspends_and_a_status_must_be_known() {
    let (h, t) = Harness::with_tenant("status", 4).await;
    let before = h.all_items().await;
    let r = h
        .tenant(&t)
        .update_tenant(&t, json!({"status": "suspended"}))
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = set_status(&h, &t, "deleted").await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(h.all_items().await, before);
}

#[tokio::test]
async fn a_tenant_onboarded_by_another_container_is_served_within_a_second_not_after_the_record_ttl(
) {
    // GIVEN container A has seen the tenant before it existed (its record cached as absent)
    let a = Harness::new().await;
    let ops = a.another_container().await;
    let t = unique("early");
    assert_eq!(
        get_product_admitted(&a.app, &t).await.status,
        403,
        "not onboarded yet"
    );
    // WHEN another container onboards it
    onboard(&ops, &t, 4).await;
    // THEN container A still trusts the absence it saw for up to a second (so a caller naming a
    // tenant without a record costs at most one read a second), and serves it after that
    assert_eq!(get_product_admitted(&a.app, &t).await.status, 403);
    a.clock.advance_seconds(1);
    assert_eq!(
        get_product_admitted(&a.app, &t).await.status,
        404,
        "served (no such product)"
    );
}

#[tokio::test]
async fn an_operator_cannot_suspend_its_own_tenant() {
    // GIVEN an operator of tenant `ops-home` (which is onboarded and active)
    let (h, home) = Harness::with_tenant("ops-home", 1).await;
    let operator = Auth::Operator(home.clone());

    // WHEN it tries to suspend its own tenant
    let r = h
        .caller(&operator)
        .update_tenant(&home, json!({ "status": "suspended" }))
        .await;

    // THEN 409 problem+json, and the tenant is still active (its operators are not locked out)
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.content_type, "application/problem+json");
    // AND so is a suspension riding along with a tier change, which changes nothing either
    let r = h
        .caller(&operator)
        .update_tenant(&home, json!({ "tier": "basic", "status": "suspended" }))
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    let record = h.caller(&operator).get_tenant(&home).await;
    assert_eq!(record.status, 200, "{}", record.body);
    assert_eq!(record.body["status"], "active");
    assert_eq!(
        record.body["tier"], "standard",
        "the refused change wrote nothing"
    );
}

#[test]
fn every_delay_that_relies_on_the_record_cache_outlasts_the_longest_function_timeout() {
    use shared::store::tenancy::tenants::{
        LONGEST_FUNCTION_TIMEOUT_SECONDS, RECORD_SETTLED_SECONDS,
    };
    // GIVEN every function's timeout in template.yaml (its own, else the Globals')
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
    let t: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let global = t["Globals"]["Function"]["Timeout"].as_u64().unwrap();
    let longest = t["Resources"]
        .as_mapping()
        .unwrap()
        .values()
        .filter(|r| r["Type"].as_str() == Some("AWS::Serverless::Function"))
        .map(|r| r["Properties"]["Timeout"].as_u64().unwrap_or(global))
        .max()
        .unwrap();
    // THEN the constant the delays are built on is that longest timeout, and each delay covers the
    // cache bound and such a request
    assert_eq!(longest, LONGEST_FUNCTION_TIMEOUT_SECONDS);
    assert!(RECORD_SETTLED_SECONDS >= RECORD_TTL_SECONDS + longest);
    assert_eq!(
        shared::store::lifecycle::offboarding::DELETION_DELAY_SECONDS,
        RECORD_SETTLED_SECONDS
    );
    assert_eq!(
        shared::store::lifecycle::resharding::WRITES_MOVE_DELAY_SECONDS,
        RECORD_SETTLED_SECONDS
    );
}

#[tokio::test]
async fn a_record_read_that_is_slow_is_trusted_from_when_it_was_sent() {
    use shared::identity::clock::Clock;
    // GIVEN a tenant onboarded by another container, and container A whose clock moves 20 s while
    // its read of the record is under way (a slow read)
    let (ops, t) = Harness::with_tenant("slow", 1).await;
    let a = ops.another_container().await;
    let tenant = shared::identity::ids::TenantId::parse(&t).unwrap();
    let sent_at = a.clock.now_millis();
    let (read, ()) = tokio::join!(a.app.directory.record(&tenant), async {
        a.clock.advance_seconds(20)
    });
    assert!(read.unwrap().is_some(), "onboarded");
    // AND the operator suspends it just after
    assert_eq!(set_status(&ops, &t, "suspended").await.status, 200);
    // WHEN RECORD_TTL_SECONDS have passed since the read was sent (only 10 s since it answered)
    a.clock.set_millis(sent_at + RECORD_TTL_SECONDS * 1000);
    // THEN A reads the record again, and refuses the tenant
    let r = get_product_admitted(&a.app, &t).await;
    assert_eq!(r.status, 403, "{}", r.body);
}

#[tokio::test]
async fn a_tenants_own_user_does_not_see_which_operator_started_its_re_sharding() {
    // GIVEN a tenant being re-sharded by an operator of tenant "platform"
    let (h, t) = Harness::with_tenant("reshard", 1).await;
    let operator = integration::operator();
    let r = h.caller(&operator).reshard(&t, 4).await;
    assert_eq!(r.status, 202, "{}", r.body);
    // WHEN the tenant's own user and an operator read the record
    let get = |auth: Auth| {
        let (h, t) = (&h, t.clone());
        async move { h.caller(&auth).get_tenant(&t).await }
    };
    let own = get(Auth::Tenant(t.clone())).await;
    let ops = get(operator.clone()).await;
    // THEN both see the migration, and only the operator sees requestedBy
    assert_eq!(own.status, 200, "{}", own.body);
    assert_eq!(own.body["migration"]["toShardCount"], 4, "{}", own.body);
    assert!(
        own.body["migration"].get("requestedBy").is_none(),
        "{}",
        own.body
    );
    assert!(!own.body.to_string().contains("platform"), "{}", own.body);
    assert_eq!(
        ops.body["migration"]["requestedBy"], "platform",
        "{}",
        ops.body
    );
}

#[tokio::test]
async fn an_operator_whose_own_tenant_record_cannot_be_read_is_refused_503_and_writes_nothing() {
    // GIVEN an operator of an onboarded tenant, whose container has its record cached, and an active
    // tenant it may act on
    let (h, ops_tenant) = Harness::with_tenant("ops", 1).await;
    let operator = Auth::Operator(ops_tenant.clone());
    let t = integration::onboarded(&h, "target").await;
    let path = params(&[("tenantId", &t)]);
    let suspend = || {
        h.caller(&operator).admitted().call(
            "update-tenant",
            &path,
            Some(json!({"status": "suspended"})),
        )
    };
    // WHEN the cache has expired and every read of the operator's own record is throttled
    h.clock.advance_seconds(RECORD_TTL_SECONDS + 1);
    h.faults
        .refuse_requests_containing(Some(&raw_key(&ops_tenant, "TENANT")));
    let through_runtime = suspend().await;
    let direct = h
        .caller(&operator)
        .update_tenant(&t, json!({"status": "suspended"}))
        .await;
    // THEN both answer 503 problem+json, served or called directly: the power fails closed
    through_runtime.assert_problem(503);
    direct.assert_problem(503);
    // AND nothing was written: the tenant is still active
    h.faults.refuse_requests_containing(None);
    let record = h.caller(&operator).get_tenant(&t).await;
    assert_eq!(record.status, 200, "{}", record.body);
    assert_eq!(record.body["status"], "active");
    // AND once the record reads again, the operator acts as before
    assert_eq!(suspend().await.status, 200);
}
