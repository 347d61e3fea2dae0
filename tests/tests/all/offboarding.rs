//! The end of a tenant's life: offboarding (`DELETE /tenants/{tenantId}`) deletes every item of the
//! tenant, resumably and with an exact report, and nothing of anyone else; export
//! (`GET /tenants/{tenantId}/export`) gives every item, and `pooltable import` loads it into another
//! table that then answers the API exactly as the original did.

use shared::identity::keys::raw_key;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::api::get_product_admitted;
use integration::routes::params;
use integration::{export_page, onboard, onboarded_on_shards, unique, Auth, Harness, Resp};
use serde_json::{json, Value};
use shared::identity::clock::Clock;
use shared::identity::ids::TenantId;
use shared::store::client::hooks::{Bag, HookResult, Intercept, Parts, RequestRef};
use shared::store::lifecycle::offboarding::{kind_of, DELETION_DELAY_SECONDS};

type Item = HashMap<String, AttributeValue>;
/// A read route, its path parameters and its query.
type Read<'a> = (&'a str, BTreeMap<String, String>, Vec<(&'a str, &'a str)>);

/// What [`seed_every_kind`] created, for the reads that follow.
pub(crate) struct Seeded {
    session: String,
}

/// Gives `tenant` an item of every kind: `products` products, a department with an employee (and
/// its membership), a user (profile and email) with an order (header, line, summary, date index),
/// a transfer code, an integration token, a session with a child, an idempotency record, and usage
/// counters with a quota window.
pub(crate) async fn seed_every_kind(h: &Harness, tenant: &str, products: usize) -> Seeded {
    let auth = Auth::Tenant(tenant.to_owned());
    let ok = |r: Resp, what: &str| {
        assert!(r.status < 300, "seeding {what}: {} {}", r.status, r.body);
        r
    };
    let run = |bin: &'static str, p: BTreeMap<String, String>, body: Option<Value>| {
        let auth = auth.clone();
        async move { ok(h.caller(&auth).call(bin, &p, body).await, bin) }
    };
    for i in 0..products {
        let id = format!("p-{i}");
        run(
            "put-product",
            params(&[("productId", &id)]),
            Some(json!({"name": format!("Product {i}"), "price": i})),
        )
        .await;
    }
    run(
        "put-department",
        params(&[("departmentId", "d-1")]),
        Some(json!({"name": "Engineering"})),
    )
    .await;
    run(
        "put-employee",
        params(&[("employeeId", "e-1")]),
        Some(json!({"name": "Grace", "departmentId": "d-1"})),
    )
    .await;
    run(
        "put-user",
        params(&[("userId", "u-1")]),
        Some(json!({"name": "Ada", "email": format!("ada@{tenant}.example")})),
    )
    .await;
    run(
        "create-order",
        params(&[("userId", "u-1")]),
        Some(
            json!({"orderId": "o-1", "date": "2026-11-20", "amount": 19.99,
            "items": [{"itemId": "l-1", "sku": "BOOK-1", "qty": 1, "price": 19.99}]}),
        ),
    )
    .await;
    run("create-transfer-code", params(&[("userId", "u-1")]), None).await;
    run(
        "put-integration-token",
        params(&[("service", "crm")]),
        Some(json!({"token": "tok-1", "expiresAt": h.clock.now_seconds() + 3600})),
    )
    .await;
    let session = run(
        "create-session",
        BTreeMap::new(),
        Some(json!({"customerId": "c-1"})),
    )
    .await
    .body["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    run(
        "create-session",
        BTreeMap::new(),
        Some(json!({"customerId": "c-1", "parentSessionId": session})),
    )
    .await;
    let keyed = h
        .caller(&auth)
        .header("Idempotency-Key", "seed-1")
        .create_session(json!({"customerId": "c-2"}))
        .await;
    ok(keyed, "a keyed create-session");
    ok(get_product_admitted(&h.app, tenant).await, "a metered read");
    h.app.flush_usage().await.unwrap();
    Seeded { session }
}

/// The partition kinds of `items` (`TENANT#t#<KIND>#…`).
fn partition_kinds(tenant: &str, items: &[Item]) -> std::collections::BTreeSet<String> {
    let prefix = raw_key(tenant, "");
    items
        .iter()
        .map(|i| {
            let pk = i["PK"].as_s().unwrap();
            pk[prefix.len()..].split('#').next().unwrap().to_owned()
        })
        .collect()
}

/// Whether `item` is one an export leaves out or changes as it runs: a quota window (the limiter's
/// state, not exported) or a usage counter of the export itself (billed to the exported tenant).
fn moved_by_the_export(item: &Item) -> bool {
    let (pk, sk) = (item["PK"].as_s().unwrap(), item["SK"].as_s().unwrap());
    pk.contains("#RATE#") || sk.contains("#export-tenant#")
}

/// `value` without any member named `export-tenant` (the export's own usage).
fn without_the_export(mut value: Value) -> Value {
    match &mut value {
        Value::Object(map) => {
            map.remove("export-tenant");
            for v in map.values_mut() {
                *v = without_the_export(v.take());
            }
        }
        Value::Array(items) => {
            for v in items.iter_mut() {
                *v = without_the_export(v.take());
            }
        }
        _ => {}
    }
    value
}

fn sorted(mut items: Vec<Item>) -> Vec<Item> {
    items.sort_by_key(|i| {
        (
            i["PK"].as_s().unwrap().clone(),
            i["SK"].as_s().unwrap().clone(),
        )
    });
    items
}

/// Route `bin` on `tenant` (`/tenants/{tenantId}…`), without a body, as `operator`.
async fn tenant_call(h: &Harness, bin: &str, tenant: &str, operator: &Auth) -> Resp {
    h.caller(operator)
        .call(bin, &[("tenantId", tenant)], None)
        .await
}

async fn offboard(h: &Harness, tenant: &str, operator: &Auth) -> Resp {
    tenant_call(h, "offboard-tenant", tenant, operator).await
}

#[tokio::test]
async fn offboarding_deletes_every_item_of_the_tenant_resumably_and_nothing_of_another() {
    // GIVEN a tenant with an item of every kind (and 150 products: several deletion steps), and
    // another tenant active beside it
    let h = Harness::new().await;
    let victim = unique("gone");
    let other = unique("stays");
    let operator = Auth::Operator(integration::onboarded(&h, "ops").await);
    onboard(&h, &victim, 4).await;
    onboard(&h, &other, 4).await;
    seed_every_kind(&h, &victim, 150).await;
    seed_every_kind(&h, &other, 3).await;
    let victim_prefix = raw_key(&victim, "");
    let other_prefix = raw_key(&other, "");
    let before = h.items_under(&victim_prefix).await;
    let kinds = partition_kinds(&victim, &before);
    for kind in [
        "TENANT",
        "PRODUCT",
        "HR",
        "DEPARTMENT",
        "USER",
        "EMAIL",
        "ORDER",
        "ORDERDATE",
        "TRANSFER",
        "INTEGRATION",
        "SESSION",
        "IDEMPOTENCY",
        "USAGE",
        "RATE",
    ] {
        assert!(kinds.contains(kind), "no {kind} item was seeded: {kinds:?}");
    }
    let other_before = sorted(h.items_under(&other_prefix).await);

    // WHEN an operator of a third tenant offboards it
    let r = offboard(&h, &victim, &operator).await;
    // THEN 202: offboarding, nothing deleted yet, and when to come back
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["status"], "offboarding");
    assert_eq!(r.body["deletedTotal"], 0);
    assert_eq!(
        r.retry_after.as_deref(),
        Some(DELETION_DELAY_SECONDS.to_string().as_str())
    );
    // AND the tenant is refused (this container knows at once; others within the record TTL)
    let refused = get_product_admitted(&h.app, &victim).await;
    refused.assert_problem_naming(403, "offboarded");
    // AND its record no longer changes, and GET shows the offboarding
    let patch = h
        .caller(&operator)
        .update_tenant(&victim, json!({"status": "active"}))
        .await;
    assert_eq!(patch.status, 409, "{}", patch.body);
    let shown = tenant_call(&h, "get-tenant", &victim, &operator).await;
    assert_eq!(shown.body["status"], "offboarding", "{}", shown.body);
    assert_eq!(shown.body["offboarding"]["deletedTotal"], 0);
    // AND nothing is deleted before every container has stopped serving it
    let early = offboard(&h, &victim, &operator).await;
    assert_eq!(early.status, 202, "{}", early.body);
    assert_eq!(h.items_under(&victim_prefix).await.len(), before.len());

    // WHEN deletion may start, and runs are killed part-way three times before one is let finish
    h.clock.advance_seconds(DELETION_DELAY_SECONDS);
    for ms in [15, 40, 90] {
        let _ =
            tokio::time::timeout(Duration::from_millis(ms), offboard(&h, &victim, &operator)).await;
    }
    // (two calls at a time from here on, as two operators, or a retried call, would send them)
    let mut rounds = 0;
    let report = loop {
        let (a, b) = tokio::join!(
            offboard(&h, &victim, &operator),
            offboard(&h, &victim, &operator)
        );
        for r in [&a, &b] {
            assert!(r.status == 200 || r.status == 202, "{}", r.body);
        }
        if let Some(done) = [a, b].into_iter().find(|r| r.status == 200) {
            break done;
        }
        rounds += 1;
        assert!(rounds < 20, "the offboarding does not end");
    };

    // THEN the report counts every item exactly once, by kind
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!(report.body["status"], "offboarded");
    let t = TenantId::parse(&victim).unwrap();
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for item in &before {
        *expected.entry(kind_of(&t, item)).or_default() += 1;
    }
    assert_eq!(report.body["deleted"], json!(expected), "{}", report.body);
    assert_eq!(report.body["deletedTotal"], before.len());
    assert!(
        report.body["startedAt"].as_str().unwrap() <= report.body["finishedAt"].as_str().unwrap()
    );
    // AND the table holds no key of the tenant, and the other tenant's items are byte-identical
    assert_eq!(h.items_under(&victim_prefix).await, Vec::<Item>::new());
    assert_eq!(sorted(h.items_under(&other_prefix).await), other_before);
    // AND asking again answers the same report; the tenant itself is gone
    let again = offboard(&h, &victim, &operator).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body, report.body);
    let gone = tenant_call(&h, "get-tenant", &victim, &operator).await;
    assert_eq!(gone.status, 404, "{}", gone.body);
}

#[tokio::test]
async fn an_operator_cannot_offboard_its_own_tenant_and_an_unknown_tenant_is_404() {
    let (h, own) = Harness::with_tenant("ops", 1).await;
    let operator = Auth::Operator(own.clone());
    let r = offboard(&h, &own, &operator).await;
    r.assert_problem(409);
    let r = offboard(&h, &unique("never"), &operator).await;
    r.assert_problem(404);
    // AND nothing was written but the onboarded record
    assert_eq!(h.items_under(&raw_key(&own, "")).await.len(), 1);
}

/// A whole export, page after page.
struct Exported {
    lines: Vec<String>,
    pages: usize,
    /// The longest cursor a `Link` header carried.
    longest_cursor: usize,
}

/// Every page of `tenant`'s export, following the `Link` header, `limit` items per page.
async fn export_lines(h: &Harness, tenant: &str, limit: &str) -> Exported {
    let operator = Auth::Operator(unique("ops"));
    let pages = integration::export_pages(h, &operator, tenant, limit).await;
    for page in &pages {
        assert_eq!(page.content_type, "application/x-ndjson");
    }
    Exported {
        lines: pages
            .iter()
            .flat_map(|p| p.text.lines().map(str::to_owned))
            .collect(),
        pages: pages.len(),
        longest_cursor: pages
            .iter()
            .filter_map(|p| p.next_cursor().map(|c| c.len()))
            .max()
            .unwrap_or(0),
    }
}

#[tokio::test]
async fn an_exported_tenant_imported_into_an_empty_table_reads_back_identically() {
    // GIVEN a tenant with an item of every kind
    let (h, t) = Harness::with_tenant("exp", 4).await;
    let seeded = seed_every_kind(&h, &t, 30).await;
    let mut raw = sorted(h.items_under(&raw_key(&t, "")).await);
    raw.retain(|i| !moved_by_the_export(i));

    // WHEN an operator exports it in pages of 7
    let Exported { lines, pages, .. } = export_lines(&h, &t, "7").await;

    // THEN the pages hold every item exactly once, as stored (but the quota windows, and the usage
    // the export itself is billed)
    assert!(
        pages >= raw.len() / 7,
        "{pages} pages for {} items",
        raw.len()
    );
    let mut exported = sorted(devtools::import::parse_export(&lines.join("\n")).unwrap());
    assert!(!exported
        .iter()
        .any(|i| i["PK"].as_s().unwrap().contains("#RATE#")));
    exported.retain(|i| !moved_by_the_export(i));
    assert_eq!(exported, raw);

    // WHEN the export is imported into an empty table
    let fresh = Harness::new().await;
    let imported = devtools::import::import(&fresh.admin, &fresh.table, exported)
        .await
        .unwrap();
    assert_eq!((imported.written, imported.erased), (raw.len(), 0));

    // THEN every read route answers there exactly as on the original table
    let today = shared::store::quota::usage::utc_date(h.clock.now_millis());
    let email = format!("ada@{t}.example");
    let reads: Vec<Read> = vec![
        ("get-tenant", params(&[("tenantId", &t)]), vec![]),
        ("get-product", params(&[("productId", "p-7")]), vec![]),
        ("query-tenant-products", params(&[]), vec![("limit", "100")]),
        ("list-employees", params(&[]), vec![]),
        ("list-departments", params(&[]), vec![]),
        ("get-employee", params(&[("employeeId", "e-1")]), vec![]),
        ("get-department", params(&[("departmentId", "d-1")]), vec![]),
        (
            "list-department-employees",
            params(&[("departmentId", "d-1")]),
            vec![],
        ),
        ("get-user", params(&[("userId", "u-1")]), vec![]),
        ("find-user-by-email", params(&[]), vec![("email", &email)]),
        ("get-order", params(&[("orderId", "o-1")]), vec![]),
        (
            "list-tenant-orders",
            params(&[]),
            vec![("from", "2026-11-01"), ("to", "2026-11-30")],
        ),
        (
            "get-integration-token",
            params(&[("service", "crm")]),
            vec![],
        ),
        (
            "get-session-by-session-id",
            params(&[("sessionId", &seeded.session)]),
            vec![],
        ),
        (
            "get-child-sessions-by-session-id",
            params(&[("sessionId", &seeded.session)]),
            vec![],
        ),
        (
            "get-sessions-by-customer-id",
            params(&[("customerId", "c-1")]),
            vec![],
        ),
        (
            "get-usage",
            params(&[]),
            vec![("from", &today), ("to", &today)],
        ),
    ];
    let auth = Auth::Tenant(t.clone());
    for (bin, p, query) in &reads {
        let original = h.caller(&auth).query(query).call(bin, p, None).await;
        let imported = fresh.caller(&auth).query(query).call(bin, p, None).await;
        assert_eq!(original.status, 200, "{bin}: {}", original.body);
        assert_eq!(imported.status, original.status, "{bin}: {}", imported.body);
        assert_eq!(
            without_the_export(imported.body),
            without_the_export(original.body),
            "{bin}"
        );
    }
}

#[tokio::test]
async fn items_written_before_the_catalog_existed_are_found_once_backfilled() {
    // GIVEN a tenant whose integration token item has no catalog entry (as written before the index
    // existed; it is alone in its partition)
    let (h, t) = Harness::with_tenant("old", 1).await;
    seed_every_kind(&h, &t, 1).await;
    let token = raw_key(&t, "INTEGRATION#crm");
    h.admin
        .update_item()
        .table_name(&h.table)
        .key("PK", AttributeValue::S(token.clone()))
        .key("SK", AttributeValue::S(token.clone()))
        .update_expression("REMOVE #catalog")
        .expression_attribute_names("#catalog", "catalog")
        .condition_expression("attribute_exists(PK)")
        .send()
        .await
        .unwrap();
    let exported_pks = |lines: Vec<String>| -> Vec<String> {
        devtools::import::parse_export(&lines.join("\n"))
            .unwrap()
            .iter()
            .filter(|i| !moved_by_the_export(i))
            .map(|i| i["PK"].as_s().unwrap().clone())
            .collect()
    };
    // WHEN it is exported, THEN the token is missing
    let lines = export_lines(&h, &t, "100").await.lines;
    let before = exported_pks(lines);
    let mut raw = h.items_under(&raw_key(&t, "")).await;
    raw.retain(|i| !moved_by_the_export(i));
    assert_eq!(before.len(), raw.len() - 1);
    assert!(!before.contains(&token));
    // WHEN the catalog is backfilled, THEN the export holds every item again
    let done = shared::store::operator::backfill_catalog(&h.admin, &h.table)
        .await
        .unwrap();
    assert_eq!(done.enlisted, 1);
    let lines = export_lines(&h, &t, "100").await.lines;
    assert_eq!(exported_pks(lines).len(), raw.len());
    // AND a second run has nothing to do
    let again = shared::store::operator::backfill_catalog(&h.admin, &h.table)
        .await
        .unwrap();
    assert_eq!(again.enlisted, 0);
}

#[tokio::test]
async fn the_longest_keys_export_page_by_page() {
    // GIVEN a tenant with a 64-character id and a user with a 254-character email (the longest
    // keys the scheme has: the email uniqueness item's)
    let h = Harness::new().await;
    let t = format!("{}{}", unique("long"), "x".repeat(64 - 15));
    assert_eq!(t.len(), 64);
    onboard(&h, &t, 1).await;
    let email = format!("{}@example.com", "a".repeat(254 - 12));
    assert_eq!(email.len(), 254);
    let r = h
        .tenant(&t)
        .put_user("u-1", json!({"name": "Long", "email": email}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    // WHEN it is exported one item per page, THEN every cursor is accepted and every item comes once
    let exported = export_lines(&h, &t, "1").await;
    let mut raw = h.items_under(&raw_key(&t, "")).await;
    raw.retain(|i| !moved_by_the_export(i));
    let mut lines = devtools::import::parse_export(&exported.lines.join("\n")).unwrap();
    lines.retain(|i| !moved_by_the_export(i));
    assert_eq!(lines.len(), raw.len());
    assert!(exported.pages >= raw.len());
    // AND the email item's position made a cursor longer than any list's (1 KB), which was accepted
    assert!(
        exported.longest_cursor > shared::identity::cursor::MAX_CURSOR_BYTES,
        "{} bytes",
        exported.longest_cursor
    );
}

#[tokio::test]
async fn an_export_cursor_is_bound_to_its_tenant_and_refused_when_edited() {
    // GIVEN two tenants and a cursor from the first one's export
    let (h, [a, b]) = Harness::with_tenants([("expa", 1), ("expb", 1)]).await;
    seed_every_kind(&h, &a, 3).await;
    let operator = Auth::Operator(unique("ops"));
    let first = export_page(&h, &operator, &a, &[("limit", "2")]).await;
    let cursor = first.next_cursor().expect("a next page");
    // WHEN it is used for the other tenant, or edited, or the limit is out of range
    for (tenant, cursor, limit) in [
        (b.as_str(), cursor.clone(), "2"),
        (a.as_str(), format!("{cursor}x"), "2"),
        (a.as_str(), cursor.clone(), "0"),
        (a.as_str(), cursor.clone(), "1001"),
    ] {
        let r = export_page(
            &h,
            &operator,
            tenant,
            &[("limit", limit), ("cursor", &cursor)],
        )
        .await;
        // THEN 400 problem+json
        r.assert_problem(400);
    }
    // AND a tenant that does not exist is 404
    export_page(&h, &operator, &unique("none"), &[])
        .await
        .assert_problem(404);
}

#[tokio::test]
async fn a_reused_tenant_id_is_offboarded_to_the_end_every_time_with_less_data_each_time() {
    // GIVEN a tenant id that is onboarded, filled and offboarded, three times, with less each time
    // (the report of an earlier, longer offboarding must not block a shorter one's)
    let h = Harness::new().await;
    let operator = Auth::Operator(integration::onboarded(&h, "ops").await);
    let reused = unique("reused");
    let prefix = raw_key(&reused, "");
    let mut reports = Vec::new();
    for products in [250, 30, 1] {
        onboard(&h, &reused, 4).await;
        seed_every_kind(&h, &reused, products).await;
        let before = h.items_under(&prefix).await.len();
        // WHEN it is offboarded
        let report = integration::offboard_to_end(&h, &reused, &operator).await;
        // THEN it finishes, counting exactly this tenant's items, and leaves zero items
        assert_eq!(report.body["status"], "offboarded", "{}", report.body);
        assert_eq!(report.body["deletedTotal"], before, "{}", report.body);
        assert_eq!(h.items_under(&prefix).await, Vec::<Item>::new());
        // AND a later call answers this offboarding's report, not an earlier one's
        let again = offboard(&h, &reused, &operator).await;
        assert_eq!(again.body, report.body);
        reports.push(report.body);
        h.clock.advance_seconds(1);
    }
    assert!(reports[0]["deletedTotal"].as_u64() > reports[2]["deletedTotal"].as_u64());
}

#[tokio::test]
async fn a_report_outlives_its_requesters_tenant_and_only_operators_read_it() {
    // GIVEN an operator of tenant A who offboards tenant X
    let (h, a) = Harness::with_tenant("opsa", 1).await;
    let b = integration::onboarded(&h, "opsb").await;
    let x = integration::onboarded(&h, "x").await;
    seed_every_kind(&h, &x, 3).await;
    let report = integration::offboard_to_end(&h, &x, &Auth::Operator(a.clone())).await;
    // WHEN A's own tenant is offboarded afterwards, by an operator of B
    integration::offboard_to_end(&h, &a, &Auth::Operator(b.clone())).await;
    // THEN X's report is still there for operators (of B, or of a tenant never onboarded)
    for operator in [b.clone(), unique("ops")] {
        let r = offboard(&h, &x, &Auth::Operator(operator)).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body, report.body);
    }
    // AND it is kept under no tenant: neither A's (gone) nor X's
    assert_eq!(h.items_under(&raw_key(&a, "")).await, Vec::<Item>::new());
    assert_eq!(h.items_under(&raw_key(&x, "")).await, Vec::<Item>::new());
    // AND a user of a new tenant X cannot read it: the route is the operators', and nothing of
    // it is under X's prefix, which is all X's credentials reach
    onboard(&h, &x, 1).await;
    let r = offboard(&h, &x, &Auth::Tenant(x.clone())).await;
    r.assert_problem(403);
    assert_eq!(
        h.items_under(&raw_key(&x, "")).await.len(),
        1,
        "the record only"
    );
}

#[tokio::test]
async fn operators_of_an_offboarded_or_suspended_tenant_are_refused_every_operator_route() {
    // GIVEN tenant G, offboarded, tenant S, suspended, and a tenant T they would act on
    let h = Harness::new().await;
    let ops = Auth::Operator(integration::onboarded(&h, "ops").await);
    let (g, s) = (unique("gone"), unique("susp"));
    onboard(&h, &g, 1).await;
    onboard(&h, &s, 1).await;
    let t = integration::onboarded(&h, "target").await;
    integration::offboard_to_end(&h, &g, &ops).await;
    let r = h
        .caller(&ops)
        .update_tenant(&s, json!({"status": "suspended"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let before = sorted(h.all_items().await);
    // WHEN their operators (with still-valid tokens) call every operator route, on T and on their
    // own tenant, served as the runtime serves them
    let table = devtools::routes::RouteTable::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
    )
    .unwrap();
    let operator_bins: Vec<String> = table
        .routes()
        // every route an operator may call that names a tenant (or none: onboarding)
        .filter(|r| {
            r.function.caller != devtools::routes::Caller::Tenant
                && r.params().iter().all(|p| *p == "tenantId")
        })
        .map(|r| r.function.bin.clone())
        .collect();
    assert!(operator_bins.len() >= 6, "{operator_bins:?}");
    for own in [&g, &s] {
        for bin in &operator_bins {
            for target in [&t, own] {
                let body = match bin.as_str() {
                    "onboard-tenant" => Some(json!({"tenantId": target, "tier": "premium"})),
                    "update-tenant" => Some(json!({"status": "active"})),
                    _ => None,
                };
                let r = h
                    .caller(&Auth::Operator(own.to_string()))
                    .admitted()
                    .call(bin, &[("tenantId", target)], body)
                    .await;
                // THEN each is 403
                assert_eq!(
                    r.status, 403,
                    "{bin} on {target} by an operator of {own}: {}",
                    r.body
                );
            }
        }
    }
    // AND nothing was written
    assert_eq!(sorted(h.all_items().await), before);
    // AND an operator of a tenant never onboarded still may onboard it (how a platform starts)
    let fresh = unique("fresh");
    let r = h
        .caller(&Auth::Operator(fresh.clone()))
        .admitted()
        .onboard_tenant(json!({"tenantId": fresh, "tier": "basic"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test]
async fn a_re_onboarded_tenants_usage_starts_at_zero_in_a_container_that_served_the_old_one() {
    // GIVEN container A serving tenant T, with counts it has not written yet (its clock stands
    // still, so they wait for the next flush)
    let a = Harness::new().await;
    let ops = a.another_container().await;
    let operator = Auth::Operator(unique("ops"));
    let t = onboarded_on_shards(&ops, "reborn", 1).await;
    for _ in 0..5 {
        assert_eq!(get_product_admitted(&a.app, &t).await.status, 404);
    }
    // WHEN another container offboards T and onboards a new tenant of the same id
    integration::offboard_to_end(&ops, &t, &operator).await;
    onboard(&ops, &t, 1).await;
    // AND A, its cached record expired, serves the new T once
    a.clock.advance_seconds(DELETION_DELAY_SECONDS);
    assert_eq!(get_product_admitted(&a.app, &t).await.status, 404);
    a.app.flush_usage().await.unwrap();
    // THEN the new T's usage holds that one call, and nothing of the old T's (read from the
    // operators' container once its cached absence of T has expired)
    ops.clock.advance_seconds(1);
    let today = shared::store::quota::usage::utc_date(a.app.clock.now_millis());
    let r = ops
        .tenant(&t)
        .query(&[("from", &today), ("to", &today)])
        .get_usage()
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["days"][0]["routes"]["get-product"], 1, "{}", r.body);
}

/// Runs the lifecycle driver from `driver`'s container until nothing is listed; how many runs.
async fn drive_to_the_end(driver: &Harness) -> usize {
    for run in 1..=60 {
        let driven = tenants::drive_lifecycle::drive(&driver.app, &tenants::Lanes::in_process())
            .await
            .unwrap();
        if driven.pending == 0 {
            return run;
        }
    }
    panic!("the lifecycle driver does not finish");
}

#[tokio::test]
async fn an_offboarding_finishes_with_no_client_after_its_first_call_even_when_its_driver_is_killed(
) {
    // GIVEN a tenant with 300 products and an item of every other kind, whose offboarding an
    // operator starts with one call and never calls again
    let h = Harness::new().await;
    let operator = Auth::Operator(integration::onboarded(&h, "ops").await);
    let t = onboarded_on_shards(&h, "driven", 4).await;
    seed_every_kind(&h, &t, 300).await;
    let prefix = raw_key(&t, "");
    let before = h.items_under(&prefix).await.len();
    assert_eq!(offboard(&h, &t, &operator).await.status, 202);
    // WHEN the driver runs in another container: first before deletion may start (it waits)
    let driver = h.another_container().await;
    let early = tenants::drive_lifecycle::drive(&driver.app, &tenants::Lanes::in_process())
        .await
        .unwrap();
    assert_eq!((early.finished, early.pending), (0, 1), "{early:?}");
    assert_eq!(h.items_under(&prefix).await.len(), before);
    // AND then, once it may, is killed part-way three times, and is left to run
    driver.clock.advance_seconds(DELETION_DELAY_SECONDS);
    integration::drive_killed_after(&driver.app, &[20, 60, 150]).await;
    drive_to_the_end(&driver).await;
    // THEN the tenant is gone, with zero items left, and the report counts every item once
    assert_eq!(h.items_under(&prefix).await, Vec::<Item>::new());
    let report = offboard(&h, &t, &operator).await;
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!(report.body["deletedTotal"], before, "{}", report.body);
    // AND the driver's list is empty again
    let listed = h
        .items_under(&shared::identity::keys::lifecycle_drive_pk())
        .await;
    assert!(
        !listed
            .iter()
            .any(|i| i["drivenTenantId"].as_s().unwrap() == &t),
        "{listed:?}"
    );
}

#[tokio::test]
async fn the_drivers_unlist_never_removes_a_listing_newer_than_the_one_it_read() {
    // GIVEN a tenant listed for the driver, and the driver's read of the list
    let h = Harness::new().await;
    let platform = h.app.db_for_operator(&TenantId::platform()).await.unwrap();
    let t = TenantId::parse(&unique("relisted")).unwrap();
    let first_listing = h.app.clock.now_millis();
    shared::store::lifecycle::driving::list(&platform, &t, first_listing)
        .await
        .unwrap();
    let read = shared::store::lifecycle::driving::listed(&platform)
        .await
        .unwrap();
    let read_at = read.iter().find(|l| l.tenant == t).unwrap().listed_at_ms;
    assert_eq!(read_at, first_listing);
    // WHEN, between that read and the driver's delete (the injected delay), the tenant id is
    // onboarded again and listed anew by its re-sharding or offboarding
    h.clock.advance_seconds(5);
    shared::store::lifecycle::driving::list(&platform, &t, h.app.clock.now_millis())
        .await
        .unwrap();
    let unlisted = shared::store::lifecycle::driving::unlist(&platform, &t, read_at)
        .await
        .unwrap();
    // THEN the delete is refused and the newer listing stays for the driver's next run
    assert!(!unlisted);
    let entries = shared::store::lifecycle::driving::listed(&platform)
        .await
        .unwrap();
    assert!(
        entries
            .iter()
            .any(|l| l.tenant == t && l.listed_at_ms > read_at),
        "{entries:?}"
    );
    // AND the listing it did read is removed as before
    let now_at = entries.iter().find(|l| l.tenant == t).unwrap().listed_at_ms;
    assert!(
        shared::store::lifecycle::driving::unlist(&platform, &t, now_at)
            .await
            .unwrap()
    );
    assert!(!shared::store::lifecycle::driving::listed(&platform)
        .await
        .unwrap()
        .iter()
        .any(|l| l.tenant == t));
}

/// One TransactWriteItems as sent: when, its body's bytes, and the write units it asks of each
/// partition (a Delete of an item of `deleted_item_kb`, a Put of the item it carries; two units a
/// started kilobyte, as transactions cost).
#[derive(Debug, Clone)]
struct SentTransaction {
    at: std::time::Instant,
    bytes: usize,
    units_by_partition: HashMap<String, u64>,
}

#[derive(Debug)]
struct TransactionRecorder {
    deleted_item_kb: u64,
    sent: std::sync::Arc<std::sync::Mutex<Vec<SentTransaction>>>,
}

impl Intercept for TransactionRecorder {
    fn name(&self) -> &'static str {
        "TransactionRecorder"
    }

    fn read_before_transmit(&self, ctx: RequestRef, _: &Parts, _: &mut Bag) -> HookResult {
        let Some(body) = ctx.request().body().bytes() else {
            return Ok(());
        };
        let Ok(json) = serde_json::from_slice::<Value>(body) else {
            return Ok(());
        };
        let Some(actions) = json["TransactItems"].as_array() else {
            return Ok(());
        };
        let mut units_by_partition: HashMap<String, u64> = HashMap::new();
        for action in actions {
            let (pk, units) = if let Some(put) = action.get("Put") {
                let kb = (put["Item"].to_string().len() as u64).div_ceil(1024);
                (put["Item"]["PK"]["S"].as_str(), 2 * kb.max(1))
            } else if let Some(delete) = action.get("Delete") {
                let pk = delete["Key"]["PK"]["S"].as_str();
                let kb = match pk.is_some_and(|pk| pk.contains("#PRODUCT#")) {
                    true => self.deleted_item_kb,
                    false => 1,
                };
                (pk, 2 * kb)
            } else {
                let other = action.as_object().and_then(|o| o.values().next()).unwrap();
                (other["Key"]["PK"]["S"].as_str(), 2)
            };
            *units_by_partition
                .entry(pk.unwrap_or("?").to_owned())
                .or_default() += units;
        }
        self.sent.lock().unwrap().push(SentTransaction {
            at: std::time::Instant::now(),
            bytes: body.len(),
            units_by_partition,
        });
        Ok(())
    }
}

/// Asserts every recorded transaction fits DynamoDB's limits (4 MB; 1,000 write units on one
/// partition), and that the writes on each partition were spread at its rate: between any two
/// transactions on it, what was sent from the first up to the second is at most a second's units
/// plus 1,000 units a second of the time between them.
fn assert_within_partition_limits(sent: &[SentTransaction], what: &str) {
    assert!(!sent.is_empty(), "{what}: no transaction was sent");
    for t in sent {
        assert!(t.bytes <= 4 * 1024 * 1024, "{what}: {} bytes", t.bytes);
        for (pk, units) in &t.units_by_partition {
            assert!(
                *units <= 1_000,
                "{what}: {units} units on {pk} in one request"
            );
        }
    }
    let partitions: std::collections::BTreeSet<&String> = sent
        .iter()
        .flat_map(|t| t.units_by_partition.keys())
        .collect();
    for pk in partitions {
        let on: Vec<(std::time::Instant, u64)> = sent
            .iter()
            .filter_map(|t| t.units_by_partition.get(pk).map(|u| (t.at, *u)))
            .collect();
        for i in 0..on.len() {
            let mut units = 0;
            for j in i + 1..on.len() {
                units += on[j - 1].1;
                let seconds = on[j].0.duration_since(on[i].0).as_secs_f64();
                assert!(
                    units as f64 <= 1_000.0 * (seconds + 1.0),
                    "{what}: {units} units on {pk} within {seconds:.2} s"
                );
            }
        }
    }
}

#[tokio::test]
async fn offboarding_and_re_sharding_steps_of_large_items_fit_a_transaction_and_a_partitions_rate()
{
    // GIVEN two tenants of 150 products of about 60 KB each, all on one shard, and a container
    // whose every transaction is recorded
    let h = Harness::new().await;
    let operator = integration::operator();
    let blob = "x".repeat(60 * 1024);
    let (gone, moved) = (unique("large-gone"), unique("large-moved"));
    for t in [&gone, &moved] {
        onboard(&h, t, 1).await;
        h.tenant(t)
            .put_new_products(
                (0..150).map(|i| (format!("p-{i:03}"), json!({"name": "large", "blob": blob}))),
            )
            .await;
    }
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut worker = h.another_container().await;
    worker.app =
        worker
            .app
            .with_dynamodb_interceptor(aws_sdk_dynamodb::config::SharedInterceptor::new(
                TransactionRecorder {
                    deleted_item_kb: 61,
                    sent: sent.clone(),
                },
            ));
    // WHEN the worker offboards the first to its end
    let report = integration::offboard_to_end(&worker, &gone, &operator).await;
    assert_eq!(report.status, 200, "{}", report.body);
    assert!(
        report.body["deletedTotal"].as_u64().unwrap() >= 150,
        "{}",
        report.body
    );
    let offboarding: Vec<SentTransaction> = std::mem::take(&mut *sent.lock().unwrap());
    // AND re-shards the second from 1 to 2 shards to its end
    let reshard = || worker.caller(&operator).reshard(&moved, 2);
    let delay = shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS + 1;
    integration::step_to_end(&worker, "the re-sharding", delay, 30, reshard).await;
    let resharding: Vec<SentTransaction> = std::mem::take(&mut *sent.lock().unwrap());
    // THEN every request of either fits a transaction's 4 MB and a partition's 1,000 units, and the
    // writes on each partition were spread at a partition's rate
    assert_within_partition_limits(&offboarding, "offboarding");
    assert_within_partition_limits(&resharding, "re-sharding");
    // AND every product of the re-sharded tenant is still there, once
    let pages = worker
        .tenant(&moved)
        .pages(&[("limit", "100")], |c| c.query_tenant_products())
        .await;
    let seen: usize = pages.iter().map(|r| r.ids("productId").len()).sum();
    assert_eq!(seen, 150);
}

/// Issue 58, item 3: no tenant's operation waits for another's to end. A run that can serve only
/// some of the listed tenants (two here, counted rather than timed) starts the next where it left
/// off, the least recently driven first: each listed tenant is served within ceil(6 / 2) runs.
#[tokio::test]
async fn the_driver_serves_the_least_recently_driven_first_so_no_listed_tenant_waits() {
    // GIVEN six tenants whose offboardings wait out their deletion delay (every run finds them
    // still running)
    let h = Harness::new().await;
    let operator = Auth::Operator(integration::onboarded(&h, "ops").await);
    let mut tenants = std::collections::BTreeSet::new();
    for i in 0..6 {
        let t = unique(&format!("fair{i}"));
        onboard(&h, &t, 1).await;
        assert_eq!(offboard(&h, &t, &operator).await.status, 202);
        tenants.insert(t);
    }
    let platform = h.app.db_for_operator(&TenantId::platform()).await.unwrap();
    let driven_at = || async {
        shared::store::lifecycle::driving::listed(&platform)
            .await
            .unwrap()
            .into_iter()
            .map(|l| (l.tenant.to_string(), l.driven_at_ms))
            .collect::<BTreeMap<String, u64>>()
    };
    // WHEN the driver runs four times, a second apart, each serving two of them
    let mut served = Vec::new();
    for _ in 0..4 {
        h.clock.advance_seconds(1);
        let before = driven_at().await;
        let run = Box::pin(tenants::drive_lifecycle::drive_at_most(
            &h.app,
            &tenants::Lanes::in_process(),
            2,
        ))
        .await
        .unwrap();
        assert_eq!((run.listed, run.pending), (6, 6), "{run:?}");
        let after = driven_at().await;
        let now: std::collections::BTreeSet<String> = after
            .iter()
            .filter(|(t, at)| before.get(*t) != Some(*at))
            .map(|(t, _)| t.clone())
            .collect();
        served.push(now);
    }
    // THEN each run served two, the first three runs each tenant exactly once, and the fourth the
    // first run's two again (they were the least recently driven)
    assert!(served.iter().all(|s| s.len() == 2), "{served:?}");
    let first_three: std::collections::BTreeSet<String> =
        served[..3].iter().flatten().cloned().collect();
    assert_eq!(first_three, tenants, "{served:?}");
    assert_eq!(served[3], served[0], "{served:?}");
}

/// The transaction that writes an offboarding's report.
fn is_report_write(body: &str) -> bool {
    body.contains("TransactItems") && body.contains("OFFBOARDING_REPORT")
}

/// Two calls finishing one offboarding at once, at the same step: the one that answers first is
/// the report kept; the other, whose report write comes after, answers it too and never replaces
/// it (before the mend it wrote its own, dated later, so the report read afterwards was not the
/// 200 the first caller got).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_calls_finishing_one_offboarding_at_once_answer_and_keep_the_first_report() {
    // GIVEN a tenant whose offboarding has begun and may delete, and a second container a second
    // later than the first
    let h = Harness::new().await;
    let operator = Auth::Operator(integration::onboarded(&h, "ops").await);
    let t = unique("twofinish");
    onboard(&h, &t, 1).await;
    assert_eq!(offboard(&h, &t, &operator).await.status, 202);
    h.clock.advance_seconds(DELETION_DELAY_SECONDS + 1);
    let second = std::sync::Arc::new(h.another_container().await);
    second.clock.set_millis(h.clock.now_millis() + 1000);

    // WHEN the second walks it to its end, and its report write is held (aside: the hold blocks
    // the thread that sends it)
    let mut held = second.faults.hold_next_matching(is_report_write);
    let finishing = integration::aside({
        let (second, t, operator) = (second.clone(), t.clone(), operator.clone());
        move || async move {
            loop {
                let r = offboard(&second, &t, &operator).await;
                if r.status != 202 {
                    return r;
                }
            }
        }
    });
    held.reached().await;
    // AND the first finishes it meanwhile
    let first = offboard(&h, &t, &operator).await;
    assert_eq!(first.status, 200, "{}", first.body);
    // AND the held write goes on
    held.release();
    let late = finishing.ended().await;

    // THEN both answered the first's report, and it is the report kept
    assert_eq!((late.status, &late.body), (200, &first.body));
    let kept = offboard(&h, &t, &operator).await;
    assert_eq!((kept.status, &kept.body), (200, &first.body));
}

/// An export page is measured as Lambda's response carries it: a JSON string, where the NDJSON's
/// escaped quotes are escaped again. A page of quoted text measured raw passed Lambda's 6 MB, and
/// its every retry failed alike.
#[tokio::test]
async fn an_export_page_of_quoted_text_stays_within_its_bytes_as_lambda_carries_it() {
    use futures::StreamExt;
    use shared::service::http::{bytes_in_event, MAX_PAGE_BYTES};
    // GIVEN a tenant whose 90 products each hold 30,000 double quotes
    let (h, t) = Harness::with_tenant("expq", 1).await;
    let quotes = "\"".repeat(30_000);
    futures::stream::iter((0..90).map(|i| {
        let (h, t, quotes) = (&h, &t, &quotes);
        async move {
            let r = h
                .tenant(t)
                .put_product(&format!("q-{i:02}"), json!({ "text": quotes }))
                .await;
            assert_eq!(r.status, 201, "{}", r.body);
        }
    }))
    .buffer_unordered(8)
    .collect::<Vec<()>>()
    .await;
    // WHEN it is exported, 1,000 items a page
    let operator = Auth::Operator(unique("ops"));
    let pages = integration::export_pages(&h, &operator, &t, "1000").await;
    // THEN every page is within its bytes as Lambda carries it (before the mend: the first was
    // about twice that), and every product comes once
    for page in &pages {
        let size = bytes_in_event(page.text.as_bytes());
        assert!(size <= MAX_PAGE_BYTES, "{size} bytes in Lambda's response");
    }
    let lines: Vec<&str> = pages.iter().flat_map(|p| p.text.lines()).collect();
    let products = lines.iter().filter(|l| l.contains("\"PRODUCT\"")).count();
    assert_eq!(products, 90, "{} pages", pages.len());
    assert!(pages.len() >= 2);
}
