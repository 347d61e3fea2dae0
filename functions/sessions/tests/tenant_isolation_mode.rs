//! Tenant isolation mode (`TenancyConfig: PER_TENANT`), end to end through a function binary: a local
//! Runtime API sends each invocation with `Lambda-Runtime-Aws-Tenant-Id`, as the Lambda service does
//! for such a function. A request whose claim names the environment's tenant is served; one naming
//! another tenant is refused with 403, logged as an alarm, and that tenant's credentials are never
//! fetched, so the environment's credential cache holds its own tenant only.

use std::process::Stdio;

use integration::runtime_api::{function_env, RuntimeApi};
use integration::{event, Auth, Harness};
use serde_json::Value;
use tokio::io::AsyncReadExt;

const BIN: &str = "get-sessions-by-customer-id";

fn sessions_of_c1(tenant: &str) -> String {
    event::<Value>(
        "GET",
        "/customers/{customerId}/sessions",
        &[("customerId", "c1")],
        &[],
        None,
        &Auth::Tenant(tenant.to_owned()),
    )
    .to_string()
}

fn status(response: &str) -> u64 {
    let v: Value = serde_json::from_str(response).expect("a proxy response");
    v["statusCode"].as_u64().expect("a status")
}

#[tokio::test]
async fn an_environment_serves_its_own_tenant_and_refuses_any_other() {
    // GIVEN a function binary in an execution environment for tenant `mine`
    let (h, [mine, other]) = Harness::with_tenants([("mine", 1), ("other", 1)]).await;
    let h = &h;
    let assumed = |t: String| async move { h.recorded_policies(&t).await.len() };
    let (mine_before, other_before) = (assumed(mine.clone()).await, assumed(other.clone()).await);
    let api = RuntimeApi::start().await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_get-sessions-by-customer-id"))
        .env_clear()
        .envs(function_env(&h.table, &api.addr, BIN))
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the function binary starts");

    // WHEN its own tenant calls, THEN it is served
    let served = api
        .invoke_for_tenant(&sessions_of_c1(&mine), Some(&mine))
        .await;
    assert_eq!(status(&served), 200, "{served}");

    // WHEN a caller whose claim names another tenant reaches this environment
    let refused = api
        .invoke_for_tenant(&sessions_of_c1(&other), Some(&mine))
        .await;
    // THEN 403 problem+json
    assert_eq!(status(&refused), 403, "{refused}");
    assert!(refused.contains("application/problem+json"), "{refused}");
    assert!(refused.contains("serves another tenant"), "{refused}");

    // AND without a runtime tenant (the pooled mode) the same binary serves any tenant
    let pooled = api.invoke_for_tenant(&sessions_of_c1(&other), None).await;
    assert_eq!(status(&pooled), 200, "{pooled}");

    // AND the refused tenant's credentials were never fetched by the refused request: the binary's
    // only AssumeRole for `other` is the pooled call's, and `mine` was assumed once (onboarding,
    // by the test's own App, assumed each before)
    assert_eq!(assumed(mine.clone()).await, mine_before + 1);
    assert_eq!(assumed(other.clone()).await, other_before + 1);

    // AND the refusal was logged at alarm level
    child.kill().await.ok();
    let mut logs = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut logs).await.ok();
    }
    if let Some(mut err) = child.stderr.take() {
        err.read_to_string(&mut logs).await.ok();
    }
    let alarm = logs
        .lines()
        .find(|l| l.contains("tenant_environment_mismatch"))
        .unwrap_or_else(|| panic!("no alarm in the logs: {logs}"));
    let alarm: Value = serde_json::from_str(alarm).expect("a JSON log line");
    assert_eq!(alarm["level"], "ERROR");
    assert_eq!(alarm["execution_tenant"], mine.as_str());
    assert_eq!(alarm["claimed_tenant"], other.as_str());
}
