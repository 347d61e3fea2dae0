//! Lifecycle events: every committed lifecycle change becomes exactly one event on the bus, a change
//! that failed none, and a put that fails loses nothing. The table's stream on DynamoDB Local is
//! handed to `publish-lifecycle-events` as Lambda would; the bus is moto's EventBridge, delivering
//! through a rule to a queue, as a subscriber would receive them.

use integration::lifecycle_bus::{LifecycleBus, StreamTap};
use integration::{
    offboard_to_end, onboard, onboarded_on_shards, step_to_end, unique, Harness, Resp,
};
use serde_json::{json, Value};
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::raw_key;
use shared::store::imports::{self, NewImport, Outcome, FINAL_WITHIN_SECONDS};
use shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS;

use integration::operator;

async fn patch(h: &Harness, tenant: &str, body: Value) -> Resp {
    h.operator().update_tenant(tenant, body).await
}

/// The events delivered about `tenant`, by detail-type (EventBridge and the queue keep no order).
fn about(events: &[Value], tenant: &str) -> std::collections::BTreeMap<String, Vec<Value>> {
    let mut about = std::collections::BTreeMap::<String, Vec<Value>>::new();
    for e in events.iter().filter(|e| e["detail"]["tenantId"] == tenant) {
        assert_eq!(e["source"], "pooltable", "{e}");
        let kind = e["detail-type"].as_str().unwrap().to_owned();
        about.entry(kind).or_default().push(e["detail"].clone());
    }
    about
}

/// The event source mapping's filters (template.yaml), as JSON patterns.
fn template_filters() -> Vec<Value> {
    let t = integration::template::load();
    let filters = &t["Resources"]["PublishLifecycleEventsFunction"]["Properties"]["Events"]
        ["Stream"]["Properties"]["FilterCriteria"]["Filters"];
    filters
        .as_sequence()
        .expect("the stream's FilterCriteria")
        .iter()
        .map(|f| serde_json::from_str(f["Pattern"].as_str().unwrap()).unwrap())
        .collect()
}

/// Whether `value` matches an event filter pattern (the subset the template uses: nested keys,
/// values listed, `{"exists": true}`).
fn matches(pattern: &Value, value: &Value) -> bool {
    match pattern {
        Value::Object(fields) => fields.iter().all(|(k, p)| matches(p, &value[k])),
        Value::Array(alternatives) => alternatives.iter().any(|a| match a {
            Value::Object(op) if op.get("exists") == Some(&json!(true)) => !value.is_null(),
            literal => literal == value,
        }),
        _ => false,
    }
}

/// A table whose stream feeds the publisher, a subscriber on the bus, the table's stream as the
/// publisher's event source mapping reads it, and a fresh tenant's name (not onboarded yet).
async fn stage(prefix: &str) -> (Harness, LifecycleBus, StreamTap, String) {
    let h = Harness::with_stream().await;
    let bus = LifecycleBus::create().await;
    let stream = StreamTap::open(&h.admin, &h.table).await;
    (h, bus, stream, unique(prefix))
}

/// Hands `batch` to the publisher, as the event source mapping does: every record that stands for
/// an event passes the mapping's filters (template.yaml), and every event is put.
async fn publish_filtered(bus: &LifecycleBus, batch: aws_lambda_events::dynamodb::Event) {
    // (every record that stands for an event passes the event source mapping's filters)
    let filters = template_filters();
    for record in &batch.records {
        let image = |i: &serde_dynamo::Item| (!i.is_empty()).then(|| i.clone());
        let change = shared::store::lifecycle::events::Change::parse(&record.event_name).unwrap();
        let (old, new) = (
            image(&record.change.old_image),
            image(&record.change.new_image),
        );
        let events = shared::store::lifecycle::events::events_of(
            change,
            &record.event_id,
            old.as_ref(),
            new.as_ref(),
        )
        .unwrap();
        let json = serde_json::to_value(record).unwrap();
        if !events.is_empty() {
            assert!(
                filters.iter().any(|f| matches(f, &json)),
                "{events:?} would be filtered out: {json}"
            );
        }
    }
    let answer = LifecycleBus::publish(&bus.publisher(), batch).await;
    assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
}

/// Import `import` of `tenant` accepted now with 3 products, as create-import accepts it (listed
/// for the lifecycle driver, its record claimed and still `enqueuing`), and its first item written.
async fn accepted_with_one_written(
    h: &Harness,
    tenant: &TenantId,
    import: &EntityId,
) -> shared::store::lifecycle::driving::DueImport {
    use shared::identity::clock::Clock;
    use shared::store::lifecycle::driving::{list_import, DueImport};
    let db = h.app.db_for_operator(tenant).await.unwrap();
    let platform_db = h.app.db_for_operator(&TenantId::platform()).await.unwrap();
    let created_at_ms = h.clock.now_millis();
    let due = DueImport {
        due_at_ms: imports::due_at_ms(created_at_ms),
        tenant: tenant.clone(),
        import: import.clone(),
        created_at_ms,
    };
    list_import(&platform_db, &due).await.unwrap();
    let new = NewImport {
        kind: "product",
        accepted: 3,
        fingerprint: "f",
        created_at_ms,
    };
    imports::claim(&db, tenant, import, &new).await.unwrap();
    let written = imports::ItemOutcome {
        import,
        index: 0,
        outcome: Outcome::Written,
        created_at_ms,
    };
    imports::record_outcome(&db, &written, created_at_ms / 1000)
        .await
        .unwrap();
    due
}

/// The `importFinished` in `events` is import `id`'s as [`accepted_with_one_written`] left it,
/// three accepted and two never sent: its final counts, and no operator.
fn assert_one_import_finished(events: &std::collections::BTreeMap<String, Vec<Value>>, id: &str) {
    let finished = &events["importFinished"][0];
    assert_eq!(finished["outcome"], "failed");
    assert_eq!(finished["importId"], id);
    assert_eq!(finished["kind"], "product");
    assert_eq!(finished["accepted"], 3);
    assert_eq!(finished["counts"], json!({"written": 1, "notEnqueued": 2}));
    assert_eq!(finished["operator"], Value::Null);
}

/// One lifecycle driver run on `h`'s app, every request `refused` tells refused (throttled).
async fn driven_refusing(
    h: &Harness,
    lanes: &tenants::Lanes,
    refused: fn(&str) -> bool,
) -> tenants::drive_lifecycle::Driven {
    h.faults.refuse_requests_matching(Some(refused));
    let run = Box::pin(integration::drive(&h.app, lanes)).await;
    h.faults.refuse_requests_matching(None);
    run.unwrap()
}

/// The driver's note of an import's end on its deadline-list entry.
fn refuse_note(body: &str) -> bool {
    body.contains("IMPORTS_DUE") && body.contains("UpdateExpression")
}

/// The driver's removal of an import's deadline-list entry.
fn refuse_unlisting(body: &str) -> bool {
    body.contains("IMPORTS_DUE") && !body.contains("Expression")
}

/// Each detail-type with how many times it came.
fn counted(about: &std::collections::BTreeMap<String, Vec<Value>>) -> Vec<(&str, usize)> {
    about.iter().map(|(k, v)| (k.as_str(), v.len())).collect()
}

#[tokio::test]
async fn each_lifecycle_change_emits_exactly_one_event_and_a_failed_change_none() {
    // GIVEN a table whose stream feeds the publisher, and a subscriber on the bus
    let (h, bus, mut stream, t) = stage("events").await;

    // WHEN an operator takes a tenant of 20 products through every lifecycle step (a restore
    // too), with failed changes in between
    onboard(&h, &t, 4).await;
    let products: Vec<String> = (0..20).map(|i| format!("p-{i:02}")).collect();
    h.tenant(&t)
        .put_new_products(products.iter().map(|id| (id.clone(), json!({"n": 1}))))
        .await;
    let again = h
        .operator()
        .onboard_tenant(json!({"tenantId": t, "tier": "basic"}))
        .await;
    assert_eq!(
        again.status, 409,
        "onboarding it again fails: {}",
        again.body
    );
    assert_eq!(patch(&h, &t, json!({"tier": "premium"})).await.status, 200);
    assert_eq!(
        patch(&h, &t, json!({"status": "suspended"})).await.status,
        200
    );
    assert_eq!(
        patch(&h, &t, json!({"status": "suspended"})).await.status,
        200,
        "suspending a suspended tenant changes nothing"
    );
    assert_eq!(patch(&h, &t, json!({"status": "active"})).await.status, 200);
    let own = patch(&h, "platform", json!({"status": "suspended"})).await;
    assert_eq!(own.status, 409, "an operator cannot suspend its own tenant");
    let bad = patch(&h, &t, json!({"tier": "golden"})).await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    let reshard = || h.operator().reshard(&t, 8);
    step_to_end(&h, "the re-sharding", MOVES_DELAY_SECONDS, 21, reshard).await;
    let source = h.snapshot("events").await;
    let restore = json!({"from": {"table": source}});
    let restoring = h.operator().restore_tenant(&t, restore.clone()).await;
    assert_eq!(restoring.status, 202, "{}", restoring.body);
    h.clock
        .advance_seconds(shared::store::lifecycle::restoring::STARTS_DELAY_SECONDS);
    let restored = h.operator().restore_tenant(&t, restore).await;
    assert_eq!(restored.status, 200, "{}", restored.body);
    let move_own = || h.operator().move_to(&t, "own");
    step_to_end(&h, "the move", MOVES_DELAY_SECONDS, 21, move_own).await;
    let report = offboard_to_end(&h, &t, &operator()).await;
    let late = patch(&h, &t, json!({"status": "suspended"})).await;
    assert_eq!(late.status, 404, "a gone tenant's record changes no more");

    // AND a tenant's import is closed at its deadline, one item written and two never sent
    let u = onboarded_on_shards(&h, "events-import", 4).await;
    let tenant = TenantId::parse(&u).unwrap();
    let import = EntityId::parse("imp-1").unwrap();
    accepted_with_one_written(&h, &tenant, &import).await;
    h.clock.advance_seconds(FINAL_WITHIN_SECONDS + 1);
    integration::drive_to_end(&h.app).await;
    integration::drive_to_end(&h.app).await;

    // AND the publisher is handed the stream
    let batch = stream.take().await;
    publish_filtered(&bus, batch).await;

    // THEN the subscriber got exactly one event per change
    let delivered = bus.delivered().await;
    let events = about(&delivered, &t);
    assert_eq!(
        counted(&events),
        [
            ("offboardingFinished", 1),
            ("offboardingStarted", 1),
            ("reshardingFinished", 1),
            ("reshardingStarted", 1),
            ("tenantMoveFinished", 1),
            ("tenantMoveStarted", 1),
            ("tenantOnboarded", 1),
            ("tenantRestoreFinished", 1),
            ("tenantRestoreStarted", 1),
            ("tenantResumed", 1),
            ("tenantSuspended", 1),
            ("tenantTierChanged", 1),
        ],
        "{delivered:#?}"
    );
    // AND each names the operator who asked, and what came of it
    for (kind, details) in &events {
        let detail = &details[0];
        assert_eq!(
            detail["operator"]["tenantId"], "platform",
            "{kind}: {detail}"
        );
        assert!(detail["eventId"].is_string(), "{kind}: {detail}");
    }
    let detail = |kind: &str| events[kind][0].clone();
    assert_eq!(detail("tenantOnboarded")["tier"], "standard");
    assert_eq!(detail("tenantTierChanged")["tier"], "premium");
    assert_eq!(detail("tenantTierChanged")["previousTier"], "standard");
    assert_eq!(detail("tenantSuspended")["outcome"], "suspended");
    assert_eq!(detail("reshardingFinished")["from"], 4);
    assert_eq!(detail("reshardingFinished")["shardCount"], 8);
    // (the moves counted are the lanes' too: before the mend both events said 0 for a move run in
    // lanes)
    use shared::identity::shard::shard_for;
    let rehomed = products
        .iter()
        .filter(|id| shard_for(id, 4) != shard_for(id, 8))
        .count();
    assert_eq!(detail("reshardingFinished")["moved"], rehomed);
    assert_eq!(detail("tenantMoveStarted")["to"], "own");
    assert_eq!(
        detail("tenantMoveFinished")["toTable"],
        format!("{}-tenant-{t}", h.table).as_str()
    );
    let moved = detail("tenantMoveFinished")["moved"].as_u64().unwrap();
    assert!(moved >= products.len() as u64, "{moved}");
    assert_eq!(
        detail("offboardingFinished")["deleted"],
        report.body["deleted"],
        "the offboarding's counts are the report's: {}",
        report.body
    );
    // AND the import's one event carries its final counts, with no operator
    let import_events = about(&delivered, &u);
    assert_eq!(
        counted(&import_events),
        [("importFinished", 1), ("tenantOnboarded", 1)],
        "{delivered:#?}"
    );
    assert_one_import_finished(&import_events, "imp-1");
    // AND nothing else was published
    assert_eq!(detail("tenantRestoreFinished")["outcome"], "restored");
    assert_eq!(detail("tenantRestoreFinished")["source"], source.as_str());
    assert_eq!(delivered.len(), 14, "{delivered:#?}");
}

#[tokio::test]
async fn a_put_that_fails_loses_no_event_and_the_retry_sends_each_once_more_at_most() {
    // GIVEN two lifecycle changes on the stream, and a bus that is down
    let (h, bus, mut stream, t) = stage("events-retry").await;
    onboard(&h, &t, 4).await;
    assert_eq!(
        patch(&h, &t, json!({"status": "suspended"})).await.status,
        200
    );
    let batch = stream.take().await;
    let sdk = shared::service::app::load_sdk_config().await;
    let down = aws_sdk_eventbridge::Client::from_conf(
        aws_sdk_eventbridge::config::Builder::from(&sdk)
            .endpoint_url("http://127.0.0.1:9")
            .build(),
    );
    let broken = tenants::publish_events::Publisher::new(down, &bus.name, "pooltable");

    // WHEN the publisher cannot put them
    let answer = LifecycleBus::publish(&broken, batch.clone()).await;

    // THEN it names the first record as the one to resume from, and nothing was delivered
    let first = batch.records[0].change.sequence_number.clone();
    assert_eq!(answer.batch_item_failures.len(), 1, "{answer:?}");
    assert_eq!(answer.batch_item_failures[0].item_identifier, first);
    assert!(about(&bus.delivered().await, &t).is_empty());

    // WHEN Lambda hands the batch over again, from that record, and the bus is back
    let answer = LifecycleBus::publish(&bus.publisher(), batch).await;

    // THEN both events arrive, once each
    assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
    let events = about(&bus.delivered().await, &t);
    assert_eq!(
        counted(&events),
        [("tenantOnboarded", 1), ("tenantSuspended", 1)]
    );
}

#[tokio::test]
async fn a_record_that_cannot_be_read_is_counted_and_passed_without_holding_up_the_rest() {
    // GIVEN a batch whose first record is a tenant record with an image no reader understands,
    // then a good one
    let (h, bus, mut stream, t) = stage("events-unreadable").await;
    onboard(&h, &t, 4).await;
    let mut batch = stream.take().await;
    let mut broken = batch.records[0].clone();
    broken.event_id = "broken".into();
    broken.change.new_image = serde_json::from_value(json!({
        "PK": {"S": raw_key(&t, "TENANT")}, "SK": {"S": raw_key(&t, "TENANT")},
        "tenantId": {"S": t}, "tier": {"N": "5"}
    }))
    .unwrap();
    batch.records.insert(0, broken);
    let metrics = shared::service::metrics::MetricsSink::memory();
    let publisher = bus.publisher().with_metrics(metrics);

    // WHEN the publisher is handed it
    let answer = LifecycleBus::publish(&publisher, batch).await;

    // THEN nothing is retried, the good record's event is out, and the bad one is counted
    assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
    let events = about(&bus.delivered().await, &t);
    assert_eq!(counted(&events), [("tenantOnboarded", 1)]);
    let lines = publisher_lines(&publisher);
    assert!(
        lines
            .iter()
            .any(|l| l["UnreadableLifecycleRecords"] == 1.0 && l["eventId"] == "broken"),
        "{lines:?}"
    );
}

fn publisher_lines(publisher: &tenants::publish_events::Publisher) -> Vec<Value> {
    publisher.metrics().lines()
}

#[tokio::test]
async fn an_import_is_published_once_wherever_its_record_is_when_the_driver_is_cut_off_and_its_tenant_moves(
) {
    use shared::identity::keys::import_due_pk;
    // GIVEN a table whose stream feeds the publisher, a subscriber, and a tenant in a table of its
    // own
    let (h, bus, mut stream, t) = stage("own-import").await;
    let made = h
        .operator()
        .onboard_tenant(json!({"tenantId": t, "tier": "standard", "placement": "own"}))
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let tenant = TenantId::parse(&t).unwrap();
    let db = h.app.db_for_operator(&tenant).await.unwrap();
    assert_ne!(&*db.table, h.table.as_str());
    // AND an import of 3 products it was accepted, one of them written
    let import = EntityId::parse("imp-own").unwrap();
    accepted_with_one_written(&h, &tenant, &import).await;
    let entry = || async {
        h.items_under(&import_due_pk(&tenant, &import))
            .await
            .into_iter()
            .filter(|i| format!("{:?}", i["SK"]).contains("imp-own"))
            .collect::<Vec<_>>()
    };
    let lanes = tenants::Lanes::in_process();
    let drive = || Box::pin(integration::drive(&h.app, &lanes));

    // WHEN its deadline passes, and the driver closes its record (in the tenant's table) but is
    // cut off before its note (the entry's update refused)
    h.clock.advance_seconds(FINAL_WITHIN_SECONDS + 1);
    let unnoted = driven_refusing(&h, &lanes, refuse_note).await;
    // THEN its entry is still listed, not noted
    assert_eq!(unnoted.imports_due, 1, "{unnoted:?}");
    let listed = entry().await;
    assert!(
        !listed.is_empty() && !listed[0].contains_key("closedAtMs"),
        "{listed:?}"
    );

    // WHEN the tenant moves back to the pool (its closed record with it), and the driver runs
    // again, cut off before it unlists the entry (its delete refused)
    let to_pool = || h.operator().move_to(&t, "pool");
    step_to_end(&h, "the move", MOVES_DELAY_SECONDS, 21, to_pool).await;
    let cut = driven_refusing(&h, &lanes, refuse_unlisting).await;
    // THEN its entry is still listed, noted final
    assert_eq!(cut.imports_due, 1, "{cut:?}");
    let noted = entry().await;
    assert_eq!(noted.len(), 1, "{noted:?}");
    assert!(noted[0].contains_key("closedAtMs"), "{noted:?}");

    // WHEN the driver runs again, twice
    let again = drive().await.unwrap();
    let after = drive().await.unwrap();
    // THEN it closed the import again (nothing more to fail) and unlisted it
    assert_eq!((again.imports_closed, after.imports_closed), (1, 0));
    assert!(entry().await.is_empty());

    // AND the publisher, handed the pool's stream (the record's close in the tenant's table never
    // on it, its arrival in the pool and its closes there no event), put exactly one
    // importFinished, with the final counts and no operator
    publish_filtered(&bus, stream.take().await).await;
    let delivered = bus.delivered().await;
    let events = about(&delivered, &t);
    assert_eq!(
        counted(&events),
        [
            ("importFinished", 1),
            ("tenantMoveFinished", 1),
            ("tenantMoveStarted", 1),
            ("tenantOnboarded", 1)
        ],
        "{delivered:#?}"
    );
    assert_one_import_finished(&events, "imp-own");
}

#[tokio::test]
async fn an_import_closed_before_its_tenants_offboarding_began_is_still_published_once() {
    // GIVEN a table whose stream feeds the publisher, a subscriber, and a pooled tenant's import
    // of 3 products, one of them written
    let (h, bus, mut stream, t) = stage("offboarded-import").await;
    onboard(&h, &t, 4).await;
    let tenant = TenantId::parse(&t).unwrap();
    let import = EntityId::parse("imp-gone").unwrap();
    accepted_with_one_written(&h, &tenant, &import).await;
    let lanes = tenants::Lanes::in_process();
    let drive = || Box::pin(integration::drive(&h.app, &lanes));

    // WHEN its deadline passes, and the driver closes it but is cut off before its note
    h.clock.advance_seconds(FINAL_WITHIN_SECONDS + 1);
    let unnoted = driven_refusing(&h, &lanes, refuse_note).await;
    assert_eq!(unnoted.imports_due, 1, "{unnoted:?}");
    // AND the tenant's offboarding begins before the next run, which runs
    let offboarding = h.caller(&operator()).offboard_tenant(&t).await;
    assert_eq!(offboarding.status, 202, "{}", offboarding.body);
    let next = drive().await.unwrap();

    // THEN the entry is gone, nothing written into the tenant, and the publisher put exactly one
    // importFinished, with the final counts as closed
    assert_eq!(next.imports_due, 0, "{next:?}");
    publish_filtered(&bus, stream.take().await).await;
    let delivered = bus.delivered().await;
    let events = about(&delivered, &t);
    assert_eq!(
        counted(&events),
        [
            ("importFinished", 1),
            ("offboardingStarted", 1),
            ("tenantOnboarded", 1)
        ],
        "{delivered:#?}"
    );
    assert_one_import_finished(&events, "imp-gone");
}

#[tokio::test]
async fn a_closed_import_listed_again_by_the_producers_session_is_unlisted_without_a_second_event()
{
    // GIVEN a table whose stream feeds the publisher, a subscriber, and a pooled tenant's import
    // of 3 products, one of them written, closed, noted and unlisted by the driver once due
    let (h, bus, mut stream, t) = stage("relisted-import").await;
    onboard(&h, &t, 4).await;
    let tenant = TenantId::parse(&t).unwrap();
    let import = EntityId::parse("imp-again").unwrap();
    let due = accepted_with_one_written(&h, &tenant, &import).await;
    let lanes = tenants::Lanes::in_process();
    let drive = || Box::pin(integration::drive(&h.app, &lanes));
    h.clock.advance_seconds(FINAL_WITHIN_SECONDS + 1);
    let first = drive().await.unwrap();
    assert_eq!(
        (first.imports_closed, first.imports_due),
        (1, 0),
        "{first:?}"
    );

    // WHEN the import producer's session lists it again, as that session may (a bug in the
    // producer, which parses untrusted input, or a hostile one), and the driver runs
    let producer = h
        .another_container_narrowed(shared::isolation::policy::PlatformAccess::ImportsDue)
        .await;
    let producer_db = producer
        .app
        .db_for_operator(&TenantId::platform())
        .await
        .unwrap();
    shared::store::lifecycle::driving::list_import(&producer_db, &due)
        .await
        .unwrap();
    let again = drive().await.unwrap();

    // THEN the entry is gone again, and the publisher put exactly one importFinished
    assert_eq!(again.imports_due, 0, "{again:?}");
    let pk = shared::identity::keys::import_due_pk(&tenant, &import);
    assert!(h.items_under(&pk).await.is_empty());
    publish_filtered(&bus, stream.take().await).await;
    let delivered = bus.delivered().await;
    let events = about(&delivered, &t);
    assert_eq!(
        counted(&events),
        [("importFinished", 1), ("tenantOnboarded", 1)],
        "{delivered:#?}"
    );
    assert_one_import_finished(&events, "imp-again");
}
