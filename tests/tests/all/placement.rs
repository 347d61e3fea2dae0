//! Tenants in their own tables (`shared::store::tenancy::placement`, issue #42 items 1–3): a tenant
//! onboarded with `placement: own` gets `<pool>-tenant-<id>`, made with the pool's definition; every
//! route serves it from there with the same contract; of the pool it has only its record; its
//! credentials name its table and its record, the guard refuses the rest; exporting reads it, and
//! offboarding leaves no table and no item. The neighbours' items stay byte for byte.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::api::NO_PATH;
use integration::import_queue::{drain, Consumer, ImportQueues};
use integration::{offboard_to_end, onboarded_on_shards, sorted_text, unique, Auth, Harness};
use serde_json::json;
use shared::identity::clock::Clock;
use shared::identity::ids::TenantId;
use shared::identity::keys::{is_metering_pk, raw_key, tenant_record_key, PK, SK};
use shared::identity::shard::shard_for;
use shared::isolation::guard::is_guard_violation;
use shared::isolation::policy::{session_policy, session_policy_for, TableLocation, TenantTables};
use shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS;

type Item = HashMap<String, AttributeValue>;

async fn table_exists(h: &Harness, table: &str) -> bool {
    match h.admin.describe_table().table_name(table).send().await {
        Ok(_) => true,
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_not_found_exception()) =>
        {
            false
        }
        Err(e) => panic!("DescribeTable {table}: {e:?}"),
    }
}

#[tokio::test]
async fn a_tenant_in_its_own_table_is_served_from_it_exported_and_offboarded_with_its_table() {
    // GIVEN a pooled neighbour with products, and a tenant onboarded in its own table
    let (h, neighbour) = Harness::with_neighbour("pooled", 5).await;
    let own = unique("own");
    let own_table = integration::onboard_own(&h, &own, 4).await;
    let neighbours_before = sorted_text(h.items_under(&raw_key(&neighbour, "")).await);

    // WHEN it writes 30 products and a session, lists and reads them, and its usage is written
    h.tenant(&own)
        .put_new_products((0..30).map(|i| (format!("p{i:02}"), json!({"v": i}))))
        .await;
    let session = h
        .tenant(&own)
        .call(
            "create-session",
            &NO_PATH,
            Some(json!({"customerId": "c1", "state": "{}"})),
        )
        .await;
    assert_eq!(session.status, 201, "{}", session.body);
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("limit", "7")];
        if let Some(c) = cursor.as_deref() {
            query.push(("cursor", c));
        }
        let r = h
            .tenant(&own)
            .query(&query)
            .call("query-tenant-products", &NO_PATH, None)
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        listed.extend(
            r.body["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["productId"].clone()),
        );
        match r.body["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    h.app.flush_usage().await.unwrap();

    // THEN every product is listed once, and its items are in its own table, under its prefix
    assert_eq!(listed.len(), 30);
    let in_own = h.admin_scan(&own_table).await;
    let prefix = raw_key(&own, "");
    assert!(in_own
        .iter()
        .all(|i| i[PK].as_s().unwrap().starts_with(&prefix)));
    let products = in_own
        .iter()
        .filter(|i| {
            i.get("kind")
                .and_then(|k| k.as_s().ok())
                .map(String::as_str)
                == Some("PRODUCT")
        })
        .count();
    assert_eq!(products, 30, "own table: {in_own:?}");
    // AND of the pool it has only its record
    let in_pool = h.items_under(&prefix).await;
    let record = tenant_record_key(&TenantId::parse(&own).unwrap());
    assert_eq!(in_pool.len(), 1, "{in_pool:?}");
    assert_eq!(in_pool[0][PK].as_s().unwrap(), &record);
    // AND the neighbour's items are as they were
    assert_eq!(
        sorted_text(h.items_under(&raw_key(&neighbour, "")).await),
        neighbours_before
    );

    // AND its session policy names its own table and, of the pool, its record; the neighbour's the pool
    let location =
        TableLocation::from_role_arn(integration::ROLE_ARN, "us-east-1", &h.table).unwrap();
    let own_id = TenantId::parse(&own).unwrap();
    let expected =
        session_policy_for(&own_id, &location, &TenantTables::own(&own_table, &h.table)).unwrap();
    let policies = h.recorded_policies(&own).await;
    assert!(!policies.is_empty());
    assert!(policies.iter().all(|p| *p == expected), "{policies:?}");
    let pooled = session_policy(&TenantId::parse(&neighbour).unwrap(), &location).unwrap();
    assert!(h
        .recorded_policies(&neighbour)
        .await
        .iter()
        .all(|p| *p == pooled));

    // WHEN an operator exports it
    let operator = Auth::Operator(unique("ops"));
    let export = integration::export_page(&h, &operator, &own, &[("limit", "100")]).await;
    // THEN the export holds its products and its record
    assert_eq!(export.status, 200, "{}", export.body);
    let lines: Vec<&str> = export.text.lines().collect();
    assert_eq!(
        lines.iter().filter(|l| l.contains("\"PRODUCT\"")).count(),
        30
    );
    assert!(
        lines.iter().any(|l| l.contains(&record)),
        "no record in the export"
    );

    // WHEN it is offboarded
    let report = offboard_to_end(&h, &own, &operator).await;
    // THEN its table is gone, and no item of it is left in the pool
    assert_eq!(report.status, 200);
    assert!(
        !table_exists(&h, &own_table).await,
        "{own_table} is still there"
    );
    assert!(h.items_under(&prefix).await.is_empty());
    // AND the neighbour's items are still as they were
    assert_eq!(
        sorted_text(h.items_under(&raw_key(&neighbour, "")).await),
        neighbours_before
    );
}

#[tokio::test]
async fn the_guard_keeps_an_own_table_tenant_to_its_table_and_record_and_a_pooled_one_out_of_own_tables(
) {
    // GIVEN a tenant in its own table and a pooled one
    let h = Harness::new().await;
    let own = unique("own");
    let own_table = integration::onboard_own(&h, &own, 4).await;
    let pooled = onboarded_on_shards(&h, "pooled", 1).await;
    let own_db = h.app.db(&TenantId::parse(&own).unwrap()).await.unwrap();
    let pooled_db = h.app.db(&TenantId::parse(&pooled).unwrap()).await.unwrap();
    let get = |db: &shared::store::client::scoped::TenantDb, table: &str, pk: String| {
        db.sdk_client()
            .get_item()
            .table_name(table)
            .key(PK, AttributeValue::S(pk.clone()))
            .key(SK, AttributeValue::S(pk))
    };
    let refused = |e: &(dyn std::error::Error + 'static)| is_guard_violation(e);

    // WHEN the own-table tenant reads its record in the pool THEN it may
    let record = tenant_record_key(&TenantId::parse(&own).unwrap());
    let read = get(&own_db, &h.table, record).send().await.unwrap();
    assert!(read.item.is_some());
    // WHEN it reads one of its own keys in the pool, or queries the pool THEN the guard refuses
    let e = get(&own_db, &h.table, raw_key(&own, "PRODUCT#0"))
        .send()
        .await
        .unwrap_err();
    assert!(refused(&e), "{e:?}");
    let e = own_db
        .sdk_client()
        .query()
        .table_name(&h.table)
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(raw_key(&own, "PRODUCT#0")))
        .send()
        .await
        .unwrap_err();
    assert!(refused(&e), "{e:?}");
    // WHEN the pooled tenant names the own table, even at its own keys THEN the guard refuses
    let e = get(&pooled_db, &own_table, raw_key(&pooled, "PRODUCT#0"))
        .send()
        .await
        .unwrap_err();
    assert!(refused(&e), "{e:?}");
    // WHEN either names a third table THEN the guard refuses
    let e = get(&own_db, "another-table", raw_key(&own, "PRODUCT#0"))
        .send()
        .await
        .unwrap_err();
    assert!(refused(&e), "{e:?}");
}

#[tokio::test]
async fn an_own_placement_for_an_existing_tenant_is_409_and_makes_no_table() {
    // GIVEN a pooled tenant
    let (h, tenant) = Harness::with_tenant("pooled", 1).await;
    // WHEN it is onboarded again in its own table
    let r = h
        .operator()
        .onboard_tenant(json!({"tenantId": tenant, "tier": "standard", "placement": "own"}))
        .await;
    // THEN 409, and no table was made
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(!table_exists(&h, &format!("{}-tenant-{tenant}", h.table)).await);
    // AND an unknown placement is a 400 naming the field
    let r = h
        .operator()
        .onboard_tenant(json!({"tenantId": unique("x"), "tier": "standard", "placement": "silo"}))
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.to_string().contains("placement"), "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_own_table_tenant_is_imported_into_resharded_metered_and_held_to_its_quota_in_its_table()
{
    // GIVEN a tenant in its own table on 4 shards with 60 products, and a pooled neighbour
    let (h, neighbour) = Harness::with_tenant("pooled", 1).await;
    let r = h
        .tenant(&neighbour)
        .put_product("n0", json!({"v": 0}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let own = unique("own");
    let own_table = integration::onboard_own(&h, &own, 4).await;
    h.tenant(&own)
        .put_new_products((0..60).map(|i| (format!("p{i:02}"), json!({"v": i}))))
        .await;
    let neighbours_before = sorted_text(h.items_under(&raw_key(&neighbour, "")).await);

    // WHEN 20 products are imported through the queue and its consumer (a Lambda process)
    let queues = ImportQueues::create(3, 1).await;
    let consumer = Consumer::start(&h.table, &queues).await;
    let posted =
        crate::imports::post_import(&h, &queues, &own, crate::imports::products("i", 20), &[])
            .await;
    assert_eq!(posted.status, 202, "{}", posted.body);
    drain(&queues, &[&consumer], 10).await;
    let id = posted.body["importId"].as_str().unwrap();
    let progress = h.tenant(&own).get_import(id).await;
    // THEN they are written, once
    assert_eq!(progress.body["written"], 20, "{}", progress.body);
    assert_eq!(progress.body["status"], "complete", "{}", progress.body);

    // WHEN it is re-sharded 4 → 8 and the driver, in another container, runs it to its end
    let started = h.operator().reshard(&own, 8).await;
    assert_eq!(started.status, 202, "{}", started.body);
    let driver = h.another_container().await;
    driver.clock.advance_seconds(MOVES_DELAY_SECONDS);
    integration::drive_to_end(&driver.app).await;
    h.clock.advance_seconds(MOVES_DELAY_SECONDS);
    // AND it is served through the runtime (admitted: quota window and usage written)
    for _ in 0..3 {
        let r = h
            .tenant(&own)
            .admitted()
            .query(&[("limit", "5")])
            .call("query-tenant-products", &NO_PATH, None)
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    h.app.flush_usage().await.unwrap();

    // THEN every product is on its 8-shard key in its own table, once
    let t = TenantId::parse(&own).unwrap();
    let in_own = h.admin_scan(&own_table).await;
    let products: Vec<&Item> = in_own
        .iter()
        .filter(|i| {
            i[PK]
                .as_s()
                .unwrap()
                .starts_with(&raw_key(&own, "PRODUCT#"))
        })
        .collect();
    assert_eq!(products.len(), 80);
    for item in &products {
        let id = item["productId"].as_s().unwrap();
        assert_eq!(
            item[PK].as_s().unwrap(),
            &raw_key(&own, format!("PRODUCT#{}", shard_for(id, 8))),
            "{id}"
        );
    }
    // AND its usage counters and quota windows are in its own table
    let metering: Vec<&str> = in_own
        .iter()
        .map(|i| i[PK].as_s().unwrap().as_str())
        .filter(|pk| is_metering_pk(&t, pk))
        .collect();
    assert!(
        metering.iter().any(|pk| pk.contains("#USAGE#")),
        "{metering:?}"
    );
    assert!(
        metering.iter().any(|pk| pk.contains("#RATE#")),
        "{metering:?}"
    );
    let today = shared::identity::clock::rfc3339(h.clock.now_millis())[..10].to_owned();
    let usage = h
        .tenant(&own)
        .query(&[("from", today.as_str()), ("to", today.as_str())])
        .call("get-usage", &NO_PATH, None)
        .await;
    assert_eq!(usage.status, 200, "{}", usage.body);
    assert!(
        usage.body.to_string().contains("query-tenant-products"),
        "{}",
        usage.body
    );
    // AND the record says 8 shards; of the pool it has only that record; the neighbour is as it was
    let record = h.operator().get_tenant(&own).await;
    assert_eq!(record.body["shardCount"], 8, "{}", record.body);
    assert_eq!(h.items_under(&raw_key(&own, "")).await.len(), 1);
    assert_eq!(
        sorted_text(h.items_under(&raw_key(&neighbour, "")).await),
        neighbours_before
    );
}

#[tokio::test]
async fn a_restore_of_an_own_table_tenant_from_a_copy_of_the_pool_is_refused_and_deletes_nothing() {
    // GIVEN a tenant in its own table with products, and a copy of the pool (which holds its record
    // but none of its items)
    let h = Harness::new().await;
    let own = unique("own");
    let own_table = integration::onboard_own(&h, &own, 4).await;
    h.tenant(&own)
        .put_new_products((0..5).map(|i| (format!("p{i}"), json!({"v": i}))))
        .await;
    let source = h.snapshot("t0").await;
    let before = sorted_text(h.admin_scan(&own_table).await);
    // WHEN an operator restores it from that copy, as a dry run and for real
    for dry_run in [true, false] {
        let r = h
            .operator()
            .restore_tenant(&own, json!({"from": {"table": source}, "dryRun": dry_run}))
            .await;
        // THEN 409 naming its own table, and its items are all still there
        assert_eq!(r.status, 409, "{}", r.body);
        assert!(r.body.to_string().contains(&own_table), "{}", r.body);
    }
    assert_eq!(sorted_text(h.admin_scan(&own_table).await), before);
}

/// Every product id `tenant` lists, page by page, in `order` (`id` or `unordered`), 9 a page.
async fn listed_products(h: &Harness, tenant: &str, order: &str) -> Vec<String> {
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("limit", "9"), ("order", order)];
        if let Some(c) = cursor.as_deref() {
            query.push(("cursor", c));
        }
        let r = h
            .tenant(tenant)
            .query(&query)
            .call("query-tenant-products", &NO_PATH, None)
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        listed.extend(r.ids("productId"));
        match r.body["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return listed,
        }
    }
}

/// Issue 58, item 6: the planner places a tenant no 100 shards carry in its own table, with the
/// shard count it needs; the tenant must then work on them.
#[tokio::test]
async fn an_own_table_tenant_takes_more_shards_than_the_pool_allows_and_is_served_on_them() {
    // GIVEN an operator, a tenant id for the pool and one for its own table
    let h = Harness::new().await;
    let (pooled, own) = (unique("pooled"), unique("wide"));
    // WHEN the pool's tenant asks 101 shards, and the own table's 162 (the planner's count for
    // the million-Zipf head) or 257
    let onboard = |tenant: &str, shards: u32, placement: &str| {
        h.operator().onboard_tenant(json!({
            "tenantId": tenant, "tier": "premium", "shardCount": shards, "placement": placement
        }))
    };
    let too_many_pooled = onboard(&pooled, 101, "pool").await;
    let too_many_own = onboard(&own, 257, "own").await;
    let wide = onboard(&own, 162, "own").await;
    // THEN the pool refuses past 100 and an own table past 256, naming the field; 162 is taken
    too_many_pooled.assert_problem_naming(400, "shardCount");
    too_many_own.assert_problem_naming(400, "shardCount");
    assert_eq!(wide.status, 201, "{}", wide.body);
    assert_eq!(wide.body["shardCount"], 162);

    // WHEN it writes 500 products, and lists them by id and as a walk
    let ids: Vec<String> = (0..500).map(|i| format!("p{i:03}")).collect();
    h.tenant(&own)
        .put_new_products(ids.iter().map(|id| (id.clone(), json!({"v": id}))))
        .await;
    let by_id = listed_products(&h, &own, "id").await;
    let mut walked = listed_products(&h, &own, "unordered").await;
    walked.sort();
    // THEN every product is listed once either way, each on its own one of 162 shards
    assert_eq!(by_id, ids);
    assert_eq!(walked, ids);
    let shards: std::collections::BTreeSet<u32> = ids.iter().map(|id| shard_for(id, 162)).collect();
    assert!(shards.len() > 100, "{} shards used", shards.len());

    // WHEN an operator moves it back to the pool, or re-shards a pooled tenant past 100
    integration::onboard(&h, &pooled, 4).await;
    let back = h.operator().move_to(&own, "pool").await;
    let pooled_wider = h.operator().reshard(&pooled, 101).await;
    // THEN 409 (re-shard to 100 first) and 400 (move it into its own table first); nothing runs
    back.assert_problem_naming(409, "re-shard");
    pooled_wider.assert_problem_naming(400, "own table");
    let record = h.operator().get_tenant(&own).await;
    assert!(record.body.get("move").is_none(), "{}", record.body);
    assert_eq!(record.body["shardCount"], 162);

    // AND offboarding walks its 162 shards and counts every product once
    let report = offboard_to_end(&h, &own, &integration::operator()).await;
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!(report.body["deleted"]["PRODUCT"], 500, "{}", report.body);
    assert!(h.items_under(&raw_key(&own, "")).await.is_empty());
}

/// A BYOK own table's onboarding whose key KMS refuses is answered 400 before its table is made.
/// Before the mend KMS was first asked after the table was made: the 400 left an empty table
/// behind, tagged as the tenant's.
#[tokio::test]
async fn an_own_table_onboarding_with_a_key_kms_refuses_is_400_and_makes_no_table() {
    // GIVEN a deployment where tenants have keys, and a tenant's own KMS key, disabled
    let h = Harness::new().await.keyed().await;
    let t = unique("refusedkey");
    let own_key = h.test_keys().new_kms_key("a disabled key").await;
    h.test_keys().set_enabled(&own_key, false).await;
    let before = h.all_items().await;

    // WHEN the tenant is onboarded into its own table under that key
    let body = json!({"tenantId": t, "tier": "standard", "placement": "own", "kmsKeyArn": own_key});
    let answer = h.operator().onboard_tenant(body.clone()).await;

    // THEN 400 naming the field, and no table, no record and nothing else is written
    answer.assert_problem_naming(400, "KMS refused");
    assert_eq!(answer.body["field"], "kmsKeyArn", "{}", answer.body);
    assert!(!table_exists(&h, &format!("{}-tenant-{t}", h.table)).await);
    h.operator().get_tenant(&t).await.assert_problem(404);
    assert_eq!(h.all_items().await, before);

    // WHEN the key is enabled and the onboarding asked again
    h.test_keys().set_enabled(&own_key, true).await;
    let again = h.operator().onboard_tenant(body).await;

    // THEN it is onboarded in its own table
    assert_eq!(again.status, 201, "{}", again.body);
    assert!(table_exists(&h, &format!("{}-tenant-{t}", h.table)).await);
}

/// An own table's onboarding with a kmsKeyArn it cannot take is refused before its table is made.
#[tokio::test]
async fn an_own_table_onboarding_with_a_kms_key_arn_it_cannot_take_is_400_and_makes_no_table() {
    // GIVEN an operator where tenants have no keys of their own, and two tenant ids
    let h = Harness::new().await;
    let (bogus, unkeyed) = (unique("bogusarn"), unique("unkeyedarn"));
    let arn = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";
    // WHEN each is onboarded in its own table, one with a malformed ARN, one with a well-formed
    // one the deployment has no keys for
    let mut answers = Vec::new();
    for (tenant, kms_key_arn) in [(&bogus, "bogus"), (&unkeyed, arn)] {
        let body = json!({"tenantId": tenant, "tier": "standard", "placement": "own",
            "kmsKeyArn": kms_key_arn});
        answers.push(h.operator().onboard_tenant(body).await);
    }
    // THEN each is 400 naming the field, and neither has a table or a record
    for (tenant, answer) in [&bogus, &unkeyed].into_iter().zip(&answers) {
        answer.assert_problem(400);
        assert_eq!(answer.body["field"], "kmsKeyArn", "{}", answer.body);
        assert!(!table_exists(&h, &format!("{}-tenant-{tenant}", h.table)).await);
        h.operator().get_tenant(tenant).await.assert_problem(404);
    }
}
