//! A tenant's key revoked while one of its operations runs, with nobody calling
//! (`tenants::Operation::may_go_on`): the lifecycle driver and the lane worker step nothing of a
//! re-sharding, a move, a restore or a keying until the key is usable again; the raw table is
//! checked byte for byte, and a lane waiting for its key is never taken as lost and sent again (its
//! copies would pile up on the queue). An offboarding needs no key and goes on (`tenant_keys.rs`).

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;

use integration::lane_pump::{Delivery, LanePump};
use integration::{unique, Harness};
use serde_json::json;
use shared::identity::keys::raw_key;
use shared::store::lifecycle::restoring::STARTS_DELAY_SECONDS;

use crate::lanes::{get_tenant, pump_until_ended, reshard_onto_queue, sorted};
use crate::restore::{keyed, put_products, restore_from, restored_of};

type Item = HashMap<String, AttributeValue>;

#[tokio::test]
async fn a_key_revoked_mid_re_sharding_pauses_its_lanes_and_the_driver_until_it_is_enabled_again() {
    use shared::store::keys::{DEFAULT_KEY_CACHE_SECONDS, REFUSAL_MEMO_MS};
    // GIVEN a tenant whose data key is wrapped by a KMS key of its own, with 200 products on 2
    // shards, re-sharded to 8 in lanes on a queue (a paused lane's turn waits nothing, here)
    let h = Harness::new().await.keyed().await;
    let t = unique("revoking");
    let own_key = h.onboard_with_own_key(&t, 2).await;
    h.tenant(&t)
        .put_new_products((0..200).map(|i| (format!("p{i:03}"), json!({"n": i}))))
        .await;
    let mut pump = LanePump::new(1, Duration::from_millis(150)).await;
    pump.lanes = pump.lanes.with_throttle_wait(Duration::ZERO);
    reshard_onto_queue(&h, &pump, &t, 8).await;
    let queued = pump.queues.backlog(&pump.queues.url).await;
    assert!(queued > 0, "no lane on the queue");

    // WHEN the tenant disables its key, this container's cache period passes, and the workers take
    // the lanes' turns and the driver runs, again and again
    h.test_keys().set_enabled(&own_key, false).await;
    h.clock.advance_millis(DEFAULT_KEY_CACHE_SECONDS * 1000 + 1);
    let before = unstepped(h.items_under(&raw_key(&t, "")).await);
    for _ in 0..5 {
        pump.round(&h.app, 10, 4, |_| Delivery::Once).await;
        let driven = tenants::drive_lifecycle::drive(&h.app, &pump.lanes)
            .await
            .unwrap();
        assert_eq!(driven.pending, 1, "{driven:?}");
    }
    // AND the wait after which the driver takes an unstepped lane as lost passes, the key still
    // revoked, and every lane's turn is taken once more
    h.clock.advance_millis(tenants::lane_walk::LOST_AFTER_MS);
    let mut taken = 0;
    for _ in 0..10 {
        if taken >= queued {
            break;
        }
        taken += pump.round(&h.app, 10, 4, |_| Delivery::Once).await as u64;
    }
    // THEN nothing of the tenant moved: its items are as they were, byte for byte (but the time its
    // lanes were last noted alive), and its lanes' turns are still on the queue, none dead
    assert_eq!(unstepped(h.items_under(&raw_key(&t, "")).await), before);
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, queued);
    assert!(pump.queues.dead_letters().await.is_empty());

    // WHEN the key is enabled again, and the refusal this container remembers has passed
    h.test_keys().set_enabled(&own_key, true).await;
    h.clock.advance_millis(REFUSAL_MEMO_MS + 1);
    // THEN the driver's first run sends no lane again: each waited its turn, none was lost
    tenants::drive_lifecycle::drive(&h.app, &pump.lanes)
        .await
        .unwrap();
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, queued);
    let operator = integration::operator();
    pump_until_ended(&h, &pump, &t, "migration").await;
    // THEN the re-sharding ends: 8 shards, and every product reads as written, once
    let view = get_tenant(&h, &t, &operator).await;
    assert_eq!(view.body["shardCount"], 8, "{}", view.body);
    let listed = h
        .tenant(&t)
        .query(&[("limit", "1000"), ("order", "id")])
        .call("query-tenant-products", &integration::api::NO_PATH, None)
        .await;
    let expected: Vec<String> = (0..200).map(|i| format!("p{i:03}")).collect();
    assert_eq!(listed.ids("productId"), expected, "{}", listed.body);
    pump.drain(&h.app, 4).await;
    assert!(pump.queues.dead_letters().await.is_empty());
}

/// `items`, sorted, without the time each lane was last stepped or noted alive (`steppedAtMs`):
/// a turn that waits for the key notes it, and changes nothing else.
fn unstepped(items: Vec<Item>) -> Vec<Item> {
    let mut items = sorted(items);
    for item in &mut items {
        item.remove("steppedAtMs");
    }
    items
}

/// A key revoked while a restore runs: nothing of the tenant is written, and an operator can still
/// end the restore.
#[tokio::test]
async fn a_restore_whose_tenants_key_is_revoked_steps_nothing_and_can_still_be_aborted() {
    use shared::store::keys::DEFAULT_KEY_CACHE_SECONDS;
    // GIVEN a tenant whose data key is wrapped by a KMS key of its own, with 40 products, a copy
    // taken of it, its products changed since, and a restore from that copy started
    let h = Harness::new().await.keyed().await;
    let t = unique("revoked-restore");
    let own_key = h.onboard_with_own_key(&t, 2).await;
    put_products(&h, &t, (0..40).map(|i| format!("sku-{i:02}")), 1).await;
    let source = h.snapshot("revokedsrc").await;
    put_products(&h, &t, (0..40).map(|i| format!("sku-{i:02}")), 2).await;
    let started = restore_from(&h, &t, &source, false).await;
    assert_eq!(started.status, 202, "{}", started.body);
    let before = keyed(h.all_items().await);

    // WHEN the tenant disables its key, the restore may write and the key cache's period has
    // passed, and the lifecycle driver runs three times
    h.test_keys().set_enabled(&own_key, false).await;
    h.clock
        .advance_seconds(STARTS_DELAY_SECONDS.max(DEFAULT_KEY_CACHE_SECONDS) + 1);
    for _ in 0..3 {
        let driven = tenants::drive_lifecycle::drive(&h.app, &tenants::Lanes::in_process()).await;
        assert_eq!(driven.unwrap().pending, 1);
    }
    // THEN nothing of the tenant was written, and an operator's call to go on is refused
    assert_eq!(
        restored_of(&t, &keyed(h.all_items().await)),
        restored_of(&t, &before)
    );
    restore_from(&h, &t, &source, false)
        .await
        .assert_problem_naming(403, "encryption key");

    // WHEN an operator aborts it
    let aborted = h
        .operator()
        .restore_tenant(&t, json!({"abort": true}))
        .await;
    // THEN it ends abandoned, the tenant active again, and still nothing of it written
    assert_eq!(aborted.status, 200, "{}", aborted.body);
    assert_eq!(aborted.body["lastRestore"]["phase"], "abandoned");
    assert_eq!(aborted.body["status"], "active");
    assert_eq!(
        restored_of(&t, &keyed(h.all_items().await)),
        restored_of(&t, &before)
    );
}

#[tokio::test]
async fn an_import_accepted_before_its_tenants_key_was_revoked_waits_on_the_queue_and_lands_once_it_is_enabled(
) {
    use crate::imports::{deliver_deferring, post_import, products};
    use shared::store::keys::{DEFAULT_KEY_CACHE_SECONDS, REFUSAL_MEMO_MS};
    // GIVEN a tenant whose data key is wrapped by a KMS key of its own, and an import of 10
    // products accepted onto a queue that dead-letters after 2 receives
    let h = Harness::new().await.keyed().await;
    let t = unique("revoked-import");
    let own_key = h.onboard_with_own_key(&t, 2).await;
    let queues = integration::import_queue::ImportQueues::create(2, 10).await;
    let accepted = post_import(&h, &queues, &t, products("rev", 10), &[]).await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    let products_of = |items: Vec<Item>| {
        let prefix = raw_key(&t, "PRODUCT#");
        items
            .into_iter()
            .filter(|i| i["PK"].as_s().is_ok_and(|pk| pk.starts_with(&prefix)))
            .count()
    };

    // WHEN the tenant disables its key, the container's cache period passes, and the consumer
    // receives the messages more times than the queue's maxReceiveCount
    h.test_keys().set_enabled(&own_key, false).await;
    h.clock.advance_millis(DEFAULT_KEY_CACHE_SECONDS * 1000 + 1);
    for _ in 0..4 {
        assert!(deliver_deferring(&h, &queues).await > 0);
    }
    // THEN nothing was written, nothing was dead-lettered, and the messages wait on the queue
    // (before the mend: each delivery counted, and the messages went to the dead-letter queue)
    assert_eq!(products_of(h.all_items().await), 0);
    assert_eq!(queues.backlog(&queues.dlq_url).await, 0);

    // WHEN the key is enabled again, and the container's note of the refusal has passed
    h.test_keys().set_enabled(&own_key, true).await;
    h.clock.advance_millis(REFUSAL_MEMO_MS);
    while deliver_deferring(&h, &queues).await > 0 {}
    // THEN every product is written once, and nothing was dead-lettered
    assert_eq!(products_of(h.all_items().await), 10);
    assert_eq!(queues.backlog(&queues.dlq_url).await, 0);

    // WHEN another tenant's import is delivered while it is suspended (its key usable)
    let s = unique("suspended-import");
    h.onboard_with_own_key(&s, 1).await;
    let queues = integration::import_queue::ImportQueues::create(2, 1).await;
    let accepted = post_import(&h, &queues, &s, products("sus", 3), &[]).await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    let suspended = h
        .operator()
        .update_tenant(&s, json!({"status": "suspended"}))
        .await;
    assert_eq!(suspended.status, 200, "{}", suspended.body);
    for _ in 0..3 {
        deliver_deferring(&h, &queues).await;
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    // THEN it is not held back as a refused key's would be: its deliveries count, and it goes to
    // the dead-letter queue as documented for a suspension
    assert_eq!(queues.backlog(&queues.dlq_url).await, 1);
}

/// Sealing a tenant's items asked while its key is revoked is refused before anything is written:
/// no keying is recorded, and none resumes once the key is enabled again.
#[tokio::test]
async fn keying_asked_while_the_tenants_key_is_revoked_is_403_and_writes_nothing() {
    use shared::store::keys::DEFAULT_KEY_CACHE_SECONDS;
    // GIVEN a tenant whose data key is wrapped by a KMS key of its own, which it has disabled, and
    // the key cache's period passed
    let h = Harness::new().await.keyed().await;
    let t = unique("revoked-keying");
    let own_key = h.onboard_with_own_key(&t, 1).await;
    h.test_keys().set_enabled(&own_key, false).await;
    h.clock.advance_millis(DEFAULT_KEY_CACHE_SECONDS * 1000 + 1);
    let before = h.all_items().await.len();

    // WHEN an operator asks for its items to be sealed
    let asked = h.operator().update_tenant(&t, json!({"keyed": true})).await;

    // THEN 403 naming the key, and nothing written: no item, no listing for the driver
    asked.assert_problem_naming(403, "encryption key");
    assert_eq!(h.all_items().await.len(), before);
    // AND once the key is enabled again, the tenant has no keying
    h.test_keys().set_enabled(&own_key, true).await;
    h.clock.advance_millis(DEFAULT_KEY_CACHE_SECONDS * 1000 + 1);
    let view = h.operator().get_tenant(&t).await;
    assert_eq!(view.status, 200, "{}", view.body);
    assert!(view.body.get("keying").is_none(), "{}", view.body);
}
