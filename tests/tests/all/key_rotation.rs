//! A tenant's key rotated by version (`PATCH /tenants/{id} {"rotateKey": true}`): nothing sealed is
//! rewritten; the new version seals only once every container has met it (a key period and a
//! margin later), so two containers with different cached views always read each other's writes;
//! emails keep their digest; import messages are sealed under a key derived from the version that
//! seals, and a tenant's sealing item holds no key; offboarding shreds every version.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::{offboard_to_end, onboard, operator, Harness};
use serde_json::{json, Value};
use shared::identity::clock::{rfc3339, Clock};
use shared::identity::ids::TenantId;
use shared::store::keys::{DEFAULT_KEY_CACHE_SECONDS, KEY_VERSION, ROTATION_MARGIN_MS};

type Item = HashMap<String, AttributeValue>;

/// The key version `tenant`'s product `id` is sealed under, as the raw table holds it.
async fn sealed_version(h: &Harness, tenant: &str, id: &str) -> u32 {
    let suffix = format!("#PRODUCT#{id}");
    let prefix = shared::identity::keys::tenant_prefix(&TenantId::parse(tenant).unwrap());
    let items = h.all_items().await;
    let item: &Item = items
        .iter()
        .find(|i| {
            matches!(i.get("PK"), Some(AttributeValue::S(pk)) if pk.starts_with(&prefix))
                && matches!(i.get("SK"), Some(AttributeValue::S(sk)) if sk.ends_with(&suffix))
        })
        .unwrap_or_else(|| panic!("no product {id} of {tenant}"));
    match item.get(KEY_VERSION) {
        Some(AttributeValue::N(n)) => n.parse().unwrap(),
        other => panic!("{id} is not sealed: {other:?}"),
    }
}

async fn put(h: &Harness, tenant: &str, id: &str, n: u64) {
    let r = h
        .tenant(tenant)
        .put_product(id, json!({"name": format!("secret {id}"), "n": n}))
        .await;
    assert!(r.status == 201 || r.status == 200, "{}", r.body);
}

async fn read_all(h: &Harness, tenant: &str, ids: &[&str]) {
    for id in ids {
        let r = h.tenant(tenant).get_product(id).await;
        assert_eq!(r.status, 200, "{id}: {}", r.body);
        assert_eq!(r.body["document"]["name"], json!(format!("secret {id}")));
    }
}

fn rotate<'a>(
    h: &'a Harness,
    tenant: &'a str,
) -> futures::future::BoxFuture<'a, integration::Resp> {
    h.operator()
        .update_tenant(tenant, json!({"rotateKey": true}))
}

#[tokio::test]
async fn a_rotated_key_seals_once_every_container_met_it_and_every_version_keeps_opening() {
    // GIVEN a keyed tenant with products under version 1, served by a second container too (which
    // caches version 1 alone)
    let a = Harness::new().await.keyed().await;
    let b = a.another_keyed_container().await;
    onboard(&a, "acme", 2).await;
    put(&a, "acme", "p-1", 1).await;
    read_all(&b, "acme", &["p-1"]).await;
    assert_eq!(b.app.keys.as_ref().unwrap().vault_calls(), 1);

    // WHEN an operator rotates its key, and retries
    let r = rotate(&a, "acme").await;
    // THEN version 2 exists, sealing from a key period and a margin later
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["key"]["versions"], json!([1, 2]), "{}", r.body);
    assert_eq!(r.body["key"]["newest"], 2);
    let seals_from = r.body["key"]["newestSealsFrom"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(r.body["tenantId"], "acme");
    // AND the retry answers the same version: no third is made
    let again = rotate(&a, "acme").await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["key"]["versions"], json!([1, 2]));
    assert_eq!(again.body["key"]["newestSealsFrom"], json!(seals_from));

    // WHEN both containers write before then
    put(&a, "acme", "p-2", 2).await;
    put(&b, "acme", "p-3", 3).await;
    // THEN both still seal under version 1, and each reads the other's writes
    for id in ["p-1", "p-2", "p-3"] {
        assert_eq!(sealed_version(&a, "acme", id).await, 1, "{id}");
    }
    read_all(&a, "acme", &["p-1", "p-2", "p-3"]).await;
    read_all(&b, "acme", &["p-1", "p-2", "p-3"]).await;

    // WHEN the first container's clock passes `sealsFrom`
    let wait_ms = DEFAULT_KEY_CACHE_SECONDS * 1000 + ROTATION_MARGIN_MS + 1;
    a.clock.advance_millis(wait_ms);
    put(&a, "acme", "p-4", 4).await;
    put(&a, "acme", "p-1", 1).await;
    // THEN its writes seal under version 2, a rewritten product too; what version 1 sealed is
    // not rewritten, and every version opens
    assert_eq!(sealed_version(&a, "acme", "p-4").await, 2);
    assert_eq!(sealed_version(&a, "acme", "p-1").await, 2);
    assert_eq!(sealed_version(&a, "acme", "p-2").await, 1);
    read_all(&a, "acme", &["p-1", "p-2", "p-3", "p-4"]).await;

    // AND a container whose view is older than the rotation (its clock held back, an edge real
    // clocks never reach: its cache would have expired by `sealsFrom`) answers 503 for an item of
    // a version it has not met, never another tenant's data or a 403, and writes nothing
    b.tenant("acme")
        .get_product("p-4")
        .await
        .assert_problem(503);
    read_all(&b, "acme", &["p-2", "p-3"]).await;
    // WHEN its cache period passes
    b.clock.advance_millis(wait_ms);
    // THEN it reads every version, at one KMS call a version
    read_all(&b, "acme", &["p-1", "p-2", "p-3", "p-4"]).await;
    assert_eq!(b.app.keys.as_ref().unwrap().vault_calls(), 3);
    put(&b, "acme", "p-5", 5).await;
    assert_eq!(sealed_version(&b, "acme", "p-5").await, 2);

    // WHEN the tenant is offboarded
    let report = offboard_to_end(&a, "acme", &operator()).await;
    assert_eq!(report.status, 200, "{}", report.body);
    // THEN every version is destroyed, and none of them is left in the key table
    assert_eq!(report.body["tenantKey"]["versions"], json!([1, 2]));
    let held = a.test_keys().every_key(&a.admin).await;
    assert!(held.iter().all(|k| k.tenant.as_str() != "acme"));
}

#[tokio::test]
async fn a_rotated_keys_new_version_seals_a_period_and_the_margin_after_it_was_made_however_slow_kms_was(
) {
    // GIVEN a keyed tenant, served by a container whose KMS answers GenerateDataKey only after
    // longer than the rotation's margin (throttled through the SDK's retries)
    let mut h = Harness::new().await.keyed().await;
    onboard(&h, "acme", 2).await;
    put(&h, "acme", "p-1", 1).await;
    let delay_ms = ROTATION_MARGIN_MS + 10_000;
    let keys = h.test_keys().tenant_keys_slow_to_make(&h, delay_ms);
    h.app = h.app.with_tenant_keys(Some(keys));

    // WHEN an operator rotates its key
    let asked_at = h.clock.now_millis();
    let r = rotate(&h, "acme").await;

    // THEN the new version seals from a key period and the margin after its row was made, not
    // after the rotation was asked: a container that read the key table just before the row
    // landed meets it before any container seals with it
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["key"]["versions"], json!([1, 2]), "{}", r.body);
    let made_at = asked_at + delay_ms;
    assert_eq!(
        r.body["key"]["newestSealsFrom"],
        json!(rfc3339(
            made_at + DEFAULT_KEY_CACHE_SECONDS * 1000 + ROTATION_MARGIN_MS
        )),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn a_rotation_keeps_emails_found_and_unique_and_is_refused_where_it_cannot_hold() {
    // GIVEN a tenant onboarded before keys were set up, and a keyed tenant with a user
    let plain = Harness::new().await;
    onboard(&plain, "plain", 1).await;
    let h = plain.keyed().await;
    onboard(&h, "acme", 1).await;
    let user = |id: &'static str, email: &'static str| {
        let h = &h;
        async move {
            let p = integration::routes::params(&[("userId", id)]);
            h.tenant("acme")
                .call("put-user", &p, Some(json!({"name": id, "email": email})))
                .await
        }
    };
    assert_eq!(user("u-1", "ada@example.com").await.status, 201);

    // WHEN its key is rotated and the new version seals
    assert_eq!(rotate(&h, "acme").await.status, 200);
    h.clock
        .advance_millis(DEFAULT_KEY_CACHE_SECONDS * 1000 + ROTATION_MARGIN_MS + 1);

    // THEN the user is found by its email, and the email stays its own (the digest is the first
    // version's: an item's key cannot be rotated)
    let found = h
        .tenant("acme")
        .query(&[("email", "ada@example.com")])
        .find_user_by_email()
        .await;
    assert_eq!(found.body["userId"], "u-1", "{}", found.body);
    user("u-2", "ada@example.com")
        .await
        .assert_problem_naming(409, "email");
    assert_eq!(user("u-2", "grace@example.com").await.status, 201);

    // AND bad rotations are 400 and change nothing
    let before = h.test_keys().every_key(&h.admin).await.len();
    for body in [
        json!({"rotateKey": false}),
        json!({"rotateKey": true, "tier": "premium"}),
        json!({"rotateKey": true, "keyed": true}),
    ] {
        h.operator()
            .update_tenant("acme", body)
            .await
            .assert_problem_naming(400, "rotateKey");
    }
    // AND a tenant never keyed has no key to rotate: 409, and no key is made
    rotate(&h, "plain").await.assert_problem(409);
    // AND no tenant's key is rotated by a tenant: the route is the operator's
    h.tenant("acme")
        .update_tenant("acme", json!({"rotateKey": true}))
        .await
        .assert_problem(403);
    assert_eq!(h.test_keys().every_key(&h.admin).await.len(), before);
}

#[tokio::test]
async fn a_keyed_tenants_import_messages_are_sealed_under_its_key_version_and_its_sealing_item_holds_no_key(
) {
    use super::imports::{deliver_in_process, post_import, products};
    // GIVEN a keyed tenant, its key rotated and sealing under version 2
    let h = Harness::new().await.keyed().await;
    integration::onboard_at_max_limits(&h, "acme", 2).await;
    let queues = integration::import_queue::ImportQueues::create(5, 10).await;
    let first = post_import(&h, &queues, "acme", products("one", 3), &[]).await;
    assert_eq!(first.status, 202, "{}", first.body);
    let before = queues.receive(10).await;
    assert_eq!(rotate(&h, "acme").await.status, 200);
    h.clock
        .advance_millis(DEFAULT_KEY_CACHE_SECONDS * 1000 + ROTATION_MARGIN_MS + 1);

    // WHEN it imports again, and both imports' messages are consumed
    let accepted = post_import(&h, &queues, "acme", products("two", 3), &[]).await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    let after = queues.receive(10).await;
    // THEN each message names the version of the tenant's key its import key derives from
    let versions = |batch: &[aws_sdk_sqs::types::Message]| -> Vec<Value> {
        batch
            .iter()
            .map(|m| {
                serde_json::from_str::<Value>(m.body().unwrap()).unwrap()["keyVersion"].clone()
            })
            .collect()
    };
    assert_eq!(versions(&before), [json!(1)]);
    assert_eq!(versions(&after), [json!(2)]);
    // AND the consumer opens both, and every product is written
    deliver_in_process(&h, &queues, &before).await;
    deliver_in_process(&h, &queues, &after).await;
    for id in ["one-00000", "one-00002", "two-00001"] {
        let r = h.tenant("acme").get_product(id).await;
        assert_eq!(r.status, 200, "{id}: {}", r.body);
    }
    // AND the tenant's sealing item holds no key: only its key table's wrapped keys can open its
    // messages, and shredding them shreds the messages too
    let pk = shared::identity::keys::import_sealing_key(&TenantId::parse("acme").unwrap());
    let items = h.all_items().await;
    let sealing = items
        .iter()
        .find(|i| i.get("PK") == Some(&AttributeValue::S(pk.clone())))
        .expect("the sealing item (its open imports)");
    assert!(!sealing.contains_key("key"), "{sealing:?}");
}

#[tokio::test]
async fn a_key_row_left_by_an_earlier_tenant_of_the_id_is_never_the_new_tenants_key() {
    // GIVEN a key row of an earlier tenant of the id "acme" (as a rotation landing after that
    // tenant's offboarding shredded its keys would leave), and no tenant acme
    let h = Harness::new().await.keyed().await;
    let t = TenantId::parse("acme").unwrap();
    let keys = h.app.keys.as_ref().unwrap();
    let orphan = keys
        .create(&t, None, "2020-01-01T00:00:00.000Z")
        .await
        .unwrap();
    // WHEN acme is onboarded again
    onboard(&h, "acme", 1).await;
    // THEN its key is a new one: the earlier row is gone, and only the new tenant's remains
    let held = h.test_keys().keys_of(&h.admin, &t).await;
    assert_eq!(held.len(), 1);
    assert_ne!(held[0].bytes(), orphan.bytes());
    put(&h, "acme", "p-1", 1).await;
    read_all(&h, "acme", &["p-1"]).await;
}

#[tokio::test]
async fn a_key_row_of_another_onboarding_of_the_id_still_under_way_is_never_shredded_by_a_second() {
    // GIVEN a key row another onboarding of "acme" made 5 seconds ago, its record not written yet
    let h = Harness::new().await.keyed().await;
    let t = TenantId::parse("acme").unwrap();
    let keys = h.app.keys.as_ref().unwrap();
    use shared::identity::clock::{rfc3339, Clock};
    let made_for = rfc3339(h.clock.now_millis() - 5_000);
    let theirs = keys.create(&t, None, &made_for).await.unwrap();
    // WHEN acme is onboarded here meanwhile
    let body = json!({"tenantId": "acme", "tier": "standard", "shardCount": 1});
    let r = h.operator().onboard_tenant(body).await;
    // THEN it is to be asked again (503: the other onboarding is under way, or died and its row
    // goes once its run is over), and the other's key is the only one, as it was
    r.assert_problem(503);
    assert!(r.retry_after.is_some());
    let held = h.test_keys().keys_of(&h.admin, &t).await;
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].bytes(), theirs.bytes());
}

#[tokio::test]
async fn a_rotation_retried_after_the_tenants_key_was_revoked_is_refused_like_a_first_one() {
    // GIVEN a tenant whose data key is wrapped by a KMS key of its own, its key rotated (the new
    // version not yet sealing)
    let h = Harness::new().await.keyed().await;
    let t = integration::unique("rot-revoked");
    let own_key = h.onboard_with_own_key(&t, 1).await;
    let first = rotate(&h, &t).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let keys_before = h.test_keys().every_key(&h.admin).await.len();

    // WHEN the tenant revokes its key, and the operator retries the rotation
    h.test_keys().set_enabled(&own_key, false).await;
    let again = rotate(&h, &t).await;

    // THEN the retry is refused as a first rotation would be (before the mend: 200 with the
    // versions, the key never asked), and no key is made
    again.assert_problem_naming(403, "encryption key");
    assert_eq!(h.test_keys().every_key(&h.admin).await.len(), keys_before);
}
