//! Restoring one tenant (`POST /tenants/{tenantId}/restore`): its items become what they were in a
//! source table, in its current layout, and every other tenant's stay as they are now. The model is
//! written first (the source's items of the tenant, at their keys in the current layout); the raw
//! table is then checked against it byte for byte, neighbours included.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::routes::params;
use integration::{onboard_at_max_limits, unique, Harness, Resp};
use serde_json::{json, Value};
use shared::identity::clock::Clock;
use shared::identity::ids::TenantId;
use shared::identity::keys::raw_key;
use shared::store::lifecycle::restoring::plan::{key_in, restored};
use shared::store::lifecycle::restoring::STARTS_DELAY_SECONDS;

use super::imports::{deliver_deferring, deliver_in_process, post_import, products};
use super::offboarding::seed_every_kind;

type Item = std::collections::HashMap<String, AttributeValue>;
type Items = BTreeMap<(String, String), Item>;

pub(crate) fn keyed(items: impl IntoIterator<Item = Item>) -> Items {
    items
        .into_iter()
        .map(|i| {
            let k = (
                i["PK"].as_s().unwrap().clone(),
                i["SK"].as_s().unwrap().clone(),
            );
            (k, i)
        })
        .collect()
}

/// The tenant's items a restore makes equal to the source.
pub(crate) fn restored_of(tenant: &str, items: &Items) -> Items {
    let t = TenantId::parse(tenant).unwrap();
    items
        .iter()
        .filter(|(_, i)| restored(&t, i))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Every item of every tenant but `tenant` and the platform.
fn others(tenant: &str, items: &Items) -> Items {
    let own = shared::identity::keys::raw_key(tenant, "");
    let platform = shared::identity::keys::raw_key(TenantId::PLATFORM, "");
    items
        .iter()
        .filter(|((pk, _), _)| !pk.starts_with(&own) && !pk.starts_with(&platform))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn key_element(
    name: &str,
    kind: aws_sdk_dynamodb::types::KeyType,
) -> aws_sdk_dynamodb::types::KeySchemaElement {
    aws_sdk_dynamodb::types::KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .unwrap()
}

fn string_attribute(name: &str) -> aws_sdk_dynamodb::types::AttributeDefinition {
    aws_sdk_dynamodb::types::AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(aws_sdk_dynamodb::types::ScalarAttributeType::S)
        .build()
        .unwrap()
}

fn restore_body(table: &str, dry_run: bool) -> Value {
    json!({"from": {"table": table}, "dryRun": dry_run})
}

/// An operator's restore of `tenant` from `table` (a dry run, or not).
pub(crate) async fn restore_from(h: &Harness, tenant: &str, table: &str, dry_run: bool) -> Resp {
    let body = restore_body(table, dry_run);
    h.operator().restore_tenant(tenant, body).await
}

/// Re-shards `tenant` to `to` shards, calling until done.
async fn reshard(h: &Harness, tenant: &str, to: u32) {
    use shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS;
    let reshard = || h.operator().reshard(tenant, to);
    integration::step_to_end(h, "the re-sharding", MOVES_DELAY_SECONDS + 1, 200, reshard).await;
}

pub(crate) async fn put_products(
    h: &Harness,
    tenant: &str,
    ids: impl Iterator<Item = String>,
    v: u64,
) {
    use futures::StreamExt;
    futures::stream::iter(ids.map(|id| async move {
        let r = h
            .tenant(tenant)
            .put_product(&id, json!({"v": v, "name": id}))
            .await;
        assert!(r.status == 201 || r.status == 200, "{}", r.body);
    }))
    .buffer_unordered(16)
    .collect::<Vec<()>>()
    .await;
}

/// A new table with a tenant named after `prefix`, onboarded at the maximum limits on `shards`
/// shards, holding `products` products `sku-00`, `sku-01`, … (each `{"v": 1}`).
async fn tenant_of_products(prefix: &str, shards: u32, products: usize) -> (Harness, String) {
    let h = Harness::new().await;
    let t = unique(prefix);
    onboard_at_max_limits(&h, &t, shards).await;
    put_products(&h, &t, (0..products).map(|i| format!("sku-{i:02}")), 1).await;
    (h, t)
}

fn counts(body: &Value) -> Value {
    json!({
        "putBack": body["putBack"],
        "overwritten": body["overwritten"],
        "deleted": body["deleted"],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_from_a_snapshot_gives_back_the_tenants_items_in_its_current_layout_and_leaves_every_neighbour_as_it_is(
) {
    // GIVEN a tenant of ~3,000 items on 8 shards (products, HR, users with orders, sessions, codes,
    // tokens) and a neighbour, snapshotted at t0 into a source table (its dry run walks ~6,000
    // items of both tables: on a loaded 2-core machine that took longer than the deployed 25 s)
    let mut h = Harness::new().await;
    h.app.settings.dry_run_seconds = 120;
    let (t, n) = (unique("restored"), unique("neighbour"));
    onboard_at_max_limits(&h, &t, 8).await;
    onboard_at_max_limits(&h, &n, 4).await;
    seed_every_kind(&h, &t, 3).await;
    seed_every_kind(&h, &n, 3).await;
    put_products(&h, &t, (0..2_900).map(|i| format!("sku-{i:04}")), 1).await;
    put_products(&h, &n, (0..50).map(|i| format!("sku-{i:04}")), 1).await;
    let source = h.snapshot("t0").await;
    let t0 = keyed(h.admin_scan(&source).await);
    // (and another tenant's item lands in the source after t0: a restore must never see it)
    let stray = shared::identity::keys::raw_key(&n, "PRODUCT#0");
    let stray_item = Item::from([
        ("PK".to_owned(), AttributeValue::S(stray.clone())),
        ("SK".to_owned(), AttributeValue::S(format!("{stray}#stray"))),
    ]);
    h.put_raw(&source, stray_item).await;
    assert!(restored_of(&t, &t0).len() >= 2_900);

    // WHEN the tenant's data is damaged: deletes, overwrites, new items, an import, a re-sharding
    // 8 → 16; and the neighbour writes after t0
    use futures::StreamExt;
    futures::stream::iter((0..300).map(|i| {
        let (h, t) = (&h, &t);
        async move {
            let r = h.tenant(t).delete_product(&format!("sku-{i:04}")).await;
            assert_eq!(r.status, 204, "{}", r.body);
        }
    }))
    .buffer_unordered(16)
    .collect::<Vec<()>>()
    .await;
    put_products(&h, &t, (300..600).map(|i| format!("sku-{i:04}")), 2).await;
    put_products(&h, &t, (0..100).map(|i| format!("new-{i:04}")), 2).await;
    let queues = integration::import_queue::ImportQueues::create(5, 10).await;
    let accepted = post_import(&h, &queues, &t, products("imported", 100), &[]).await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    let batch = queues.receive(10).await;
    deliver_in_process(&h, &queues, &batch).await;
    reshard(&h, &t, 16).await;
    put_products(&h, &n, (0..20).map(|i| format!("late-{i:04}")), 3).await;
    put_products(&h, &n, (0..5).map(|i| format!("sku-{i:04}")), 3).await;
    // The model: the source's items of the tenant, at their keys in its current layout.
    let tid = TenantId::parse(&t).unwrap();
    let model: Items = keyed(restored_of(&t, &t0).into_values().map(|mut i| {
        i.extend(key_in(&tid, &i, 16));
        i
    }));
    let before = keyed(h.all_items().await);
    assert_ne!(
        restored_of(&t, &before),
        model,
        "the damage changed the tenant"
    );
    let neighbours_before = others(&t, &before);

    // AND a dry run answers the counts, changing nothing
    let dry = restore_from(&h, &t, &source, true).await;
    assert_eq!(dry.status, 200, "{}", dry.body);
    assert_eq!(dry.body["putBack"]["PRODUCT"], 300, "{}", dry.body);
    assert_eq!(dry.body["overwritten"]["PRODUCT"], 300, "{}", dry.body);
    assert_eq!(dry.body["deleted"]["PRODUCT"], 200, "{}", dry.body);
    assert_eq!(
        keyed(h.all_items().await),
        before,
        "a dry run writes nothing"
    );

    // AND the restore starts with an Idempotency-Key, answering 202; its retry answers the same
    let key = [("Idempotency-Key", "restore-1")];
    let body = restore_body(&source, false);
    let started = h
        .operator()
        .headers(&key)
        .restore_tenant(&t, body.clone())
        .await;
    assert_eq!(started.status, 202, "{}", started.body);
    assert_eq!(started.body["status"], "restoring");
    let again = h
        .operator()
        .headers(&key)
        .restore_tenant(&t, body.clone())
        .await;
    assert!(again.replayed, "{}", again.body);
    assert_eq!(again.body, started.body);
    // AND the tenant's own requests answer 503 with Retry-After, not a half-restored view
    let refused = h.tenant(&t).get_product("sku-0001").await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.retry_after.is_some());
    // AND a re-sharding or an offboarding of it is refused
    let r = h.operator().reshard(&t, 4).await;
    assert_eq!(r.status, 409, "{}", r.body);

    // WHEN the driver, in another container, is killed part-way three times and then left to run
    let driver = h.another_container().await;
    h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    driver.clock.set_millis(h.clock.now_millis());
    integration::drive_killed_after(&driver.app, &[40, 120, 400]).await;
    integration::drive_to_end(&driver.app).await;

    // THEN the tenant is active, with a report whose counts are the dry run's
    let done = h.operator().get_tenant(&t).await;
    assert_eq!(done.body["status"], "active", "{}", done.body);
    assert!(done.body.get("restore").is_none(), "{}", done.body);
    let report = &done.body["lastRestore"];
    assert_eq!(report["phase"], "finished", "{}", done.body);
    assert_eq!(report["source"], source.as_str());
    assert_eq!(counts(report), counts(&dry.body), "{}", done.body);
    assert_eq!(done.body["shardCount"], 16);
    // AND its items are the model's, byte for byte, in its current layout
    let after = keyed(h.all_items().await);
    let restored_now = restored_of(&t, &after);
    let missing: Vec<_> = model
        .keys()
        .filter(|k| !restored_now.contains_key(*k))
        .take(3)
        .collect();
    let extra: Vec<_> = restored_now
        .keys()
        .filter(|k| !model.contains_key(*k))
        .take(3)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, extra {extra:?}"
    );
    for (k, item) in &model {
        assert_eq!(&restored_now[k], item, "{k:?}");
    }
    // AND every other tenant's items, including those written after t0, are as they were
    assert_eq!(others(&t, &after), neighbours_before);
    // AND the tenant is served again, as it was at t0
    let r = h.tenant(&t).get_product("sku-0001").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["document"]["v"], 1, "{}", r.body);
    assert_eq!(h.tenant(&t).get_product("new-0001").await.status, 404);
    // AND the Idempotency-Key still answers the first answer, and starts nothing
    let replay = h
        .operator()
        .headers(&key)
        .restore_tenant(&t, body.clone())
        .await;
    assert!(replay.replayed);
    // AND the same call without a key, after the end, answers the report and starts nothing
    let late = h.operator().restore_tenant(&t, body.clone()).await;
    assert_eq!(late.status, 200, "{}", late.body);
    assert_eq!(late.body["lastRestore"], done.body["lastRestore"]);
    let still = h.operator().get_tenant(&t).await;
    assert_eq!(still.body["status"], "active");
    // AND `again` restores again (nothing differs now: nothing to change)
    let mut again = body;
    again["again"] = json!(true);
    let r = h.operator().restore_tenant(&t, again).await;
    assert_eq!(r.status, 202, "{}", r.body);
}

#[tokio::test]
async fn a_source_that_is_not_the_tenants_is_refused_and_nothing_is_written() {
    // GIVEN a tenant, a snapshot of the table, and then the tenant offboarded and onboarded again
    // under the same id (a reused id)
    let (h, t) = tenant_of_products("reused", 4, 5).await;
    let source = h.snapshot("old").await;
    integration::offboard_to_end(&h, &t, &integration::operator()).await;
    h.clock.advance_seconds(2);
    onboard_at_max_limits(&h, &t, 4).await;
    let before = keyed(h.all_items().await);
    // WHEN an operator restores the new tenant from the old one's snapshot, or names a table
    // outside the pool's restore names, or a malformed source
    let reused = restore_from(&h, &t, &source, false).await;
    let outside = restore_from(&h, &t, "another-table", false).await;
    let both = h
        .operator()
        .restore_tenant(
            &t,
            json!({"from": {"table": source, "pointInTime": "2026-11-25T00:00:00Z"}}),
        )
        .await;
    let missing = h
        .operator()
        .restore_tenant(
            &t,
            restore_body(&format!("{}-restore-none", h.table), false),
        )
        .await;
    let point = h
        .operator()
        .restore_tenant(&t, json!({"from": {"pointInTime": "2026-11-25T00:00:00Z"}}))
        .await;
    let bare = format!("{}-restore-bare", h.table);
    h.admin
        .create_table()
        .table_name(&bare)
        .billing_mode(aws_sdk_dynamodb::types::BillingMode::PayPerRequest)
        .key_schema(key_element("PK", aws_sdk_dynamodb::types::KeyType::Hash))
        .key_schema(key_element("SK", aws_sdk_dynamodb::types::KeyType::Range))
        .attribute_definitions(string_attribute("PK"))
        .attribute_definitions(string_attribute("SK"))
        .send()
        .await
        .unwrap();
    let without_catalog = restore_from(&h, &t, &bare, true).await;
    let own = h
        .caller(&integration::Auth::Operator(t.clone()))
        .call(
            "restore-tenant",
            &params(&[("tenantId", &t)]),
            Some(restore_body(&source, false)),
        )
        .await;
    // (another restore's scratch table: a copy of the whole pool, deleted when that restore ends)
    let others_scratch = shared::store::lifecycle::restoring::point_in_time::scratch_table(
        &h.table,
        &shared::identity::ids::TenantId::parse("another").unwrap(),
        1_700_000_000_000,
    );
    let scratch = restore_from(&h, &t, &others_scratch, false).await;
    // THEN each is refused with a problem, and nothing is written
    scratch.assert_problem_naming(400, "scratch table");
    reused.assert_problem_naming(422, "reused");
    outside.assert_problem(400);
    both.assert_problem(400);
    missing.assert_problem(422);
    own.assert_problem(409);
    // (a table without the catalog index cannot be walked)
    without_catalog.assert_problem(422);
    // (DynamoDB Local has no point-in-time recovery: the window check refuses it, as DynamoDB does
    // a table without it)
    point.assert_problem_naming(422, "recovery");
    let after = keyed(h.all_items().await);
    let platform = shared::identity::keys::raw_key(TenantId::PLATFORM, "");
    let unchanged = |items: &Items| -> Items {
        items
            .iter()
            .filter(|((pk, _), _)| !pk.starts_with(&platform) && !pk.contains("#USAGE#"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(unchanged(&after), unchanged(&before));
}

#[tokio::test]
async fn a_point_in_time_restore_is_started_awaited_and_dropped_on_a_server_that_implements_it() {
    use shared::store::lifecycle::restoring::point_in_time;
    // GIVEN a pool table on the stack's second moto (DynamoDB Local implements no point-in-time
    // restore; the first serves STS alone), with point-in-time recovery on and an item of a tenant
    let moto = std::env::var("AWS_ENDPOINT_URL_SQS")
        .expect("AWS_ENDPOINT_URL_SQS is not set: run the tests with ./scripts/test.sh (moto)");
    let sdk = shared::service::app::load_sdk_config().await;
    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&sdk)
            .endpoint_url(&moto)
            .build(),
    );
    let pool = unique("pooltable-pitr");
    let def = devtools::table_from_template(&devtools::default_template_path())
        .unwrap()
        .without_stream();
    devtools::create_table(&client, &pool, &def).await.unwrap();
    client
        .update_continuous_backups()
        .table_name(&pool)
        .point_in_time_recovery_specification(
            aws_sdk_dynamodb::types::PointInTimeRecoverySpecification::builder()
                .point_in_time_recovery_enabled(true)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let key = shared::identity::keys::raw_key("acme", "PRODUCT#0");
    client
        .put_item()
        .table_name(&pool)
        .item("PK", AttributeValue::S(key.clone()))
        .item("SK", AttributeValue::S(key))
        .send()
        .await
        .unwrap();
    let t = TenantId::parse("acme").unwrap();
    let scratch = point_in_time::scratch_table(&pool, &t, 1);
    // (the window's end as the server reports it: moto's stays where recovery was turned on, so
    // the time just after the put could fall past it by a few milliseconds)
    let backups = client
        .describe_continuous_backups()
        .table_name(&pool)
        .send()
        .await
        .unwrap();
    let latest = backups
        .continuous_backups_description()
        .and_then(|d| d.point_in_time_recovery_description())
        .and_then(|p| p.latest_restorable_date_time())
        .expect("a point-in-time window")
        .to_millis()
        .unwrap();
    let at = shared::identity::clock::rfc3339(latest as u64);

    // WHEN pooltable checks the window, starts the restore, waits for it and drops it
    point_in_time::check_window(&client, &pool, &at)
        .await
        .unwrap();
    let outside = point_in_time::check_window(&client, &pool, "2001-01-01T00:00:00Z").await;
    point_in_time::start(&client, &pool, &scratch, &at)
        .await
        .unwrap();
    // (a retry finds it started)
    point_in_time::start(&client, &pool, &scratch, &at)
        .await
        .unwrap();
    let mut ready = None;
    for _ in 0..50 {
        ready = point_in_time::ready(&client, &scratch).await.unwrap();
        if ready == Some(true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let restored = client
        .scan()
        .table_name(&scratch)
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default();
    point_in_time::drop_scratch(&client, &scratch)
        .await
        .unwrap();
    point_in_time::drop_scratch(&client, &scratch)
        .await
        .unwrap();

    // THEN the scratch table was ready with the pool's item, a time outside the window was refused,
    // and the scratch table is gone
    assert_eq!(ready, Some(true));
    assert_eq!(restored.len(), 1);
    assert!(
        matches!(
            outside,
            Err(point_in_time::Unrestorable::OutsideWindow { .. })
        ),
        "{outside:?}"
    );
    assert_eq!(point_in_time::ready(&client, &scratch).await.unwrap(), None);
}

#[tokio::test]
async fn an_import_of_a_tenant_being_restored_waits_on_the_queue_and_lands_after_the_restore() {
    // GIVEN a tenant, a snapshot of it, an import of 20 products on the queue (maxReceiveCount 2),
    // and then a restore started from the snapshot
    let (h, t) = tenant_of_products("held", 4, 0).await;
    let source = h.snapshot("held").await;
    let queues = integration::import_queue::ImportQueues::create(2, 10).await;
    let accepted = post_import(&h, &queues, &t, products("held", 20), &[]).await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    let body = restore_body(&source, false);
    assert_eq!(
        h.operator().restore_tenant(&t, body.clone()).await.status,
        202
    );
    // WHEN the consumer receives the messages more times than the queue's maxReceiveCount while
    // the restore runs
    for _ in 0..4 {
        assert!(deliver_deferring(&h, &queues).await > 0);
    }
    // THEN nothing was written, nothing was dead-lettered, and the messages wait on the queue
    let products_of = |items: Vec<Item>| {
        let t = TenantId::parse(&t).unwrap();
        items.into_iter().filter(|i| restored(&t, i)).count()
    };
    assert_eq!(products_of(h.all_items().await), 0);
    assert_eq!(queues.backlog(&queues.dlq_url).await, 0);
    // AND once the restore ends, the next deliveries write every product once
    h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    let done = h.operator().restore_tenant(&t, body).await;
    assert_eq!(done.status, 200, "{}", done.body);
    while deliver_deferring(&h, &queues).await > 0 {}
    assert_eq!(products_of(h.all_items().await), 20);
    assert_eq!(queues.backlog(&queues.dlq_url).await, 0);
}

#[tokio::test]
async fn a_container_with_the_tenant_cached_stops_serving_it_before_the_restore_writes_and_the_restore_is_charged_to_the_platform(
) {
    // GIVEN a tenant of 60 products, snapshotted, then 30 of them deleted; a second container that
    // has served the tenant (its record cached, active); and an operator of a basic tenant
    let (h, t) = tenant_of_products("cached", 4, 60).await;
    let source = h.snapshot("cached").await;
    for i in 0..30 {
        let r = h.tenant(&t).delete_product(&format!("sku-{i:02}")).await;
        assert_eq!(r.status, 204, "{}", r.body);
    }
    let other = h.another_container().await;
    other.clock.set_millis(h.clock.now_millis());
    assert_eq!(other.tenant(&t).get_product("sku-59").await.status, 200);
    let ops = unique("ops-basic");
    integration::onboard_tier(&h, &ops, 1, "basic").await;
    let operator = integration::Auth::Operator(ops.clone());
    let body = restore_body(&source, false);
    let at = params(&[("tenantId", &t)]);

    // WHEN the operator starts the restore, served as the runtime serves it
    let started = h
        .caller(&operator)
        .admitted()
        .call("restore-tenant", &at, Some(body.clone()))
        .await;
    assert_eq!(started.status, 202, "{}", started.body);

    // THEN the other container still serves the tenant from its cache (a write it takes now is
    // before the restore's first write, which makes the items the source's anyway)...
    let early = other
        .tenant(&t)
        .put_product("sku-late", json!({"v": 9}))
        .await;
    assert_eq!(early.status, 201, "{}", early.body);
    // AND refuses it (503) once its cached record expires, well before the restore writes
    use shared::store::tenancy::tenants::RECORD_TTL_SECONDS;
    other.clock.advance_seconds(RECORD_TTL_SECONDS + 1);
    const { assert!(RECORD_TTL_SECONDS + 1 < STARTS_DELAY_SECONDS) };
    let refused = other.tenant(&t).get_product("sku-59").await;
    assert_eq!(refused.status, 503, "{}", refused.body);

    // WHEN the operator drives the restore to its end
    h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    let mut last = started;
    for _ in 0..20 {
        last = h
            .caller(&operator)
            .admitted()
            .call("restore-tenant", &at, Some(body.clone()))
            .await;
        if last.status != 202 {
            break;
        }
    }
    assert_eq!(last.status, 200, "{}", last.body);
    // THEN the stale container's write is undone with the rest, and the 30 products are back
    assert_eq!(
        last.body["lastRestore"]["putBack"]["PRODUCT"], 30,
        "{}",
        last.body
    );
    assert_eq!(
        last.body["lastRestore"]["deleted"]["PRODUCT"], 1,
        "{}",
        last.body
    );
    // AND the operator's tenant was charged nothing of it, and the restored tenant's quota
    // nothing: the platform's account holds it, under the route
    let charged_to_ops = integration::units_used(&h, &[&h.app], &ops, None).await;
    assert!(
        charged_to_ops < 10.0,
        "the operator's tenant was charged {charged_to_ops}"
    );
    let restore_units =
        integration::units_used(&h, &[&h.app], "_platform", Some("restore-tenant")).await;
    assert!(
        restore_units >= 30.0,
        "the restore consumed {restore_units} units"
    );
    let charged_to_tenant =
        integration::units_used(&h, &[&h.app], &t, Some("restore-tenant")).await;
    assert_eq!(charged_to_tenant, 0.0);
}

#[tokio::test]
async fn a_source_taken_while_the_tenant_was_being_re_sharded_is_refused() {
    // GIVEN a tenant of 40 products whose re-sharding 2 → 8 was running when the source was taken,
    // and has finished since
    let (h, t) = tenant_of_products("midway", 2, 40).await;
    let started = h.operator().reshard(&t, 8).await;
    assert_eq!(started.status, 202, "{}", started.body);
    let source = h.snapshot("midway").await;
    reshard(&h, &t, 8).await;
    let before = keyed(h.all_items().await);
    // WHEN an operator dry-runs or restores from it
    let dry = restore_from(&h, &t, &source, true).await;
    let real = restore_from(&h, &t, &source, false).await;
    // THEN both are refused, naming the re-sharding, and nothing changed
    for r in [&dry, &real] {
        r.assert_problem_naming(422, "re-sharding");
    }
    let after = keyed(h.all_items().await);
    assert_eq!(restored_of(&t, &after), restored_of(&t, &before));
    assert_eq!(h.operator().get_tenant(&t).await.body["status"], "active");
}

/// Issue 58, item 5: an operator aborts a running restore.
#[tokio::test]
async fn an_operator_aborts_a_running_restore_and_the_tenant_is_served_again() {
    use shared::store::tenancy::tenants::RECORD_TTL_SECONDS;
    // GIVEN a tenant of 40 products, a copy taken of it, its products changed since, and a restore
    // from that copy started (the tenant answers 503 while it runs)
    let (h, t) = tenant_of_products("aborted", 2, 40).await;
    let source = h.snapshot("toabort").await;
    put_products(&h, &t, (0..40).map(|i| format!("sku-{i:02}")), 2).await;
    let before = keyed(h.all_items().await);
    let started = restore_from(&h, &t, &source, false).await;
    assert_eq!(started.status, 202, "{}", started.body);
    h.clock.advance_seconds(RECORD_TTL_SECONDS + 1);
    h.tenant(&t).get_product("sku-00").await.assert_problem(503);
    // WHEN an operator asks for anything else with the abort, then aborts it
    let mixed = h
        .operator()
        .restore_tenant(&t, json!({"abort": true, "from": {"table": source}}))
        .await;
    let aborted = h
        .operator()
        .restore_tenant(&t, json!({"abort": true}))
        .await;
    // THEN the mixed ask is refused, and the abort ends the restore: abandoned, naming who asked,
    // with the counts of what it did (nothing yet), and the tenant active again
    mixed.assert_problem_naming(400, "abort");
    assert_eq!(aborted.status, 200, "{}", aborted.body);
    let last = &aborted.body["lastRestore"];
    assert_eq!(last["phase"], "abandoned", "{}", aborted.body);
    assert!(
        last["reason"].as_str().unwrap().contains("aborted"),
        "{last}"
    );
    for count in ["putBack", "overwritten", "deleted"] {
        assert!(last.get(count).is_some(), "{count}: {last}");
    }
    assert_eq!(aborted.body["status"], "active");
    assert!(aborted.body.get("restore").is_none_or(Value::is_null));
    // AND nothing of the tenant was changed by the restore, and it is served again
    let after = keyed(h.all_items().await);
    assert_eq!(restored_of(&t, &after), restored_of(&t, &before));
    h.clock.advance_seconds(RECORD_TTL_SECONDS + 1);
    let product = h.tenant(&t).get_product("sku-00").await;
    assert_eq!(product.status, 200, "{}", product.body);
    // AND the same abort again (its answer lost) answers the same, and changes nothing
    let again = h
        .operator()
        .restore_tenant(&t, json!({"abort": true}))
        .await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["lastRestore"], aborted.body["lastRestore"]);
    // AND an abort when none runs (a restore that ended by itself) is 409, and changes nothing
    let (other_h, other) = tenant_of_products("notaborted", 1, 1).await;
    other_h
        .operator()
        .restore_tenant(&other, json!({"abort": true}))
        .await
        .assert_problem(409);
    assert_eq!(
        restored_of(&t, &keyed(h.all_items().await)),
        restored_of(&t, &before)
    );
}

/// A restore of a tenant of 10 products, from a copy of it, whose record then names `copy` (not
/// made yet) as a point in time's copy (DynamoDB Local makes no point-in-time copies).
async fn a_point_in_time_restore(prefix: &str) -> (Harness, String, String) {
    use shared::store::lifecycle::restoring::point_in_time;
    let (h, t) = tenant_of_products(prefix, 1, 10).await;
    let source = h.snapshot(prefix).await;
    assert_eq!(restore_from(&h, &t, &source, false).await.status, 202);
    let tenant = TenantId::parse(&t).unwrap();
    let copy = point_in_time::scratch_table(&h.table, &tenant, h.clock.now_millis());
    let set = "SET #r.pointInTime = :at, #r.sourceTable = :copy";
    let values = [(":at", "2026-11-25T00:00:00Z"), (":copy", copy.as_str())];
    update_restore(&h, &t, set, &values).await;
    (h, t, copy)
}

/// Updates `t`'s restore on its record by hand (`#r` in `expression`; `values` its `:` strings):
/// a state no route leaves it in.
async fn update_restore(h: &Harness, t: &str, expression: &str, values: &[(&str, &str)]) {
    let record = shared::identity::keys::tenant_record_key(&TenantId::parse(t).unwrap());
    let update = h
        .admin
        .update_item()
        .table_name(&h.table)
        .key("PK", AttributeValue::S(record.clone()))
        .key("SK", AttributeValue::S(record))
        .update_expression(expression)
        .expression_attribute_names("#r", "restore");
    let update = values.iter().fold(update, |update, (name, value)| {
        update.expression_attribute_values(*name, AttributeValue::S((*value).to_owned()))
    });
    update.send().await.unwrap();
}

/// `copy` made as a table (what DynamoDB's point-in-time restore makes).
async fn make_copy(h: &Harness, copy: &str) {
    let def = devtools::table_from_template(&devtools::default_template_path())
        .unwrap()
        .without_stream();
    devtools::create_table(&h.admin, copy, &def).await.unwrap();
}

/// One run of the lifecycle driver on `h`'s container.
async fn driver_run(h: &Harness) -> tenants::drive_lifecycle::Driven {
    Box::pin(tenants::drive_lifecycle::drive(
        &h.app,
        &tenants::Lanes::in_process(),
    ))
    .await
    .expect("a lifecycle run")
}

/// Whether `copy` is a table, and whether it is listed for the driver to delete.
async fn copy_left(h: &Harness, copy: &str) -> (bool, bool) {
    use shared::store::lifecycle::restoring::{copies, point_in_time};
    let table = point_in_time::ready(&h.admin, copy)
        .await
        .unwrap()
        .is_some();
    let platform = h.app.db_for_operator(&TenantId::platform()).await.unwrap();
    let listed = copies::listed(&platform).await.unwrap();
    (table, listed.iter().any(|c| c.table == copy))
}

/// An abort of a point-in-time restore whose copy DynamoDB is still making (20 minutes or more, and
/// it refuses to delete a table meanwhile) ends the restore at once, and the driver deletes the copy
/// once DynamoDB lets it.
#[tokio::test]
async fn an_abort_while_the_point_in_time_copy_is_still_being_made_ends_the_restore_and_the_driver_deletes_the_copy(
) {
    // GIVEN a point-in-time restore of a tenant of 10 products, its copy made
    let (h, t, copy) = a_point_in_time_restore("pitrabort").await;
    make_copy(&h, &copy).await;
    let products = || async { keyed(h.items_under(&raw_key(&t, "PRODUCT#")).await) };
    let before = products().await;
    // WHEN an operator aborts it while DynamoDB still makes the copy (it refuses to delete it)
    h.faults
        .answer_next("DeleteTable", "ResourceInUseException");
    let aborted = h
        .operator()
        .restore_tenant(&t, json!({"abort": true}))
        .await;
    // THEN the restore ends abandoned at once, the tenant active, nothing of it written (before the
    // mend: 409, and the restore went on to write once the copy was ready), and the copy is listed
    assert_eq!(aborted.status, 200, "{}", aborted.body);
    assert_eq!(aborted.body["lastRestore"]["phase"], "abandoned");
    assert_eq!(aborted.body["status"], "active");
    assert_eq!((products().await.len(), products().await), (10, before));
    assert_eq!(copy_left(&h, &copy).await, (true, true));
    // WHEN the driver runs once the copy is due and ready
    h.clock.advance_seconds(40);
    driver_run(&h).await;
    // THEN the copy is gone, and so is its entry
    assert_eq!(copy_left(&h, &copy).await, (false, false), "{copy}");
}

/// A call that read a point-in-time restore as preparing just before an abort ended it can start
/// the copy of the whole pool just after, when the abort found none to delete: the driver deletes
/// it, whatever the tenant did since.
#[tokio::test]
async fn a_point_in_time_copy_started_just_after_an_abort_is_deleted_by_the_driver() {
    // GIVEN a point-in-time restore whose copy is not made yet
    let (h, t, copy) = a_point_in_time_restore("pitrlate").await;
    // WHEN an operator aborts it (no copy to delete yet), and then the copy a call started just
    // before the abort's end appears
    let aborted = h
        .operator()
        .restore_tenant(&t, json!({"abort": true}))
        .await;
    assert_eq!(aborted.status, 200, "{}", aborted.body);
    make_copy(&h, &copy).await;
    // AND the driver runs within a function's timeout of the abort
    driver_run(&h).await;
    let too_soon = copy_left(&h, &copy).await;
    // AND another restore of the tenant runs to its end (its report replaces the aborted one's)
    let again = h.snapshot("pitrlate2").await;
    h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    let mut answer = restore_from(&h, &t, &again, false).await;
    for _ in 0..20 {
        if answer.status == 200 {
            break;
        }
        h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
        answer = restore_from(&h, &t, &again, false).await;
    }
    assert_eq!(
        answer.body["lastRestore"]["phase"], "finished",
        "{}",
        answer.body
    );
    // AND the driver runs while DynamoDB still makes the copy, then once it is ready
    h.faults
        .answer_next("DeleteTable", "ResourceInUseException");
    driver_run(&h).await;
    let being_made = copy_left(&h, &copy).await;
    driver_run(&h).await;
    // THEN the copy stays listed until it is gone, and then is gone (before the mend: left behind
    // for good)
    assert_eq!(too_soon, (true, true));
    assert_eq!(being_made, (true, true));
    assert_eq!(copy_left(&h, &copy).await, (false, false), "{copy}");
}

/// An abort's end may take long (retries, throttling): its copy is due a function's timeout after
/// the end, not after the first listing, since a call that read the restore as preparing just
/// before the end may start the copy until then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborts_copy_is_due_from_the_restores_end_not_from_its_first_listing() {
    // GIVEN a point-in-time restore whose copy is not made yet
    let (h, t, copy) = a_point_in_time_restore("pitrslow").await;
    let h = std::sync::Arc::new(h);
    // WHEN an operator aborts it, and the restore's end is held while 30 s pass (aside: the hold
    // blocks the thread that sends it)
    let mut held = h
        .faults
        .hold_next_matching(|body| body.contains("aborted by an operator"));
    let abort = integration::aside({
        let (h, t) = (h.clone(), t.clone());
        move || async move {
            let answer = h
                .operator()
                .restore_tenant(&t, json!({"abort": true}))
                .await;
            (answer.status, answer.body)
        }
    });
    held.reached().await;
    h.clock.advance_seconds(30);
    held.release();
    let (status, body) = abort.ended().await;
    assert_eq!(status, 200, "{body}");
    // AND the driver runs 10 s after the end (past a function's timeout after the first listing)
    h.clock.advance_seconds(10);
    driver_run(&h).await;
    // AND then the copy a call started just before the end appears, and the driver runs once a
    // function's timeout has passed since the end
    make_copy(&h, &copy).await;
    let listed = copy_left(&h, &copy).await;
    h.clock.advance_seconds(40);
    driver_run(&h).await;
    // THEN the copy stayed listed, and is gone (before the mend the first run unlisted it, and the
    // copy was left behind for good)
    assert_eq!(listed, (true, true));
    assert_eq!(copy_left(&h, &copy).await, (false, false), "{copy}");
}

/// The driver unlists a copy only as it read its entry: an abort asked again meanwhile lists it
/// again, due later, and that entry stays.
#[tokio::test]
async fn a_copy_listed_again_after_the_driver_read_it_stays_listed() {
    use shared::store::lifecycle::restoring::copies;
    // GIVEN a copy listed by an abort, and read by a driver run
    let h = Harness::new().await;
    let tenant = TenantId::parse(&unique("relisted")).unwrap();
    let copy = format!("{}-restore-{tenant}-1", h.table);
    let platform = h.app.db_for_operator(&TenantId::platform()).await.unwrap();
    let entry = |listed: Vec<copies::ListedCopy>| listed.into_iter().find(|c| c.table == copy);
    let now = h.clock.now_millis();
    copies::list(&platform, &tenant, &copy, now).await.unwrap();
    let read = entry(copies::listed(&platform).await.unwrap()).expect("listed");
    // WHEN the abort is asked again (listed again, due later), and then the run unlists what it read
    copies::list(&platform, &tenant, &copy, now + 1000)
        .await
        .unwrap();
    let unlisted = copies::unlist(&platform, &read).await.unwrap();
    // THEN the entry stays, due from the second abort (before the mend it was removed, and a copy
    // started after the run's delete was left behind)
    assert!(!unlisted);
    let left = entry(copies::listed(&platform).await.unwrap()).expect("still listed");
    assert_eq!(left.due_at_ms, now + 1000 + copies::DUE_AFTER_MS);
    // AND unlisted as read the second time, it is gone
    assert!(copies::unlist(&platform, &left).await.unwrap());
    assert!(entry(copies::listed(&platform).await.unwrap()).is_none());
}

/// An abort asked again once its restore has ended (the first call's answer lost, and with it,
/// maybe, its second listing) lists the copy again, due from the retry: a copy a late call starts
/// after the driver unlisted it is still deleted.
#[tokio::test]
async fn an_abort_asked_again_after_its_restore_ended_lists_its_copy_again() {
    // GIVEN a point-in-time restore aborted before its copy was made, and a driver run, once the
    // copy was due, that found none and unlisted it
    let (h, t, copy) = a_point_in_time_restore("pitrretry").await;
    let abort = || h.operator().restore_tenant(&t, json!({"abort": true}));
    let first = abort().await;
    assert_eq!(first.status, 200, "{}", first.body);
    h.clock.advance_seconds(40);
    driver_run(&h).await;
    let unlisted = copy_left(&h, &copy).await;
    // WHEN the operator asks the abort again
    let again = abort().await;
    // THEN the same answer, and the copy listed again (before the mend: nothing listed, and a copy
    // started then was left behind for good)
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["lastRestore"], first.body["lastRestore"]);
    assert_eq!(unlisted, (false, false));
    assert_eq!(copy_left(&h, &copy).await, (false, true));
    // AND a copy that appears then is deleted by the driver once it is due
    make_copy(&h, &copy).await;
    h.clock.advance_seconds(40);
    driver_run(&h).await;
    assert_eq!(copy_left(&h, &copy).await, (false, false), "{copy}");
}

/// Issue 58, item 5: a restore's source is known by its identity, kept from the start.
#[tokio::test]
async fn a_source_replaced_under_its_name_during_a_restore_ends_it_and_writes_nothing() {
    // GIVEN a tenant of 40 products, a copy taken of it, its products changed since, and a restore
    // from that copy started
    let (h, t) = tenant_of_products("replaced", 2, 40).await;
    let source = h.snapshot("replaced").await;
    put_products(&h, &t, (0..40).map(|i| format!("sku-{i:02}")), 2).await;
    let before = keyed(h.all_items().await);
    let started = restore_from(&h, &t, &source, false).await;
    assert_eq!(started.status, 202, "{}", started.body);
    // WHEN the source is deleted and another table made under its name before the restore writes
    h.admin
        .delete_table()
        .table_name(&source)
        .send()
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(h.snapshot("replaced").await, source);
    h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    let next = restore_from(&h, &t, &source, false).await;
    // THEN the restore ends abandoned, naming the replacement, and the tenant is served again
    assert_eq!(next.status, 200, "{}", next.body);
    let last = &next.body["lastRestore"];
    assert_eq!(last["phase"], "abandoned", "{}", next.body);
    assert!(
        last["reason"].as_str().unwrap().contains("made again"),
        "{last}"
    );
    assert_eq!(next.body["status"], "active");
    // AND nothing of the tenant was written from the new table
    assert_eq!(
        restored_of(&t, &keyed(h.all_items().await)),
        restored_of(&t, &before)
    );
}

#[tokio::test]
async fn a_restore_whose_source_goes_once_every_item_was_compared_ends_finished_never_abandoned() {
    // GIVEN a tenant's products, a copy of the table, then one product deleted and one changed
    let (h, t) = tenant_of_products("source-goes", 1, 4).await;
    let source = h.snapshot("source-goes").await;
    let deleted = h
        .tenant(&t)
        .call("delete-product", &[("productId", "sku-00")], None)
        .await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    put_products(&h, &t, std::iter::once("sku-01".to_owned()), 2).await;
    // AND its restore from the copy, driven until every lane of its last phase is done but the
    // phase's end cannot be recorded (as a call cut off between dropping a point-in-time copy and
    // recording the end leaves it)
    let started = restore_from(&h, &t, &source, false).await;
    assert_eq!(started.status, 202, "{}", started.body);
    h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    h.faults.refuse_requests_containing(Some("finishedAt"));
    let mut walked = false;
    for _ in 0..30 {
        let _ = Box::pin(tenants::drive_lifecycle::drive(
            &h.app,
            &tenants::Lanes::in_process(),
        ))
        .await;
        let now = h.operator().get_tenant(&t).await;
        let restore = &now.body["restore"];
        if restore["phase"] == "deleting"
            && restore["lanes"]["lanes"].as_u64().is_some_and(|n| n > 0)
            && restore["lanes"]["lanesDone"] == restore["lanes"]["lanes"]
        {
            walked = true;
            break;
        }
    }
    assert!(walked, "the restore's last phase did not walk to its end");

    // WHEN its source is deleted, and the restore goes on
    h.admin
        .delete_table()
        .table_name(&source)
        .send()
        .await
        .unwrap();
    h.faults.refuse_requests_containing(None);
    integration::drive_to_end(&h.app).await;

    // THEN it ended finished (not abandoned), and the tenant's products are the copy's
    let done = h.operator().get_tenant(&t).await;
    assert_eq!(done.body["status"], "active", "{}", done.body);
    assert_eq!(
        done.body["lastRestore"]["phase"], "finished",
        "{}",
        done.body
    );
    for id in ["sku-00", "sku-01", "sku-02", "sku-03"] {
        let r = h.tenant(&t).get_product(id).await;
        assert_eq!(r.status, 200, "{id}: {}", r.body);
        assert_eq!(r.body["document"]["v"], 1, "{id}: {}", r.body);
    }
}

/// Issue 58, item 5's rule for exports (every item, or 409; never a silent part), held where items
/// change under the walk besides a move: a restore rewrites the tenant's partitions, and an
/// offboarding empties them once its deletion may begin. Before the mend both exported 200 pages
/// with items missing or mixed.
#[tokio::test]
async fn an_export_during_a_restore_or_an_offboarding_that_may_delete_is_refused() {
    use shared::store::lifecycle::offboarding::DELETION_DELAY_SECONDS;
    // GIVEN a tenant of 5 products being restored from a copy of it
    let (h, t) = tenant_of_products("exportrestoring", 1, 5).await;
    let source = h.snapshot("toexport").await;
    let started = restore_from(&h, &t, &source, false).await;
    assert_eq!(started.status, 202, "{}", started.body);
    // WHEN it is exported; THEN 409, until the restore is aborted
    export_all(&h, &t)
        .await
        .assert_problem_naming(409, "restored");
    let aborted = h
        .operator()
        .restore_tenant(&t, json!({"abort": true}))
        .await;
    assert_eq!(aborted.status, 200, "{}", aborted.body);
    assert_eq!(export_all(&h, &t).await.status, 200);

    // GIVEN its offboarding begun
    let offboarding = h.operator().offboard_tenant(&t).await;
    assert_eq!(offboarding.status, 202, "{}", offboarding.body);
    // WHEN it is exported before its deletion may begin; THEN every item
    assert_eq!(export_all(&h, &t).await.status, 200);
    // WHEN it is exported once its deletion may begin; THEN 409
    h.clock.advance_seconds(DELETION_DELAY_SECONDS);
    export_all(&h, &t)
        .await
        .assert_problem_naming(409, "offboarded");
}

/// Every item of `tenant` as one export page, by the platform's operator.
async fn export_all(h: &Harness, tenant: &str) -> Resp {
    let operator = integration::operator();
    integration::export_page(h, &operator, tenant, &[("limit", "100")]).await
}

/// Every restore begins at step 0: a step read of one restore, held until an operator aborted it
/// and started another, never commits into the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_of_an_aborted_restore_sent_late_never_commits_into_the_restore_begun_after_it() {
    // GIVEN a tenant of 10 products, two copies of it, and a restore from the first whose writes
    // may begin
    let (h, t) = tenant_of_products("rerestore", 1, 10).await;
    let first = h.snapshot("rerestorea").await;
    let second = h.snapshot("rerestoreb").await;
    assert_eq!(restore_from(&h, &t, &first, false).await.status, 202);
    h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    let h = std::sync::Arc::new(h);
    // WHEN a driver run's planning of its lanes is held (aside: the hold blocks the thread that
    // sends it)
    let mut held = h
        .faults
        .hold_next_matching(|body| body.contains("lanesSinceMs") && body.contains("-rerestorea"));
    let run = integration::aside({
        let h = h.clone();
        move || async move { driver_run(&h).await }
    });
    held.reached().await;
    // AND meanwhile an operator aborts that restore, and starts one from the second copy
    let aborted = h
        .operator()
        .restore_tenant(&t, json!({"abort": true}))
        .await;
    assert_eq!(aborted.status, 200, "{}", aborted.body);
    h.clock.advance_seconds(1);
    let started = restore_from(&h, &t, &second, false).await;
    assert_eq!(started.status, 202, "{}", started.body);
    // AND the held planning goes on
    held.release();
    run.ended().await;

    // THEN the tenant's restore is the second as it was started: its source, its request, no lanes
    // planned before its writes may begin (before the mend: the first's, planned)
    let view = h.operator().get_tenant(&t).await;
    let restore = &view.body["restore"];
    assert_eq!(restore["source"], second.as_str(), "{}", view.body);
    assert_eq!(
        restore["requestedAt"],
        started.body["restore"]["requestedAt"]
    );
    assert_eq!(restore["startsAt"], started.body["restore"]["startsAt"]);
    assert!(restore.get("lanes").is_none(), "{}", view.body);
}

/// The lane worker's role may not restore the pool (`RestoreTablesReadingPolicy`): a restore it
/// finds preparing with no copy (one begun after the restore whose last lane it stepped) is left
/// to a call or a driver run, which may start the copy; DynamoDB's refusal of the worker's start
/// would have ended a restore nobody asked to end.
#[tokio::test]
async fn a_lane_worker_leaves_a_point_in_time_copy_to_start_to_a_call_or_the_driver() {
    use tenants::restore_tenant::{advance, Stepper};
    // GIVEN a point-in-time restore preparing (no copy made, so none known), its copy not
    // started, its writes due
    let (h, t, _copy) = a_point_in_time_restore("pitrworker").await;
    let unstarted = "SET #r.phase = :preparing REMOVE #r.sourceId";
    update_restore(&h, &t, unstarted, &[(":preparing", "preparing")]).await;
    h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    let scope = shared::isolation::policy::Scope::Operator;
    let tenant = TenantId::parse(&t).unwrap();
    let db = h.app.operator_db(&tenant, scope).await.unwrap().unwrap();
    let read = || async {
        shared::store::tenancy::tenants::read_record_consistent(&db)
            .await
            .unwrap()
            .unwrap()
    };
    let lanes = tenants::Lanes::in_process();
    let before = keyed(h.all_items().await);
    // WHEN the lane worker steps it
    let stepped = Box::pin(advance(
        &h.app,
        &lanes,
        &db,
        read().await,
        Stepper::LaneWorker,
    ))
    .await
    .unwrap();
    // THEN it waits, still preparing (before the guard: the worker's start was refused, and the
    // restore ended abandoned), having planned no lane and written nothing, the tenant's record
    // and its neighbours' items byte for byte
    assert_eq!(stepped.status(), 202);
    assert_eq!(keyed(h.all_items().await), before);
    let view = h.operator().get_tenant(&t).await;
    assert_eq!(view.body["restore"]["phase"], "preparing", "{}", view.body);
    assert!(view.body["restore"].get("lanes").is_none(), "{}", view.body);
    // WHEN a driver run steps it
    driver_run(&h).await;
    // THEN the driver did ask DynamoDB for the copy: DynamoDB Local, which makes none, refuses it
    let view = h.operator().get_tenant(&t).await;
    assert_eq!(
        view.body["lastRestore"]["phase"], "abandoned",
        "{}",
        view.body
    );
    let reason = view.body["lastRestore"]["reason"].as_str();
    assert!(
        reason.is_some_and(|r| r.contains("point-in-time recovery")),
        "{}",
        view.body
    );
}
