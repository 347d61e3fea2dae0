//! Bulk imports through SQS (functions/imports): the producer route on moto's SQS, the consumer
//! binary as a Lambda process, and a poller that delivers batches the way an event source mapping
//! does (tests/src/import_queue.rs).

use shared::identity::keys::raw_key;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use aws_sdk_sqs::types::{Message, MessageAttributeValue};
use integration::api::NO_PATH;
use integration::import_queue::{drain, Consumer, ImportQueues};
use integration::routes::params;
use integration::{onboard, onboarded_on_shards, unique, Auth, Harness, Resp};
use serde_json::{json, Value};
use shared::identity::ids::TenantId;
use shared::identity::shard::shard_for;

/// `POST /imports` through the handler, sending to `queues`.
pub(crate) async fn post_import(
    h: &Harness,
    queues: &ImportQueues,
    tenant: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> Resp {
    let posted = h
        .tenant(tenant)
        .headers(headers)
        .call("create-import", &NO_PATH, Some(body));
    integration::sending_to(queues.producer(), posted).await
}

async fn get_import(h: &Harness, tenant: &str, id: &str) -> Resp {
    h.tenant(tenant).get_import(id).await
}

/// [`post_import`] with no headers, which must be accepted (202).
async fn accepted(h: &Harness, queues: &ImportQueues, tenant: &str, body: Value) -> Resp {
    let posted = post_import(h, queues, tenant, body, &[]).await;
    assert_eq!(posted.status, 202, "{}", posted.body);
    posted
}

/// The id of the import an accepted `POST /imports` answered.
fn import_id(posted: &Resp) -> &str {
    posted.body["importId"].as_str().unwrap()
}

/// Asserts `tenant`'s import `id` is complete with `written` items written; its progress, for the
/// test's further checks.
async fn assert_complete(h: &Harness, tenant: &str, id: &str, written: u64) -> Value {
    let progress = get_import(h, tenant, id).await;
    assert_eq!(progress.status, 200, "{}", progress.body);
    assert_eq!(progress.body["written"], written, "{}", progress.body);
    assert_eq!(progress.body["status"], "complete", "{}", progress.body);
    progress.body
}

/// A new harness, a fresh tenant named after `prefix` (4 shards, standard tier), and import queues
/// of 3 receives with a 1 s visibility timeout: where most tests here start.
async fn tenant_with_queues(prefix: &str) -> (Harness, String, ImportQueues) {
    let (h, t) = Harness::with_tenant(prefix, 4).await;
    (h, t, ImportQueues::create(3, 1).await)
}

/// The custom limits a test's tenant is onboarded under.
enum Limits {
    /// The maxima an operator may set: no quota ever binds (a test about something other than the
    /// quota: the quota's own tests are below).
    Unbound,
    /// This many capacity units a second (and 250 requests a second: never the one that binds).
    CapacityUnits(u32),
}

/// A new harness and a fresh tenant named after `prefix` on `shards` shards, under `limits`.
async fn custom_tenant(prefix: &str, shards: u32, limits: Limits) -> (Harness, String) {
    let h = Harness::new().await;
    let t = unique(prefix);
    match limits {
        Limits::Unbound => integration::onboard_at_max_limits(&h, &t, shards).await,
        Limits::CapacityUnits(cu) => integration::onboard_custom(&h, &t, shards, 250, cu).await,
    }
    (h, t)
}

/// Asserts each of `items` (tenant `t`'s `entity` items, named by their `id` attribute) is under
/// its shard of 16.
fn assert_each_on_its_shard_of_16<'a>(
    t: &str,
    entity: &str,
    id: &str,
    items: impl IntoIterator<Item = &'a Item>,
) {
    let tenant = TenantId::parse(t).unwrap();
    for item in items {
        let id = s(item, id);
        assert_eq!(
            s(item, "PK"),
            shared::identity::keys::shard_pk(&tenant, entity, shard_for(&id, 16)),
            "{id}"
        );
    }
}

pub(crate) fn products(prefix: &str, n: usize) -> Value {
    let items: Vec<Value> = (0..n)
        .map(|i| json!({"productId": format!("{prefix}-{i:05}"), "document": {"n": i, "name": format!("{prefix} {i}")}}))
        .collect();
    json!({"kind": "products", "items": items})
}

/// A raw table item.
type Item = std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>;

/// The tenant's product items, as raw table items.
async fn product_items(h: &Harness, tenant: &str) -> Vec<Item> {
    h.items_under(&raw_key(tenant, "PRODUCT#")).await
}

/// The ids of the tenant's products in the table, sorted.
async fn product_ids(h: &Harness, tenant: &str) -> Vec<String> {
    let mut ids: Vec<String> = product_items(h, tenant)
        .await
        .iter()
        .map(|i| s(i, "productId"))
        .collect();
    ids.sort();
    ids
}

fn s(item: &Item, name: &str) -> String {
    item[name].as_s().cloned().unwrap_or_default()
}

/// The signature `POST /imports` would give `body` for `tenant`.
fn signed(tenant: &str, body: &str) -> String {
    imports::sign(
        &integration::test_cursor_keys(),
        &TenantId::parse(tenant).unwrap(),
        body,
    )
}

/// The tenant's import sealing key, as the table holds it.
async fn sealing_key_of(h: &Harness, tenant: &str) -> Option<Vec<u8>> {
    let pk = shared::identity::keys::import_sealing_key(&TenantId::parse(tenant).unwrap());
    let out = h
        .admin
        .get_item()
        .table_name(&h.table)
        .key("PK", aws_sdk_dynamodb::types::AttributeValue::S(pk.clone()))
        .key("SK", aws_sdk_dynamodb::types::AttributeValue::S(pk))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    out.item
        .and_then(|i| i.get("key").and_then(|k| k.as_b().ok()).cloned())
        .map(|b| b.into_inner())
}

/// A message body of `tenant` with its sealed items opened, changed by `edit`, and sealed again
/// (as a faulty producer holding the tenant's key would send it).
async fn resealed(
    h: &Harness,
    tenant: &str,
    body: &str,
    edit: impl FnOnce(&mut Vec<imports::MessageItem>),
) -> String {
    let key = sealing_key_of(h, tenant)
        .await
        .expect("the tenant has an import key");
    let mut message: imports::ImportMessage = serde_json::from_str(body).unwrap();
    let t = TenantId::parse(tenant).unwrap();
    let mut items =
        imports::open_items(&key, &t, &message.import_id, &message.sealed_items).unwrap();
    edit(&mut items);
    message.sealed_items = imports::seal_items(&key, &t, &message.import_id, &items).unwrap();
    serde_json::to_string(&message).unwrap()
}

/// Takes `tenant`'s one import message off the queue and sends it back poison: the same message,
/// signed (as a faulty producer would send it), with a document for item 1 that the consumer
/// refuses. The poison message's body.
async fn poison_the_queued_message(h: &Harness, queues: &ImportQueues, tenant: &str) -> String {
    let on_queue = queues.receive(10).await;
    assert_eq!(
        on_queue.len(),
        1,
        "the import's items travel in one message"
    );
    queues
        .sqs
        .delete_message()
        .queue_url(&queues.url)
        .receipt_handle(on_queue[0].receipt_handle().unwrap())
        .send()
        .await
        .unwrap();
    let mut deep = json!("leaf");
    for _ in 0..40 {
        deep = json!({ "d": deep });
    }
    let poison = resealed(h, tenant, on_queue[0].body().unwrap(), |items| {
        set_document(&mut items[1], json!({ "d": deep }))
    })
    .await;
    send_raw(queues, &poison, tenant, Some(&signed(tenant, &poison))).await;
    poison
}

/// Replaces a product item's document (a faulty producer's edit).
fn set_document(item: &mut imports::MessageItem, document: Value) {
    match &mut item.item {
        imports::ImportItem::Product(p) => p.document = document,
        other => panic!("not a product: {other:?}"),
    }
}

async fn send_raw(queues: &ImportQueues, body: &str, tenant: &str, signature: Option<&str>) {
    let attr = |v: &str| {
        MessageAttributeValue::builder()
            .data_type("String")
            .string_value(v)
            .build()
            .unwrap()
    };
    let mut send = queues
        .sqs
        .send_message()
        .queue_url(&queues.url)
        .message_body(body)
        .message_attributes(imports::TENANT_ATTRIBUTE, attr(tenant));
    if let Some(signature) = signature {
        send = send.message_attributes(imports::SIGNATURE_ATTRIBUTE, attr(signature));
    }
    send.send().await.expect("send a message to the queue");
}

#[tokio::test]
async fn five_thousand_products_imported_for_a_16_shard_tenant_land_exactly_once() {
    // GIVEN a 16-shard tenant, the import queue, and two consumers (MaximumConcurrency 2)
    let (h, t) = custom_tenant("bulk", 16, Limits::Unbound).await;
    let queues = ImportQueues::create(5, 10).await;
    let (a, b) = (
        Consumer::start(&h.table, &queues).await,
        Consumer::start(&h.table, &queues).await,
    );

    // WHEN five imports of 1,000 products each are posted; the first is sent twice with its
    // Idempotency-Key, as a client retrying after a lost answer would
    let mut ids = Vec::new();
    for part in 0..5 {
        let body = products(&format!("p{part}"), 1000);
        let key = format!("import-{t}-{part}");
        let first = post_import(&h, &queues, &t, body.clone(), &[("Idempotency-Key", &key)]).await;
        assert_eq!(first.status, 202, "{}", first.body);
        assert_eq!(first.body["accepted"], 1000);
        assert_eq!(first.body["status"], "running");
        if part == 0 {
            let again = post_import(&h, &queues, &t, body, &[("Idempotency-Key", &key)]).await;
            assert_eq!(again.status, 202);
            assert_eq!(
                again.body["importId"], first.body["importId"],
                "the same key is the same import"
            );
        }
        ids.push(import_id(&first).to_owned());
    }
    // AND SQS delivers some messages twice (at-least-once): copies of ten are sent again
    for m in queues.receive(10).await {
        let tenant = m.message_attributes().unwrap()[imports::TENANT_ATTRIBUTE]
            .string_value()
            .unwrap()
            .to_owned();
        let signature = m.message_attributes().unwrap()[imports::SIGNATURE_ATTRIBUTE]
            .string_value()
            .unwrap()
            .to_owned();
        send_raw(&queues, m.body().unwrap(), &tenant, Some(&signature)).await;
    }
    let invocations = drain(&queues, &[&a, &b], 10).await;

    // THEN every product is in the table exactly once, on its shard of 16, with its document
    let items = product_items(&h, &t).await;
    assert_eq!(items.len(), 5000);
    let mut seen = HashSet::new();
    for item in &items {
        let id = s(item, "productId");
        assert!(seen.insert(id.clone()), "{id} twice");
        assert_eq!(
            s(item, "PK"),
            raw_key(&t, format!("PRODUCT#{}", shard_for(&id, 16)))
        );
        let n: usize = id.rsplit('-').next().unwrap().parse().unwrap();
        assert_eq!(
            item["document"].as_m().unwrap()["n"].as_n().unwrap(),
            &n.to_string()
        );
    }
    // AND each import reports 1,000 written, none failed, and nothing went to the dead-letter queue
    for id in &ids {
        let progress = assert_complete(&h, &t, id, 1000).await;
        assert_eq!(progress["failed"], 0);
    }
    assert!(queues.dead_letters().await.is_empty());
    // 5,000 items in messages of 25: 200 messages, and the 10 copies
    assert!(
        invocations >= 21,
        "{invocations} invocations for 210 messages in batches of 10"
    );
}

#[tokio::test]
async fn a_poison_item_reaches_the_dead_letter_queue_after_the_retry_count_and_is_reported_failed()
{
    // GIVEN an import of three products (one message), which on the queue has become poison: the
    // same message, signed (as a faulty producer would send it), with a document for item 1 that the
    // consumer refuses
    let (h, t, queues) = tenant_with_queues("poison").await;
    let consumer = Consumer::start(&h.table, &queues).await;
    let posted = accepted(&h, &queues, &t, products("ok", 3)).await;
    let id = import_id(&posted).to_owned();
    let poison = poison_the_queued_message(&h, &queues, &t).await;

    // WHEN the poller delivers until the queue is empty (the message comes back once its
    // visibility timeout of 1 s has passed)
    drain(&queues, &[&consumer], 10).await;

    // THEN the message is on the dead-letter queue, after 3 deliveries
    let dead = queues.dead_letters().await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].body(), Some(poison.as_str()));
    let log = consumer.logged();
    assert_eq!(
        log.matches("an import item was not written").count(),
        3,
        "{log}"
    );
    // AND the import is final: the poison item failed (rejected), the others written
    let progress = get_import(&h, &t, &id).await;
    assert_eq!(progress.body["accepted"], 3);
    assert_eq!(progress.body["written"], 2, "{}", progress.body);
    assert_eq!(progress.body["failed"], 1, "{}", progress.body);
    assert_eq!(
        progress.body["failedBy"]["rejected"], 1,
        "{}",
        progress.body
    );
    assert_eq!(progress.body["status"], "failed");
    // AND the good products were written once, the poison one never
    let written = product_ids(&h, &t).await;
    assert_eq!(written, ["ok-00000", "ok-00002"]);
}

#[tokio::test]
async fn a_message_written_straight_to_the_queue_for_another_tenant_is_refused_and_nothing_is_written(
) {
    // GIVEN two tenants, and an attacker with sqs:SendMessage who saw one of mallory's messages
    let (h, [mallory, victim]) = Harness::with_tenants([("mallory", 4), ("victim", 4)]).await;
    let queues = ImportQueues::create(3, 1).await;
    let consumer = Consumer::start(&h.table, &queues).await;
    let posted = post_import(&h, &queues, &mallory, products("m", 1), &[]).await;
    assert_eq!(posted.status, 202);
    let genuine = queues.receive(1).await.remove(0);
    let body = genuine.body().unwrap().to_owned();
    let mallorys_signature = genuine.message_attributes().unwrap()[imports::SIGNATURE_ATTRIBUTE]
        .string_value()
        .unwrap()
        .to_owned();

    // WHEN messages naming the victim are written straight to the queue: mallory's signed message
    // with the tenant attribute changed, one with no signature, one signed with another key, and
    // one whose body was edited under mallory's signature
    send_raw(&queues, &body, &victim, Some(&mallorys_signature)).await;
    send_raw(&queues, &body, &victim, None).await;
    let other_key = shared::identity::cursor::CursorKeys::new(&[9; 32], None).unwrap();
    let forged = imports::sign(&other_key, &TenantId::parse(&victim).unwrap(), &body);
    send_raw(&queues, &body, &victim, Some(&forged)).await;
    let edited = resealed(&h, &mallory, &body, |items| {
        set_document(&mut items[0], json!({"n": 666}))
    })
    .await;
    send_raw(&queues, &edited, &mallory, Some(&mallorys_signature)).await;
    // AND validly signed messages that must not be written either: one older than its markers (a
    // replay), and one sent for an earlier tenant of the same id (offboarded, then onboarded again)
    let mut replay: Value = serde_json::from_str(&body).unwrap();
    replay["issuedAt"] = json!(integration::real_now_millis() - 15 * 24 * 3600 * 1000);
    let replay = replay.to_string();
    send_raw(&queues, &replay, &mallory, Some(&signed(&mallory, &replay))).await;
    let mut former: Value = serde_json::from_str(&body).unwrap();
    former["tenantSince"] = json!("2020-01-01T00:00:00Z");
    let former = former.to_string();
    send_raw(&queues, &former, &mallory, Some(&signed(&mallory, &former))).await;
    drain(&queues, &[&consumer], 10).await;

    // THEN nothing was written for the victim, and mallory's product is as mallory sent it
    assert!(product_items(&h, &victim).await.is_empty());
    assert!(h.items_under(&raw_key(&victim, "IMPORT#")).await.is_empty());
    let mine = product_items(&h, &mallory).await;
    assert_eq!(mine.len(), 1);
    assert_eq!(
        mine[0]["document"].as_m().unwrap()["n"].as_n().unwrap(),
        "0"
    );
    // AND each forgery raised an alarm and was kept, never written, in the dead-letter queue (it
    // could have been signed with a key this consumer did not know yet); the signed replays were
    // dropped for good
    let log = consumer.logged();
    assert!(log.matches("forged_import_message").count() >= 4, "{log}");
    assert_eq!(queues.dead_letters().await.len(), 4);
    assert_eq!(log.matches("expired_import_message").count(), 1, "{log}");
    assert_eq!(
        log.matches("import_for_a_former_tenant").count(),
        1,
        "{log}"
    );
    let id = import_id(&posted);
    assert_eq!(get_import(&h, &mallory, id).await.body["written"], 1);
    // AND the victim cannot read mallory's import either
    assert_eq!(get_import(&h, &victim, id).await.status, 404);
}

#[tokio::test]
async fn a_consumer_that_crashes_mid_batch_loses_nothing() {
    // GIVEN an import of 1,000 products: 40 messages, the first 10 (250 items) delivered as a batch
    let (h, t) = custom_tenant("crash", 8, Limits::Unbound).await;
    let queues = ImportQueues::create(5, 2).await;
    let posted = post_import(&h, &queues, &t, products("c", 1000), &[]).await;
    assert_eq!(posted.status, 202);
    let id = import_id(&posted).to_owned();
    let crashing = Consumer::start(&h.table, &queues).await;
    let batch = queues.receive(10).await;
    assert_eq!(batch.len(), 10);

    // WHEN the consumer process is killed while it writes the batch
    let event = queues.event(&batch);
    let invocation = crashing.invoke(&event, Duration::from_secs(60));
    let crash = async {
        let prefix = raw_key(&t, "PRODUCT#");
        loop {
            let written = h.items_under(&prefix).await.len();
            if written > 0 {
                crashing.kill().await;
                return written;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    let (answer, _) = tokio::select! {
        answer = invocation => (answer, 0),
        written = crash => (None, written),
    };
    assert!(
        answer.is_none(),
        "the batch finished before the crash; make it larger"
    );
    let at_crash = product_items(&h, &t).await.len();
    assert!(at_crash < 250, "the batch was not cut: {at_crash} written");
    // AND the poller, with no answer, deletes nothing; a new execution environment takes over
    assert_eq!(queues.settle(&batch, None).await, 0);
    let replacement = Consumer::start(&h.table, &queues).await;
    drain(&queues, &[&replacement], 10).await;

    // THEN every product is written exactly once, and the import's counts are exact
    let items = product_items(&h, &t).await;
    assert_eq!(items.len(), 1000);
    assert_eq!(
        items
            .iter()
            .map(|i| s(i, "productId"))
            .collect::<HashSet<_>>()
            .len(),
        1000
    );
    let progress = assert_complete(&h, &t, &id, 1000).await;
    assert_eq!(progress["failed"], 0);
    assert!(queues.dead_letters().await.is_empty());
}

/// Posts each body as `t`'s import: each is a 400 naming its field, and nothing is enqueued or
/// recorded.
async fn refused_and_nothing_enqueued<const N: usize>(
    h: &Harness,
    queues: &ImportQueues,
    t: &str,
    cases: [(Value, &str); N],
) {
    for (body, field) in cases {
        let r = post_import(h, queues, t, body, &[]).await;
        r.assert_problem(400);
        assert_eq!(r.body["field"], field, "{}", r.body);
    }
    assert_eq!(queues.backlog(&queues.url).await, 0, "nothing was enqueued");
    assert!(h.items_under(&raw_key(t, "IMPORT#")).await.is_empty());
}

#[tokio::test]
async fn a_bad_item_is_refused_by_its_index_and_nothing_is_enqueued() {
    let (h, t, queues) = tenant_with_queues("checked").await;
    let mut body = products("b", 5);
    body["items"][3]["document"] = json!([1, 2]);
    let cases = [
        (body, "items[3].document"),
        (
            json!({"kind": "products", "items": [{"productId": "no#pe", "document": {}}]}),
            "items[0]",
        ),
        (
            json!({"kind": "products", "items": [{"productId": "a", "document": {}, "extra": 1}]}),
            "items[0]",
        ),
        (
            json!({"kind": "products", "items": [{"productId": "a", "document": {"s": "\u{FFFF}"}}]}),
            "items[0].document",
        ),
        (json!({"kind": "products", "items": []}), "items"),
        (products("many", 1001), "items"),
        (json!({"kind": "orders", "items": [{}]}), "kind"),
    ];
    // AND a body of 3.3 MB whose quotes take it past 6 MB in the Lambda event (each `\"` travels
    // as four bytes) is a 413 that says so (before the mend: accepted by the handler, refused by
    // Lambda before it ran, with no problem+json)
    let quoted: Vec<Value> = (0..1000)
        .map(|i| json!({"productId": format!("q-{i:04}"), "document": {"q": "\"".repeat(1600)}}))
        .collect();
    let quoted = json!({"kind": "products", "items": quoted});
    assert!(quoted.to_string().len() < 3_500_000);
    let r = post_import(&h, &queues, &t, quoted, &[]).await;
    r.assert_problem(413);
    assert!(
        r.body["detail"].as_str().unwrap().contains("JSON-escaped"),
        "{}",
        r.body
    );
    refused_and_nothing_enqueued(&h, &queues, &t, cases).await;
    // AND an unknown import is 404
    get_import(&h, &t, "0123456789abcdef")
        .await
        .assert_problem(404);
}

#[tokio::test]
async fn a_product_written_after_the_import_was_accepted_is_not_replaced_by_it() {
    // GIVEN an import of two products, still on the queue
    let (h, t, queues) = tenant_with_queues("late").await;
    let consumer = Consumer::start(&h.table, &queues).await;
    let posted = accepted(&h, &queues, &t, products("x", 2)).await;
    // WHEN the tenant writes one of them (a PUT after the import was accepted), then the queue drains
    h.clock.advance_seconds(1);
    let put = h
        .tenant(&t)
        .put_product("x-00001", json!({"by": "put"}))
        .await;
    assert_eq!(put.status, 201, "{}", put.body);
    drain(&queues, &[&consumer], 10).await;
    // THEN the PUT's document stands, the other product is imported, and the counts say so
    let items = product_items(&h, &t).await;
    let doc = |id: &str| {
        let item = items.iter().find(|i| s(i, "productId") == id).unwrap();
        item["document"].as_m().unwrap().clone()
    };
    assert_eq!(doc("x-00001")["by"].as_s().unwrap(), "put");
    assert!(!doc("x-00001").contains_key("n"));
    assert_eq!(doc("x-00000")["n"].as_n().unwrap(), "0");
    let id = import_id(&posted);
    let progress = assert_complete(&h, &t, id, 1).await;
    assert_eq!(progress["superseded"], 1, "{progress}");
}

#[tokio::test]
async fn an_idempotency_key_names_one_import_even_after_a_failure_part_way() {
    let (h, t, queues) = tenant_with_queues("keyed").await;
    let consumer = Consumer::start(&h.table, &queues).await;
    let key = [("Idempotency-Key", "import-once")];
    // GIVEN a keyed import whose queue is unreachable: 503, and its record says it is enqueuing
    let broken = ImportQueues::unreachable(&queues).await;
    let failed = post_import(&h, &broken, &t, products("k", 30), &key).await;
    failed.assert_problem(503);
    let id = {
        let records = h.items_under(&raw_key(&t, "IMPORT#")).await;
        assert_eq!(
            records.len(),
            1,
            "the record is claimed before anything is sent"
        );
        s(&records[0], "importId")
    };
    assert_eq!(get_import(&h, &t, &id).await.body["status"], "enqueuing");
    // WHEN the same key comes with another body: 422, and nothing is sent
    let other = post_import(&h, &queues, &t, products("other", 3), &key).await;
    other.assert_problem(422);
    assert_eq!(queues.backlog(&queues.url).await, 0);
    // WHEN the same request is retried: 202 with the same import, and sent again in full
    let retried = post_import(&h, &queues, &t, products("k", 30), &key).await;
    assert_eq!(retried.status, 202, "{}", retried.body);
    assert_eq!(retried.body["importId"], id.as_str());
    // (relative to the request's URL, so under the API's stage too)
    let location = format!("imports/{id}");
    assert_eq!(retried.location.as_deref(), Some(location.as_str()));
    let replayed = post_import(&h, &queues, &t, products("k", 30), &key).await;
    assert_eq!(replayed.status, 202);
    // AND the replay carries every header the contract documents for the 202, Location included
    assert!(replayed.replayed, "a replay");
    assert_eq!(replayed.location.as_deref(), Some(location.as_str()));
    assert_eq!(replayed.body, retried.body);
    drain(&queues, &[&consumer], 10).await;
    // THEN each item is written once
    assert_complete(&h, &t, &id, 30).await;
    assert_eq!(product_items(&h, &t).await.len(), 30);
}

/// The import's claim: the PutItem of its record (the only request naming `itemKind`).
fn is_import_claim(body: &str) -> bool {
    body.contains("\"itemKind\"")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_requests_with_one_idempotency_key_at_once_answer_the_same_recorded_answer() {
    // GIVEN a tenant with its queues, and a second container of the same table
    let (h, t, queues) = tenant_with_queues("key-race").await;
    let second = std::sync::Arc::new(h.another_container().await);
    let key = [("Idempotency-Key", "import-race")];
    // WHEN a keyed import, sent through the second container, is held just before it claims the
    // import's record (it found no answer recorded for its key)
    let mut held = second.faults.hold_next_matching(is_import_claim);
    let late = integration::aside({
        let (second, producer, t) = (second.clone(), queues.producer(), t.clone());
        move || async move {
            let posted = second
                .tenant(&t)
                .headers(&[("Idempotency-Key", "import-race")])
                .call("create-import", &NO_PATH, Some(products("r", 3)));
            integration::sending_to(producer, posted).await
        }
    });
    held.reached().await;
    // AND the same request, with the same key, is answered meanwhile
    let first = post_import(&h, &queues, &t, products("r", 3), &key).await;
    assert_eq!(first.status, 202, "{}", first.body);
    held.release();
    let answered_late = late.ended().await;

    // THEN the held request answers what the first recorded, replayed, byte for byte
    assert_eq!(answered_late.status, 202, "{}", answered_late.body);
    assert!(answered_late.replayed, "a replay: {}", answered_late.body);
    assert_eq!(answered_late.body, first.body);
    assert_eq!(answered_late.location, first.location);
    // AND the items were sent once
    assert_eq!(queues.backlog(&queues.url).await, 1);
}

#[tokio::test]
async fn a_product_given_twice_keeps_its_last_item() {
    // GIVEN an import naming product `a` twice, and `b` once
    let (h, t, queues) = tenant_with_queues("twice").await;
    let consumer = Consumer::start(&h.table, &queues).await;
    let body = json!({"kind": "products", "items": [
        {"productId": "a", "document": {"v": 1}},
        {"productId": "b", "document": {"v": 1}},
        {"productId": "a", "document": {"v": 2}},
    ]});
    // WHEN it is posted and the queue drained
    let posted = accepted(&h, &queues, &t, body).await;
    drain(&queues, &[&consumer], 10).await;
    // THEN two products are accepted and written, `a` with its last document
    assert_eq!(posted.body["accepted"], 2);
    let id = import_id(&posted);
    assert_complete(&h, &t, id, 2).await;
    let items = product_items(&h, &t).await;
    let a = items.iter().find(|i| s(i, "productId") == "a").unwrap();
    assert_eq!(a["document"].as_m().unwrap()["v"].as_n().unwrap(), "2");
    assert_eq!(items.len(), 2);
}

#[test]
fn the_template_levels_imports_through_a_queue_with_a_dead_letter_queue_and_least_privilege() {
    let t = integration::template::load();
    let r = &t["Resources"];
    // The consumer: on the queue, reporting batch item failures, with bounded concurrency
    let consumer = &r["ImportConsumerFunction"]["Properties"];
    let source = &consumer["Events"]["Queue"];
    assert_eq!(source["Type"].as_str(), Some("SQS"));
    let props = &source["Properties"];
    assert_eq!(
        serde_yaml::to_string(&props["FunctionResponseTypes"])
            .unwrap()
            .trim(),
        "- ReportBatchItemFailures"
    );
    assert!(!props["ScalingConfig"]["MaximumConcurrency"].is_null());
    // The queue sends to the dead-letter queue after as many receives as the consumer counts
    let redrive = &r["ImportQueue"]["Properties"]["RedrivePolicy"];
    let max_receives = redrive["maxReceiveCount"].as_u64().unwrap();
    assert_eq!(
        consumer["Environment"]["Variables"]["IMPORT_MAX_RECEIVES"].as_str(),
        Some(max_receives.to_string().as_str())
    );
    assert_eq!(
        serde_yaml::to_string(&redrive["deadLetterTargetArn"])
            .unwrap()
            .trim(),
        "!GetAtt ImportDeadLetterQueue.Arn"
    );
    // Least privilege: the producer may only send, the consumer only receive and delete (plus the
    // attribute read the event source mapping needs); no other role reaches SQS
    let sqs_actions = |resource: &str, property: &str| -> Vec<String> {
        let text = serde_yaml::to_string(&r[resource]["Properties"][property]).unwrap();
        let mut actions: Vec<String> = text
            .split_whitespace()
            .filter(|w| w.starts_with("sqs:"))
            .map(|w| {
                w.trim_matches(|c| c == ',' || c == '[' || c == ']')
                    .to_owned()
            })
            .collect();
        actions.sort();
        actions
    };
    assert_eq!(
        sqs_actions("ImportQueueSendPolicy", "PolicyDocument"),
        ["sqs:SendMessage"]
    );
    assert_eq!(
        sqs_actions("ImportQueueConsumePolicy", "PolicyDocument"),
        [
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
            "sqs:ReceiveMessage",
            // a message deferred by its tenant's capacity quota goes back as a delayed copy
            "sqs:SendMessage"
        ]
    );
    // (which role holds which: tests/tests/all/roles.rs, from routes.yaml's `reaches`)
    assert!(sqs_actions("TenantAccessRole", "Policies").is_empty());
    // The consumer serves every tenant from one pool: an event source mapping passes no tenant id
    assert!(!consumer["TenancyConfig"].is_null());
}

#[test]
fn the_consumer_event_is_an_sqs_batch_for_acme_signed_at_run_time() {
    let raw = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../events/import-consumer.json"),
    )
    .unwrap();
    // Its signature, issuedAt and tenantSince are filled in per run (scripts/import_queue.py sign-event).
    let event: aws_lambda_events::event::sqs::SqsEvent = serde_json::from_str(&raw).unwrap();
    assert_eq!(event.records.len(), 1);
    let message = &event.records[0];
    assert_eq!(
        message.message_attributes[imports::TENANT_ATTRIBUTE]
            .string_value
            .as_deref(),
        Some("acme")
    );
    // The committed body shows its items in the clear, as `items`; sign-event seals them with the
    // tenant's import key into `sealedItems`, as POST /imports sends them.
    let body: Value = serde_json::from_str(message.body.as_deref().unwrap()).unwrap();
    assert_eq!(body["items"][0]["index"], 0);
    assert!(body.get("sealedItems").is_none());
}

#[tokio::test]
async fn a_re_onboarded_tenants_import_is_written_by_a_consumer_that_served_the_old_one() {
    // GIVEN a consumer that has just written an import of tenant T (it caches T's record for 30 s)
    let (h, t, queues) = tenant_with_queues("again").await;
    let consumer = Consumer::start(&h.table, &queues).await;
    accepted(&h, &queues, &t, products("old", 5)).await;
    drain(&queues, &[&consumer], 10).await;
    assert_eq!(product_items(&h, &t).await.len(), 5);
    // AND T offboarded and onboarded again, all within that consumer's cache window
    integration::offboard_to_end(&h, &t, &Auth::Operator(unique("ops"))).await;
    onboard(&h, &t, 4).await;
    h.clock.advance_seconds(1);
    // WHEN the new T imports, and the same consumer takes its messages
    let second = accepted(&h, &queues, &t, products("new", 7)).await;
    drain(&queues, &[&consumer], 10).await;
    // THEN every item is written, and the import completes
    let id = import_id(&second);
    assert_complete(&h, &t, id, 7).await;
    assert_eq!(product_items(&h, &t).await.len(), 7);
}

#[tokio::test]
async fn a_superseded_item_delivered_again_after_the_newer_product_is_deleted_is_not_written() {
    use shared::identity::clock::Clock;
    // GIVEN an import of two products, one of which the tenant writes after the import was
    // accepted: the consumer counts that item as superseded
    let (h, t, queues) = tenant_with_queues("resurrect").await;
    let consumer = Consumer::start(&h.table, &queues).await;
    let accepted_at = h.clock.now_millis();
    let posted = accepted(&h, &queues, &t, products("x", 2)).await;
    h.clock.advance_seconds(1);
    let auth = Auth::Tenant(t.clone());
    let path = params(&[("productId", "x-00001")]);
    let put = h
        .caller(&auth)
        .call("put-product", &path, Some(json!({"by": "put"})))
        .await;
    assert_eq!(put.status, 201, "{}", put.body);
    drain(&queues, &[&consumer], 10).await;
    let id = import_id(&posted);
    assert_eq!(get_import(&h, &t, id).await.body["superseded"], 1);
    // WHEN the newer product is deleted, and the import's message for it is delivered again
    let deleted = h.caller(&auth).call("delete-product", &path, None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    let record = h.caller(&auth).get_tenant(&t).await;
    let message = json!({
        "importId": id,
        "kind": "products",
        "issuedAt": accepted_at,
        "tenantSince": record.body["createdAt"],
        "items": [{"index": 1, "productId": "x-00001", "document": {"n": 1, "name": "x 1"}}],
    })
    .to_string();
    send_raw(&queues, &message, &t, Some(&signed(&t, &message))).await;
    drain(&queues, &[&consumer], 10).await;
    // THEN the product stays deleted, and the item still counts as superseded, once
    assert!(product_items(&h, &t)
        .await
        .iter()
        .all(|i| s(i, "productId") != "x-00001"));
    let progress = get_import(&h, &t, id).await;
    assert_eq!(progress.body["superseded"], 1, "{}", progress.body);
    assert_eq!(progress.body["written"], 1, "{}", progress.body);
}

#[tokio::test]
async fn an_import_draws_from_the_tenants_capacity_quota() {
    // GIVEN a tenant of 100 capacity units a second, the import queue and a consumer process
    let (h, t) = custom_tenant("quota", 1, Limits::CapacityUnits(100)).await;
    let queues = ImportQueues::create(5, 10).await;
    let consumer = Consumer::start(&h.table, &queues).await;
    // WHEN it imports 20 products of 20 KB (one message; about 800 write units with their GSI1
    // copies: 8 seconds of its quota)
    let items: Vec<Value> = (0..20)
        .map(|i| json!({"productId": format!("big-{i:02}"), "document": {"blob": "x".repeat(20 * 1024)}}))
        .collect();
    let accepted = accepted(&h, &queues, &t, json!({"kind": "products", "items": items})).await;
    drain(&queues, &[&consumer], 10).await;
    // THEN every product is written, once the quota allowed: the message was deferred (its record
    // says so) rather than written at once
    assert_eq!(product_items(&h, &t).await.len(), 20);
    let id = import_id(&accepted);
    let record = h
        .items_under(&raw_key(&t, format!("IMPORT#{id}")))
        .await
        .into_iter()
        .find(|i| s(i, "kind") == "IMPORT")
        .unwrap();
    assert!(record.contains_key("deferredAtMs"), "{record:?}");
    // AND over any 10 seconds the tenant consumed at most 1.2 times its quota, plus the items in
    // flight (4) when its bucket ran dry
    let by_second = units_by_second(&h, &t).await;
    let bound = 1.2 * 100.0 * 10.0 + 4.0 * 45.0;
    for from in by_second.keys() {
        let used: f64 = by_second.range(*from..from + 10).map(|(_, u)| u).sum();
        assert!(
            used <= bound,
            "{used} units in 10 s (bound {bound}): {by_second:?}"
        );
    }
}

/// Signing keys as a function holds them during a rotation: `current`, `previous`, `next`.
fn rotation_keys(
    current: &str,
    previous: Option<&str>,
    next: Option<&str>,
) -> shared::identity::cursor::CursorKeys {
    let keys =
        shared::identity::cursor::CursorKeys::new(current.as_bytes(), previous.map(str::as_bytes))
            .unwrap();
    match next {
        Some(next) => keys.with_next(next.as_bytes()).unwrap(),
        None => keys,
    }
}

/// A consumer process holding `current`, `previous` and `next` (empty: none).
async fn consumer_with_keys(table: &str, current: &str, previous: &str, next: &str) -> Consumer {
    let env = [
        ("CURSOR_SIGNING_KEY", current.to_owned()),
        ("CURSOR_SIGNING_KEY_PREVIOUS", previous.to_owned()),
        ("CURSOR_SIGNING_KEY_NEXT", next.to_owned()),
        ("IMPORT_MAX_RECEIVES", "5".to_owned()),
    ];
    Consumer::start_bin(&integration::import_queue::consumer_bin(), table, &env).await
}

#[tokio::test]
async fn a_key_rotation_in_either_order_of_functions_drops_no_message_and_writes_each_item_once() {
    // GIVEN a tenant, the import queue, and a rotation from key OLD to key NEW in two steps:
    // step 1 gives every function NEW as its next key, step 2 makes NEW current and OLD previous
    let (h, t) = Harness::with_tenant("rotate", 4).await;
    let queues = ImportQueues::create(5, 1).await;
    let (old, new) = ("o".repeat(32), "n".repeat(32));
    let producer = |keys| {
        let h = &h;
        async move {
            let p = h.another_container().await;
            p.app.signing.set(keys, 0);
            p
        }
    };
    let step1_producer = producer(rotation_keys(&old, None, Some(&new))).await;
    let step2_producer = producer(rotation_keys(&new, Some(&old), None)).await;
    let step1_consumer = consumer_with_keys(&h.table, &old, "", &new).await;
    let step2_consumer = consumer_with_keys(&h.table, &new, &old, "").await;
    let before_consumer = consumer_with_keys(&h.table, &old, "", "").await;

    // WHEN step 2 reaches the producer first: it signs with NEW while a message signed with OLD is
    // still in flight, and the consumer (at step 1) reads both
    let first = post_import(&step1_producer, &queues, &t, products("a", 5), &[]).await;
    let second = post_import(&step2_producer, &queues, &t, products("b", 5), &[]).await;
    drain(&queues, &[&step1_consumer], 10).await;
    // AND, the other way round, step 2 reaches the consumer first: it reads a message the
    // producer (still at step 1) signed with OLD
    let third = post_import(&step1_producer, &queues, &t, products("c", 5), &[]).await;
    drain(&queues, &[&step2_consumer], 10).await;
    // AND a message signed with NEW reaches a consumer that missed step 1 before one that has it
    let fourth = post_import(&step2_producer, &queues, &t, products("d", 5), &[]).await;
    let batch = queues.receive(10).await;
    assert_eq!(batch.len(), 1);
    let answer = before_consumer
        .invoke(&queues.event(&batch), Duration::from_secs(60))
        .await;
    assert_eq!(
        queues.settle(&batch, answer.as_ref()).await,
        0,
        "deleted: {answer:?}"
    );
    drain(&queues, &[&step2_consumer], 10).await;

    // THEN no message was dropped, and every item was written exactly once
    for (import, prefix) in [(first, "a"), (second, "b"), (third, "c"), (fourth, "d")] {
        assert_eq!(import.status, 202, "{}", import.body);
        let id = import_id(&import);
        let state = get_import(&h, &t, id).await;
        assert_eq!(state.body["written"], 5, "import {prefix}: {}", state.body);
    }
    assert_eq!(product_items(&h, &t).await.len(), 20);
    assert!(queues.dead_letters().await.is_empty());
    // AND the consumer that missed step 1 raised the alarm, but wrote nothing and deleted nothing
    assert!(before_consumer.logged().contains("forged_import_message"));
}

#[tokio::test]
async fn a_product_deleted_after_the_import_was_accepted_stays_deleted() {
    // GIVEN an import of two products that already exist, still on the queue
    let (h, t) = Harness::with_tenant("deleted", 4).await;
    h.tenant(&t)
        .put_new_products(["x-00000", "x-00001"].map(|id| (id.to_owned(), json!({"by": "put"}))))
        .await;
    h.clock.advance_seconds(1);
    let queues = ImportQueues::create(3, 1).await;
    let consumer = Consumer::start(&h.table, &queues).await;
    let posted = accepted(&h, &queues, &t, products("x", 2)).await;
    // WHEN the tenant deletes one of them after the import was accepted, then the queue drains
    h.clock.advance_seconds(1);
    let delete = h.tenant(&t).delete_product("x-00001").await;
    assert_eq!(delete.status, 204, "{}", delete.body);
    drain(&queues, &[&consumer], 10).await;
    // THEN the deleted product stays deleted, the other is imported, and the counts say so
    let items = product_items(&h, &t).await;
    let ids: Vec<String> = items.iter().map(|i| s(i, "productId")).collect();
    assert_eq!(ids, ["x-00000"], "{ids:?}");
    let id = import_id(&posted);
    let progress = assert_complete(&h, &t, id, 1).await;
    assert_eq!(progress["superseded"], 1, "{progress}");
    // AND a delete of a product that is not there answers 404 and still records its deletion
    // (what lets it win over an import accepted before it that has not landed yet)
    let missing = h.tenant(&t).delete_product("never").await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        h.items_under(&raw_key(&t, "DELETED#PRODUCT#never"))
            .await
            .len(),
        1
    );
    // AND an import accepted after the delete writes the product again (the tenant's later word)
    h.clock.advance_seconds(1);
    accepted(&h, &queues, &t, products("x", 2)).await;
    drain(&queues, &[&consumer], 10).await;
    assert_eq!(product_items(&h, &t).await.len(), 2);
}

/// Re-shards `t` to 16 shards while a consumer running in this process, on the test's clock (so
/// the migration's delays pass for both), delivers `first` messages before writes move, `first`
/// after they move, and one between each of the migrator's steps.
async fn reshard_to_16_while_consuming(h: &Harness, queues: &ImportQueues, t: &str, first: usize) {
    use shared::store::lifecycle::resharding::{MOVES_DELAY_SECONDS, WRITES_MOVE_DELAY_SECONDS};
    let settings = imports::consume::ConsumerSettings {
        max_receives: 5,
        writes_in_flight: 4,
        requeue: None,
        max_defer_seconds: imports::consume::DEFAULT_MAX_DEFER_SECONDS,
    };
    let settings = &settings;
    let deliver = |messages: usize| async move {
        let batch = queues.receive(messages).await;
        let event = serde_json::from_value(queues.event(&batch)).unwrap();
        let answer = integration::import_queue::consume(&h.app, settings, event).await;
        let answer = serde_json::to_value(answer).unwrap();
        queues.settle(&batch, Some(&answer)).await
    };
    let (at, operator) = (params(&[("tenantId", t)]), integration::operator());
    let reshard = || {
        h.caller(&operator)
            .call("update-tenant", &at, Some(json!({"shardCount": 16})))
    };
    assert_eq!(reshard().await.status, 202);
    assert_eq!(deliver(first).await, first);
    h.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS + 1);
    assert_eq!(deliver(first).await, first);
    h.clock.advance_seconds(MOVES_DELAY_SECONDS);
    let mut steps = 0;
    loop {
        steps += 1;
        assert!(steps < 200, "the migration never finished");
        let r = reshard().await;
        if queues.backlog(&queues.url).await > 0 {
            deliver(1).await;
        }
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 202, "{}", r.body);
    }
}

#[tokio::test]
async fn an_import_during_a_resharding_from_4_to_16_writes_every_item_once_on_its_new_shard() {
    // GIVEN a 4-shard tenant and an import of 300 products (12 messages) on the queue; the
    // consumer runs in this process, on this test's clock, so the migration's delays pass for both
    let (h, t) = custom_tenant("moving", 4, Limits::Unbound).await;
    let queues = ImportQueues::create(5, 1).await;
    let posted = accepted(&h, &queues, &t, products("m", 300)).await;
    // WHEN the tenant is re-sharded to 16 while the consumer writes: before writes move, after
    // they move, and between the migrator's steps
    reshard_to_16_while_consuming(&h, &queues, &t, 2).await;
    let consumer = Consumer::start(&h.table, &queues).await;
    drain(&queues, &[&consumer], 10).await;
    // THEN every product is there exactly once, each on its shard of 16
    let items = product_items(&h, &t).await;
    let mut ids: Vec<String> = items.iter().map(|i| s(i, "productId")).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 300);
    assert_eq!(items.len(), 300, "a product has two copies");
    assert_each_on_its_shard_of_16(&t, "PRODUCT", "productId", &items);
    assert_complete(&h, &t, import_id(&posted), 300).await;
}

#[tokio::test]
async fn after_an_offboarding_nothing_readable_of_the_tenant_stays_on_the_queue_or_its_dead_letters(
) {
    // GIVEN a tenant's import still on the queue, and one of its messages already on the
    // dead-letter queue (a consumer kept failing it)
    let (h, t) = Harness::with_tenant("leaving", 4).await;
    let queues = ImportQueues::create(1, 1).await;
    let documents = |prefix: &str| {
        let items: Vec<Value> = (0..30)
            .map(|i| json!({"productId": format!("{prefix}-{i:02}"), "document": {"recipe": format!("secret-recipe-{i}")}}))
            .collect();
        json!({"kind": "products", "items": items})
    };
    assert_eq!(
        post_import(&h, &queues, &t, documents("a"), &[])
            .await
            .status,
        202
    );
    let failed = queues.receive(1).await;
    assert_eq!(failed.len(), 1);
    // (delivered once and never settled: with maxReceiveCount 1, it moves on its next receive)
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(queues.receive(10).await.len() <= 1);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        post_import(&h, &queues, &t, documents("b"), &[])
            .await
            .status,
        202
    );
    // WHEN the tenant is offboarded, to the end
    integration::offboard_to_end(&h, &t, &Auth::Operator(unique("ops"))).await;
    // THEN every message of the tenant left on either queue holds its items sealed, never in the
    // clear, and the key that sealed them is gone with the tenant: nothing of it is readable
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut left = queues.dead_letters().await;
    left.extend(queues.receive(10).await);
    assert!(
        !left.is_empty(),
        "the test needs messages left on the queues"
    );
    for m in &left {
        let body = m.body().unwrap();
        assert!(!body.contains("secret-recipe"), "{body}");
        let message: imports::ImportMessage = serde_json::from_str(body).unwrap();
        assert!(!message.sealed_items.is_empty());
    }
    assert_eq!(sealing_key_of(&h, &t).await, None);
    // AND a consumer given them drops them, writing nothing
    let consumer = Consumer::start(&h.table, &queues).await;
    drain(&queues, &[&consumer], 10).await;
    assert!(product_items(&h, &t).await.is_empty());
}

#[tokio::test]
async fn a_message_of_a_tenant_being_offboarded_is_dropped_as_a_former_tenants_and_writes_nothing()
{
    // GIVEN a tenant's import on the queue, and the tenant's offboarding started (its items not
    // deleted yet)
    let (h, t) = Harness::with_tenant("leaving", 1).await;
    let queues = ImportQueues::create(5, 1).await;
    let posted = post_import(&h, &queues, &t, products("late", 3), &[]).await;
    assert_eq!(posted.status, 202, "{}", posted.body);
    let queued = queues.receive(10).await;
    assert_eq!(queued.len(), 1);
    let offboarding = h.operator().offboard_tenant(&t).await;
    assert_eq!(offboarding.status, 202, "{}", offboarding.body);
    let before = h.items_under(&raw_key(&t, "")).await;

    // WHEN a consumer receives the message
    let deleted = deliver_in_process(&h, &queues, &queued).await;

    // THEN it is dropped for good (deleted, never cycled to the dead-letter queue), and nothing is
    // written: the tenant's raw items are byte for byte as they were
    assert_eq!(deleted, 1);
    assert_eq!(h.items_under(&raw_key(&t, "")).await, before);
}

/// Delivers `batch` to a consumer in this process (on the test's clock) and settles it as an event
/// source mapping would: how many messages were deleted.
pub(crate) async fn deliver_in_process(
    h: &Harness,
    queues: &ImportQueues,
    batch: &[Message],
) -> usize {
    let settings = imports::consume::ConsumerSettings {
        max_receives: queues.max_receives,
        writes_in_flight: 4,
        requeue: None,
        max_defer_seconds: imports::consume::DEFAULT_MAX_DEFER_SECONDS,
    };
    let event = serde_json::from_value(queues.event(batch)).unwrap();
    let answer = integration::import_queue::consume(&h.app, &settings, event).await;
    let answer = serde_json::to_value(answer).unwrap();
    queues.settle(batch, Some(&answer)).await
}

/// Receives what is on the queue and never deletes it (a consumer that crashes or times out on
/// every delivery), until SQS has moved all of it to the dead-letter queue.
async fn crash_until_dead_lettered(queues: &ImportQueues, messages: usize) {
    for _ in 0..30 {
        if queues.backlog(&queues.dlq_url).await >= messages as u64 {
            return;
        }
        let _ = queues.receive(10).await;
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    panic!("the messages never reached the dead-letter queue");
}

/// The id of `tenant`'s only import, read from the table (for a request that was never answered).
async fn only_import_id(h: &Harness, tenant: &str) -> String {
    let records: Vec<_> = h
        .items_under(&raw_key(tenant, "IMPORT#"))
        .await
        .into_iter()
        .filter(|i| i.contains_key("importId"))
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    s(&records[0], "importId")
}

#[tokio::test]
async fn every_import_is_final_by_its_deadline_with_counts_per_reason_and_nothing_changes_after() {
    use shared::store::imports::FINAL_WITHIN_SECONDS;
    let h = Harness::new().await;
    let queues = ImportQueues::create(3, 1).await;
    let broken = ImportQueues::unreachable(&queues).await;
    // GIVEN an import of 30 products (two messages): one message is written, the other's every
    // delivery crashes or times out until SQS gives up on it
    // (under limits that never bind: this test is about deadlines, not the quota)
    let crashed = unique("crashed");
    integration::onboard_at_max_limits(&h, &crashed, 4).await;
    let a = accepted(&h, &queues, &crashed, products("a", 30)).await;
    let a_id = import_id(&a).to_owned();
    let both = queues.receive(2).await;
    assert_eq!(both.len(), 2);
    assert_eq!(deliver_in_process(&h, &queues, &both[..1]).await, 1);
    crash_until_dead_lettered(&queues, 1).await;
    let before = get_import(&h, &crashed, &a_id).await;
    assert_eq!(before.body["status"], "running", "{}", before.body);
    let written = before.body["written"].as_u64().unwrap();
    assert!(written == 25 || written == 5, "{}", before.body);
    // AND an import of 3 products whose tenant is suspended on every delivery
    let suspended = onboarded_on_shards(&h, "suspended", 4).await;
    let b = accepted(&h, &queues, &suspended, products("b", 3)).await;
    let b_id = import_id(&b).to_owned();
    let status = |status: &'static str| {
        let (h, suspended) = (&h, &suspended);
        async move {
            let r = h
                .operator()
                .update_tenant(suspended, json!({ "status": status }))
                .await;
            assert_eq!(r.status, 200, "{}", r.body);
        }
    };
    status("suspended").await;
    for _ in 0..3 {
        let batch = queues.receive(10).await;
        assert_eq!(batch.len(), 1);
        assert_eq!(deliver_in_process(&h, &queues, &batch).await, 0);
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    crash_until_dead_lettered(&queues, 2).await;
    // AND an unkeyed import that failed part-way (its queue unreachable: 503, never retried), and
    // a keyed one that failed the same way
    let unsent = onboarded_on_shards(&h, "unsent", 4).await;
    post_import(&h, &broken, &unsent, products("c", 4), &[])
        .await
        .assert_problem(503);
    let c_id = only_import_id(&h, &unsent).await;
    assert_eq!(
        get_import(&h, &unsent, &c_id).await.body["status"],
        "enqueuing"
    );
    let keyed = onboarded_on_shards(&h, "keyed", 4).await;
    let key = [("Idempotency-Key", "late-retry")];
    post_import(&h, &broken, &keyed, products("d", 2), &key)
        .await
        .assert_problem(503);
    let d_id = only_import_id(&h, &keyed).await;

    // WHEN the lifecycle driver runs before the deadline: nothing is closed
    let early = tenants::drive_lifecycle::drive(&h.app, &tenants::Lanes::in_process())
        .await
        .unwrap();
    assert_eq!(early.imports_closed, 0, "{early:?}");
    assert_eq!(
        get_import(&h, &crashed, &a_id).await.body["status"],
        "running"
    );
    // AND once the deadline has passed, a keyed retry of the request that never finished sending,
    // even before the driver has run, is told its import is final, and sends nothing
    h.clock.advance_seconds(FINAL_WITHIN_SECONDS + 1);
    post_import(&h, &queues, &keyed, products("d", 2), &key)
        .await
        .assert_problem(409);
    assert_eq!(queues.backlog(&queues.url).await, 0);
    let run = tenants::drive_lifecycle::drive(&h.app, &tenants::Lanes::in_process())
        .await
        .unwrap();

    // THEN all four are final, with each item counted once, by reason
    assert_eq!((run.imports_closed, run.imports_due), (4, 0), "{run:?}");
    status("active").await;
    let expect = |r: &Resp, status: &str, written: u64, by: Value| {
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body["status"], status, "{}", r.body);
        assert_eq!(r.body["written"], written, "{}", r.body);
        assert_eq!(r.body["failedBy"], by, "{}", r.body);
        let failed: u64 = by
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum();
        assert_eq!(r.body["failed"], failed, "{}", r.body);
    };
    let none = |reason: &str, n: u64| {
        let mut by = json!({"rejected": 0, "undelivered": 0, "notEnqueued": 0, "overQuota": 0});
        by[reason] = json!(n);
        by
    };
    let a_final = get_import(&h, &crashed, &a_id).await;
    expect(
        &a_final,
        "failed",
        written,
        none("undelivered", 30 - written),
    );
    expect(
        &get_import(&h, &suspended, &b_id).await,
        "failed",
        0,
        none("undelivered", 3),
    );
    expect(
        &get_import(&h, &unsent, &c_id).await,
        "failed",
        0,
        none("notEnqueued", 4),
    );
    expect(
        &get_import(&h, &keyed, &d_id).await,
        "failed",
        0,
        none("notEnqueued", 2),
    );
    // AND a dead-lettered message sent again (a redrive) writes nothing
    let dead = queues.dead_letters().await;
    for m in &dead {
        send_raw(
            &queues,
            m.body().unwrap(),
            m.message_attributes().unwrap()["tenant"]
                .string_value()
                .unwrap(),
            m.message_attributes().unwrap()["signature"].string_value(),
        )
        .await;
    }
    let redriven = queues.receive(10).await;
    assert_eq!(redriven.len(), dead.len());
    assert_eq!(deliver_in_process(&h, &queues, &redriven).await, dead.len());
    assert_eq!(get_import(&h, &crashed, &a_id).await.body, a_final.body);
    assert_eq!(product_items(&h, &crashed).await.len() as u64, written);
    assert_eq!(product_items(&h, &suspended).await.len(), 0);
    // AND the keyed request retried after its deadline is told its import is final, sending nothing
    let late = post_import(&h, &queues, &keyed, products("d", 2), &key).await;
    late.assert_problem(409);
    assert_eq!(queues.backlog(&queues.url).await, 0);
    // AND a second run finds nothing left to close
    let again = tenants::drive_lifecycle::drive(&h.app, &tenants::Lanes::in_process())
        .await
        .unwrap();
    assert_eq!(
        (again.imports_closed, again.imports_due),
        (0, 0),
        "{again:?}"
    );
}

#[tokio::test]
async fn an_idempotency_key_reused_after_its_import_expired_names_a_new_import() {
    use shared::store::imports::RETENTION_SECONDS;
    // GIVEN a keyed import of two products, written
    let (h, t) = custom_tenant("reused", 4, Limits::Unbound).await;
    let queues = ImportQueues::create(3, 1).await;
    let key = [("Idempotency-Key", "monthly")];
    let first = post_import(&h, &queues, &t, products("p", 2), &key).await;
    assert_eq!(first.status, 202, "{}", first.body);
    assert_eq!(
        deliver_in_process(&h, &queues, &queues.receive(10).await).await,
        1
    );
    let id = import_id(&first).to_owned();
    assert_eq!(get_import(&h, &t, &id).await.body["written"], 2);
    // AND the same request again a day later, once its key's record (24 h) has expired: every item
    // was sent, so nothing is sent again, and the answer is the import as it stands
    h.clock.advance_seconds(25 * 3600);
    let retried = post_import(&h, &queues, &t, products("p", 2), &key).await;
    assert_eq!(retried.status, 202, "{}", retried.body);
    assert!(!retried.replayed);
    assert_eq!(retried.body["createdAt"], first.body["createdAt"]);
    assert_eq!(retried.body["status"], "complete", "{}", retried.body);
    assert_eq!(retried.location.as_deref(), first.location.as_deref());
    assert_eq!(queues.backlog(&queues.url).await, 0);
    // AND the products changed by the tenant since
    for n in 0..2 {
        let r = h
            .tenant(&t)
            .put_product(&format!("p-{n:05}"), json!({"n": 100 + n}))
            .await;
        assert!(r.status == 200 || r.status == 201, "{}", r.body);
    }
    // WHEN the same request comes again after the import's 14 days (TTL has not removed it yet)
    h.clock.advance_seconds(RETENTION_SECONDS + 1);
    let second = post_import(&h, &queues, &t, products("p", 2), &key).await;
    // THEN it is a new import of the same id, not a replay of the old answer
    assert_eq!(second.status, 202, "{}", second.body);
    assert!(!second.replayed);
    assert_eq!(second.body["importId"], id.as_str());
    assert_ne!(second.body["createdAt"], first.body["createdAt"]);
    assert_eq!(second.body["status"], "running");
    // AND its items are written, the old import's markers counting for nothing
    assert_eq!(
        deliver_in_process(&h, &queues, &queues.receive(10).await).await,
        1
    );
    assert_complete(&h, &t, &id, 2).await;
    assert_eq!(product_items(&h, &t).await.len(), 2);
    // AND after another 14 days the key takes another body (no 422)
    h.clock.advance_seconds(RETENTION_SECONDS + 1);
    let third = post_import(&h, &queues, &t, products("q", 3), &key).await;
    assert_eq!(third.status, 202, "{}", third.body);
    assert_eq!(third.body["accepted"], 3);
}

/// The import ids `tenant`'s sealing item counts as open.
async fn open_imports(h: &Harness, tenant: &str) -> Vec<String> {
    h.items_under(&raw_key(tenant, "SEALING#"))
        .await
        .iter()
        .filter_map(|i| i.get("openImports"))
        .flat_map(|ids| ids.as_ss().cloned().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn an_idempotency_key_sent_again_after_its_import_is_final_holds_no_place_among_the_open_imports(
) {
    use shared::store::imports::FINAL_WITHIN_SECONDS;
    // GIVEN a keyed import, written, and made final by the driver past its deadline, a day and more
    // ago (its key's recorded answer has expired)
    let (h, t) = Harness::with_tenant("final", 1).await;
    let queues = ImportQueues::create(3, 1).await;
    let key = [("Idempotency-Key", "daily")];
    let first = post_import(&h, &queues, &t, products("p", 2), &key).await;
    assert_eq!(first.status, 202, "{}", first.body);
    assert_eq!(
        deliver_in_process(&h, &queues, &queues.receive(10).await).await,
        1
    );
    h.clock
        .advance_seconds((FINAL_WITHIN_SECONDS + 1).max(25 * 3600));
    for _ in 0..5 {
        let run = Box::pin(tenants::drive_lifecycle::drive(
            &h.app,
            &tenants::Lanes::in_process(),
        ))
        .await
        .unwrap();
        if run.imports_due == 0 {
            break;
        }
    }
    assert_eq!(open_imports(&h, &t).await, Vec::<String>::new());

    let listed = || async {
        let entries = h
            .items_under(&shared::identity::keys::import_due_pk_prefix())
            .await;
        let of_t = |i: &&Item| {
            i["SK"]
                .as_s()
                .is_ok_and(|sk| sk.contains(&format!("#{t}#")))
        };
        entries.iter().filter(of_t).count()
    };
    assert_eq!(listed().await, 0);

    // WHEN the same key comes again, with the same body and then with another, three times each
    let mut answers = Vec::new();
    for _ in 0..3 {
        // (a second apart: each request lists its entry under its own deadline)
        h.clock.advance_seconds(1);
        answers.push(post_import(&h, &queues, &t, products("p", 2), &key).await);
        answers.push(post_import(&h, &queues, &t, products("q", 3), &key).await);
    }

    // THEN the first is answered with the import as it stands, the second 422, every time
    for pair in answers.chunks(2) {
        let (same, other) = (&pair[0], &pair[1]);
        assert_eq!(same.status, 202, "{}", same.body);
        assert_eq!(same.body["status"], "complete", "{}", same.body);
        other.assert_problem(422);
    }
    // AND none holds a place among the tenant's open imports (a place only a deadline releases,
    // and the final import has none left), nor an entry on the driver's deadline list (one a
    // tenant could add without bound, one a request, each read by the driver's run)
    assert_eq!(open_imports(&h, &t).await, Vec::<String>::new());
    assert_eq!(listed().await, 0);
}

#[tokio::test]
async fn an_import_retried_after_its_department_went_gets_its_recorded_answer() {
    // GIVEN a department, and an import of an employee in it sent with an Idempotency-Key (202)
    let (h, t) = Harness::with_tenant("dept-gone", 1).await;
    let queues = ImportQueues::create(3, 1).await;
    put_new_department(&h, &t, "eng", "Engineering").await;
    let hire = json!({"kind": "employees", "items": [
        {"employeeId": "e-1", "name": "E", "departmentId": "eng"}]});
    let key = [("Idempotency-Key", "hire-e1")];
    let first = post_import(&h, &queues, &t, hire.clone(), &key).await;
    assert_eq!(first.status, 202, "{}", first.body);
    // AND the department gone since (as a restore to a copy taken before it was made leaves it)
    for item in h.items_under(&raw_key(&t, "")).await {
        if item
            .get("kind")
            .and_then(|k| k.as_s().ok())
            .map(String::as_str)
            == Some("DEPARTMENT")
        {
            h.admin
                .delete_item()
                .table_name(&h.table)
                .key("PK", item["PK"].clone())
                .key("SK", item["SK"].clone())
                .send()
                .await
                .unwrap();
        }
    }

    // WHEN the same request comes again, and another naming the department
    let again = post_import(&h, &queues, &t, hire.clone(), &key).await;
    let other = post_import(&h, &queues, &t, hire, &[("Idempotency-Key", "hire-e1-b")]).await;

    // THEN the retry gets its recorded answer; the new request is refused, naming the department
    assert!(again.replayed, "{}", again.body);
    assert_eq!((again.status, &again.body), (202, &first.body));
    other.assert_problem(400);
    assert_eq!(
        other.body["field"], "items[0].departmentId",
        "{}",
        other.body
    );
}

/// Writes department `id`, named `name`, as `tenant` by PUT: a new one (201).
async fn put_new_department(h: &Harness, tenant: &str, id: &str, name: &str) {
    let put = h
        .tenant(tenant)
        .put_department(id, json!({ "name": name }))
        .await;
    assert_eq!(put.status, 201, "{}", put.body);
}

/// Writes employee `id`, named `name`, in `department`, as `tenant` by PUT: a new one (201).
async fn put_new_employee(h: &Harness, tenant: &str, id: &str, name: &str, department: &str) {
    let put = h
        .tenant(tenant)
        .put_employee(id, json!({"name": name, "departmentId": department}))
        .await;
    assert_eq!(put.status, 201, "{}", put.body);
}

/// The employees `list-department-employees` lists for department `d` (one page of up to 100).
async fn members(h: &Harness, tenant: &str, d: &str) -> Vec<String> {
    let r = h
        .tenant(tenant)
        .query(&[("limit", "100")])
        .list_department_employees(d)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut ids = r.ids("employeeId");
    ids.sort();
    ids
}

#[tokio::test]
async fn departments_and_employees_are_imported_as_their_puts_write_them_and_a_later_word_stands() {
    // GIVEN a 4-shard tenant with a department and two employees written by PUT
    let (h, t, queues) = tenant_with_queues("hr-import").await;
    let consumer = Consumer::start(&h.table, &queues).await;
    put_new_department(&h, &t, "old", "Old").await;
    for e in ["moved", "deleted-later"] {
        put_new_employee(&h, &t, e, e, "old").await;
    }
    h.clock.advance_seconds(1);
    // WHEN it imports two departments, one of them twice (the last item wins)
    let departments = json!({"kind": "departments", "items": [
        {"departmentId": "eng", "name": "Eng (draft)"},
        {"departmentId": "ops", "name": "Operations"},
        {"departmentId": "eng", "name": "Engineering"},
    ]});
    let posted = accepted(&h, &queues, &t, departments).await;
    assert_eq!(posted.body["kind"], "departments");
    assert_eq!(posted.body["accepted"], 2);
    drain(&queues, &[&consumer], 10).await;
    // THEN both are there, as a PUT would have written them
    let eng = h.tenant(&t).get_department("eng").await;
    assert_eq!(eng.status, 200, "{}", eng.body);
    assert_eq!(eng.body["name"], "Engineering");
    assert_complete(&h, &t, import_id(&posted), 2).await;

    // WHEN it imports employees: a new one, one moving from `old` to `eng`, one the tenant then
    // writes itself while the import waits, one it deletes while the import waits, and one new
    h.clock.advance_seconds(1);
    let employees = json!({"kind": "employees", "items": [
        {"employeeId": "new", "name": "New", "departmentId": "eng", "email": "new@acme.example"},
        {"employeeId": "moved", "name": "Moved", "departmentId": "eng"},
        {"employeeId": "put-later", "name": "Imported", "departmentId": "ops"},
        {"employeeId": "deleted-later", "name": "Back?", "departmentId": "ops"},
        {"employeeId": "ops-1", "name": "Ops 1", "departmentId": "ops"},
    ]});
    let posted = accepted(&h, &queues, &t, employees).await;
    h.clock.advance_seconds(1);
    put_new_employee(&h, &t, "put-later", "By PUT", "eng").await;
    let deleted = h.tenant(&t).delete_employee("deleted-later").await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    drain(&queues, &[&consumer], 10).await;
    // THEN the imported employees are written with their memberships moved in the same write, the
    // PUT's employee stands, and the deleted one stays deleted
    let new = h.tenant(&t).get_employee("new").await;
    assert_eq!(new.status, 200, "{}", new.body);
    assert_eq!(new.body["email"], "new@acme.example");
    let later = h.tenant(&t).get_employee("put-later").await;
    assert_eq!(later.body["name"], "By PUT", "{}", later.body);
    assert_eq!(later.body["departmentId"], "eng");
    h.tenant(&t)
        .get_employee("deleted-later")
        .await
        .assert_problem(404);
    assert_eq!(members(&h, &t, "eng").await, ["moved", "new", "put-later"]);
    assert_eq!(members(&h, &t, "ops").await, ["ops-1"]);
    assert!(members(&h, &t, "old").await.is_empty());
    let progress = assert_complete(&h, &t, import_id(&posted), 3).await;
    assert_eq!(progress["superseded"], 2, "{progress}");
    // AND every employee item of the tenant has exactly one membership, in its own department
    let employees = h.items_under(&raw_key(&t, "HR#")).await;
    let employees: Vec<_> = employees
        .iter()
        .filter(|i| s(i, "kind") == "EMPLOYEE")
        .collect();
    assert_eq!(employees.len(), 4);
    for e in &employees {
        let d = s(e, "departmentId");
        assert!(
            members(&h, &t, &d).await.contains(&s(e, "employeeId")),
            "{e:?}"
        );
    }
    // AND an imported employee is stored with exactly the attributes a PUT stores
    let attributes = |id: &str| {
        let item = employees.iter().find(|e| s(e, "employeeId") == id).unwrap();
        let mut names: Vec<&String> = item.keys().collect();
        names.sort();
        names.into_iter().cloned().collect::<Vec<_>>()
    };
    assert_eq!(attributes("ops-1"), attributes("put-later"));
    assert!(attributes("ops-1").contains(&"updatedAtMs".to_owned()));
}

#[tokio::test]
async fn an_employee_import_naming_a_department_that_does_not_exist_is_refused_by_its_index() {
    // GIVEN a tenant with one department
    let (h, t, queues) = tenant_with_queues("hr-refused").await;
    put_new_department(&h, &t, "eng", "Eng").await;
    // WHEN it imports employees whose fourth item names a department it does not have, or items of
    // another kind, or an employee without a department
    let cases = [
        (
            json!({"kind": "employees", "items": [
                {"employeeId": "a", "name": "A", "departmentId": "eng"},
                {"employeeId": "a", "name": "A again", "departmentId": "eng"},
                {"employeeId": "b", "name": "B", "departmentId": "eng"},
                {"employeeId": "c", "name": "C", "departmentId": "nowhere"},
                {"employeeId": "d", "name": "D", "departmentId": "nowhere"},
            ]}),
            // the request's index, though the duplicate `a` is dropped before the check
            "items[3].departmentId",
        ),
        (
            json!({"kind": "employees", "items": [{"productId": "p", "document": {}}]}),
            "items[0]",
        ),
        (
            json!({"kind": "employees", "items": [{"employeeId": "a", "name": "A"}]}),
            "items[0]",
        ),
        (
            json!({"kind": "departments", "items": [{"departmentId": "x", "name": "\u{1}"}]}),
            "items[0].name",
        ),
    ];
    // THEN each is a 400 naming the item, and nothing is enqueued or recorded
    refused_and_nothing_enqueued(&h, &queues, &t, cases).await;
}

#[tokio::test]
async fn an_employee_import_during_a_resharding_from_4_to_16_moves_every_membership_once() {
    // GIVEN a 4-shard tenant with three departments and ten employees in the first, and an import
    // of 60 employees (3 messages) moving those ten and adding fifty, across all three departments
    let (h, t) = custom_tenant("hr-moving", 4, Limits::Unbound).await;
    let queues = ImportQueues::create(5, 1).await;
    for d in ["d0", "d1", "d2"] {
        put_new_department(&h, &t, d, d).await;
    }
    for i in 0..10 {
        let e = format!("e-{i:02}");
        put_new_employee(&h, &t, &e, &e, "d0").await;
    }
    h.clock.advance_seconds(1);
    let items: Vec<Value> = (0..60)
        .map(|i| json!({"employeeId": format!("e-{i:02}"), "name": format!("E {i}"), "departmentId": format!("d{}", 1 + i % 2)}))
        .collect();
    let posted = accepted(
        &h,
        &queues,
        &t,
        json!({"kind": "employees", "items": items}),
    )
    .await;
    // WHEN the tenant is re-sharded to 16 while the consumer writes: before writes move, after
    // they move, and between the migrator's steps
    reshard_to_16_while_consuming(&h, &queues, &t, 1).await;
    let consumer = Consumer::start(&h.table, &queues).await;
    drain(&queues, &[&consumer], 10).await;
    // THEN every employee is there exactly once, on its shard of 16, with one membership, in its
    // imported department
    let items = h.items_under(&raw_key(&t, "HR#")).await;
    let employees: Vec<_> = items
        .iter()
        .filter(|i| s(i, "kind") == "EMPLOYEE")
        .collect();
    assert_eq!(
        employees.len(),
        60,
        "an employee is missing or has two copies"
    );
    assert_each_on_its_shard_of_16(&t, "HR", "employeeId", employees.iter().copied());
    assert!(members(&h, &t, "d0").await.is_empty());
    let (d1, d2) = (members(&h, &t, "d1").await, members(&h, &t, "d2").await);
    assert_eq!((d1.len(), d2.len()), (30, 30));
    assert!(
        d1.iter().all(|e| e[2..].parse::<u32>().unwrap() % 2 == 0),
        "{d1:?}"
    );
    assert_complete(&h, &t, import_id(&posted), 60).await;
}

#[tokio::test]
async fn a_delete_after_the_acceptance_wins_even_when_the_import_has_not_landed_yet() {
    // GIVEN a tenant with a department, and an import of a product and of an employee accepted and
    // still on the queue (neither exists yet)
    let (h, t, queues) = tenant_with_queues("early-delete").await;
    let consumer = Consumer::start(&h.table, &queues).await;
    put_new_department(&h, &t, "eng", "Eng").await;
    h.clock.advance_seconds(1);
    let product = accepted(&h, &queues, &t, products("p", 1)).await;
    let employee = json!({"kind": "employees", "items": [
        {"employeeId": "e-1", "name": "E", "departmentId": "eng"},
    ]});
    let employee = accepted(&h, &queues, &t, employee).await;
    // WHEN the tenant deletes both before the consumer writes them (404: not landed yet)
    h.clock.advance_seconds(1);
    h.tenant(&t)
        .delete_product("p-00000")
        .await
        .assert_problem(404);
    h.tenant(&t)
        .delete_employee("e-1")
        .await
        .assert_problem(404);
    // AND the queue drains
    drain(&queues, &[&consumer], 10).await;
    // THEN the deletes won: neither is there, and no membership was written
    h.tenant(&t)
        .get_product("p-00000")
        .await
        .assert_problem(404);
    h.tenant(&t).get_employee("e-1").await.assert_problem(404);
    assert!(members(&h, &t, "eng").await.is_empty());
    // AND each import says so: the item was superseded by the later delete
    for posted in [&product, &employee] {
        let progress = assert_complete(&h, &t, import_id(posted), 0).await;
        assert_eq!(progress["superseded"], 1, "{progress}");
    }
}

#[tokio::test]
async fn a_tenant_at_its_bound_of_open_imports_gets_429_and_never_delays_another_tenants_close() {
    // GIVEN a tenant with its maximum of imports open (one item each, never delivered), and
    // another tenant with one import
    use shared::store::imports::{FINAL_WITHIN_SECONDS, MAX_OPEN_IMPORTS};
    let (h, [flood, quiet]) = Harness::with_tenants([("flood", 1), ("quiet", 1)]).await;
    let queues = ImportQueues::create(3, 1).await;
    for i in 0..MAX_OPEN_IMPORTS {
        let r = post_import(&h, &queues, &flood, products(&format!("f{i}"), 1), &[]).await;
        assert_eq!(r.status, 202, "import {i}: {}", r.body);
    }
    h.clock.advance_seconds(1);
    let quiet_import = accepted(&h, &queues, &quiet, products("q", 1)).await;
    // WHEN the flooding tenant asks for one more
    let refused = post_import(&h, &queues, &flood, products("over", 1), &[]).await;
    // THEN it is refused 429 with a Retry-After, and nothing of it is written
    refused.assert_problem(429);
    assert!(refused.retry_after.is_some());
    let records = h.items_under(&raw_key(&flood, "IMPORT#")).await;
    assert_eq!(
        records.iter().filter(|i| s(i, "kind") == "IMPORT").count(),
        MAX_OPEN_IMPORTS
    );
    // WHEN the lifecycle driver runs once, past every deadline
    h.clock.advance_seconds(FINAL_WITHIN_SECONDS + 1);
    let driven = Box::pin(tenants::drive_lifecycle::drive(
        &h.app,
        &tenants::Lanes::in_process(),
    ))
    .await
    .unwrap();
    // THEN the other tenant's import is final after that first run
    let id = import_id(&quiet_import);
    let progress = get_import(&h, &quiet, id).await;
    assert_eq!(progress.body["status"], "failed", "{}", progress.body);
    assert_eq!(
        progress.body["failedBy"]["undelivered"], 1,
        "{}",
        progress.body
    );
    assert!(driven.imports_closed >= 1, "{driven:?}");
    // AND once the flooding tenant's imports are final, it may import again
    for _ in 0..5 {
        if Box::pin(tenants::drive_lifecycle::drive(
            &h.app,
            &tenants::Lanes::in_process(),
        ))
        .await
        .unwrap()
        .imports_due
            == 0
        {
            break;
        }
    }
    accepted(&h, &queues, &flood, products("again", 1)).await;
}

/// Delivers one batch of up to 10 messages to a consumer in this process (on `h`'s clock) that
/// defers to `queues` with no delay (the test's clock, not SQS's, says when a debt is repaid), and
/// settles it as an event source mapping would. How many messages the batch held.
pub(crate) async fn deliver_deferring(h: &Harness, queues: &ImportQueues) -> usize {
    deliver_deferring_up_to(h, queues, 10).await
}

/// [`deliver_deferring`], of at most `messages` messages.
async fn deliver_deferring_up_to(h: &Harness, queues: &ImportQueues, messages: usize) -> usize {
    let settings = imports::consume::ConsumerSettings {
        max_receives: queues.max_receives,
        writes_in_flight: 4,
        requeue: Some(queues.producer()),
        max_defer_seconds: 0,
    };
    let batch = queues.receive(messages).await;
    if batch.is_empty() {
        return 0;
    }
    let event = serde_json::from_value(queues.event(&batch)).unwrap();
    let answer = integration::import_queue::consume(&h.app, &settings, event).await;
    let answer = serde_json::to_value(answer).unwrap();
    queues.settle(&batch, Some(&answer)).await;
    batch.len()
}

/// The capacity units `tenant`'s quota windows counted in each second (every shard).
async fn units_by_second(h: &Harness, tenant: &str) -> BTreeMap<u64, f64> {
    let mut by_second = BTreeMap::new();
    for item in h.items_under(&raw_key(tenant, "RATE#")).await {
        let sk = s(&item, "SK");
        let second: u64 = sk.rsplit('#').nth(1).unwrap().parse().unwrap();
        let milli: f64 = item
            .get("milliUnits")
            .and_then(|v| v.as_n().ok())
            .map_or(0.0, |n| n.parse().unwrap());
        *by_second.entry(second).or_default() += milli / 1000.0;
    }
    by_second
}

#[tokio::test]
async fn imports_are_held_to_the_capacity_quota_deferred_without_limit_and_never_hold_up_another_tenant(
) {
    // GIVEN a tenant of 100 capacity units a second importing 2,000 products (each message of 25
    // costs more than a second's quota), whose bucket another container keeps drained for its first
    // 20 seconds, and another tenant importing 25 products meanwhile; one consumer in this process,
    // on the test's clock
    const QUOTA: u32 = 100;
    let h = Harness::new().await;
    let (t, other) = (unique("held"), unique("neighbour"));
    integration::onboard_custom(&h, &t, 1, 250, QUOTA).await;
    onboard(&h, &other, 1).await;
    let drainer = h.another_container().await;
    let queues = ImportQueues::create(5, 1).await;
    let start = h.app.clock.now_seconds() + 1;
    let at = |second: u64| {
        h.clock.set_millis(second * 1000);
        drainer.clock.set_millis(second * 1000);
    };
    at(start);
    // (two imports of 1,000: the most one takes)
    let mut big_ids = Vec::new();
    for prefix in ["held-a", "held-b"] {
        let big = accepted(&h, &queues, &t, products(prefix, 1000)).await;
        big_ids.push(import_id(&big).to_owned());
    }
    let small = accepted(&h, &queues, &other, products("n", 25)).await;
    let small_id = import_id(&small).to_owned();
    // WHEN a batch is delivered each second (the drainer putting a 60 KB product first, while it
    // drains) until both imports are complete
    let blob = "x".repeat(60 * 1024);
    let mut other_done_at = None;
    let mut second = start;
    loop {
        at(second);
        if second < start + 20 {
            let _ = drainer
                .tenant(&t)
                .admitted()
                .put_product(&format!("drain-{second}"), json!({"blob": blob}))
                .await;
        }
        deliver_deferring(&h, &queues).await;
        if other_done_at.is_none()
            && get_import(&h, &other, &small_id).await.body["status"] == "complete"
        {
            other_done_at = Some(second);
        }
        let mut complete = other_done_at.is_some();
        for id in &big_ids {
            let progress = get_import(&h, &t, id).await;
            complete &= progress.body["status"] == "complete";
            assert!(
                second < start + 1_500,
                "the import never finished: {}",
                progress.body
            );
        }
        if complete {
            break;
        }
        second += 1;
    }
    // THEN the other tenant's import completed as soon as the queue reached it: about the first
    // pass over the 81 messages, 10 a batch (the held tenant's, deferred, go to the back)
    let other_done_at = other_done_at.unwrap();
    assert!(
        other_done_at <= start + 30,
        "the neighbour's import completed {} s in",
        other_done_at - start
    );
    // AND every item of the held tenant was written, before its deadline
    for id in &big_ids {
        let progress = get_import(&h, &t, id).await;
        assert_eq!(progress.body["written"], 1000, "{}", progress.body);
    }
    assert!(second * 1000 < shared::store::imports::due_at_ms(start * 1000));
    // AND over any 10 seconds it consumed no more than 1.2 times its quota, plus the stated bound:
    // one message's items (25) and one request of the drainer beyond their estimates
    let by_second = units_by_second(&h, &t).await;
    let bound = 1.2 * f64::from(QUOTA) * 10.0 + 250.0;
    for from in start..second {
        let used: f64 = by_second.range(from..from + 10).map(|(_, u)| u).sum();
        assert!(
            used <= bound,
            "{used} units in the 10 s from second {} (bound {bound}): {:?}",
            from - start,
            by_second.range(from..from + 10).collect::<Vec<_>>()
        );
    }
}

/// A tenant of 50 capacity units a second (its id from `prefix`) with an import of `n` products
/// on the queue, a second before the import's deadline, and its bucket drained by a 60 KB product:
/// with its queues, the import's 202 and its deadline (epoch seconds).
async fn in_debt_before_the_deadline(
    prefix: &str,
    n: usize,
) -> (Harness, String, ImportQueues, Resp, u64) {
    let (h, t) = custom_tenant(prefix, 1, Limits::CapacityUnits(50)).await;
    let queues = ImportQueues::create(5, 1).await;
    let start = h.app.clock.now_seconds() + 1;
    h.clock.set_millis(start * 1000);
    let posted = accepted(&h, &queues, &t, products(prefix, n)).await;
    let deadline = shared::store::imports::due_at_ms(start * 1000) / 1000;
    h.clock.set_millis((deadline - 1) * 1000);
    let drain = h
        .tenant(&t)
        .admitted()
        .put_product("drain", json!({"blob": "x".repeat(60 * 1024)}))
        .await;
    assert_eq!(drain.status, 201, "{}", drain.body);
    (h, t, queues, posted, deadline)
}

/// The lifecycle driver's run a second past `deadline` (epoch seconds): it closes the import.
async fn close_past(h: &Harness, deadline: u64) {
    h.clock.set_millis((deadline + 1) * 1000);
    Box::pin(tenants::drive_lifecycle::drive(
        &h.app,
        &tenants::Lanes::in_process(),
    ))
    .await
    .unwrap();
}

#[tokio::test]
async fn an_import_held_back_by_the_quota_until_its_deadline_fails_over_quota() {
    // GIVEN a tenant of 50 capacity units a second with an import of 25 products on the queue, a
    // second before its deadline, and its bucket drained
    let (h, t, queues, posted, deadline) = in_debt_before_the_deadline("late", 25).await;
    // WHEN the consumer gets the message, still in debt, and the deadline passes
    assert_eq!(deliver_deferring(&h, &queues).await, 1);
    close_past(&h, deadline).await;
    // THEN nothing of it was written, nothing is left on the queue, and its items failed with a
    // reason of their own
    let progress = get_import(&h, &t, import_id(&posted)).await;
    assert_eq!(progress.body["status"], "failed", "{}", progress.body);
    assert_eq!(
        progress.body["failedBy"]["overQuota"], 25,
        "{}",
        progress.body
    );
    assert_eq!(progress.body["written"], 0, "{}", progress.body);
    assert!(queues.receive(10).await.is_empty());
}

#[tokio::test]
async fn only_the_items_the_quota_held_back_past_the_deadline_fail_over_quota_and_the_undelivered_fail_undelivered(
) {
    // GIVEN a tenant of 50 capacity units a second with an import of 50 products (two messages of
    // 25) on the queue, a second before its deadline, and its bucket drained
    let (h, t, queues, posted, deadline) = in_debt_before_the_deadline("split", 50).await;
    // WHEN the consumer gets one message, still in debt (it gives up on it: the debt outlasts the
    // deadline), the other is never delivered, and the deadline passes
    assert_eq!(deliver_deferring_up_to(&h, &queues, 1).await, 1);
    close_past(&h, deadline).await;
    // THEN the message the quota held back fails overQuota, and the one never delivered fails
    // undelivered: one message's deferral labels no other's items
    let progress = get_import(&h, &t, import_id(&posted)).await;
    assert_eq!(progress.body["status"], "failed", "{}", progress.body);
    assert_eq!(
        progress.body["failedBy"],
        json!({"rejected": 0, "undelivered": 25, "notEnqueued": 0, "overQuota": 25}),
        "{}",
        progress.body
    );
    assert_eq!(progress.body["written"], 0, "{}", progress.body);
}

/// Issue 56, item 5: a whole invocation that fails after a deferral sent its copy never makes a
/// second copy of the message, however often the original is delivered again.
#[tokio::test]
async fn a_deferred_message_delivered_again_after_whole_invocations_failed_is_copied_once() {
    // GIVEN a tenant of 100 capacity units a second, and an import of 20 products of 20 KB in one
    // message (about 8 seconds of its quota)
    let (h, t) = custom_tenant("copies", 1, Limits::CapacityUnits(100)).await;
    let queues = ImportQueues::create(50, 1).await;
    let items: Vec<Value> = (0..20)
        .map(|i| json!({"productId": format!("big-{i:02}"), "document": {"blob": "x".repeat(20 * 1024)}}))
        .collect();
    accepted(&h, &queues, &t, json!({"kind": "products", "items": items})).await;
    let settings = imports::consume::ConsumerSettings {
        max_receives: queues.max_receives,
        writes_in_flight: 4,
        requeue: Some(queues.producer()),
        max_defer_seconds: 0,
    };
    let batch = queues.receive(10).await;
    let messages = batch.len();
    assert!(messages >= 1);
    // WHEN a delivery writes what the quota allows and defers the rest, and its invocation then
    // fails whole, and the same messages are delivered again four times, each failing whole
    for _ in 0..5 {
        let event = serde_json::from_value(queues.event(&batch)).unwrap();
        integration::import_queue::consume(&h.app, &settings, event).await;
        queues.settle(&batch, None).await;
    }
    // THEN beside each original is at most one copy, of the first generation: the redeliveries
    // found it sent
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let on_queue = queues.receive(20).await;
    let copy_of = |m: &Message| {
        m.message_attributes()
            .and_then(|a| a.get("copy")?.string_value().map(str::to_owned))
    };
    let mut per_message: BTreeMap<&str, Vec<Option<String>>> = BTreeMap::new();
    for m in &on_queue {
        per_message
            .entry(m.body().unwrap_or_default())
            .or_default()
            .push(copy_of(m));
    }
    assert_eq!(per_message.len(), messages);
    for copies in per_message.values_mut() {
        copies.sort();
        assert!(
            *copies == [None] || *copies == [None, Some("1".to_owned())],
            "{copies:?}"
        );
    }
    assert!(on_queue.len() > messages, "nothing was deferred");
    // WHEN the quota refills, and both are delivered until the queue is empty
    let mut deliveries = 0;
    let mut batch = on_queue;
    while !batch.is_empty() {
        batch.truncate(10);
        h.clock.advance_seconds(10);
        let event = serde_json::from_value(queues.event(&batch)).unwrap();
        let answer = integration::import_queue::consume(&h.app, &settings, event).await;
        queues
            .settle(&batch, Some(&serde_json::to_value(answer).unwrap()))
            .await;
        deliveries += 1;
        assert!(deliveries < 40, "the import does not end");
        tokio::time::sleep(Duration::from_millis(1100)).await;
        batch = queues.receive(10).await;
        // AND no message ever has two copies of one generation on the queue
        let mut copies: Vec<(&str, Option<String>)> = batch
            .iter()
            .map(|m| (m.body().unwrap_or_default(), copy_of(m)))
            .filter(|(_, copy)| copy.is_some())
            .collect();
        let all = copies.len();
        copies.sort();
        copies.dedup();
        assert_eq!(copies.len(), all, "{batch:?}");
    }
    // THEN every product is written, once
    assert_eq!(product_items(&h, &t).await.len(), 20);
}

/// A message's last delivery in which an item fails and the tenant's bucket runs dry part-way: the
/// failed item is recorded failed and the message goes to the dead-letter queue, while a copy of
/// it carries on with the items the bucket held back, each written once (before the mend they went
/// to the dead-letter queue with it, never tried again, and failed at the deadline).
#[tokio::test]
async fn items_held_back_on_a_messages_last_delivery_are_written_by_a_copy_not_dead_lettered() {
    // GIVEN a tenant of 20 capacity units a second with an import of 25 products in one message,
    // which on the queue has become poison for item 1, and a queue that delivers a message once
    const QUOTA: u32 = 20;
    let h = Harness::new().await;
    let t = unique("heldlast");
    integration::onboard_custom(&h, &t, 1, 250, QUOTA).await;
    let queues = ImportQueues::create(1, 1).await;
    let posted = accepted(&h, &queues, &t, products("ok", 25)).await;
    let id = import_id(&posted).to_owned();
    poison_the_queued_message(&h, &queues, &t).await;

    // WHEN it is delivered (its last delivery), then, a second at a time, whatever is on the queue
    assert_eq!(deliver_deferring(&h, &queues).await, 1);
    let after_first = get_import(&h, &t, &id).await;
    assert!(
        after_first.body["written"].as_u64() < Some(24),
        "{}",
        after_first.body
    );
    for _ in 0..120 {
        h.clock.advance_seconds(1);
        deliver_deferring(&h, &queues).await;
        if get_import(&h, &t, &id).await.body["status"] != "running" {
            break;
        }
    }

    // THEN the poison message is on the dead-letter queue, and the import is final: item 1 failed
    // (rejected), every other written, once
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let _ = queues.receive(10).await;
    let dead = queues.dead_letters().await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    let progress = get_import(&h, &t, &id).await;
    assert_eq!(progress.body["written"], 24, "{}", progress.body);
    assert_eq!(progress.body["failed"], 1, "{}", progress.body);
    assert_eq!(
        progress.body["failedBy"]["rejected"], 1,
        "{}",
        progress.body
    );
    assert_eq!(product_items(&h, &t).await.len(), 24);
}

/// Delivers `queues`' next batch (see [`deliver_deferring`]) once one is there, waiting for a
/// message to be visible again (its visibility timeout) for up to 10 s. How many messages it held.
async fn deliver_when_visible(h: &Harness, queues: &ImportQueues) -> usize {
    for _ in 0..50 {
        let delivered = deliver_deferring(h, queues).await;
        if delivered > 0 {
            return delivered;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no message became visible in 10 s");
}

/// Throttling (or an outage) through every delivery of a message is no refusal: on its last
/// delivery the message is held back, a copy delivered as a first delivery, and its items are
/// written once DynamoDB takes them again. Before the mend the item was recorded failed
/// (`rejected`) for good and the message dead-lettered.
#[tokio::test]
async fn an_item_throttled_through_every_delivery_is_held_back_and_written_never_failed() {
    // GIVEN an import of three products on a queue that dead-letters after 3 receives, and every
    // write of one of them throttled, past the SDK's retries
    let (h, t, queues) = tenant_with_queues("throttled").await;
    let posted = accepted(&h, &queues, &t, products("thr", 3)).await;
    let id = import_id(&posted).to_owned();
    h.faults.refuse_requests_containing(Some("thr-00001"));

    // WHEN its message is delivered as often as the queue allows
    for _ in 0..queues.max_receives {
        assert_eq!(deliver_when_visible(&h, &queues).await, 1);
    }

    // THEN nothing is dead-lettered, and the throttled item has no outcome: the import is not final
    assert!(queues.dead_letters().await.is_empty());
    let progress = get_import(&h, &t, &id).await;
    assert_eq!(progress.body["written"], 2, "{}", progress.body);
    assert_eq!(progress.body["failed"], 0, "{}", progress.body);
    assert_eq!(progress.body["status"], "running", "{}", progress.body);

    // WHEN DynamoDB takes the writes again, and the copy is delivered
    h.faults.refuse_requests_containing(None);
    assert_eq!(deliver_when_visible(&h, &queues).await, 1);

    // THEN the import is complete, every item written once, and nothing is left on either queue
    assert_complete(&h, &t, &id, 3).await;
    let written = product_ids(&h, &t).await;
    assert_eq!(written, ["thr-00000", "thr-00001", "thr-00002"]);
    assert!(queues.receive(10).await.is_empty());
    assert!(queues.dead_letters().await.is_empty());
}
