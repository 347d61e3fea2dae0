//! Online encryption (issue 59): a tenant onboarded before tenants had keys (5,000 products, and
//! departments and employees) gets a key of its own with `PATCH /tenants/{tenantId}
//! {"keyed": true}`, and the lifecycle driver seals every item, with nobody calling, while the
//! tenant writes and a container that still holds its old "no key" view writes too. Checked against
//! a model of every product; afterwards no item of a sealed kind is plain in the raw table, and no
//! key holds an email (each user's email item moved to its keyed digest).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use futures::StreamExt;
use integration::{onboard, Auth, Harness};
use serde_json::{json, Value};
use shared::identity::ids::TenantId;
use shared::identity::keys::{entity_sk_prefix, kind};
use shared::isolation::policy::Scope;
use shared::store::client::sealed::ERASING_SINCE;
use shared::store::keys::{is_sealed, open_item, DEFAULT_KEY_CACHE_SECONDS};
use shared::store::lifecycle::keying::{self, Walked, SETTLE_SECONDS};
use shared::store::tenancy::tenants::{read_record_consistent, LONGEST_FUNCTION_TIMEOUT_SECONDS};

const PRODUCTS: usize = 5_000;

fn doc(id: &str, v: u64) -> Value {
    json!({"name": format!("{id}-secret"), "v": v})
}

/// Puts `ids` with version `v` through container `h`, 16 at a time, into `model`.
async fn put(h: &Harness, ids: &[String], v: u64, model: &mut BTreeMap<String, Value>) {
    futures::stream::iter(ids.iter().map(|id| async move {
        let r = h.tenant("acme").put_product(id, doc(id, v)).await;
        assert!(r.status == 200 || r.status == 201, "{}", r.body);
    }))
    .buffer_unordered(16)
    .collect::<Vec<()>>()
    .await;
    for id in ids {
        model.insert(id.clone(), doc(id, v));
    }
}

/// An operator's `PATCH /tenants/acme` with `body` through container `h`.
async fn update_acme(h: &Harness, body: Value) -> integration::Resp {
    let p = integration::routes::params(&[("tenantId", "acme")]);
    h.operator().call("update-tenant", &p, Some(body)).await
}

/// An operator's `{"keyed": true}` for acme through keyed container `h` (202), and the lifecycle
/// driver's runs once every container has met the key, until the walk has ended.
async fn key_acme_to_the_end(h: &Harness) {
    let started = update_acme(h, json!({"keyed": true})).await;
    assert_eq!(started.status, 202, "{}", started.body);
    h.clock
        .advance_millis((keying::waits_seconds(DEFAULT_KEY_CACHE_SECONDS) + 1) * 1000);
    integration::drive_to_end(&h.app).await;
}

/// Creates a session of acme with `body` through container `h`: its id.
async fn create_session(h: &Harness, body: Value) -> String {
    let none = integration::routes::params(&[]);
    let r = h
        .tenant("acme")
        .call("create-session", &none, Some(body))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["sessionId"].as_str().unwrap().to_owned()
}

/// Writes user `id` with `email` through container `h`.
async fn put_user(h: &Harness, id: &str, email: &str) {
    let r = h
        .tenant("acme")
        .call(
            "put-user",
            &integration::routes::params(&[("userId", id)]),
            Some(json!({"name": id, "email": email})),
        )
        .await;
    assert!(r.status == 200 || r.status == 201, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_of_5000_items_is_sealed_online_under_load_and_matches_its_model() {
    // GIVEN a tenant onboarded by a container without tenant keys (as before keys were set up),
    // with 5,000 products, two departments and an employee, all plain
    let plain = Harness::new().await;
    onboard(&plain, "acme", 4).await;
    let ids: Vec<String> = (0..PRODUCTS).map(|i| format!("p-{i:05}")).collect();
    let mut model = BTreeMap::new();
    put(&plain, &ids, 1, &mut model).await;
    for d in ["d-1", "d-2"] {
        let r = plain
            .tenant("acme")
            .put_department(d, json!({"name": "Secret dept"}))
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let ada = json!({"name": "Ada Secretary", "departmentId": "d-1"});
    assert_eq!(
        plain.tenant("acme").put_employee("e-1", ada).await.status,
        201
    );
    // ... and 20 users, whose email uniqueness items are keyed by the plain email
    for i in 0..20 {
        put_user(
            &plain,
            &format!("u-{i}"),
            &format!("user{i}@secret.example"),
        )
        .await;
    }
    // ... a session with a state and a child of it, and a transfer code
    let root = create_session(
        &plain,
        json!({"customerId": "c-1", "state": "Secret state"}),
    )
    .await;
    create_session(
        &plain,
        json!({"customerId": "c-1", "parentSessionId": root}),
    )
    .await;
    let code = plain
        .tenant("acme")
        .call(
            "create-transfer-code",
            &integration::routes::params(&[("userId", "u-2")]),
            None,
        )
        .await;
    assert_eq!(code.status, 201, "{}", code.body);
    // AND keyed containers on the same table: one that starts the sealing, and one that served the
    // tenant before (it has cached that the tenant has no key)
    let keyed = plain.another_container().await.keyed().await;
    let stale = keyed.another_keyed_container().await;
    assert_eq!(
        stale.tenant("acme").get_product("p-00001").await.status,
        200
    );

    // WHEN an operator asks for the tenant's items to be sealed
    let r = keyed
        .operator()
        .call(
            "update-tenant",
            &integration::routes::params(&[("tenantId", "acme")]),
            Some(json!({"keyed": true})),
        )
        .await;
    // THEN it answers 202 with the progress: sealing starts once every container has met the key
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["keying"]["itemsSealed"], 0, "{}", r.body);
    // ... meanwhile the stale container writes plain items (it has not met the key yet)
    let early: Vec<String> = (0..50).map(|i| format!("p-{i:05}")).collect();
    put(&stale, &early, 2, &mut model).await;
    put_user(&stale, "u-20", "user20@secret.example").await;

    // WHEN the key cache's period passes, and the driver seals with nobody calling while both
    // containers write
    let wait = (keying::waits_seconds(DEFAULT_KEY_CACHE_SECONDS) + 1) * 1000;
    for c in [&plain, &keyed, &stale] {
        c.clock.advance_millis(wait);
    }
    let late: Vec<String> = (1000..1400).map(|i| format!("p-{i:05}")).collect();
    let (stale_late, keyed_late) = late.split_at(200);
    let mut written = model.clone();
    let writes = async {
        // (a user changes its email, and another writes its profile again, during the walk)
        put_user(&keyed, "u-0", "changed@secret.example").await;
        put_user(&stale, "u-1", "user1@secret.example").await;
        // (and the session gets a second child: its root's count changes under the walk)
        create_session(
            &keyed,
            json!({"customerId": "c-1", "parentSessionId": root}),
        )
        .await;
        put(&stale, stale_late, 3, &mut written).await;
        let mut more = BTreeMap::new();
        put(&keyed, keyed_late, 3, &mut more).await;
        written.extend(more);
    };
    tokio::join!(integration::drive_to_end(&keyed.app), writes);
    let model = written;

    // THEN the tenant's record shows no sealing left
    let done = keyed.operator().get_tenant("acme").await;
    assert!(done.body.get("keying").is_none(), "{}", done.body);
    // AND every item of a sealed kind in the raw table is sealed, none holds a document, and none
    // holds any of the documents' text
    let t = TenantId::parse("acme").unwrap();
    let items = keyed.all_items().await;
    let prefix = |k: &str| entity_sk_prefix(&t, k);
    let of_kind = |k: &str| {
        let (prefix, stored_as) = (prefix(k), AttributeValue::S(k.to_owned()));
        items
            .iter()
            .filter(move |i| matches!(i.get("SK"), Some(AttributeValue::S(sk)) if sk.starts_with(&prefix)))
            .filter(move |i| i.get("kind") == Some(&stored_as))
            .collect::<Vec<_>>()
    };
    let products = of_kind(kind::PRODUCT);
    assert_eq!(products.len(), PRODUCTS);
    assert_eq!(of_kind(kind::DEPARTMENT).len(), 2);
    assert_eq!(of_kind(kind::EMPLOYEE).len(), 1);
    for item in products
        .iter()
        .chain(&of_kind(kind::DEPARTMENT))
        .chain(&of_kind(kind::EMPLOYEE))
    {
        assert!(is_sealed(item), "plain: {item:?}");
        assert!(!item.contains_key("document"));
        assert!(!format!("{item:?}").contains("secret") && !format!("{item:?}").contains("Secret"));
    }
    // AND each product opens to the model's document, the last write of each
    let key = keyed
        .app
        .tenant_key(&t, None)
        .await
        .unwrap()
        .expect("acme has a key");
    for item in products {
        let opened = open_item(Some(&key), item.clone()).expect("opens under acme's key");
        let id = match opened.get("productId") {
            Some(AttributeValue::S(id)) => id.clone(),
            other => panic!("no productId: {other:?}"),
        };
        let document: Value =
            serde_dynamo::from_attribute_value(opened["document"].clone()).unwrap();
        assert_eq!(document, model[&id], "{id}");
    }
    // AND every item of acme of any sealed kind (users' profiles and email items too) is sealed, and
    // no attribute of any of acme's items holds an email in the clear
    let acme = shared::identity::keys::tenant_prefix(&t);
    let acme_items: Vec<_> = items
        .iter()
        .filter(|i| matches!(i.get("PK"), Some(AttributeValue::S(pk)) if pk.starts_with(&acme)))
        .collect();
    let of_sealed_kind = |i: &&&std::collections::HashMap<String, AttributeValue>| matches!(i.get("kind"), Some(AttributeValue::S(k)) if shared::identity::entities::sealed(k));
    let sealed_kinds: Vec<_> = acme_items.iter().filter(of_sealed_kind).collect();
    // 5,000 products, 2 departments, an employee and her membership, 21 profiles and 21 email
    // items, a session and its two children, and a transfer code
    assert_eq!(sealed_kinds.len(), PRODUCTS + 4 + 42 + 4);
    assert!(sealed_kinds.iter().all(|i| is_sealed(i)));
    for item in &acme_items {
        assert!(
            !format!("{item:?}").contains("@secret"),
            "an email in {item:?}"
        );
    }
    // AND no key of any item holds an email: every email item is under its keyed digest
    for item in &items {
        for name in ["PK", "SK", "GSI1"] {
            if let Some(AttributeValue::S(k)) = item.get(name) {
                assert!(!k.contains('@'), "an email in a key: {k}");
            }
        }
    }
    // AND every user is found by its email, the changed one by its new email only
    for i in 1..=20 {
        let email = format!("user{i}@secret.example");
        let found = keyed
            .tenant("acme")
            .query(&[("email", &email)])
            .find_user_by_email()
            .await;
        assert_eq!(found.body["userId"], format!("u-{i}"), "{}", found.body);
    }
    let changed = keyed
        .tenant("acme")
        .query(&[("email", "changed@secret.example")]);
    assert_eq!(changed.find_user_by_email().await.body["userId"], "u-0");
    let old = keyed
        .tenant("acme")
        .query(&[("email", "user0@secret.example")]);
    assert_eq!(old.find_user_by_email().await.status, 404);

    // AND the API serves them as written
    let r = keyed.tenant("acme").get_product("p-01000").await;
    assert_eq!(r.body["document"], model["p-01000"]);
    let r = keyed.tenant("acme").get_employee("e-1").await;
    assert_eq!(r.body["name"], "Ada Secretary");
    let p = integration::routes::params(&[("sessionId", &root)]);
    let r = keyed
        .tenant("acme")
        .call("get-session-by-session-id", &p, None)
        .await;
    assert_eq!(r.body["state"], "Secret state", "{}", r.body);
    let r = keyed
        .tenant("acme")
        .call("get-child-sessions-by-session-id", &p, None)
        .await;
    assert_eq!(
        r.body["items"].as_array().map(Vec::len),
        Some(2),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn keyed_is_asked_alone_only_true_and_only_where_tenants_have_keys_writing_nothing_otherwise()
{
    let plain = Harness::new().await;
    onboard(&plain, "acme", 1).await;
    // WHEN tenants have no keys here: 400 naming keyed
    update_acme(&plain, json!({"keyed": true}))
        .await
        .assert_problem_naming(400, "TENANT_KEYS_TABLE");
    let keyed = plain.another_container().await.keyed().await;
    let before = keyed.all_items().await.len();
    // AND with other fields, or false: 400, and nothing is written
    update_acme(&keyed, json!({"keyed": true, "tier": "basic"}))
        .await
        .assert_problem_naming(400, "on its own");
    update_acme(&keyed, json!({"keyed": false}))
        .await
        .assert_problem_naming(400, "offboarding");
    assert_eq!(keyed.all_items().await.len(), before);
    assert_eq!(
        keyed.test_keys().every_key(&keyed.admin).await.len(),
        0,
        "no key made"
    );
}

#[tokio::test]
async fn a_user_erased_while_its_tenant_is_being_keyed_loses_its_plain_email_item_too() {
    // GIVEN a tenant with a user, onboarded without keys, whose keying has just started (its email
    // item still under the plain email)
    let plain = Harness::new().await;
    onboard(&plain, "acme", 1).await;
    put_user(&plain, "u-1", "ada@secret.example").await;
    let keyed = plain.another_container().await.keyed().await;
    assert_eq!(
        update_acme(&keyed, json!({"keyed": true})).await.status,
        202
    );

    // WHEN the user is erased through the keyed container
    let p = integration::routes::params(&[("userId", "u-1")]);
    let erased = keyed.tenant("acme").call("erase-user", &p, None).await;

    // THEN it answers with one email item deleted, and none is left at either key
    assert_eq!(erased.status, 200, "{}", erased.body);
    assert_eq!(erased.body["deleted"]["EMAIL"], 1, "{}", erased.body);
    let email = AttributeValue::S("EMAIL".into());
    assert!(!keyed
        .all_items()
        .await
        .iter()
        .any(|i| i.get("kind") == Some(&email)));
}

/// A tenant onboarded plain with product `p-plain` (the containers and the products' model): a
/// keyed container `stale` that served it (its view: no key), then `keyed`'s `{"keyed": true}`
/// (202: the key made). Returns (plain, keyed, stale, model).
async fn keying_asked_beside_a_stale_view() -> (Harness, Harness, Harness, BTreeMap<String, Value>)
{
    let plain = Harness::new().await;
    onboard(&plain, "acme", 1).await;
    let mut model = BTreeMap::new();
    put(&plain, &["p-plain".to_owned()], 1, &mut model).await;
    let keyed = plain.another_container().await.keyed().await;
    let stale = keyed.another_keyed_container().await;
    let acme = Auth::Tenant("acme".into());
    let read = stale.caller(&acme).admitted().get_product("p-plain").await;
    assert_eq!(read.status, 200, "{}", read.body);
    let started = update_acme(&keyed, json!({"keyed": true})).await;
    assert_eq!(started.status, 202, "{}", started.body);
    (plain, keyed, stale, model)
}

#[tokio::test]
async fn a_stale_no_key_view_answers_503_for_a_sealed_item_and_is_let_go_so_the_next_request_meets_the_key(
) {
    // GIVEN a tenant onboarded plain, with a product; a keyed container that served it (it cached
    // that it has no key), and one that asked for its sealing (it made the key, and seals its
    // writes from then on)
    let (_plain, keyed, stale, mut model) = keying_asked_beside_a_stale_view().await;
    // (each read served as the runtime serves it: quota, handler, metering)
    async fn read(h: &Harness, id: &str) -> integration::Resp {
        let acme = Auth::Tenant("acme".into());
        h.caller(&acme).admitted().get_product(id).await
    }
    put(&keyed, &["p-sealed".to_owned()], 1, &mut model).await;
    // (a view fetched under 5 s ago is the key table's newest already: it is kept, so an item it
    // cannot open never costs a KMS call per request)
    for _ in 0..2 {
        assert_eq!(read(&stale, "p-sealed").await.status, 503);
    }
    for c in [&keyed, &stale] {
        c.clock.advance_seconds(10);
    }

    // WHEN the stale container reads the sealed product some seconds later, well within the key
    // cache's period
    let first = read(&stale, "p-sealed").await;
    // THEN it answers 503 (never a wrong or partial answer)
    assert_eq!(first.status, 503, "{}", first.body);
    // AND its next request, at the same moment, has met the key: both products read as written
    for id in ["p-sealed", "p-plain"] {
        let r = read(&stale, id).await;
        assert_eq!(r.status, 200, "{id}: {}", r.body);
        assert_eq!(r.body["document"], model[id], "{id}");
    }
}

/// A save reads only the stored profile's email (a projection): with a view of the tenant from
/// before its keying, the projection still asks for the sealed attributes, so a sealed profile is
/// met as one (503, the view let go) and never read as a profile with no email (a 500, the view
/// kept for the rest of its period).
#[tokio::test]
async fn a_stale_no_key_views_save_of_a_sealed_profile_answers_503_and_the_next_meets_the_key() {
    // GIVEN a tenant onboarded plain, with a user; a keyed container that served it (it cached
    // that the tenant has no key), and one that asks for its sealing and saves a user sealed
    let plain = Harness::new().await;
    onboard(&plain, "acme", 1).await;
    put_user(&plain, "u-plain", "grace@secret.example").await;
    let keyed = plain.another_container().await.keyed().await;
    let stale = keyed.another_keyed_container().await;
    let user = |id: &str| integration::routes::params(&[("userId", id)]);
    let read = stale
        .tenant("acme")
        .call("get-user", &user("u-plain"), None)
        .await;
    assert_eq!(read.status, 200, "{}", read.body);
    let started = update_acme(&keyed, json!({"keyed": true})).await;
    assert_eq!(started.status, 202, "{}", started.body);
    put_user(&keyed, "u-sealed", "ada@secret.example").await;
    for c in [&keyed, &stale] {
        c.clock.advance_seconds(10);
    }
    // (the quota's windows and usage counters aside: the admission counts every request)
    let acme_id = TenantId::parse("acme").unwrap();
    let unmetered = |mut items: Vec<RawItem>| {
        let metered = |i: &RawItem| {
            i["PK"]
                .as_s()
                .is_ok_and(|pk| shared::identity::keys::is_metering_pk(&acme_id, pk))
        };
        items.retain(|i| !metered(i));
        items
    };
    let before = unmetered(stale.all_items().await);

    // WHEN the stale container saves the sealed user, well within its key cache's period
    let renamed = json!({"name": "Ada Renamed", "email": "ada@secret.example"});
    // (each save served as the runtime serves it: the view let go after a 503)
    let acme = Auth::Tenant("acme".into());
    let at = user("u-sealed");
    let save = || {
        let caller = stale.caller(&acme).admitted();
        caller.call("put-user", &at, Some(renamed.clone()))
    };
    let first = save().await;

    // THEN it answers 503 and writes nothing
    first.assert_problem(503);
    assert_eq!(unmetered(stale.all_items().await), before);
    // AND its next save has met the key: the profile is saved, sealed, and reads as written
    let again = save().await;
    assert_eq!(again.status, 200, "{}", again.body);
    let r = keyed
        .tenant("acme")
        .call("get-user", &user("u-sealed"), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["name"], "Ada Renamed", "{}", r.body);
}

#[tokio::test]
async fn a_recorded_answer_written_before_keying_is_sealed_by_the_walk_and_still_replays() {
    // GIVEN a tenant onboarded plain, whose user was handed a transfer code by a request with an
    // Idempotency-Key: its recorded answer (holding the code) is plain
    let plain = Harness::new().await;
    onboard(&plain, "acme", 1).await;
    put_user(&plain, "u-1", "ada@secret.example").await;
    async fn ask(h: &Harness) -> integration::Resp {
        let p = integration::routes::params(&[("userId", "u-1")]);
        h.tenant("acme")
            .headers(&[("Idempotency-Key", "code-before-keying")])
            .call("create-transfer-code", &p, None)
            .await
    }
    let first = ask(&plain).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let code = first.body["code"].as_str().unwrap().to_owned();
    let record = |items: &[std::collections::HashMap<String, AttributeValue>]| {
        let records: Vec<_> = items
            .iter()
            .filter(|i| i.get("kind") == Some(&AttributeValue::S("IDEMPOTENCY".into())))
            .cloned()
            .collect();
        assert_eq!(records.len(), 1, "{records:?}");
        records[0].clone()
    };
    assert!(!is_sealed(&record(&plain.all_items().await)));

    // WHEN an operator has its items sealed, and the driver walks to the end
    let keyed = plain.another_container().await.keyed().await;
    key_acme_to_the_end(&keyed).await;

    // THEN the record is sealed, and no item of the table holds the code, in its keys or anywhere
    let items = keyed.all_items().await;
    assert!(is_sealed(&record(&items)), "{:?}", record(&items));
    for item in &items {
        assert!(!format!("{item:?}").contains(code.as_str()), "{item:?}");
    }
    // AND the same request again gets the same answer (the same code), and the code redeems once
    let again = ask(&keyed).await;
    assert_eq!((again.status, &again.body), (201, &first.body));
    let p = integration::routes::params(&[("code", &code)]);
    let redeemed = keyed
        .tenant("acme")
        .call("redeem-transfer-code", &p, None)
        .await;
    assert_eq!(redeemed.body["userId"], "u-1", "{}", redeemed.body);
}

#[tokio::test]
async fn a_plain_import_key_is_retired_under_the_tenants_key_and_still_opens_what_was_queued_before(
) {
    use super::imports::{deliver_in_process, post_import, products};
    // GIVEN a tenant onboarded plain, whose import's message is still on its queue, sealed with
    // the random import key its sealing item holds in the clear
    let plain = Harness::new().await;
    integration::onboard_at_max_limits(&plain, "acme", 1).await;
    let queues = integration::import_queue::ImportQueues::create(5, 10).await;
    let posted = post_import(&plain, &queues, "acme", products("before", 3), &[]).await;
    assert_eq!(posted.status, 202, "{}", posted.body);
    let queued = queues.receive(10).await;
    assert_eq!(queued.len(), 1);
    let pk = shared::identity::keys::import_sealing_key(&TenantId::parse("acme").unwrap());
    let sealing_item = |items: &[std::collections::HashMap<String, AttributeValue>]| {
        items
            .iter()
            .find(|i| i.get("PK") == Some(&AttributeValue::S(pk.clone())))
            .cloned()
            .expect("the sealing item")
    };
    let stored = sealing_item(&plain.all_items().await)["key"].clone();

    // WHEN an operator has its items sealed, and the driver walks to the end
    let keyed = plain.another_container().await.keyed().await;
    key_acme_to_the_end(&keyed).await;

    // THEN no item of the table holds the import key in the clear: the sealing item keeps it
    // sealed under version 1 of the tenant's key
    let items = keyed.all_items().await;
    for item in &items {
        assert!(!item.values().any(|v| v == &stored), "{item:?}");
    }
    let retired = sealing_item(&items);
    assert!(!retired.contains_key("key"), "{retired:?}");
    assert_eq!(retired["retiredKeyVersion"], AttributeValue::N("1".into()));
    assert!(retired.contains_key("retiredKey"), "{retired:?}");
    // AND the keying asked again walks to its end again and changes it no more
    key_acme_to_the_end(&keyed).await;
    assert_eq!(sealing_item(&keyed.all_items().await), retired);
    // AND the message queued before the keying opens through the tenant's key: its products are
    // written; a new import is sealed under the tenant's key
    assert_eq!(deliver_in_process(&keyed, &queues, &queued).await, 1);
    for i in 0..3 {
        let r = keyed
            .tenant("acme")
            .get_product(&format!("before-{i:05}"))
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let after = post_import(&keyed, &queues, "acme", products("after", 3), &[]).await;
    assert_eq!(after.status, 202, "{}", after.body);
    let message: Value = serde_json::from_str(queues.receive(10).await[0].body().unwrap()).unwrap();
    assert_eq!(message["keyVersion"], json!(1));
}

#[tokio::test]
async fn a_consumer_whose_view_is_behind_the_keying_keeps_a_sealed_import_message_and_writes_it_once_it_meets_the_key(
) {
    use super::imports::{deliver_in_process, post_import, products};
    // GIVEN a tenant onboarded plain, and a keyed consumer container that wrote its first import
    // (so it holds the view that the tenant has no key)
    let plain = Harness::new().await;
    integration::onboard_at_max_limits(&plain, "acme", 1).await;
    let queues = integration::import_queue::ImportQueues::create(5, 1).await;
    let keyed = plain.another_container().await.keyed().await;
    let stale = keyed.another_keyed_container().await;
    let first = post_import(&plain, &queues, "acme", products("plain", 1), &[]).await;
    assert_eq!(first.status, 202, "{}", first.body);
    assert_eq!(
        deliver_in_process(&stale, &queues, &queues.receive(10).await).await,
        1
    );
    // AND the tenant keyed to the end through another container, whose next import is sealed under
    // version 1 of the tenant's key
    key_acme_to_the_end(&keyed).await;
    let sealed = post_import(&keyed, &queues, "acme", products("sealed", 3), &[]).await;
    assert_eq!(sealed.status, 202, "{}", sealed.body);
    let queued = queues.receive(10).await;
    let message: Value = serde_json::from_str(queued[0].body().unwrap()).unwrap();
    assert_eq!(message["keyVersion"], json!(1));
    let before = keyed.all_items().await;
    stale.clock.advance_seconds(10);

    // WHEN the consumer whose view is behind receives it, well within its key cache's period
    let deleted = deliver_in_process(&stale, &queues, &queued).await;

    // THEN it is not deleted (never dropped for good: the tenant's key is not destroyed) and the
    // table is byte for byte as it was
    assert_eq!(deleted, 0);
    assert_eq!(keyed.all_items().await, before);
    // AND delivered again, the same container has met the key: the three products are written
    let mut again = Vec::new();
    for _ in 0..10 {
        again = queues.receive(10).await;
        if !again.is_empty() {
            break;
        }
    }
    assert_eq!(deliver_in_process(&stale, &queues, &again).await, 1);
    for i in 0..3 {
        let r = keyed
            .tenant("acme")
            .get_product(&format!("sealed-{i:05}"))
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
}

/// GIVEN a tenant onboarded plain with a product, and two keyed containers: `asked` (the
/// operator's) and `serving` (it serves the tenant); a start of the sealing that recorded the walk,
/// then failed to make the key (KMS down); the start's `sealsFrom` passed, and the serving
/// container's view of "no key" fetched again. Returns the containers and the products' model.
async fn a_start_that_failed_to_make_the_key(
) -> (Harness, Harness, Harness, BTreeMap<String, Value>) {
    use std::sync::atomic::Ordering;
    let plain = Harness::new().await;
    onboard(&plain, "acme", 1).await;
    let mut model = BTreeMap::new();
    put(&plain, &["p-plain".to_owned()], 1, &mut model).await;
    let asked = plain.another_container().await.keyed().await;
    let serving = asked.another_keyed_container().await;
    asked.test_keys().outage.store(true, Ordering::SeqCst);
    let failed = update_acme(&asked, json!({"keyed": true})).await;
    assert_eq!(failed.status, 503, "{}", failed.body);
    asked.test_keys().outage.store(false, Ordering::SeqCst);
    pass_a_key_period(&[&asked, &serving]);
    let read = serving.tenant("acme").get_product("p-plain").await;
    assert_eq!(read.status, 200, "{}", read.body);
    (plain, asked, serving, model)
}

/// Moves the clocks of `containers` past a key period and the settling margin.
fn pass_a_key_period(containers: &[&Harness]) {
    for c in containers {
        c.clock
            .advance_millis((keying::waits_seconds(DEFAULT_KEY_CACHE_SECONDS) + 1) * 1000);
    }
}

/// The walk, asked to wait, is driven to its end a key period later, while `serving` (whose view is
/// "no key") writes a product first: every product item ends sealed and reads as `model` holds it.
async fn a_plain_write_while_waiting_ends_sealed(
    asked: &Harness,
    serving: &Harness,
    model: &mut BTreeMap<String, Value>,
) {
    put(serving, &["p-late".to_owned()], 1, model).await;
    pass_a_key_period(&[asked, serving]);
    integration::drive_to_end(&asked.app).await;
    two_products_sealed_as_modelled(asked, model).await;
}

/// Acme's two product items, read raw through `h`, are sealed, and each reads as `model` holds it.
async fn two_products_sealed_as_modelled(h: &Harness, model: &BTreeMap<String, Value>) {
    let products: Vec<_> = h
        .all_items()
        .await
        .into_iter()
        .filter(|i| i.get("kind") == Some(&AttributeValue::S("PRODUCT".into())))
        .collect();
    assert_eq!(products.len(), 2, "{products:?}");
    assert!(products.iter().all(is_sealed), "plain: {products:?}");
    for (id, doc) in model {
        let r = h.tenant("acme").get_product(id).await;
        assert_eq!(r.body["document"], *doc, "{id}: {}", r.body);
    }
}

#[tokio::test]
async fn a_key_made_after_the_start_failed_to_make_it_seals_only_once_every_container_let_go_of_its_absence(
) {
    // GIVEN a start that failed to make the key, its `sealsFrom` passed, and a container serving the
    // tenant whose view of "no key" is fresh
    let (_plain, asked, serving, mut model) = a_start_that_failed_to_make_the_key().await;

    // WHEN the operator asks again: the key is made now
    let again = update_acme(&asked, json!({"keyed": true})).await;

    // THEN the walk waits from now (202; `keying::seals_from`), sealing nothing yet
    assert_eq!(again.status, 202, "{}", again.body);
    // AND a product the serving container writes meanwhile (its view still "no key": plain) is
    // sealed by the walk once it starts: no product item is left plain when it ends
    a_plain_write_while_waiting_ends_sealed(&asked, &serving, &mut model).await;
}

/// A write of product `p-straddling` (a Put of it, alone or in a transaction).
fn is_straddling_write(body: &str) -> bool {
    body.contains("PRODUCT#p-straddling") && body.contains("\"Item\"")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_write_admitted_just_before_a_no_key_view_expires_and_sent_late_is_sealed_by_the_walk(
) {
    // GIVEN a tenant onboarded plain, with a product, and two keyed containers: `stale`, which
    // served the tenant (it cached that it has no key), and `keyed`, which asked for its sealing
    let (_plain, keyed, stale, mut model) = keying_asked_beside_a_stale_view().await;
    let stale = std::sync::Arc::new(stale);

    // WHEN, a moment before its view of "no key" expires, the stale container is asked for a new
    // product, and the write is slow: held before it is sent
    stale
        .clock
        .advance_millis(DEFAULT_KEY_CACHE_SECONDS * 1000 - 100);
    let mut held = stale.faults.hold_next_matching(is_straddling_write);
    let writing = integration::aside({
        let stale = stale.clone();
        move || async move {
            let doc = doc("p-straddling", 1);
            stale.tenant("acme").put_product("p-straddling", doc).await
        }
    });
    held.reached().await;
    // AND the driver runs once the key period and the settling margin have passed (when the walk
    // started before the mend)
    keyed
        .clock
        .advance_millis((DEFAULT_KEY_CACHE_SECONDS + SETTLE_SECONDS + 1) * 1000);
    integration::drive_runs(&keyed.app, 3).await;
    // AND the write is sent then, within the longest a function runs
    held.release();
    let written = writing.ended().await;
    assert_eq!(written.status, 201, "{}", written.body);
    model.insert("p-straddling".into(), doc("p-straddling", 1));
    // AND the driver runs on until the walk has ended
    keyed
        .clock
        .advance_millis((LONGEST_FUNCTION_TIMEOUT_SECONDS + 1) * 1000);
    integration::drive_to_end(&keyed.app).await;

    // THEN no product item is left plain, and each reads as written
    let done = keyed.operator().get_tenant("acme").await;
    assert!(done.body.get("keying").is_none(), "{}", done.body);
    two_products_sealed_as_modelled(&keyed, &model).await;
}

/// The write that counts a keying walk's start from its key's making (`keying::postpone`).
fn is_start_moved(body: &str) -> bool {
    body.contains("SET #k.#from")
}

#[tokio::test]
async fn a_key_whose_making_was_not_followed_by_moving_the_walks_start_is_waited_for_by_the_next_call(
) {
    // GIVEN a start that failed to make the key, its `sealsFrom` passed, and a container serving the
    // tenant whose view of "no key" is fresh
    let (_plain, asked, serving, mut model) = a_start_that_failed_to_make_the_key().await;
    // AND a call that made the key, then was cut off before it moved the walk's start (refused)
    asked.faults.refuse_requests_matching(Some(is_start_moved));
    let cut = update_acme(&asked, json!({"keyed": true})).await;
    asked.faults.refuse_requests_matching(None);
    assert_eq!(cut.status, 503, "{}", cut.body);

    // WHEN the operator asks again (its container has the key)
    let again = update_acme(&asked, json!({"keyed": true})).await;

    // THEN the walk waits from now (202; `keying::seals_from`), sealing nothing yet
    assert_eq!(again.status, 202, "{}", again.body);
    let db = asked
        .app
        .operator_db(&TenantId::parse("acme").unwrap(), Scope::Operator)
        .await
        .unwrap()
        .unwrap();
    let record = read_record_consistent(&db).await.unwrap().unwrap();
    let keying = record.keying.unwrap();
    assert!(keying.key_made, "{keying:?}");
    let now = shared::identity::clock::Clock::now_seconds(&*asked.clock);
    assert!(
        keying.seals_from >= now + DEFAULT_KEY_CACHE_SECONDS,
        "{keying:?}"
    );
    // AND a plain write meanwhile is sealed by the walk once it starts
    a_plain_write_while_waiting_ends_sealed(&asked, &serving, &mut model).await;
}

/// The keying walk's transaction that puts back user `u-fenced`'s items sealed.
fn is_fenced_users_sealing(body: &str) -> bool {
    body.contains("TransactItems") && body.contains("USER#u-fenced")
}

/// The erasure fences `u-fenced`'s items carry: each item's key and its `erasingSince`, in the raw
/// table.
fn fences(items: &[RawItem]) -> Vec<(AttributeValue, AttributeValue)> {
    items
        .iter()
        .filter(|i| {
            i.get("PK")
                .and_then(|pk| pk.as_s().ok())
                .is_some_and(|pk| pk.ends_with("USER#u-fenced"))
        })
        .filter_map(|i| Some((i.get("SK")?.clone(), i.get(ERASING_SINCE)?.clone())))
        .collect()
}

/// The keying walk reads a page holding a user's profile with no erasure's fence; before its sealed
/// rewrite commits, an erasure of that user sets its fence (and is cut off there). The rewrite must
/// not drop the fence (`keying::unchanged`; without its condition the fence is gone here): it is
/// cancelled, and the next step rewrites the profile sealed with the fence on. Then the erasure
/// asked again takes every item of the user, and its neighbour stays, sealed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_set_between_the_keying_walks_read_and_its_rewrite_is_never_dropped() {
    // GIVEN a tenant onboarded without keys, with two users, whose keying has started and may seal
    let plain = Harness::new().await;
    onboard(&plain, "acme", 1).await;
    put_user(&plain, "u-fenced", "ada@secret.example").await;
    put_user(&plain, "u-other", "grace@secret.example").await;
    let walker = std::sync::Arc::new(plain.another_container().await.keyed().await);
    let eraser = plain.another_container().await.keyed().await;
    assert_eq!(
        update_acme(&walker, json!({"keyed": true})).await.status,
        202
    );
    pass_a_key_period(&[&walker, &eraser]);

    // WHEN the walk has read the first user's profile and its sealed rewrite is held before it is
    // sent
    let mut held = walker.faults.hold_next_matching(is_fenced_users_sealing);
    // (aside: the hold blocks the thread that sends it)
    let walk = integration::aside({
        let walker = walker.clone();
        move || async move { integration::drive_to_end(&walker.app).await }
    });
    held.reached().await;
    // AND meanwhile an erasure of that user sets its fence and is cut off at its first read (its
    // fence left on: its removal throttled past the SDK's retries)
    let user = integration::routes::params(&[("userId", "u-fenced")]);
    eraser
        .faults
        .refuse_requests_containing(Some("KeyConditionExpression"));
    eraser.faults.throttle_containing_with_reason(
        "REMOVE",
        "TableWriteKeyRangeThroughputExceeded",
        10,
    );
    let cut = eraser.tenant("acme").call("erase-user", &user, None).await;
    eraser.faults.refuse_requests_containing(None);
    eraser
        .faults
        .throttle_containing_with_reason("REMOVE", "", 0);
    assert_eq!(cut.status, 503, "{}", cut.body);
    let fenced = fences(&walker.all_items().await);
    assert_eq!(fenced.len(), 1, "the profile's fence: {fenced:?}");
    // AND the walk's rewrite goes on, and the walk to its end
    held.release();
    walk.ended().await;

    // THEN the fence is on the profile as the erasure set it, byte for byte, and the profile is
    // sealed (the held rewrite was cancelled by the fence; the next step kept it)
    let items = walker.all_items().await;
    assert_eq!(fences(&items), fenced);
    let profile = items
        .iter()
        .find(|i| fences(std::slice::from_ref(*i)) == fenced)
        .expect("the fenced profile");
    assert!(is_sealed(profile), "{profile:?}");

    // WHEN the erasure is asked again
    let erased = eraser.tenant("acme").call("erase-user", &user, None).await;

    // THEN every item of the user is gone (the erasure's own report stays), and its neighbour's
    // profile is there, sealed, and reads
    assert_eq!(erased.status, 200, "{}", erased.body);
    assert_eq!(erased.body["deleted"], json!({"EMAIL": 1, "USER": 1}));
    let report = AttributeValue::S("ERASURE".into());
    let items: Vec<_> = walker
        .all_items()
        .await
        .into_iter()
        .filter(|i| i.get("kind") != Some(&report))
        .collect();
    let of = |user: &str| {
        items
            .iter()
            .filter(|i| {
                i.values().any(|v| {
                    v.as_s()
                        .is_ok_and(|s| s.ends_with(&format!("#{user}")) || s == user)
                })
            })
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(of("u-fenced"), Vec::new());
    let neighbour = of("u-other");
    assert!(!neighbour.is_empty());
    assert!(neighbour.iter().all(is_sealed), "{neighbour:?}");
    // (an email item's key is its keyed digest, and its user sealed: told by its kind, the one
    // left is the neighbour's)
    let email = AttributeValue::S("EMAIL".into());
    let emails: Vec<_> = items
        .iter()
        .filter(|i| i.get("kind") == Some(&email))
        .collect();
    assert_eq!(emails.len(), 1, "{emails:?}");
    assert!(is_sealed(emails[0]), "{emails:?}");
    let other = integration::routes::params(&[("userId", "u-other")]);
    let read = eraser.tenant("acme").call("get-user", &other, None).await;
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(read.body["email"], "grace@secret.example", "{}", read.body);
}

/// An item as the raw table holds it.
type RawItem = std::collections::HashMap<String, AttributeValue>;

/// A keying begun before an offboarding never goes on once that has begun. An operator's call to
/// go on is 409, and a step of the walk whose record was read before the offboarding began is
/// cancelled by its checkpoint's condition: an email item it moved to its digest's key could land
/// in a partition the offboarding's lanes had passed, and outlive the tenant. The offboarding then
/// deletes every item of the tenant.
#[tokio::test]
async fn a_keying_begun_before_an_offboarding_seals_nothing_once_the_offboarding_has_begun() {
    // GIVEN a tenant onboarded plain with a user, whose keying has begun and may seal, and its
    // record as a step of the walk read it
    let plain = Harness::new().await;
    onboard(&plain, "acme", 1).await;
    put_user(&plain, "u-1", "ada@secret.example").await;
    let keyed = plain.another_container().await.keyed().await;
    let started = update_acme(&keyed, json!({"keyed": true})).await;
    assert_eq!(started.status, 202, "{}", started.body);
    pass_a_key_period(&[&keyed]);
    let acme = TenantId::parse("acme").unwrap();
    let db = keyed
        .app
        .operator_db(&acme, Scope::Operator)
        .await
        .unwrap()
        .unwrap();
    let read = read_record_consistent(&db).await.unwrap().unwrap();
    let key = keyed.app.tenant_key(&acme, Some(&read.created_at));
    let key = key.await.unwrap().expect("acme's key");
    let prefix = shared::identity::keys::tenant_prefix(&acme);
    let unmetered = |items: Vec<RawItem>| {
        let metered = |pk: &str| shared::identity::keys::is_metering_pk(&acme, pk);
        let of_acme = |i: &RawItem| {
            i["PK"]
                .as_s()
                .is_ok_and(|pk| pk.starts_with(&prefix) && !metered(pk))
        };
        let mut items: Vec<RawItem> = items.into_iter().filter(of_acme).collect();
        items.sort_by_key(|i| format!("{:?}{:?}", i.get("PK"), i.get("SK")));
        items
    };

    // WHEN its offboarding begins
    let offboarding = keyed.operator().offboard_tenant("acme").await;
    assert_eq!(offboarding.status, 202, "{}", offboarding.body);
    let before = unmetered(keyed.all_items().await);
    // AND that step goes on, and an operator asks the keying to go on
    let state = read.keying.clone().expect("the keying");
    let walked = keying::step(&db, &read, &state, &key).await.unwrap();
    let asked = update_acme(&keyed, json!({"keyed": true})).await;

    // THEN the step is cancelled and the call is 409: nothing of the tenant changed
    assert!(matches!(walked, Walked::Raced), "the step went on");
    asked.assert_problem(409);
    assert_eq!(unmetered(keyed.all_items().await), before);
    // AND the offboarding ends with no item of the tenant left
    let report = integration::offboard_to_end(&keyed, "acme", &integration::operator()).await;
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!(keyed.items_under(&prefix).await, Vec::new());
}

/// The keying walk's transaction that puts back a transfer code sealed.
fn is_codes_sealing(body: &str) -> bool {
    body.contains("TransactItems") && body.contains(r#""S":"TRANSFER""#)
}

/// The keying walk reads a page holding an unredeemed transfer code (no `updatedAtMs`, no
/// `redeemedBy`); before its sealed rewrite commits, the code is redeemed. The rewrite must not
/// drop the redeemer (`keying::unchanged`): it is cancelled, the next step seals the code
/// redeemed, and the code is never redeemed twice (without the condition, the second redemption
/// hands the user out again: 200).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_redeemed_between_the_keying_walks_read_and_its_rewrite_is_never_redeemed_again() {
    // GIVEN a tenant onboarded without keys, with a user and a transfer code for it, whose keying
    // has started and may seal
    let plain = Harness::new().await;
    onboard(&plain, "acme", 1).await;
    put_user(&plain, "u-1", "ada@secret.example").await;
    let p = integration::routes::params(&[("userId", "u-1")]);
    let made = plain
        .tenant("acme")
        .call("create-transfer-code", &p, None)
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let code = made.body["code"].as_str().unwrap().to_owned();
    let walker = std::sync::Arc::new(plain.another_container().await.keyed().await);
    let redeemer = plain.another_container().await.keyed().await;
    let started = update_acme(&walker, json!({"keyed": true})).await;
    assert_eq!(started.status, 202, "{}", started.body);
    pass_a_key_period(&[&walker, &redeemer]);
    let at = integration::routes::params(&[("code", code.as_str())]);
    let redeem = || {
        redeemer
            .tenant("acme")
            .call("redeem-transfer-code", &at, None)
    };

    // WHEN the walk has read the code and its sealed rewrite is held before it is sent (aside: the
    // hold blocks the thread that sends it)
    let mut held = walker.faults.hold_next_matching(is_codes_sealing);
    let walk = integration::aside({
        let walker = walker.clone();
        move || async move { integration::drive_to_end(&walker.app).await }
    });
    held.reached().await;
    // AND meanwhile the code is redeemed
    let first = redeem().await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["userId"], "u-1", "{}", first.body);
    // AND the walk's rewrite goes on, and the walk to its end
    held.release();
    walk.ended().await;

    // THEN the code is sealed and still redeemed, and redeeming it again finds no code to redeem
    let items = walker.all_items().await;
    let codes: Vec<_> = items
        .iter()
        .filter(|i| i.get("kind") == Some(&AttributeValue::S("TRANSFER".into())))
        .collect();
    assert_eq!(codes.len(), 1, "{codes:?}");
    assert!(is_sealed(codes[0]), "{:?}", codes[0]);
    assert!(codes[0].contains_key("redeemedBy"), "{:?}", codes[0]);
    redeem().await.assert_problem(404);
}

/// A keying waits while a re-sharding begun after it runs; the driver, which steps the re-sharding
/// first, keeps the tenant listed once it has ended and seals every item with nobody calling.
#[tokio::test]
async fn a_keying_behind_a_resharding_begun_after_it_is_driven_to_its_end_once_that_ends() {
    // GIVEN a tenant onboarded plain on 2 shards with 40 products, whose keying has begun
    let plain = Harness::new().await;
    onboard(&plain, "acme", 2).await;
    let ids: Vec<String> = (0..40).map(|i| format!("p-{i:02}")).collect();
    let mut model = BTreeMap::new();
    put(&plain, &ids, 1, &mut model).await;
    let keyed = plain.another_container().await.keyed().await;
    assert_eq!(
        update_acme(&keyed, json!({"keyed": true})).await.status,
        202
    );
    // AND a re-sharding to 4 shards begun while the keying waits
    let resharding = update_acme(&keyed, json!({"shardCount": 4})).await;
    assert_eq!(resharding.status, 202, "{}", resharding.body);

    // WHEN both waits pass, and the lifecycle driver runs with nobody calling
    keyed.clock.advance_seconds(
        keying::waits_seconds(DEFAULT_KEY_CACHE_SECONDS)
            + shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS
            + 1,
    );
    integration::drive_to_end(&keyed.app).await;

    // THEN both have ended: 4 shards, and no sealing left
    let done = keyed.operator().get_tenant("acme").await;
    assert_eq!(done.body["shardCount"], 4, "{}", done.body);
    assert!(done.body.get("keying").is_none(), "{}", done.body);
    assert!(done.body.get("migration").is_none(), "{}", done.body);
    // AND every product is sealed in the raw table, and served as written
    let products: Vec<_> = keyed
        .all_items()
        .await
        .into_iter()
        .filter(|i| i.get("kind") == Some(&AttributeValue::S(kind::PRODUCT.into())))
        .collect();
    assert_eq!(products.len(), ids.len());
    assert!(products.iter().all(is_sealed), "plain: {products:?}");
    for (id, doc) in &model {
        let r = keyed.tenant("acme").get_product(id).await;
        assert_eq!(r.body["document"], *doc, "{id}: {}", r.body);
    }
}
