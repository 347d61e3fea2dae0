//! The tenant lifecycle: suspend and resume. A suspended tenant's requests get 403 once every
//! container's cached record has expired (`RECORD_TTL_SECONDS`), and no container vends its
//! credentials to find out: records are read with the functions' own, record-only client.

use integration::routes::{call, call_admitted, get_product_admitted, params};
use integration::{onboard, unique, Auth, Harness, Resp};
use serde_json::json;
use shared::store::tenants::RECORD_TTL_SECONDS;

async fn set_status(ops: &Harness, tenant: &str, status: &str) -> Resp {
    call(
        &ops.app,
        "update-tenant",
        &params(&[("tenantId", tenant)]),
        &[],
        Some(json!({ "status": status })),
        &Auth::Operator("platform".into()),
    )
    .await
}

#[tokio::test]
async fn a_suspended_tenant_gets_403_within_the_record_ttl_and_no_container_vends_its_credentials()
{
    // GIVEN an active tenant served by container A, and an operator working from another container
    let a = Harness::new().await;
    let ops = Harness::on_table(&a.admin, &a.table, 3600, &a.sts_endpoint).await;
    let t = unique("suspend");
    onboard(&a, &t, 4).await;
    assert_eq!(
        get_product_admitted(&a.app, &t).await.status,
        404,
        "served (no such product)"
    );

    // WHEN the operator suspends it
    let r = set_status(&ops, &t, "suspended").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "suspended");

    // THEN container A serves it while its cached record is fresh
    assert_eq!(get_product_admitted(&a.app, &t).await.status, 404);
    // AND refuses it once the record is RECORD_TTL_SECONDS old: 403 problem+json
    a.clock.advance_seconds(RECORD_TTL_SECONDS);
    let r = get_product_admitted(&a.app, &t).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.content_type, "application/problem+json");
    assert!(r.body["detail"].as_str().unwrap().contains("suspended"));
    // AND a handler called directly refuses it too (App::db), for reads and writes
    let direct = call(
        &a.app,
        "put-product",
        &params(&[("productId", "p-2")]),
        &[],
        Some(json!({"name": "x"})),
        &Auth::Tenant(t.clone()),
    )
    .await;
    assert_eq!(direct.status, 403, "{}", direct.body);

    // AND a container that never served it refuses it without ever assuming the tenant role
    let fresh = Harness::on_table(&a.admin, &a.table, 3600, &a.sts_endpoint).await;
    let assumed_before = fresh.recorded_policies(&t).await.len();
    for bin in ["get-product", "query-tenant-products", "create-session"] {
        let body = (bin == "create-session").then(|| json!({"customerId": "c"}));
        let r = call_admitted(
            &fresh.app,
            bin,
            &params(&[("productId", "p-1")]),
            body,
            &Auth::Tenant(t.clone()),
        )
        .await;
        assert_eq!(r.status, 403, "{bin}: {}", r.body);
    }
    assert_eq!(
        fresh.recorded_policies(&t).await.len(),
        assumed_before,
        "credentials were vended for a suspended tenant"
    );
    // AND nothing was written for it while suspended
    let products = a.items_under(&format!("TENANT#{t}#PRODUCT#")).await;
    assert!(products.is_empty());

    // WHEN the operator resumes it (an operator may act on a suspended tenant)
    let r = set_status(&ops, &t, "active").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "active");
    // THEN every container serves it again within RECORD_TTL_SECONDS
    fresh.clock.advance_seconds(RECORD_TTL_SECONDS);
    assert_eq!(get_product_admitted(&fresh.app, &t).await.status, 404);
    a.clock.advance_seconds(RECORD_TTL_SECONDS);
    assert_eq!(get_product_admitted(&a.app, &t).await.status, 404);
}

#[tokio::test]
async fn only_an_operator_suspends_and_a_status_must_be_known() {
    let h = Harness::new().await;
    let t = unique("status");
    onboard(&h, &t, 4).await;
    let before = h.all_items().await;
    let r = call(
        &h.app,
        "update-tenant",
        &params(&[("tenantId", &t)]),
        &[],
        Some(json!({"status": "suspended"})),
        &Auth::Tenant(t.clone()),
    )
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
    let ops = Harness::on_table(&a.admin, &a.table, 3600, &a.sts_endpoint).await;
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
    let h = Harness::new().await;
    let home = unique("ops-home");
    onboard(&h, &home, 1).await;
    let operator = Auth::Operator(home.clone());

    // WHEN it tries to suspend its own tenant
    let r = call(
        &h.app,
        "update-tenant",
        &params(&[("tenantId", &home)]),
        &[],
        Some(json!({ "status": "suspended" })),
        &operator,
    )
    .await;

    // THEN 409 problem+json, and the tenant is still active (its operators are not locked out)
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.content_type, "application/problem+json");
    // AND so is a suspension riding along with a tier change, which changes nothing either
    let r = call(
        &h.app,
        "update-tenant",
        &params(&[("tenantId", &home)]),
        &[],
        Some(json!({ "tier": "basic", "status": "suspended" })),
        &operator,
    )
    .await;
    assert_eq!(r.status, 409, "{}", r.body);
    let record = call(
        &h.app,
        "get-tenant",
        &params(&[("tenantId", &home)]),
        &[],
        None,
        &operator,
    )
    .await;
    assert_eq!(record.status, 200, "{}", record.body);
    assert_eq!(record.body["status"], "active");
    assert_eq!(
        record.body["tier"], "standard",
        "the refused change wrote nothing"
    );
}
