//! Issue 58, item 5: a move or an onboarding takes an existing own table only when it has the
//! pool's keys and indexes and is empty (`shared::store::tenancy::placement::create_own_table`);
//! otherwise 409 naming it, and nothing changes. Empty means no item under the tenant's keys, read
//! through the tenant walk, and no other item as DynamoDB counts them.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::{unique, Harness};
use serde_json::json;
use shared::identity::ids::TenantId;
use shared::identity::keys::{is_metering_pk, kind, raw_key, shard_pk};

type Item = HashMap<String, AttributeValue>;

/// Issue 58, item 5: an existing own table is taken only when it has the pool's keys and indexes
/// and is empty; otherwise 409 naming it, and nothing changes.
#[tokio::test]
async fn an_existing_own_table_of_other_keys_or_with_items_is_409_naming_it_and_nothing_changes() {
    // GIVEN a tenant id whose own table an operator made with other keys, and a pooled tenant
    // whose own table an operator made from the pool's definition and wrote an item into
    let h = Harness::new().await;
    let newcomer = unique("otherkeys");
    let other_keys = h.own_table_of_other_keys(&newcomer).await;
    let pooled = integration::onboarded(&h, "fullown").await;
    let full = format!("{}-tenant-{pooled}", h.table);
    let def = devtools::table_from_template(&devtools::default_template_path())
        .unwrap()
        .without_stream();
    devtools::create_table(&h.admin, &full, &def).await.unwrap();
    let stray_key = raw_key(&pooled, "STRAY#1");
    let stray: Item = [
        ("PK".to_string(), AttributeValue::S(stray_key.clone())),
        ("SK".to_string(), AttributeValue::S(stray_key)),
    ]
    .into();
    h.put_raw(&full, stray.clone()).await;
    // WHEN the first is onboarded in its own table, and the second moved into its own
    let onboarding = h
        .operator()
        .onboard_tenant(json!({"tenantId": newcomer, "tier": "standard", "placement": "own"}))
        .await;
    let moving = h.operator().move_to(&pooled, "own").await;
    // THEN each is 409 naming its table and why, never a 500
    onboarding.assert_problem_naming(409, &other_keys);
    assert!(onboarding.body["detail"]
        .as_str()
        .unwrap()
        .contains("other keys"));
    moving.assert_problem_naming(409, &full);
    assert!(moving.body["detail"]
        .as_str()
        .unwrap()
        .contains("holds items"));
    // AND nothing changed: no record for the first, the second pooled and active, the stray item
    h.operator().get_tenant(&newcomer).await.assert_problem(404);
    assert_pooled_and_not_moving(&h, &pooled).await;
    assert_eq!(h.admin_scan(&full).await, vec![stray]);
}

/// DynamoDB counts a table's items about every six hours, so a table filled since passes a check
/// of the count. Items under the tenant's keys are found by the walk, read consistently (asked
/// before the count: DynamoDB Local's count is current, and the refusal says which found them). A
/// move would take such a copy for the tenant's product and drop the product it replaces.
#[tokio::test]
async fn an_own_table_holding_an_item_under_the_tenants_keys_is_refused_by_the_walk_and_nothing_changes(
) {
    // GIVEN a pooled tenant with a product, and its own table an operator made from the pool's
    // definition with a copy of that product in it; and a new tenant id whose own table an
    // operator made likewise, with an item at its first product shard
    let h = Harness::new().await;
    let pooled = integration::onboarded(&h, "copied").await;
    h.tenant(&pooled)
        .put_new_products([("p-1".to_string(), json!({"v": 1}))])
        .await;
    let products = h.items_under(&raw_key(&pooled, "PRODUCT#")).await;
    assert_eq!(products.len(), 1, "{products:?}");
    let copied_table = format!("{}-tenant-{pooled}", h.table);
    let newcomer = unique("planted");
    let planted_table = format!("{}-tenant-{newcomer}", h.table);
    let def = devtools::table_from_template(&devtools::default_template_path())
        .unwrap()
        .without_stream();
    let planted_pk = shard_pk(&TenantId::parse(&newcomer).unwrap(), kind::PRODUCT, 0);
    let planted: Item = [
        ("PK".to_string(), AttributeValue::S(planted_pk.clone())),
        (
            "SK".to_string(),
            AttributeValue::S(raw_key(&newcomer, "PRODUCT#p-9")),
        ),
    ]
    .into();
    for (table, item) in [(&copied_table, &products[0]), (&planted_table, &planted)] {
        devtools::create_table(&h.admin, table, &def).await.unwrap();
        h.put_raw(table, item.clone()).await;
    }
    let pooled_id = TenantId::parse(&pooled).unwrap();
    let unmetered = |items: Vec<Item>| {
        let metered = |i: &Item| {
            i["PK"]
                .as_s()
                .is_ok_and(|pk| is_metering_pk(&pooled_id, pk))
        };
        integration::sorted_text(items.into_iter().filter(|i| !metered(i)).collect())
    };
    let pooled_before = unmetered(h.items_under(&raw_key(&pooled, "")).await);
    // WHEN the first is moved into its own table, and the second onboarded in its own
    let moving = h.operator().move_to(&pooled, "own").await;
    let onboarding = h
        .operator()
        .onboard_tenant(json!({"tenantId": newcomer, "tier": "standard", "placement": "own"}))
        .await;
    // THEN each is 409 naming its table and the key the walk found the item under
    let copied_pk = products[0]["PK"].as_s().unwrap();
    for (r, table, pk) in [
        (&moving, &copied_table, copied_pk),
        (&onboarding, &planted_table, &planted_pk),
    ] {
        r.assert_problem_naming(409, table)
            .assert_problem_naming(409, &format!("under one of this tenant's keys ({pk})"));
    }
    // AND nothing changed: the first pooled and active with its items byte for byte, no record for
    // the second, and each table holds only what the operator put there
    assert_pooled_and_not_moving(&h, &pooled).await;
    let pooled_after = unmetered(h.items_under(&raw_key(&pooled, "")).await);
    assert_eq!(pooled_after, pooled_before);
    h.operator().get_tenant(&newcomer).await.assert_problem(404);
    assert_eq!(h.admin_scan(&copied_table).await, vec![products[0].clone()]);
    assert_eq!(h.admin_scan(&planted_table).await, vec![planted]);
}

/// `tenant`'s record says it is in the pool, with no move.
async fn assert_pooled_and_not_moving(h: &Harness, tenant: &str) {
    let record = h.operator().get_tenant(tenant).await;
    assert_eq!(record.body["placement"], "pool", "{}", record.body);
    assert!(
        record.body.get("move").is_none_or(|m| m.is_null()),
        "{}",
        record.body
    );
}

/// A walk's first Query of an own table (any table named `…-tenant-twice-…`).
fn is_walk_of_twice(body: &str) -> bool {
    body.contains("-tenant-twice-") && body.contains("KeyConditionExpression")
}

/// The same onboarding, with one Idempotency-Key, sent twice at once into an operator's empty
/// table: the one whose walk comes after the other's answer was recorded in that table (where the
/// tenant's recorded answers live) is answered as the other was, never 409 for the table it found
/// holding that answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_onboarding_sent_twice_at_once_into_an_operators_table_answers_both_as_the_first() {
    // GIVEN an empty table an operator made from the pool's definition for a new tenant id, and a
    // second container
    let h = Harness::new().await;
    let tenant = unique("twice");
    let table = format!("{}-tenant-{tenant}", h.table);
    let def = devtools::table_from_template(&devtools::default_template_path())
        .unwrap()
        .without_stream();
    devtools::create_table(&h.admin, &table, &def)
        .await
        .unwrap();
    let second = std::sync::Arc::new(h.another_container().await);
    let body = json!({"tenantId": tenant, "tier": "standard", "placement": "own"});

    // WHEN the second container's onboarding reads no record and its walk of the table is held
    // (aside: the hold blocks the thread that sends it)
    let mut held = second.faults.hold_next_matching(is_walk_of_twice);
    let onboarding = integration::aside({
        let (second, body) = (second.clone(), body.clone());
        move || async move {
            second
                .caller(&integration::operator())
                .header("Idempotency-Key", "onboard-twice")
                .onboard_tenant(body)
                .await
        }
    });
    held.reached().await;
    // AND the first container's, with the same key, onboards the tenant meanwhile
    let first = h
        .operator()
        .header("Idempotency-Key", "onboard-twice")
        .onboard_tenant(body)
        .await;
    assert_eq!(first.status, 201, "{}", first.body);
    // AND the held walk goes on
    held.release();
    let again = onboarding.ended().await;

    // THEN the second is answered as the first was, and the tenant is onboarded in its table
    assert_eq!((again.status, &again.body), (first.status, &first.body));
    let record = h.operator().get_tenant(&tenant).await;
    assert_eq!(record.body["ownTable"], table.as_str(), "{}", record.body);
}
