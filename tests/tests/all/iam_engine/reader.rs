//! A read-only route's session (`Scope::Reader`, issue 56), judged by fakecloud: a tenant's role
//! (tagged with its id, holding the template's tenant-access role policy) assumed with a reader's
//! session policy, its credentials sending every operation at the tenant's product, record, usage
//! counter and quota window keys: only reads, and UpdateItem of the two counters, go past IAM.

use shared::identity::ids::TenantId;
use shared::identity::keys::{quota_window_pk, raw_key, tenant_record_key, usage_counter_pk};
use shared::isolation::credentials::{assume_role_request, CredentialSettings};
use shared::isolation::policy::{Scope, TableLocation, TenantTables};

use super::{
    engine, iam_allows, session_client, tenant_access_role, Engine, Op, OPS, POOL, REGION,
};

#[tokio::test]
#[ignore = "runs against fakecloud in strict IAM mode: scripts/iam-engine.sh"]
async fn iam_alone_holds_a_read_only_routes_session_to_reads_and_its_counters() {
    // GIVEN the pool, and a role for tenant `rdr` tagged with its id, holding the tenant-access
    // role's policy
    let Engine { ddb, iam, sts, def } = engine();
    let _ = devtools::create_table(&ddb, POOL, &def).await;
    let tenant = TenantId::parse("rdr").unwrap();
    let role = tenant_access_role(
        &iam,
        "pooltable-engine-reader-rdr",
        &[("TenantId", tenant.as_str())],
    )
    .await;
    // WHEN it is assumed with a read-only route's session policy
    let settings = CredentialSettings {
        role_arn: role.clone(),
        operator_role_arn: None,
        platform_access: Default::default(),
        table: TableLocation::from_role_arn(&role, REGION, POOL).unwrap(),
        duration_seconds: 900,
    };
    let pooled = TenantTables::pooled(POOL);
    let out = assume_role_request(&sts, &settings, &tenant, &pooled, Scope::Reader)
        .unwrap()
        .send()
        .await
        .expect("AssumeRole");
    let client = session_client(&out);
    // THEN each operation at each key goes past IAM exactly when it reads, or adds to a counter
    let counters = [usage_counter_pk(&tenant, 2), quota_window_pk(&tenant, 0)];
    let keys = [
        raw_key(tenant.as_str(), "PRODUCT#0"),
        tenant_record_key(&tenant),
        counters[0].clone(),
        counters[1].clone(),
    ];
    let (mut allowed_count, mut refused_count) = (0usize, 0usize);
    for pk in &keys {
        for op in OPS {
            let expected = matches!(op, Op::Get | Op::Query | Op::QueryGsi1)
                || (op == Op::Update && counters.contains(pk));
            let allowed = iam_allows(&client, op, POOL, pk).await;
            match allowed {
                true => allowed_count += 1,
                false => refused_count += 1,
            }
            assert_eq!(allowed, expected, "reader {op:?} {pk}");
        }
    }
    println!(
        "fakecloud (strict IAM), a read-only route's session: {} requests, {allowed_count} allowed, {refused_count} refused, each as expected",
        allowed_count + refused_count
    );
}
