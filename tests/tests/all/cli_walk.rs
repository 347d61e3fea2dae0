//! An operator's first day, through the CLI only: `pooltable tenants …` takes two tenants, side by
//! side, through every operation, each with `--wait`, against the local API `scripts/dev.sh` serves:
//! - one through onboarding, a tier change, a key rotation, a re-sharding, and a move to its own
//!   table and back;
//! - the other through onboarding, an export resumed from a cursor, a user's erasure while the
//!   tenant is suspended, a restore (dry run, then for real) from a copy the export made (the erased
//!   user stays erased), and an offboarding.
//!
//! Not a unit of the suite: `scripts/schemathesis.sh` runs both (`--ignored cli_walk::`) in the
//! background of its contract passes, with `POOLTABLE_API_URL`, and the stack's admin environment
//! (`target/stack-logs/contract/stack.env`: `TABLE_NAME` and DynamoDB Local's endpoint) for
//! `pooltable create-table` and `pooltable import`. Under `cargo lambda watch` each operation waits
//! out its real settle delay (about 70 s); side by side, the two walks take about four minutes.

use std::process::Command;

use pooltable_client::{connect, types};
use serde_json::{json, Value};

/// What a `pooltable` command line did: its exit status, stdout and stderr.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// stdout as JSON (the record a tenant command answers).
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or(Value::Null)
    }

    /// Asserts the command succeeded; itself.
    fn done(self, what: &str) -> Self {
        assert_eq!(
            self.code, 0,
            "{what}: exit {}\n{}{}",
            self.code, self.stdout, self.stderr
        );
        self
    }
}

/// Runs `pooltable <args>` as the operator (with `token`) against the local API.
fn pooltable(args: &[&str]) -> Ran {
    let url = std::env::var("POOLTABLE_API_URL").expect(
        "POOLTABLE_API_URL is not set: scripts/schemathesis.sh runs this test against the local API",
    );
    let out = Command::new(integration::process::built_bin("debug", "pooltable"))
        .args(args)
        .env("POOLTABLE_API_URL", url)
        .env(
            "POOLTABLE_TOKEN",
            shared::isolation::claims::dev_jwt("platform", true),
        )
        .output()
        .expect("run target/debug/pooltable");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The operator's own tenant (its record must exist: exit 3 when an earlier run, or the other walk,
/// made it), then tenant `t` onboarded by the CLI (basic, 2 shards): the tenant's client.
fn onboarded_with_products(t: &str) -> pooltable_client::Client {
    let platform = pooltable(&["tenants", "onboard", "platform"]);
    assert!([0, 3].contains(&platform.code), "{}", platform.stderr);
    let onboarded =
        pooltable(&["tenants", "onboard", t, "--tier", "basic", "--shards", "2"]).done("onboard");
    assert_eq!(onboarded.json()["shardCount"], 2);
    let base = std::env::var("POOLTABLE_API_URL").expect("POOLTABLE_API_URL");
    connect(&base, &shared::isolation::claims::dev_jwt(t, false)).unwrap()
}

/// Tenant `tenant` writes product `id` named `name`.
async fn put(tenant: &pooltable_client::Client, id: &str, name: &str) {
    let body: types::ProductDocument =
        serde_json::from_value(json!({"name": name, "price": 3})).unwrap();
    tenant
        .put_product()
        .product_id(id)
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("put {id}: {e:?}"));
}

/// Tenant `tenant` writes 12 products, `p-0` to `p-11`.
async fn twelve_products(tenant: &pooltable_client::Client) {
    for i in 0..12 {
        put(tenant, &format!("p-{i}"), &format!("item {i}")).await;
    }
}

#[tokio::test]
#[ignore = "run by scripts/schemathesis.sh against the local API"]
async fn the_cli_changes_a_tenants_tier_key_shards_and_placement_waiting_for_each() {
    // GIVEN a tenant the CLI onboards, with 12 products
    let t = integration::unique("walk");
    let tenant = onboarded_with_products(&t);
    twelve_products(&tenant).await;

    // WHEN the CLI changes its tier
    let tiered = pooltable(&["tenants", "tier", &t, "standard"]).done("tier");
    // THEN the record says so
    assert_eq!(tiered.json()["tier"], "standard");
    // WHEN it gives the tenant limits of its own (tier custom), high enough for the rest of the walk
    let custom = pooltable(&[
        "tenants",
        "tier",
        &t,
        "custom",
        "--requests-per-second",
        "900",
        "--capacity-units-per-second",
        "9000",
    ])
    .done("tier custom");
    // THEN the record holds them
    assert_eq!(custom.json()["tier"], "custom", "{}", custom.stdout);
    assert_eq!(
        custom.json()["limits"],
        json!({"requestsPerSecond": 900, "capacityUnitsPerSecond": 9000}),
        "{}",
        custom.stdout
    );

    // WHEN it rotates the tenant's key (the local API keys every tenant), and asks again
    let rotated = pooltable(&["tenants", "rotate-key", &t]).done("rotate-key");
    let again = pooltable(&["tenants", "rotate-key", &t]).done("rotate-key again");
    // THEN the key has a second version, sealing from a key period later, and asking again before
    // then made no third
    assert_eq!(
        rotated.json()["key"]["versions"],
        json!([1, 2]),
        "{}",
        rotated.stdout
    );
    assert_eq!(
        again.json()["key"],
        rotated.json()["key"],
        "{}",
        again.stdout
    );

    // WHEN it re-shards the tenant in 2 lanes, waiting
    let resharded =
        pooltable(&["tenants", "reshard", &t, "4", "--lanes", "2", "--wait"]).done("reshard");
    // THEN it returns once the re-sharding has ended, having shown its progress on stderr
    assert_eq!(resharded.json()["shardCount"], 4, "{}", resharded.stdout);
    assert!(
        resharded.json()["migration"].is_null(),
        "{}",
        resharded.stdout
    );
    assert!(
        resharded.stderr.contains(&format!("reshard {t}: running"))
            && resharded.stderr.contains(&format!("reshard {t}: ended")),
        "{}",
        resharded.stderr
    );

    // WHEN it moves the tenant to its own table, and back to the pool, waiting each time
    let moved = pooltable(&["tenants", "move", &t, "own", "--wait"]).done("move own");
    // THEN each returns once the move has ended
    assert_eq!(moved.json()["placement"], "own", "{}", moved.stdout);
    assert!(moved.json()["move"].is_null(), "{}", moved.stdout);
    let back = pooltable(&["tenants", "move", &t, "pool", "--wait"]).done("move pool");
    assert_eq!(back.json()["placement"], "pool", "{}", back.stdout);
    assert!(back.json()["move"].is_null(), "{}", back.stdout);
    // AND every product reads as written
    for i in 0..12 {
        let id = format!("p-{i}");
        let got = tenant.get_product().product_id(id.as_str()).send().await;
        assert!(got.is_ok(), "{id} after the walk: {got:?}");
    }
}

#[tokio::test]
#[ignore = "run by scripts/schemathesis.sh against the local API"]
async fn the_cli_exports_erases_restores_and_offboards_a_tenant_waiting_for_each() {
    let pool = std::env::var("TABLE_NAME")
        .expect("TABLE_NAME is not set: scripts/schemathesis.sh sources the stack's stack.env");
    // GIVEN a tenant the CLI onboards, with 12 products
    let t = integration::unique("walk");
    let tenant = onboarded_with_products(&t);
    twelve_products(&tenant).await;
    // AND a user the tenant writes
    let user: types::UserInput =
        serde_json::from_value(json!({"name": "Ada", "email": "ada@walk.example"})).unwrap();
    tenant
        .put_user()
        .user_id("u-walk")
        .body(user)
        .send()
        .await
        .expect("put u-walk");

    // WHEN it exports the tenant 5 items a page, and again from the first page's cursor
    let whole = pooltable(&["tenants", "export", &t, "--limit", "5"]).done("export");
    let first = whole
        .stderr
        .lines()
        .find(|l| l.starts_with(&format!("export {t}: page 1,")))
        .unwrap_or_else(|| panic!("page 1's progress: {}", whole.stderr));
    let cursor = first
        .split("--cursor ")
        .nth(1)
        .unwrap_or_else(|| panic!("page 1 names the next page's cursor: {first}"));
    let rest = pooltable(&["tenants", "export", &t, "--limit", "5", "--cursor", cursor])
        .done("export --cursor");
    // THEN the resumed export is exactly what followed page 1: nothing twice, nothing missing
    let lines: Vec<&str> = whole.stdout.lines().collect();
    let resumed: Vec<&str> = rest.stdout.lines().collect();
    assert!(lines.len() > 12, "every product and the record: {lines:?}");
    assert!(!resumed.is_empty() && resumed.len() < lines.len());
    assert_eq!(lines[lines.len() - resumed.len()..], resumed[..]);

    // WHEN a restored copy of the pool is made from that export (create-table, import)
    let copy = format!("{pool}-restore-{t}");
    pooltable(&["create-table", &copy]).done("create-table");
    let file = std::env::temp_dir().join(format!("{t}.ndjson"));
    std::fs::write(&file, &whole.stdout).unwrap();
    pooltable(&["import", "--table", &copy, file.to_str().unwrap()]).done("import");
    // AND the tenant then loses a product and gains another
    tenant
        .delete_product()
        .product_id("p-0")
        .send()
        .await
        .expect("delete p-0");
    put(&tenant, "p-late", "written after the copy").await;
    // AND the CLI erases the user while the tenant is suspended, and erases it again
    pooltable(&["tenants", "suspend", &t]).done("suspend");
    let erased = pooltable(&["tenants", "erase-user", &t, "u-walk"]).done("erase-user");
    let again = pooltable(&["tenants", "erase-user", &t, "u-walk"]).done("erase-user again");
    pooltable(&["tenants", "resume", &t]).done("resume");
    assert_eq!(erased.json()["deleted"]["USER"], 1, "{}", erased.stdout);
    assert_eq!(
        again.json(),
        erased.json(),
        "a retry answers the first report"
    );
    // AND the CLI restores it from the copy: a dry run, then for real, waiting
    let dry = pooltable(&["tenants", "restore", &t, "--from-table", &copy, "--dry-run"])
        .done("restore --dry-run");
    let restored =
        pooltable(&["tenants", "restore", &t, "--from-table", &copy, "--wait"]).done("restore");
    // THEN the dry run counted, the restore ended finished, and the tenant's products are the
    // copy's again
    assert!(
        dry.stdout.contains("put") || dry.stdout.contains("delete"),
        "{}",
        dry.stdout
    );
    assert_eq!(
        restored.json()["lastRestore"]["phase"],
        "finished",
        "{}",
        restored.stdout
    );
    assert!(
        tenant.get_product().product_id("p-0").send().await.is_ok(),
        "p-0 is back"
    );
    assert!(
        tenant
            .get_product()
            .product_id("p-late")
            .send()
            .await
            .is_err(),
        "p-late is gone"
    );
    assert!(
        tenant.get_user().user_id("u-walk").send().await.is_err(),
        "the erased user stays erased: the copy held it, the restore did not bring it back"
    );

    // WHEN it offboards the tenant, waiting
    let offboarded = pooltable(&["tenants", "offboard", &t, "--wait"]).done("offboard");
    // THEN it returns once every item is deleted, with the report
    assert_eq!(
        offboarded.json()["status"],
        "offboarded",
        "{}",
        offboarded.stdout
    );
    // AND the tenant's calls are refused from then on
    assert!(tenant.get_product().product_id("p-1").send().await.is_err());
    let _ = std::fs::remove_file(file);
}
