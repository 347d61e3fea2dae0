//! A key per tenant (`shared::store::keys`): products sealed at rest under the tenant's own key and
//! served as written; one KMS call per tenant per container per period; a revoked key refuses every
//! route and writes nothing, and serves again once enabled; offboarding shreds the key, so that a
//! copy of the table made before holds that tenant's products as ciphertext no key the stack holds
//! opens, while its neighbours' still open.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::keys::item_text;
use integration::{offboard_to_end, onboard, operator, Harness};
use serde_json::{json, Value};
use shared::identity::ids::TenantId;
use shared::identity::keys::{
    entity_sk_prefix, kind, quota_window_pk_prefix, tenant_prefix, usage_counter_pk_prefix,
};
use shared::store::client::error::StoreError;
use shared::store::keys::{
    is_sealed, open_item, DEFAULT_KEY_CACHE_SECONDS, REFUSAL_MEMO_MS, SEALED,
};

type Item = HashMap<String, AttributeValue>;

/// `count` products of `tenant`, each with a text no other tenant's holds: the model.
fn products_of(tenant: &str, count: usize) -> BTreeMap<String, Value> {
    (0..count)
        .map(|i| {
            let id = format!("p-{i:03}");
            let doc =
                json!({"name": format!("{tenant}-secret-{i}"), "price": i, "tags": ["a", "b"]});
            (id, doc)
        })
        .collect()
}

async fn put_all(h: &Harness, tenant: &str, model: &BTreeMap<String, Value>) {
    for (id, doc) in model {
        let r = h.tenant(tenant).put_product(id, doc.clone()).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
}

/// Every product of `tenant` as the API reads it, one by one and listed, against `model`.
async fn assert_served(h: &Harness, tenant: &str, model: &BTreeMap<String, Value>) {
    for (id, doc) in model {
        let r = h.tenant(tenant).get_product(id).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body["document"], *doc, "{tenant}/{id}");
    }
    let r = h
        .tenant(tenant)
        .query(&[("limit", "100")])
        .query_tenant_products()
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let listed: BTreeMap<String, Value> = r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["productId"].as_str().unwrap().to_owned(),
                p["document"].clone(),
            )
        })
        .collect();
    assert_eq!(&listed, model, "{tenant}'s list");
}

fn products_in<'a>(items: &'a [Item], tenant: &str) -> Vec<&'a Item> {
    let tenant = TenantId::parse(tenant).unwrap();
    let prefix = entity_sk_prefix(&tenant, kind::PRODUCT);
    items
        .iter()
        .filter(|i| matches!(i.get("SK"), Some(AttributeValue::S(sk)) if sk.starts_with(&prefix)))
        .collect()
}

#[tokio::test]
async fn a_keyed_tenants_products_are_sealed_at_rest_and_served_as_written() {
    // GIVEN a keyed world with two tenants, on 1 and 4 shards, each with products of its own
    let h = Harness::new().await.keyed().await;
    onboard(&h, "acme", 1).await;
    onboard(&h, "globex", 4).await;
    let (acme, globex) = (products_of("acme", 12), products_of("globex", 12));
    put_all(&h, "acme", &acme).await;
    put_all(&h, "globex", &globex).await;
    // A product written again is sealed again (a fresh nonce), and served as last written.
    let mut acme = acme;
    let replaced = json!({"name": "acme-secret-replaced"});
    let r = h
        .tenant("acme")
        .put_product("p-000", replaced.clone())
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    acme.insert("p-000".into(), replaced);

    // THEN each reads every product as written, by id and listed
    assert_served(&h, "acme", &acme).await;
    assert_served(&h, "globex", &globex).await;

    // AND the raw table holds no document in plaintext: every product is sealed, no text of any
    // document is in any item, and only keys, kind, owner and write time stay readable
    let items = h.all_items().await;
    for (tenant, count) in [("acme", 12), ("globex", 12)] {
        let products = products_in(&items, tenant);
        assert_eq!(products.len(), count, "{tenant}'s products in the table");
        for item in products {
            assert!(is_sealed(item), "{item:?}");
            let mut names: Vec<&str> = item.keys().map(String::as_str).collect();
            names.sort();
            assert_eq!(
                names,
                [
                    "GSI1",
                    "PK",
                    "SK",
                    "keyVersion",
                    "kind",
                    SEALED,
                    "tenantId",
                    "updatedAtMs"
                ]
                .into_iter()
                .filter(|n| item.contains_key(*n))
                .collect::<Vec<_>>()
            );
            assert!(!item.contains_key("document") && !item.contains_key("productId"));
        }
    }
    for item in &items {
        assert!(!item_text(item).contains("secret"), "plaintext in {item:?}");
    }

    // AND a re-sharding (4 → 8 for globex: every product on a new partition) carries the sealed
    // items as they are (the sealing is bound to the sort key, not the shard), and they still open
    let reshard = || h.operator().reshard("globex", 8);
    let delay = shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS + 1;
    let done = integration::step_to_end(&h, "the re-sharding", delay, 200, reshard).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_served(&h, "globex", &globex).await;

    // AND this container asked KMS once per tenant (the GenerateDataKey of its onboarding), not
    // per request
    let keys = h.app.keys.as_ref().unwrap();
    assert_eq!(keys.vault_calls(), 2);

    // AND another container, with nothing cached, serves them all with one Decrypt per tenant
    let other = h.another_keyed_container().await;
    assert_served(&other, "acme", &acme).await;
    assert_served(&other, "globex", &globex).await;
    assert_eq!(other.app.keys.as_ref().unwrap().vault_calls(), 2);
    // ... and again after its cache period: one more each
    other
        .clock
        .advance_millis(DEFAULT_KEY_CACHE_SECONDS * 1000 + 1);
    assert_served(&other, "acme", &acme).await;
    assert_served(&other, "globex", &globex).await;
    assert_eq!(other.app.keys.as_ref().unwrap().vault_calls(), 4);
}

#[tokio::test]
async fn a_revoked_key_refuses_every_route_and_writes_nothing_until_it_is_enabled_again() {
    // GIVEN a BYOK tenant (its data key wrapped by a KMS key of its own) with products, and a
    // neighbour on the platform's key
    let h = Harness::new().await.keyed().await;
    let own_key = h.onboard_with_own_key("initech", 1).await;
    onboard(&h, "acme", 1).await;
    let (initech, acme) = (products_of("initech", 5), products_of("acme", 5));
    put_all(&h, "initech", &initech).await;
    put_all(&h, "acme", &acme).await;
    let before = h.all_items().await;

    // WHEN the tenant disables its key, and this container's cache period passes
    h.test_keys().set_enabled(&own_key, false).await;
    h.clock.advance_millis(DEFAULT_KEY_CACHE_SECONDS * 1000 + 1);

    // THEN every route of the tenant answers 403 problem+json, naming the key, and writes nothing
    let tenant = h.tenant("initech");
    let answers = [
        tenant.get_product("p-001").await,
        tenant.query_tenant_products().await,
        tenant.put_product("p-009", json!({"name": "new"})).await,
        tenant.delete_product("p-001").await,
        tenant.put_department("d-1", json!({"name": "Ops"})).await,
    ];
    for r in &answers {
        r.assert_problem_naming(403, "encryption key");
    }
    // ... and its export, re-sharding and move are refused too
    let op = h.operator();
    assert_eq!(op.export_tenant("initech").await.status, 403);
    assert_eq!(op.reshard("initech", 2).await.status, 403);
    assert_eq!(op.move_to("initech", "own").await.status, 403);
    // ... and an operator's erasure of one of its users (its email's key needs the tenant's key)
    let erasure = op.erase_tenant_user("initech", "u-1").await;
    erasure.assert_problem_naming(403, "encryption key");
    let mut after = h.all_items().await;
    let mut expected = before.clone();
    let order = |items: &mut Vec<Item>| {
        items.sort_by_key(|i| format!("{:?}{:?}", i.get("PK"), i.get("SK")))
    };
    order(&mut after);
    order(&mut expected);
    // Only the neighbour's and the platform's bookkeeping may differ (usage counters, quota windows).
    let initech_id = TenantId::parse("initech").unwrap();
    let prefix = tenant_prefix(&initech_id);
    let usage = usage_counter_pk_prefix(&initech_id);
    let windows = quota_window_pk_prefix(&initech_id);
    let tenant_items = |items: &[Item]| -> Vec<Item> {
        items
            .iter()
            .filter(|i| {
                matches!(i.get("PK"), Some(AttributeValue::S(pk)) if pk.starts_with(&prefix)
                    && !pk.starts_with(&usage) && !pk.starts_with(&windows))
            })
            .cloned()
            .collect()
    };
    assert_eq!(
        tenant_items(&after),
        tenant_items(&expected),
        "nothing of initech's written"
    );
    // ... while its neighbour is served as before
    assert_served(&h, "acme", &acme).await;

    // WHEN the key is enabled again (the container asks KMS again within REFUSAL_MEMO_MS: a revoked
    // tenant costs KMS one call per container per that, not one per request)
    let calls = h.app.keys.as_ref().unwrap().vault_calls();
    assert!(h.tenant("initech").get_product("p-001").await.status == 403);
    assert_eq!(h.app.keys.as_ref().unwrap().vault_calls(), calls);
    h.test_keys().set_enabled(&own_key, true).await;
    h.clock.advance_millis(REFUSAL_MEMO_MS);

    // THEN every item reads again, as written, and writes are taken
    assert_served(&h, "initech", &initech).await;
    let r = h
        .tenant("initech")
        .put_product("p-009", json!({"name": "new"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test]
async fn offboarding_shreds_the_tenants_key_so_no_copy_of_its_items_opens() {
    // GIVEN a keyed world: a tenant leaving and one staying, each with products
    let h = Harness::new().await.keyed().await;
    onboard(&h, "leaving", 2).await;
    onboard(&h, "staying", 2).await;
    let (leaving, staying) = (products_of("leaving", 8), products_of("staying", 8));
    put_all(&h, "leaving", &leaving).await;
    put_all(&h, "staying", &staying).await;
    // AND a copy of the table, as a restore source (a point-in-time restore) would be
    let copy = h.snapshot("before-offboarding").await;

    // WHEN the leaving tenant is offboarded
    let report = offboard_to_end(&h, "leaving", &operator()).await;
    assert_eq!(report.status, 200, "{}", report.body);

    // THEN the report names the key destroyed: the KMS key that wrapped it, its versions, when
    let destroyed = &report.body["tenantKey"];
    assert_eq!(destroyed["kmsKeyId"], json!(h.test_keys().platform_key));
    assert_eq!(destroyed["versions"], json!([1]));
    assert!(destroyed["destroyedAt"].as_str().is_some(), "{destroyed}");

    // AND no key the stack still holds opens any of the leaving tenant's products in the copy
    let held = h.test_keys().every_key(&h.admin).await;
    assert!(held.iter().all(|k| k.tenant.as_str() != "leaving"));
    assert!(held.iter().any(|k| k.tenant.as_str() == "staying"));
    let copied = h.admin_scan(&copy).await;
    let gone = products_in(&copied, "leaving");
    assert_eq!(
        gone.len(),
        8,
        "the copy holds the leaving tenant's products"
    );
    for item in &gone {
        assert!(is_sealed(item));
        assert!(
            !item_text(item).contains("secret"),
            "plaintext in the copy: {item:?}"
        );
        for key in &held {
            assert!(
                open_item(Some(key), (*item).clone()).is_err(),
                "{}'s key opened {item:?}",
                key.tenant
            );
        }
    }

    // AND its neighbour's products in the same copy still open, to what was written
    let staying_key = held
        .iter()
        .find(|k| k.tenant.as_str() == "staying")
        .unwrap();
    let kept = products_in(&copied, "staying");
    assert_eq!(kept.len(), 8);
    for item in kept {
        let opened = open_item(Some(staying_key), item.clone()).expect("the neighbour's key opens");
        let id = match opened.get("productId") {
            Some(AttributeValue::S(id)) => id.clone(),
            other => panic!("no productId: {other:?}"),
        };
        let doc: Value = serde_dynamo::from_attribute_value(opened["document"].clone()).unwrap();
        assert_eq!(doc, staying[&id]);
    }
    // AND the neighbour is served as before
    assert_served(&h, "staying", &staying).await;
}

/// The transaction that deletes an offboarded tenant's record, the offboarding's last write: one
/// conditioned Delete, no Update or Put (a lane's step and the lanes' fold each write a checkpoint).
fn is_record_deletion(body: &str) -> bool {
    body.contains("\"TransactItems\":[{\"Delete\":")
        && body.contains("ConditionExpression")
        && !body.contains("\"Update\":")
        && !body.contains("\"Put\":")
}

/// The offboarding's report, written before its record is deleted.
fn is_report_write(body: &str) -> bool {
    body.contains("OFFBOARDING_REPORT")
}

#[tokio::test]
async fn an_offboarding_cut_off_around_its_shredding_still_reports_the_key_it_destroyed() {
    for (cut_at, refused) in [
        ("its report", is_report_write as fn(&str) -> bool),
        ("its record's deletion", is_record_deletion),
    ] {
        // GIVEN a keyed tenant with products
        let h = Harness::new().await.keyed().await;
        onboard(&h, "leaving", 1).await;
        put_all(&h, "leaving", &products_of("leaving", 3)).await;
        let client = h.caller(&operator());

        // WHEN its offboarding is cut off at `cut_at` (refused past the SDK's retries), then called
        // once more
        h.faults.refuse_requests_matching(Some(refused));
        let mut calls = 0..50;
        let cut = loop {
            assert!(calls.next().is_some(), "cut at {cut_at}: never cut off");
            let r = client.offboard_tenant("leaving").await;
            if r.status != 202 {
                break r;
            }
            h.clock
                .advance_seconds(shared::store::lifecycle::offboarding::DELETION_DELAY_SECONDS);
        };
        h.faults.refuse_requests_matching(None);
        assert_eq!(cut.status, 503, "cut at {cut_at}: {}", cut.body);
        let report = client.offboard_tenant("leaving").await;

        // THEN the report names the key destroyed, as an offboarding never cut off does
        assert_eq!(report.status, 200, "cut at {cut_at}: {}", report.body);
        let destroyed = &report.body["tenantKey"];
        assert_eq!(
            destroyed["versions"],
            json!([1]),
            "cut at {cut_at}: {destroyed}"
        );
        assert_eq!(destroyed["kmsKeyId"], json!(h.test_keys().platform_key));
        // AND the key is gone, and the report stays as answered
        let held = h.test_keys().every_key(&h.admin).await;
        assert!(held.iter().all(|k| k.tenant.as_str() != "leaving"));
        let again = client.offboard_tenant("leaving").await;
        assert_eq!(again.body, report.body, "cut at {cut_at}");
    }
}

#[tokio::test]
async fn a_container_that_held_an_offboarded_tenants_key_serves_it_onboarded_again_under_its_new_key(
) {
    // GIVEN two containers of a keyed world, the second having served acme (its key cached)
    let a = Harness::new().await.keyed().await;
    let b = a.another_keyed_container().await;
    onboard(&a, "acme", 1).await;
    let first = products_of("acme", 3);
    put_all(&a, "acme", &first).await;
    assert_served(&b, "acme", &first).await;

    // WHEN acme is offboarded (its key shredded) and onboarded again on the first container, and
    // writes products under its new key
    let report = offboard_to_end(&a, "acme", &operator()).await;
    assert_eq!(report.status, 200, "{}", report.body);
    onboard(&a, "acme", 1).await;
    // (the first container's cached absence of the record, from the offboarding's end, expires)
    a.clock.advance_seconds(2);
    let again: BTreeMap<String, Value> = products_of("acme-again", 3);
    put_all(&a, "acme", &again).await;

    // THEN the second container, once its cached record has expired, reads the new record's tenant
    // with the new key (well inside its key cache period), never the destroyed one
    b.clock
        .advance_seconds(shared::store::tenancy::tenants::RECORD_TTL_SECONDS + 1);
    assert_served(&b, "acme", &again).await;
    assert_eq!(b.app.keys.as_ref().unwrap().vault_calls(), 2);
}

/// An id offboarded through one container (which clears only its own cache) and onboarded again
/// through another that still caches the shredded key: the new record gets a key of its own.
/// Before the mend the cached key passed for it: no key row was made, and every container wrote
/// the tenant's items plain.
#[tokio::test]
async fn an_id_onboarded_again_where_its_shredded_key_is_cached_gets_a_key_of_its_own() {
    // GIVEN two containers of a keyed world; acme onboarded through the first, which caches its key
    let a = Harness::new().await.keyed().await;
    let b = a.another_keyed_container().await;
    onboard(&a, "acme", 1).await;
    let first = keys_of_acme(&a).await;
    assert_eq!(first.len(), 1, "{first:?}");

    // WHEN the second offboards it to the end (its key shredded), and the first onboards it again
    // within its key cache's period (an offboarding takes at least its deletion delay) and puts
    // products
    let report = offboard_to_end(&b, "acme", &operator()).await;
    assert_eq!(report.status, 200, "{}", report.body);
    a.clock.advance_seconds(61);
    onboard(&a, "acme", 1).await;
    a.clock.advance_seconds(2);
    let again = products_of("acme-again", 3);
    put_all(&a, "acme", &again).await;

    // THEN acme has a new key, its products are sealed, and the other container serves them
    let keys = keys_of_acme(&a).await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert_ne!(keys[0].1, first[0].1, "the shredded key again");
    let items = a.all_items().await;
    let products = products_in(&items, "acme");
    assert_eq!(products.len(), again.len());
    for product in products {
        assert!(is_sealed(product), "{}", item_text(product));
    }
    b.clock
        .advance_seconds(shared::store::tenancy::tenants::RECORD_TTL_SECONDS + 1);
    assert_served(&b, "acme", &again).await;
}

/// A container that caches an id's key, when KMS cannot be reached as it meets the id's next
/// incarnation, answers 503: the key it holds was shredded with the first, and never stands in for
/// the new one's (before the mend it did: its reads of the new items failed to open, 500, and its
/// writes were sealed under a destroyed key, lost to every container).
#[tokio::test]
async fn a_cached_key_of_an_ids_earlier_incarnation_never_serves_the_next_while_kms_is_out() {
    // GIVEN two containers of a keyed world; acme onboarded through the first, which caches its
    // key; offboarded to the end through the second and onboarded there again, with products
    let a = Harness::new().await.keyed().await;
    let b = a.another_keyed_container().await;
    onboard(&a, "acme", 1).await;
    let report = offboard_to_end(&b, "acme", &operator()).await;
    assert_eq!(report.status, 200, "{}", report.body);
    onboard(&b, "acme", 1).await;
    b.clock.advance_seconds(2);
    let again = products_of("acme-again", 3);
    put_all(&b, "acme", &again).await;
    let before = a.all_items().await;

    // WHEN KMS cannot be reached as the first container meets the new record, within its key
    // cache's period
    a.test_keys().outage.store(true, Ordering::SeqCst);
    a.clock.advance_seconds(61);
    let read = a.tenant("acme").get_product("p-001").await;
    let write = a.tenant("acme").put_product("p-new", json!({"n": 1})).await;

    // THEN both answer 503, and nothing is written
    read.assert_problem(503);
    write.assert_problem(503);
    assert_eq!(a.all_items().await, before);
    // AND once KMS answers (and the container's note of the outage has passed), the first
    // container serves the new incarnation under its new key
    a.test_keys().outage.store(false, Ordering::SeqCst);
    a.clock.advance_millis(REFUSAL_MEMO_MS);
    assert_served(&a, "acme", &again).await;
}

#[tokio::test]
async fn a_stale_shredding_of_an_offboarded_record_leaves_the_key_of_the_id_onboarded_again() {
    // GIVEN acme keyed, offboarded to the end (its key shredded), onboarded again, and writing
    // products under its new key
    let h = Harness::new().await.keyed().await;
    onboard(&h, "acme", 1).await;
    let first = h.operator().get_tenant("acme").await.body["createdAt"]
        .as_str()
        .unwrap()
        .to_owned();
    let report = offboard_to_end(&h, "acme", &operator()).await;
    assert_eq!(report.status, 200, "{}", report.body);
    onboard(&h, "acme", 1).await;
    h.clock.advance_seconds(2);
    let again = products_of("acme-again", 3);
    put_all(&h, "acme", &again).await;
    let before = keys_of_acme(&h).await;
    assert_eq!(before.len(), 1, "{before:?}");

    // WHEN a call of the first offboarding that stalled before its shredding goes on, naming the
    // record it read
    let keys = h.app.keys.as_ref().unwrap();
    let acme = TenantId::parse("acme").unwrap();
    let named = keys.to_shred(&acme, &first).await.unwrap();
    keys.shred(&acme, &first).await.unwrap();

    // THEN it names nothing to destroy and destroys nothing: the new record's key is as it was,
    // and acme is served under it
    assert_eq!(named, None);
    assert_eq!(keys_of_acme(&h).await, before);
    assert_served(&h, "acme", &again).await;
}

#[tokio::test]
async fn a_keyed_tenants_employees_and_departments_are_sealed_and_move_between_departments() {
    // GIVEN a keyed tenant on 2 shards with two departments and an employee in the first
    let h = Harness::new().await.keyed().await;
    onboard(&h, "acme", 2).await;
    let t = h.tenant("acme");
    for (d, name) in [("d-1", "Secret Ops"), ("d-2", "Secret Labs")] {
        let r = t.put_department(d, json!({"name": name})).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let ada =
        json!({"name": "Ada Secretary", "departmentId": "d-1", "email": "ada@secret.example"});
    let r = t.put_employee("e-1", ada.clone()).await;
    assert_eq!(r.status, 201, "{}", r.body);

    // WHEN she moves to the second department (a transaction conditioned on her department)
    let moved =
        json!({"name": "Ada Secretary", "departmentId": "d-2", "email": "ada@secret.example"});
    let r = t.put_employee("e-1", moved).await;
    assert_eq!(r.status, 200, "{}", r.body);

    // THEN every read answers as written
    let e = t.get_employee("e-1").await;
    assert_eq!((e.status, &e.body["departmentId"]), (200, &json!("d-2")));
    assert_eq!(e.body["email"], "ada@secret.example");
    let d = t.get_department("d-2").await;
    assert_eq!((d.status, &d.body["name"]), (200, &json!("Secret Labs")));
    let listed = t.query(&[("limit", "10")]).list_departments().await;
    assert_eq!(
        listed.body["items"].as_array().map(Vec::len),
        Some(2),
        "{}",
        listed.body
    );
    // AND the department lists her, by name
    let members = h
        .tenant("acme")
        .query(&[("limit", "10")])
        .list_department_employees("d-2")
        .await;
    assert_eq!(
        members.body["items"][0]["name"], "Ada Secretary",
        "{}",
        members.body
    );
    // AND in the raw table the employee, her membership and the departments are sealed: only
    // their department id (which the moves' conditions read) and keys stay readable
    let items = h.all_items().await;
    let sealed: Vec<&Item> = items.iter().filter(|i| is_sealed(i)).collect();
    assert_eq!(sealed.len(), 4, "{items:?}");
    for item in sealed {
        let text = item_text(item);
        assert!(!text.contains("Secret") && !text.contains("ada@"), "{text}");
    }
}

/// A keyed world, acme with 3 products, and a fresh container that served them (its key cached):
/// the world, the container, and the model.
async fn served_by_a_fresh_keyed_container() -> (Harness, Harness, BTreeMap<String, Value>) {
    let h = Harness::new().await.keyed().await;
    onboard(&h, "acme", 1).await;
    let model = products_of("acme", 3);
    put_all(&h, "acme", &model).await;
    let c = h.another_keyed_container().await;
    assert_served(&c, "acme", &model).await;
    (h, c, model)
}

#[tokio::test]
async fn when_kms_cannot_be_reached_a_recent_key_serves_for_two_periods_then_the_tenant_gets_503() {
    // GIVEN a keyed tenant with products, served by a fresh container (its key cached)
    let (h, c, model) = served_by_a_fresh_keyed_container().await;
    let period_ms = DEFAULT_KEY_CACHE_SECONDS * 1000;

    // WHEN KMS cannot be reached, past the container's cache period
    h.test_keys().outage.store(true, Ordering::SeqCst);
    c.clock.advance_millis(period_ms + 1);
    // THEN the key fetched within two periods keeps serving (an outage is not a revocation)
    assert_served(&c, "acme", &model).await;

    // WHEN the outage outlasts two periods
    c.clock.advance_millis(period_ms);
    // THEN the tenant's requests answer 503, and write nothing
    let r = c.tenant("acme").get_product("p-001").await;
    r.assert_problem(503);
    let r = c.tenant("acme").put_product("p-new", json!({"n": 1})).await;
    r.assert_problem(503);
    assert_eq!(products_in(&h.all_items().await, "acme").len(), model.len());

    // WHEN KMS answers again
    h.test_keys().outage.store(false, Ordering::SeqCst);
    // THEN it is served again once the container's note of the outage has passed
    c.clock.advance_millis(REFUSAL_MEMO_MS);
    assert_served(&c, "acme", &model).await;
}

#[tokio::test]
async fn a_throttled_key_table_falls_back_on_the_recent_key_and_keeps_it_for_an_outage_after() {
    // GIVEN a keyed tenant, and a container's key cache whose key table reads pass through the
    // fault layer, its key fetched
    let h = Harness::new().await.keyed().await;
    onboard(&h, "acme", 1).await;
    let acme = TenantId::parse("acme").unwrap();
    let faulting = aws_sdk_dynamodb::Client::from_conf(
        h.admin
            .config()
            .to_builder()
            .interceptor(integration::TestInterceptor {
                requests: h.requests.clone(),
                faults: h.faults.clone(),
            })
            .build(),
    );
    let keys = h.test_keys().tenant_keys_on(&h, faulting);
    let fetched = keys.current(&acme, None).await.unwrap().expect("a key");

    // WHEN its period passes and the key table throttles every read
    h.clock.advance_millis(DEFAULT_KEY_CACHE_SECONDS * 1000 + 1);
    h.faults
        .refuse_requests_containing(Some(h.test_keys().table()));
    let throttled = keys.current(&acme, None).await;
    // THEN the recent key serves (before the mend: 503, and the key was dropped)
    let served = throttled.expect("the recent key").expect("a key");
    assert_eq!(served.versions(), fetched.versions());

    // WHEN the throttling ends and KMS is then out of reach, five seconds on
    h.faults.refuse_requests_containing(None);
    h.test_keys().outage.store(true, Ordering::SeqCst);
    h.clock.advance_millis(REFUSAL_MEMO_MS);
    // THEN the recent key still serves: the throttling did not drop it
    let out = keys.current(&acme, None).await;
    assert!(matches!(out, Ok(Some(_))), "{out:?}");
    h.test_keys().outage.store(false, Ordering::SeqCst);
}

#[tokio::test]
async fn a_key_table_failing_otherwise_answers_its_error_and_keeps_the_recent_key_for_an_outage_after(
) {
    // GIVEN a keyed tenant, and a container's key cache whose key table reads pass through the
    // fault layer, its key fetched
    let h = Harness::new().await.keyed().await;
    onboard(&h, "acme", 1).await;
    let acme = TenantId::parse("acme").unwrap();
    let faulting = aws_sdk_dynamodb::Client::from_conf(
        h.admin
            .config()
            .to_builder()
            .interceptor(integration::TestInterceptor {
                requests: h.requests.clone(),
                faults: h.faults.clone(),
            })
            .build(),
    );
    let keys = h.test_keys().tenant_keys_on(&h, faulting);
    let fetched = keys.current(&acme, None).await.unwrap().expect("a key");

    // WHEN its period passes and the key table answers one read with an error that is neither an
    // outage nor a refusal
    h.clock.advance_millis(DEFAULT_KEY_CACHE_SECONDS * 1000 + 1);
    h.faults.answer_next("Query", "ValidationException");
    let failed = keys.current(&acme, None).await;
    // THEN that error is the answer (never taken for a refusal, nor served around)
    assert!(matches!(failed, Err(StoreError::Internal(_))), "{failed:?}");

    // WHEN KMS is then out of reach
    h.test_keys().outage.store(true, Ordering::SeqCst);
    let out = keys.current(&acme, None).await;
    h.test_keys().outage.store(false, Ordering::SeqCst);
    // THEN the recent key serves: only a refusal drops it (before 73e432f any failure did, and
    // this answered 503)
    let served = out.expect("the recent key").expect("a key");
    assert_eq!(served.versions(), fetched.versions());
}

#[tokio::test]
async fn while_kms_is_out_a_container_asks_it_once_every_five_seconds_and_its_recent_key_serves_at_once(
) {
    // GIVEN a keyed tenant with products, served by a fresh container (its key cached)
    let (h, c, model) = served_by_a_fresh_keyed_container().await;
    let keys = c.app.keys.as_ref().expect("a keyed container");
    let acme = TenantId::parse("acme").unwrap();

    // WHEN KMS cannot be reached, past the container's cache period, and the container serves ten
    // reads as the runtime serves them (admitted, then handled)
    h.test_keys().outage.store(true, Ordering::SeqCst);
    c.clock.advance_millis(DEFAULT_KEY_CACHE_SECONDS * 1000 + 1);
    let before = keys.vault_calls();
    for _ in 0..10 {
        let r = c.tenant("acme").admitted().get_product("p-001").await;
        // THEN each is served by the recent key
        assert_eq!(r.status, 200, "{}", r.body);
    }
    // AND KMS was asked once (before the mend: three times a request, each attempt up to the
    // SDK's retries and timeouts, so a request could outlast its function's timeout)
    assert_eq!(keys.vault_calls() - before, 1);

    // WHEN a request meets an item its key cannot open (a newer version), and KMS is still out
    keys.forget_unless_fresh(&acme);
    // THEN the recent key still serves the rest (before the mend: dropped, every request 503)
    assert_served(&c, "acme", &model).await;

    // WHEN five seconds pass
    c.clock.advance_millis(REFUSAL_MEMO_MS);
    assert_served(&c, "acme", &model).await;
    // THEN KMS was asked once more
    assert_eq!(keys.vault_calls() - before, 2);
    // AND once KMS answers and the note has passed, the key is fetched again and served
    h.test_keys().outage.store(false, Ordering::SeqCst);
    c.clock.advance_millis(REFUSAL_MEMO_MS);
    assert_served(&c, "acme", &model).await;
    assert_eq!(keys.vault_calls() - before, 3);
}

#[tokio::test]
async fn a_keyed_tenants_imported_products_are_sealed_and_a_batch_delivered_twice_writes_each_once()
{
    use super::imports::{deliver_in_process, post_import, products};
    // GIVEN a keyed tenant and an import of 30 products, accepted onto the queue
    // (at the largest limits: no message is held back by the capacity quota)
    let h = Harness::new().await.keyed().await;
    integration::onboard_at_max_limits(&h, "acme", 2).await;
    let queues = integration::import_queue::ImportQueues::create(5, 10).await;
    let accepted = post_import(&h, &queues, "acme", products("imp", 30), &[]).await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);

    // WHEN the consumer takes its messages, and a batch is delivered a second time
    let mut batches = Vec::new();
    loop {
        let batch = queues.receive(10).await;
        if batch.is_empty() {
            break;
        }
        deliver_in_process(&h, &queues, &batch).await;
        batches.push(batch);
    }
    deliver_in_process(&h, &queues, &batches[0]).await;

    // THEN every product is stored once, sealed, and reads back as imported
    let items = h.all_items().await;
    let stored = products_in(&items, "acme");
    assert_eq!(stored.len(), 30);
    assert!(stored
        .iter()
        .all(|i| is_sealed(i) && !item_text(i).contains("imp ")));
    let r = h.tenant("acme").get_product("imp-00007").await;
    assert_eq!(
        r.body["document"],
        json!({"n": 7, "name": "imp 7"}),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn a_keyed_tenants_emails_are_keyed_by_a_digest_found_changed_and_erased() {
    // GIVEN a keyed tenant with a user
    let h = Harness::new().await.keyed().await;
    onboard(&h, "acme", 1).await;
    let call = |bin: &'static str, id: &'static str, body: Option<Value>| {
        let h = &h;
        async move {
            let p = integration::routes::params(&[("userId", id)]);
            h.tenant("acme").call(bin, &p, body).await
        }
    };
    let ada = json!({"name": "Ada", "email": "Ada@Secret.example"});
    assert_eq!(call("put-user", "u-1", Some(ada)).await.status, 201);
    let find = |email: &'static str| {
        let h = &h;
        async move {
            h.tenant("acme")
                .query(&[("email", email)])
                .find_user_by_email()
                .await
        }
    };
    // THEN it is found by its email in any case, and no key holds the email
    assert_eq!(find("ada@secret.example").await.body["userId"], "u-1");
    let no_email_in_keys = |items: &[Item]| {
        items.iter().all(|i| {
            ["PK", "SK"]
                .iter()
                .all(|k| !matches!(i.get(*k), Some(AttributeValue::S(v)) if v.contains('@')))
        })
    };
    assert!(no_email_in_keys(&h.all_items().await));
    // AND another user cannot take it
    let grace = json!({"name": "Grace", "email": "ada@secret.example"});
    call("put-user", "u-2", Some(grace))
        .await
        .assert_problem_naming(409, "email");
    // WHEN the user changes its email
    let moved = json!({"name": "Ada", "email": "lovelace@secret.example"});
    assert_eq!(call("put-user", "u-1", Some(moved)).await.status, 200);
    // THEN it is found by the new one only, and the old one is free
    assert_eq!(find("lovelace@secret.example").await.body["userId"], "u-1");
    assert_eq!(find("ada@secret.example").await.status, 404);
    // WHEN the user is erased
    assert_eq!(call("erase-user", "u-1", None).await.status, 200);
    // THEN no email item is left
    assert_eq!(find("lovelace@secret.example").await.status, 404);
    let items = h.all_items().await;
    assert!(no_email_in_keys(&items));
    assert!(!items
        .iter()
        .any(|i| i.get("kind") == Some(&AttributeValue::S("EMAIL".into()))));
}

#[tokio::test]
async fn a_keyed_tenants_users_orders_and_integration_tokens_are_sealed_and_served_as_written() {
    // GIVEN a keyed tenant and a plain neighbour (onboarded before keys were set up)
    let plain = Harness::new().await;
    onboard(&plain, "globex", 1).await;
    let h = plain.keyed().await;
    onboard(&h, "acme", 1).await;
    let call =
        |tenant: &'static str, bin: &'static str, p: &[(&str, &str)], body: Option<Value>| {
            let h = &h;
            let p = integration::routes::params(p);
            async move { h.tenant(tenant).call(bin, &p, body).await }
        };
    // WHEN each writes a user, an order of three lines and an integration token, and changes the
    // user's name and email (the profile's write is conditioned on its sealed bytes)
    let now = shared::identity::clock::Clock::now_seconds(&*h.clock);
    for t in ["acme", "globex"] {
        let ada = json!({"name": "Ada Secretname", "email": "ada@secret.example"});
        assert_eq!(
            call(t, "put-user", &[("userId", "u-1")], Some(ada))
                .await
                .status,
            201
        );
        let moved = json!({"name": "Ada Lovelace-Secret", "email": "lovelace@secret.example"});
        let r = call(t, "put-user", &[("userId", "u-1")], Some(moved)).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let order = json!({
            "orderId": "o-1", "date": "2026-11-02", "amount": 31.5,
            "items": (0..3).map(|n| json!({"itemId": format!("l-{n}"), "sku": format!("SECRET-SKU-{n}"), "qty": n + 1, "price": 10.5})).collect::<Vec<_>>(),
        });
        let r = call(t, "create-order", &[("userId", "u-1")], Some(order)).await;
        assert_eq!(r.status, 201, "{}", r.body);
        let token = json!({"token": "secret-token-123", "expiresAt": now + 3600});
        let r = call(
            t,
            "put-integration-token",
            &[("service", "github")],
            Some(token),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }

    // THEN every read answers as written, for both
    for t in ["acme", "globex"] {
        let user = call(t, "get-user", &[("userId", "u-1")], None).await;
        assert_eq!(user.status, 200, "{}", user.body);
        assert_eq!(user.body["email"], "lovelace@secret.example");
        assert_eq!(user.body["name"], "Ada Lovelace-Secret");
        assert_eq!(user.body["orders"][0]["orderId"], "o-1", "{}", user.body);
        let order = call(t, "get-order", &[("orderId", "o-1")], None).await;
        assert_eq!(
            order.body["items"][2]["sku"], "SECRET-SKU-2",
            "{}",
            order.body
        );
        assert_eq!(order.body["amount"], 31.5);
        let listed = h
            .tenant(t)
            .query(&[("from", "2026-11-01"), ("to", "2026-11-30")])
            .list_tenant_orders()
            .await;
        assert_eq!(listed.body["items"][0]["orderId"], "o-1", "{}", listed.body);
        let found = h
            .tenant(t)
            .query(&[("email", "lovelace@secret.example")])
            .find_user_by_email()
            .await;
        assert_eq!(found.body["name"], "Ada Lovelace-Secret", "{}", found.body);
        let token = call(t, "get-integration-token", &[("service", "github")], None).await;
        assert_eq!(token.body["token"], "secret-token-123", "{}", token.body);
    }

    // AND in the raw table no item of acme holds a name, an email, a sku or a token in the clear,
    // while the plain neighbour's are as they were written
    let items = h.all_items().await;
    let of = |tenant: &str| -> Vec<&Item> {
        let prefix = tenant_prefix(&TenantId::parse(tenant).unwrap());
        items
            .iter()
            .filter(
                |i| matches!(i.get("PK"), Some(AttributeValue::S(pk)) if pk.starts_with(&prefix)),
            )
            .collect()
    };
    let secrets = ["Secret", "secret", "SECRET", "@"];
    let acme_sealed = of("acme")
        .into_iter()
        .filter(|i| {
            let kind = i
                .get("kind")
                .and_then(|k| k.as_s().ok())
                .map(String::as_str);
            matches!(
                kind,
                Some(
                    "USER"
                        | "EMAIL"
                        | "ORDER"
                        | "ORDER_SUMMARY"
                        | "ORDERDATE"
                        | "ITEM"
                        | "INTEGRATION"
                )
            )
        })
        .collect::<Vec<_>>();
    // a profile, an email item, a header, a summary, a date index entry, 3 lines and a token
    assert_eq!(acme_sealed.len(), 9, "{acme_sealed:?}");
    for item in &acme_sealed {
        assert!(is_sealed(item), "{item:?}");
        let text = item_text(item);
        assert!(
            secrets.iter().all(|s| !text.contains(s)),
            "plaintext in {text}"
        );
    }
    let globex_text: String = of("globex").iter().map(|i| item_text(i)).collect();
    assert!(globex_text.contains("SECRET-SKU-2") && globex_text.contains("secret-token-123"));

    // AND a transfer code (sealed; its redeemer stays plain: its redemption is one conditional
    // UpdateItem) is made and redeemed once, whole items read in full for a keyed tenant as for any
    let code = call("acme", "create-transfer-code", &[("userId", "u-1")], None).await;
    assert_eq!(code.status, 201, "{}", code.body);
    let code = code.body["code"].as_str().unwrap().to_owned();
    let redeem = |code: String| {
        let h = &h;
        async move {
            let p = integration::routes::params(&[("code", &code)]);
            let key = [("Idempotency-Key", code.as_str())];
            h.tenant("acme")
                .headers(&key)
                .call("redeem-transfer-code", &p, None)
                .await
        }
    };
    let redeemed = redeem(code.clone()).await;
    assert_eq!(redeemed.status, 200, "{}", redeemed.body);
    assert_eq!(redeemed.body["userId"], "u-1", "{}", redeemed.body);
    // (asked again with the same key: the same answer; with a fresh code, none)
    let again = redeem(code.clone()).await;
    assert_eq!(
        again.body["userId"], "u-1",
        "{} {}",
        again.status, again.body
    );
    assert_eq!(
        redeem(code.replace(char::is_alphanumeric, "0"))
            .await
            .status,
        404
    );

    // AND the user's erasure deletes every item of its own, sealed as they are
    let r = call("acme", "erase-user", &[("userId", "u-1")], None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["deletedTotal"], 8, "{}", r.body);
}

#[tokio::test]
async fn a_keyed_tenants_sessions_transfer_codes_and_recorded_answers_are_sealed_and_served() {
    // GIVEN a keyed tenant with a user
    let h = Harness::new().await.keyed().await;
    onboard(&h, "acme", 1).await;
    let call = |bin: &'static str, p: &[(&str, &str)], key: Option<&str>, body: Option<Value>| {
        let h = &h;
        let p = integration::routes::params(p);
        let key: Vec<(&str, String)> = key
            .map(|k| ("Idempotency-Key", k.to_owned()))
            .into_iter()
            .collect();
        async move {
            let headers: Vec<(&str, &str)> = key.iter().map(|(n, v)| (*n, v.as_str())).collect();
            h.tenant("acme").headers(&headers).call(bin, &p, body).await
        }
    };
    let ada = json!({"name": "Ada", "email": "ada@example.com"});
    assert_eq!(
        call("put-user", &[("userId", "u-1")], None, Some(ada))
            .await
            .status,
        201
    );

    // WHEN it creates a session with a state, twice with one Idempotency-Key, and a child of it
    let root_body = json!({"customerId": "cust-secret-1", "state": "SECRET-STATE-cart-42"});
    let root = call(
        "create-session",
        &[],
        Some("root-1"),
        Some(root_body.clone()),
    )
    .await;
    assert_eq!(root.status, 201, "{}", root.body);
    let replayed = call("create-session", &[], Some("root-1"), Some(root_body)).await;
    assert_eq!((replayed.status, &replayed.body), (201, &root.body));
    let root_id = root.body["sessionId"].as_str().unwrap().to_owned();
    let child_body = json!({"customerId": "cust-secret-1", "parentSessionId": root_id, "state": "SECRET-STATE-child"});
    let child = call("create-session", &[], None, Some(child_body)).await;
    assert_eq!(child.status, 201, "{}", child.body);
    let child_id = child.body["sessionId"].as_str().unwrap().to_owned();
    // AND a transfer code, with an Idempotency-Key
    let code = call(
        "create-transfer-code",
        &[("userId", "u-1")],
        Some("code-1"),
        None,
    )
    .await;
    assert_eq!(code.status, 201, "{}", code.body);
    let code = code.body["code"].as_str().unwrap().to_owned();

    // THEN every session read answers what was written
    let got = call(
        "get-session-by-session-id",
        &[("sessionId", &root_id)],
        None,
        None,
    )
    .await;
    assert_eq!(got.body["state"], "SECRET-STATE-cart-42", "{}", got.body);
    let children = call(
        "get-child-sessions-by-session-id",
        &[("sessionId", &root_id)],
        None,
        None,
    )
    .await;
    assert_eq!(
        children.body["items"][0]["state"], "SECRET-STATE-child",
        "{}",
        children.body
    );
    let parent = call(
        "get-session-by-child-session-id",
        &[("childSessionId", &child_id)],
        None,
        None,
    )
    .await;
    assert_eq!(
        parent.body["sessionId"],
        root_id.as_str(),
        "{}",
        parent.body
    );
    let last = call(
        "get-last-login-time-by-customer-id",
        &[("customerId", "cust-secret-1")],
        None,
        None,
    )
    .await;
    assert_eq!(last.status, 200, "{}", last.body);
    let listed = call(
        "get-sessions-by-customer-id",
        &[("customerId", "cust-secret-1")],
        None,
        None,
    )
    .await;
    assert_eq!(
        listed.body["items"].as_array().map(Vec::len),
        Some(1),
        "{}",
        listed.body
    );

    // AND in the raw table the sessions, the code and the recorded answers are sealed: no state,
    // no code outside its key, and the child count and the code's redeemer plain
    let prefix = tenant_prefix(&TenantId::parse("acme").unwrap());
    let items = h.all_items().await;
    let of_kind = |kinds: &[&str]| -> Vec<&Item> {
        items
            .iter()
            .filter(|i| matches!(i.get("PK"), Some(AttributeValue::S(pk)) if pk.starts_with(&prefix)))
            .filter(|i| matches!(i.get("kind"), Some(AttributeValue::S(k)) if kinds.contains(&k.as_str())))
            .collect()
    };
    let sealed = of_kind(&["SESSION", "CHILD_SESSION", "TRANSFER", "IDEMPOTENCY"]);
    // a root, a child, a code, and the two keys' records
    assert_eq!(sealed.len(), 5, "{sealed:?}");
    for item in &sealed {
        assert!(is_sealed(item), "{item:?}");
        let mut text = item_text(item);
        for key in ["PK", "SK", "GSI1", "catalog"] {
            if let Some(value) = item.get(key) {
                text = text.replace(&format!("{value:?}"), "");
            }
        }
        for secret in [
            "SECRET",
            "cart-42",
            "sessionId",
            "lastLoginTime",
            code.as_str(),
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
    // AND no item anywhere in the table holds the code, its keys included: the code's item is keyed
    // by the code's SHA-256, so a copy of the table hands out no code
    for item in &items {
        assert!(!format!("{item:?}").contains(code.as_str()), "{item:?}");
    }
    let root_item = of_kind(&["SESSION"])[0];
    assert_eq!(
        root_item.get("childCount"),
        Some(&AttributeValue::N("1".into()))
    );

    // WHEN the code is redeemed, and the session expired
    let redeemed = call("redeem-transfer-code", &[("code", &code)], None, None).await;
    assert_eq!(redeemed.body["userId"], "u-1", "{}", redeemed.body);
    let expired = call("expire-session", &[("sessionId", &root_id)], None, None).await;
    // THEN the code is spent (a second redemption is 404), its redeemer plain beside its sealed
    // attributes, and the session gone with its child
    assert_eq!(expired.status, 204, "{}", expired.body);
    let spent = call("redeem-transfer-code", &[("code", &code)], None, None).await;
    assert_eq!(spent.status, 404, "{}", spent.body);
    let items = h.all_items().await;
    let codes: Vec<&Item> = items
        .iter()
        .filter(|i| matches!(i.get("kind"), Some(AttributeValue::S(k)) if k == "TRANSFER"))
        .collect();
    assert_eq!(codes.len(), 1);
    assert!(
        is_sealed(codes[0]) && matches!(codes[0].get("redeemedBy"), Some(AttributeValue::S(_)))
    );
    assert!(!items
        .iter()
        .any(|i| matches!(i.get("kind"), Some(AttributeValue::S(k)) if k.ends_with("SESSION"))));
    let gone = call(
        "get-session-by-session-id",
        &[("sessionId", &root_id)],
        None,
        None,
    )
    .await;
    assert_eq!(gone.status, 404, "{}", gone.body);
}

/// acme's onboarding by the operator through container `h`, with `idempotency_key` when given.
async fn onboard_acme(h: &Harness, idempotency_key: Option<&str>) -> integration::Resp {
    let headers: Vec<(&str, &str)> = idempotency_key
        .map(|k| ("Idempotency-Key", k))
        .into_iter()
        .collect();
    let body = json!({"tenantId": "acme", "tier": "standard", "shardCount": 1});
    h.operator()
        .headers(&headers)
        .call("onboard-tenant", &[] as &[(&str, &str)], Some(body))
        .await
}

/// acme's keys in the key table: each version, its bytes and the KMS key that wraps it.
async fn keys_of_acme(h: &Harness) -> Vec<(u32, Vec<u8>, String)> {
    let acme = TenantId::parse("acme").unwrap();
    let keys = h.test_keys().keys_of(&h.admin, &acme).await;
    keys.into_iter()
        .map(|k| (k.version, k.bytes().to_vec(), k.kms_key))
        .collect()
}

#[tokio::test]
async fn onboarding_an_existing_tenants_id_again_never_makes_a_new_key_over_the_one_its_items_are_sealed_under(
) {
    // GIVEN a keyed tenant onboarded with an Idempotency-Key, with sealed products
    let h = Harness::new().await.keyed().await;
    let first = onboard_acme(&h, Some("onboard-acme")).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let model = products_of("acme", 3);
    put_all(&h, "acme", &model).await;
    let held = keys_of_acme(&h).await;
    assert_eq!(held.len(), 1);

    // WHEN the same onboarding is sent again a second later: a retry with its Idempotency-Key, then
    // one without, then one through another container a minute on
    h.clock.advance_seconds(1);
    let retried = onboard_acme(&h, Some("onboard-acme")).await;
    let again = onboard_acme(&h, None).await;
    let other = h.another_keyed_container().await;
    other.clock.advance_seconds(60);
    let elsewhere = onboard_acme(&other, None).await;

    // THEN the retry replays the first answer, and the others are 409
    assert_eq!((retried.status, &retried.body), (201, &first.body));
    for r in [&again, &elsewhere] {
        assert_eq!(r.status, 409, "{}", r.body);
    }
    // AND the tenant's key is the one it had, and a container that meets it only now reads every
    // product as written
    assert_eq!(keys_of_acme(&h).await, held);
    let fresh = h.another_keyed_container().await;
    assert_served(&fresh, "acme", &model).await;
}
