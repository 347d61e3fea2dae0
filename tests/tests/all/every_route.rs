//! Every route of openapi.yaml called through the typed client (`pooltable-client`, generated from it
//! at build time), against the local API `cargo lambda watch` serves (#45). Not a unit of the
//! suite: `scripts/schemathesis.sh` runs it (`--ignored every_route::`) once the API is up, with
//! `POOLTABLE_API_URL`; and the operator CLI (`pooltable tenants …`) onboards, suspends, resumes,
//! exports and offboards a tenant through the same client.

use std::collections::BTreeSet;
use std::process::Command;

use chrono::NaiveDate;
use futures::StreamExt;
use pooltable_client::{connect, types, Error, ResponseValue};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

/// The API's base URL: the test fails, never skips, without one.
fn api_url() -> String {
    std::env::var("POOLTABLE_API_URL")
        .expect("POOLTABLE_API_URL is not set: scripts/schemathesis.sh runs this test against the local API")
}

/// A request body or typed value from JSON, checked against its schema's type.
fn typed<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a value of the schema's type")
}

/// The operations called so far, and what each answered.
#[derive(Default)]
struct Calls(BTreeSet<String>);

impl Calls {
    /// `answer` of operation `op`, which must be a success.
    fn ok<T>(
        &mut self,
        op: &str,
        answer: Result<ResponseValue<T>, Error<types::Problem>>,
    ) -> ResponseValue<T> {
        self.0.insert(op.to_owned());
        match answer {
            Ok(value) => value,
            Err(e) => panic!("{op}: {e:?}"),
        }
    }

    /// `answer` of operation `op`, which must be a refusal with `status` and a problem body.
    fn refused<T: std::fmt::Debug>(
        &mut self,
        op: &str,
        answer: Result<ResponseValue<T>, Error<types::Problem>>,
        status: u16,
    ) {
        self.0.insert(op.to_owned());
        match answer {
            Err(Error::ErrorResponse(problem)) => {
                assert_eq!(problem.status().as_u16(), status, "{op}: {problem:?}")
            }
            other => panic!("{op}: expected {status}, got {other:?}"),
        }
    }
}

fn json_of(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).expect("a typed answer serializes")
}

#[tokio::test]
#[ignore = "run by scripts/schemathesis.sh against the local API"]
async fn every_route_answers_through_the_generated_client() {
    // GIVEN an operator, and a new tenant it onboards through the client
    let base = api_url();
    let op = connect(&base, &shared::isolation::claims::dev_jwt("platform", true)).unwrap();
    let t = integration::unique("client");
    let tc = connect(&base, &shared::isolation::claims::dev_jwt(&t, false)).unwrap();
    let mut calls = Calls::default();
    // The operator's own tenant (its record must exist); 409 when an earlier pass made it.
    let _ = op
        .onboard_tenant()
        .body(typed::<types::OnboardTenant>(
            json!({"tenantId": "platform", "tier": "standard"}),
        ))
        .send()
        .await;

    // WHEN every operation is called once (at least), in an order that makes what the next reads
    let onboarded = calls.ok(
        "onboard-tenant",
        op.onboard_tenant()
            .idempotency_key(format!("k-{t}").as_str())
            .body(typed::<types::OnboardTenant>(
                json!({"tenantId": t, "tier": "standard", "shardCount": 4}),
            ))
            .send()
            .await,
    );
    // THEN each answers its documented success, in its documented type
    assert_eq!(onboarded.status().as_u16(), 201);
    assert_eq!(json_of(&*onboarded)["tenantId"], t.as_str());
    let got = calls.ok(
        "get-tenant",
        op.get_tenant().tenant_id(t.as_str()).send().await,
    );
    assert_eq!(json_of(&*got)["shardCount"], 4);
    let changed = calls.ok(
        "update-tenant",
        op.update_tenant()
            .tenant_id(t.as_str())
            .body(typed::<types::UpdateTenant>(json!({"tier": "premium"})))
            .send()
            .await,
    );
    assert_eq!(json_of(&*changed)["tier"], "premium");

    calls.ok(
        "put-product",
        tc.put_product()
            .product_id("p-1")
            .body(typed::<types::ProductDocument>(
                json!({"name": "Widget", "price": 3}),
            ))
            .send()
            .await,
    );
    let product = calls.ok(
        "get-product",
        tc.get_product().product_id("p-1").send().await,
    );
    let product = json_of(&*product).to_string();
    assert!(product.contains("Widget"), "{product}");
    let page = calls.ok(
        "query-tenant-products",
        tc.query_tenant_products().limit(10u64).send().await,
    );
    assert_eq!(json_of(&*page)["items"].as_array().map(Vec::len), Some(1));
    calls.ok(
        "delete-product",
        tc.delete_product().product_id("p-1").send().await,
    );
    calls.refused(
        "get-product",
        tc.get_product().product_id("p-1").send().await,
        404,
    );

    calls.ok(
        "put-department",
        tc.put_department()
            .department_id("eng")
            .body(typed::<types::DepartmentInput>(
                json!({"name": "Engineering"}),
            ))
            .send()
            .await,
    );
    calls.ok(
        "get-department",
        tc.get_department().department_id("eng").send().await,
    );
    calls.ok(
        "put-employee",
        tc.put_employee()
            .employee_id("e-1")
            .body(typed::<types::EmployeeInput>(
                json!({"name": "Ada", "departmentId": "eng"}),
            ))
            .send()
            .await,
    );
    calls.ok(
        "get-employee",
        tc.get_employee().employee_id("e-1").send().await,
    );
    calls.ok("list-employees", tc.list_employees().send().await);
    calls.ok("list-departments", tc.list_departments().send().await);
    let members = calls.ok(
        "list-department-employees",
        tc.list_department_employees()
            .department_id("eng")
            .send()
            .await,
    );
    assert_eq!(
        json_of(&*members)["items"].as_array().map(Vec::len),
        Some(1)
    );
    calls.ok(
        "delete-employee",
        tc.delete_employee().employee_id("e-1").send().await,
    );

    calls.ok(
        "put-user",
        tc.put_user()
            .user_id("u-1")
            .body(typed::<types::UserInput>(
                json!({"name": "Grace", "email": "grace@example.com"}),
            ))
            .send()
            .await,
    );
    calls.ok("get-user", tc.get_user().user_id("u-1").send().await);
    calls.ok(
        "find-user-by-email",
        tc.find_user_by_email()
            .email("grace@example.com")
            .send()
            .await,
    );
    calls.ok(
        "create-order",
        tc.create_order()
            .user_id("u-1")
            .body(typed::<types::OrderInput>(json!({
                "orderId": "o-1", "date": "2026-01-15", "amount": 12.5,
                "items": [{"itemId": "l-1", "sku": "s-1", "qty": 1, "price": 12.5}],
            })))
            .send()
            .await,
    );
    calls.ok("get-order", tc.get_order().order_id("o-1").send().await);
    let (from, to) = (
        NaiveDate::from_ymd_opt(2026, 1, 1).unwrap(),
        NaiveDate::from_ymd_opt(2026, 12, 31).unwrap(),
    );
    let orders = calls.ok(
        "list-tenant-orders",
        tc.list_tenant_orders().from(from).to(to).send().await,
    );
    assert_eq!(json_of(&*orders)["items"].as_array().map(Vec::len), Some(1));
    let code = calls.ok(
        "create-transfer-code",
        tc.create_transfer_code().user_id("u-1").send().await,
    );
    let code = json_of(&*code)["code"].as_str().unwrap().to_owned();
    calls.ok(
        "redeem-transfer-code",
        tc.redeem_transfer_code().code(code.as_str()).send().await,
    );
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    calls.ok(
        "put-integration-token",
        tc.put_integration_token()
            .service("crm")
            .body(typed::<types::IntegrationTokenInput>(
                json!({"token": "t0k3n", "expiresAt": expires}),
            ))
            .send()
            .await,
    );
    calls.ok(
        "get-integration-token",
        tc.get_integration_token().service("crm").send().await,
    );
    // The user erased with its order and email: gone from the reads.
    let erased = calls.ok("erase-user", tc.erase_user().user_id("u-1").send().await);
    assert_eq!(json_of(&*erased)["deleted"]["EMAIL"], 1);
    assert!(tc.get_user().user_id("u-1").send().await.is_err());
    // The operator's erasure of the same user answers the same report.
    let again = calls.ok(
        "erase-tenant-user",
        op.erase_tenant_user()
            .tenant_id(t.as_str())
            .user_id("u-1")
            .send()
            .await,
    );
    assert_eq!(json_of(&*again), json_of(&*erased));

    let import = calls.ok(
        "create-import",
        tc.create_import()
            .body(typed::<types::ImportInput>(json!({
                "kind": "products", "items": [{"productId": "p-9", "document": {"name": "Imported"}}],
            })))
            .send()
            .await,
    );
    let import_id = json_of(&*import)["importId"].as_str().unwrap().to_owned();
    calls.ok(
        "get-import",
        tc.get_import().import_id(import_id.as_str()).send().await,
    );
    let today = chrono::Utc::now().date_naive();
    calls.ok(
        "get-usage",
        tc.get_usage().from(today).to(today).send().await,
    );
    calls.ok(
        "get-tenant-usage",
        op.get_tenant_usage()
            .tenant_id(t.as_str())
            .from(today)
            .to(today)
            .send()
            .await,
    );

    let root = calls.ok(
        "create-session",
        tc.create_session()
            .body(typed::<types::CreateSession>(
                json!({"customerId": "cust-1"}),
            ))
            .send()
            .await,
    );
    let root: uuid::Uuid = json_of(&*root)["sessionId"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let child = tc
        .create_session()
        .body(typed::<types::CreateSession>(
            json!({"customerId": "cust-1", "parentSessionId": root}),
        ))
        .send()
        .await
        .expect("a child session");
    let child: uuid::Uuid = json_of(&*child)["sessionId"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    calls.ok(
        "get-session-by-session-id",
        tc.get_session_by_session_id().session_id(root).send().await,
    );
    let children = calls.ok(
        "get-child-sessions-by-session-id",
        tc.get_child_sessions_by_session_id()
            .session_id(root)
            .send()
            .await,
    );
    assert_eq!(
        json_of(&*children)["items"].as_array().map(Vec::len),
        Some(1)
    );
    calls.ok(
        "get-session-by-child-session-id",
        tc.get_session_by_child_session_id()
            .child_session_id(child)
            .send()
            .await,
    );
    calls.ok(
        "get-last-login-time-by-customer-id",
        tc.get_last_login_time_by_customer_id()
            .customer_id("cust-1")
            .send()
            .await,
    );
    calls.ok(
        "get-session-id-by-customer-id",
        tc.get_session_id_by_customer_id()
            .customer_id("cust-1")
            .session_id(root)
            .send()
            .await,
    );
    calls.ok(
        "get-sessions-by-customer-id",
        tc.get_sessions_by_customer_id()
            .customer_id("cust-1")
            .send()
            .await,
    );
    calls.ok(
        "expire-session",
        tc.expire_session().session_id(root).send().await,
    );

    let export = calls.ok(
        "export-tenant",
        op.export_tenant().tenant_id(t.as_str()).send().await,
    );
    let mut lines = Vec::new();
    let mut body = export.into_inner().into_inner();
    while let Some(chunk) = body.next().await {
        lines.extend_from_slice(&chunk.expect("the export's body"));
    }
    let exported = String::from_utf8(lines).unwrap();
    assert!(exported.lines().count() > 5, "{exported}");
    // a restore's dry run from a table not named as a restored copy of the pool: refused (400, on
    // from.table), nothing written; tests/tests/all/restore.rs restores from real copies
    calls.refused(
        "restore-tenant",
        op.restore_tenant()
            .tenant_id(t.as_str())
            .body(typed::<types::RestoreTenant>(
                json!({"from": {"table": "no-such-restored-copy"}, "dryRun": true}),
            ))
            .send()
            .await,
        400,
    );
    let offboarding = calls.ok(
        "offboard-tenant",
        op.offboard_tenant().tenant_id(t.as_str()).send().await,
    );
    assert_eq!(offboarding.status().as_u16(), 202);

    // AND every operation of openapi.yaml was called
    let root_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let table = devtools::routes::RouteTable::load(&root_dir).expect("routes.yaml");
    let routes: BTreeSet<String> = table.routes().map(|r| r.function.bin.clone()).collect();
    assert_eq!(calls.0, routes);
}

/// Runs `pooltable tenants <args>` with the operator's token; its exit status and output.
fn cli(args: &[&str]) -> (i32, Value, String) {
    let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/pooltable");
    let out = Command::new(bin)
        .arg("tenants")
        .args(args)
        .env("POOLTABLE_API_URL", api_url())
        .env(
            "POOLTABLE_TOKEN",
            shared::isolation::claims::dev_jwt("platform", true),
        )
        .output()
        .expect("run target/debug/pooltable");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)),
    )
}

#[tokio::test]
#[ignore = "run by scripts/schemathesis.sh against the local API"]
async fn the_operator_cli_takes_a_tenant_through_its_lifecycle() {
    // GIVEN a tenant id no one has
    let t = integration::unique("cli");
    // WHEN the CLI onboards, suspends, resumes, reads, exports and offboards it
    let (code, onboarded, out) = cli(&["onboard", &t, "--tier", "basic", "--shards", "2"]);
    // THEN each step succeeds (exit 0) with the record, and the record changes as asked
    assert_eq!(code, 0, "{out}");
    assert_eq!(onboarded["tier"], "basic");
    let (code, _, out) = cli(&["onboard", &t, "--tier", "basic"]);
    assert_eq!(code, 3, "onboarding it again is refused (exit 3): {out}");
    assert!(out.contains("already exists"), "{out}");
    let (code, suspended, out) = cli(&["suspend", &t]);
    assert_eq!(
        (code, &suspended["status"]),
        (0, &json!("suspended")),
        "{out}"
    );
    let (code, resumed, out) = cli(&["resume", &t]);
    assert_eq!((code, &resumed["status"]), (0, &json!("active")), "{out}");
    let (code, got, out) = cli(&["get", &t]);
    assert_eq!((code, &got["shardCount"]), (0, &json!(2)), "{out}");
    let (code, tiered, out) = cli(&["tier", &t, "premium"]);
    assert_eq!((code, &tiered["tier"]), (0, &json!("premium")), "{out}");
    // (no restore runs: an abort is refused, exit 3)
    let (code, _, out) = cli(&["restore", &t, "--abort"]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("No restore"), "{out}");
    // AND a re-sharding of another tenant starts (exit 0, its progress), and a move asked while it
    // runs is refused (exit 3)
    let other = integration::unique("clire");
    let (code, _, out) = cli(&["onboard", &other, "--shards", "2"]);
    assert_eq!(code, 0, "{out}");
    let (code, resharding, out) = cli(&["reshard", &other, "4"]);
    assert_eq!(code, 0, "{out}");
    assert!(!resharding["migration"].is_null(), "{out}");
    let (code, _, out) = cli(&["move", &other, "own"]);
    assert_eq!(code, 3, "{out}");
    // AND every command's --help prints the usage and exits 0
    for verb in [
        "onboard", "get", "tier", "suspend", "resume", "reshard", "move", "restore", "offboard",
        "export", "usage",
    ] {
        let (code, _, out) = cli(&[verb, "--help"]);
        assert_eq!(code, 0, "{verb} --help: {out}");
        assert!(out.contains("pooltable tenants"), "{verb} --help: {out}");
    }
    let (code, _, out) = cli(&["usage", &t]);
    assert_eq!(code, 0, "{out}");
    let (code, _, out) = cli(&["export", &t]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("export {t}: page 1,")),
        "progress on stderr: {out}"
    );
    // (an export resumes from a cursor; one the API refuses names itself for the resume)
    let (code, _, refused) = cli(&["export", &t, "--cursor", "not-a-cursor"]);
    assert_eq!(code, 3, "{refused}");
    assert!(refused.contains("--cursor not-a-cursor"), "{refused}");
    let record_key = shared::identity::keys::tenant_record_key(
        &shared::identity::ids::TenantId::parse(&t).unwrap(),
    );
    assert!(
        out.lines().any(|l| l.contains(&record_key)),
        "the export holds the tenant's record: {out}"
    );
    let (code, offboarding, out) = cli(&["offboard", &t]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(offboarding["status"], "offboarding", "{out}");
    // AND a tenant that does not exist, or a bad argument, is a failure a script can tell apart
    let (code, _, out) = cli(&["get", "no-such-tenant-anywhere"]);
    assert_eq!(code, 3, "{out}");
    let (code, _, out) = cli(&["onboard"]);
    assert_eq!(code, 2, "{out}");
}
