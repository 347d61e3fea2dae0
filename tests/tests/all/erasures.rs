//! Erasures survive a restore (issue 59): a user erased (`DELETE /users/{userId}`), with every item
//! of its own, stays erased when its tenant is restored from a copy taken before the erasure; the
//! tenant's other users come back as the copy holds them; the erased id is not used again. An
//! operator erases a user as the tenant would (`DELETE /tenants/{tenantId}/users/{userId}`).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::routes::params;
use integration::{onboard_at_max_limits, unique, Auth, Harness, Resp};
use serde_json::json;
use shared::identity::ids::TenantId;
use shared::identity::keys::{id_in_partition, tenant_prefix, PK};
use shared::store::lifecycle::restoring::STARTS_DELAY_SECONDS;

type Item = HashMap<String, AttributeValue>;

/// A user of `tenant` with two orders of two line items each.
async fn user_with_orders(h: &Harness, tenant: &str, user: &str) {
    user_with(h, tenant, user, 2, 2).await;
}

/// A user of `tenant` with `orders` orders (`<user>-o<o>`) of `lines` line items each
/// (`i<o>-<nnn>`), made 8 at a time.
async fn user_with(h: &Harness, tenant: &str, user: &str, orders: usize, lines: usize) {
    let auth = Auth::Tenant(tenant.to_owned());
    let email = format!("{user}@example.com");
    let r = h
        .caller(&auth)
        .call(
            "put-user",
            &params(&[("userId", user)]),
            Some(json!({"name": user, "email": email})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    orders_of(h, tenant, user, orders, lines).await;
}

/// `orders` orders of `user` of `tenant` (`<user>-o<o>`), of `lines` line items each
/// (`i<o>-<nnn>`), made 8 at a time.
async fn orders_of(h: &Harness, tenant: &str, user: &str, orders: usize, lines: usize) {
    use futures::StreamExt;
    let auth = Auth::Tenant(tenant.to_owned());
    futures::stream::iter((0..orders).map(|o| {
        let auth = &auth;
        async move {
            let items: Vec<_> = (0..lines)
                .map(
                    |i| json!({"itemId": format!("i{o}-{i:03}"), "sku": "S", "qty": 1, "price": 1}),
                )
                .collect();
            let body = json!({"orderId": format!("{user}-o{o}"), "date": "2026-11-20",
                "amount": lines, "items": items});
            let r = h
                .caller(auth)
                .call("create-order", &params(&[("userId", user)]), Some(body))
                .await;
            assert_eq!(r.status, 201, "{}", r.body);
        }
    }))
    .buffer_unordered(8)
    .collect::<Vec<()>>()
    .await;
}

/// `user`'s erasure asked while every request holding `marker` (a key only one of its
/// transactions deletes) never reaches the table, which must cut it off (503), then asked again:
/// the second answer.
async fn erasure_cut_off_then_retried(h: &Harness, tenant: &str, user: &str, marker: &str) -> Resp {
    let auth = Auth::Tenant(tenant.to_owned());
    let erase = || async {
        h.caller(&auth)
            .call("erase-user", &params(&[("userId", user)]), None)
            .await
    };
    h.faults.refuse_requests_containing(Some(marker));
    let cut = erase().await;
    h.faults.refuse_requests_containing(None);
    assert_eq!(cut.status, 503, "{}", cut.body);
    erase().await
}

/// The items of `tenant` that name `user` (its partition, its `userId`) or one of its orders.
fn items_of(items: &[Item], tenant: &str, user: &str) -> Vec<Item> {
    let t = TenantId::parse(tenant).unwrap();
    let text = |i: &Item, name: &str| match i.get(name) {
        Some(AttributeValue::S(s)) => s.clone(),
        _ => String::new(),
    };
    items
        .iter()
        .filter(|i| {
            let pk = text(i, PK);
            let in_user = id_in_partition(&t, "USER", &pk) == Some(user);
            let in_order = id_in_partition(&t, "ORDER", &pk).is_some_and(|o| o.starts_with(user));
            let of_tenant = pk.starts_with(&tenant_prefix(&t));
            in_user || in_order || (of_tenant && text(i, "userId") == user)
        })
        .cloned()
        .collect()
}

/// `finished` answers the whole erasure of `user` (`total` items), and nothing of it is left.
async fn wholly_erased(h: &Harness, tenant: &str, user: &str, finished: &Resp, total: u64) {
    assert_eq!(finished.status, 200, "{}", finished.body);
    assert_eq!(finished.body["deletedTotal"], total, "{}", finished.body);
    let left = items_of(&h.all_items().await, tenant, user);
    assert!(left.is_empty(), "{left:?}");
}

/// The erasure records of `tenant`, raw.
async fn erasure_records(h: &Harness, tenant: &str) -> Vec<Item> {
    h.all_items()
        .await
        .into_iter()
        .filter(|i| i.get("kind") == Some(&AttributeValue::S("ERASURE".into())))
        .filter(|i| i.get("tenantId") == Some(&AttributeValue::S(tenant.to_owned())))
        .collect()
}

/// An order `<user>-late` for `user`, placed as `auth`: the answer.
async fn late_order(h: &Harness, auth: &Auth, user: &str) -> Resp {
    let order = json!({"orderId": format!("{user}-late"), "date": "2026-11-21", "amount": 1,
        "items": [{"itemId": "late", "sku": "S", "qty": 1, "price": 1}]});
    h.caller(auth)
        .call("create-order", &params(&[("userId", user)]), Some(order))
        .await
}

async fn reads_of(h: &Harness, tenant: &str, user: &str) -> Vec<u16> {
    let auth = Auth::Tenant(tenant.to_owned());
    let c = h.caller(&auth);
    let email = format!("{user}@example.com");
    vec![
        c.call("get-user", &params(&[("userId", user)]), None)
            .await
            .status,
        c.query(&[("email", &email)])
            .call("find-user-by-email", &params(&[]), None)
            .await
            .status,
        h.caller(&auth)
            .call(
                "get-order",
                &params(&[("orderId", &format!("{user}-o0"))]),
                None,
            )
            .await
            .status,
    ]
}

#[tokio::test]
async fn an_erased_user_stays_erased_when_its_tenant_is_restored_from_a_copy_taken_before() {
    // GIVEN a tenant with two users, each with two orders, and a copy of the table taken then
    let h = Harness::new().await;
    let t = unique("erasing");
    onboard_at_max_limits(&h, &t, 4).await;
    user_with_orders(&h, &t, "u-gone").await;
    user_with_orders(&h, &t, "u-kept").await;
    let copy = h.snapshot("before-erasure").await;
    let copied = h.admin_scan(&copy).await;
    // (1 profile, 1 email, 2 summaries, 2 headers, 4 line items, 2 date index entries)
    assert_eq!(items_of(&copied, &t, "u-gone").len(), 12);

    // WHEN the tenant erases one user
    let auth = Auth::Tenant(t.clone());
    let erased = h
        .caller(&auth)
        .call("erase-user", &params(&[("userId", "u-gone")]), None)
        .await;

    // THEN it answers what it deleted, and a retry answers the same
    assert_eq!(erased.status, 200, "{}", erased.body);
    assert_eq!(erased.body["deletedTotal"], 12, "{}", erased.body);
    assert_eq!(
        erased.body["deleted"],
        json!({"EMAIL": 1, "ITEM": 4, "ORDER": 2, "ORDERDATE": 2, "ORDER_SUMMARY": 2, "USER": 1})
    );
    let again = h
        .caller(&auth)
        .call("erase-user", &params(&[("userId", "u-gone")]), None)
        .await;
    assert_eq!((again.status, &again.body), (200, &erased.body));
    // AND nothing of the user is left, and its reads answer 404
    assert!(items_of(&h.all_items().await, &t, "u-gone").is_empty());
    assert_eq!(reads_of(&h, &t, "u-gone").await, [404, 404, 404]);

    // WHEN an operator restores the tenant from the copy taken before the erasure
    restored_from(&h, &t, &copy).await;

    // THEN the erased user stays erased: none of its items is back, its reads answer 404
    // AND the other user is as the copy holds it, byte for byte
    gone_and_kept_as_copied(&h, &t, &copied).await;
    assert_eq!(reads_of(&h, &t, "u-kept").await, [200, 200, 200]);
    // AND the erased id is not used again
    let reuse = h
        .caller(&auth)
        .call(
            "put-user",
            &params(&[("userId", "u-gone")]),
            Some(json!({"name": "x", "email": "x@example.com"})),
        )
        .await;
    reuse.assert_problem_naming(409, "erased");
    // AND a user that never was is 404 to an erasure
    let none = h
        .caller(&auth)
        .call("erase-user", &params(&[("userId", "u-never")]), None)
        .await;
    assert_eq!(none.status, 404, "{}", none.body);
}

/// After a restore of `tenant`: no item of `u-gone` in the table and its reads 404, and `u-kept`'s
/// items byte for byte as `copied` holds them.
async fn gone_and_kept_as_copied(h: &Harness, tenant: &str, copied: &[Item]) {
    let after = h.all_items().await;
    let gone = items_of(&after, tenant, "u-gone");
    assert!(gone.is_empty(), "{gone:?}");
    assert_eq!(reads_of(h, tenant, "u-gone").await, [404, 404, 404]);
    let sorted = |mut items: Vec<Item>| {
        items.sort_by_key(|i| format!("{:?}{:?}", i.get("PK"), i.get("SK")));
        items
    };
    assert_eq!(
        sorted(items_of(&after, tenant, "u-kept")),
        sorted(items_of(copied, tenant, "u-kept"))
    );
}

/// The operator's restore of `tenant` from `copy`, driven to its end.
async fn restored_from(h: &Harness, tenant: &str, copy: &str) {
    let r = h
        .operator()
        .restore_tenant(tenant, json!({"from": {"table": copy}}))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    integration::drive_to_end(&h.app).await;
    let done = h.operator().get_tenant(tenant).await;
    assert_eq!(done.body["status"], "active", "{}", done.body);
}

#[tokio::test]
async fn an_erased_users_order_it_never_saw_stays_away_line_items_too_when_a_copy_holding_it_is_restored(
) {
    // GIVEN a keyed tenant with a user without orders and another with two, and a copy taken then
    let h = Harness::new().await.keyed().await;
    let t = unique("erasing-unseen");
    onboard_at_max_limits(&h, &t, 4).await;
    user_with(&h, &t, "u-gone", 0, 0).await;
    user_with_orders(&h, &t, "u-kept").await;
    let without_orders = h.snapshot("before-orders").await;
    // AND a second copy, taken after the first user placed two orders of two line items
    orders_of(&h, &t, "u-gone", 2, 2).await;
    let with_orders = h.snapshot("with-orders").await;
    let copied = h.admin_scan(&with_orders).await;
    assert_eq!(items_of(&copied, &t, "u-gone").len(), 12);
    // AND the tenant restored from the first copy: the orders are gone, the user is not
    restored_from(&h, &t, &without_orders).await;
    assert_eq!(items_of(&h.all_items().await, &t, "u-gone").len(), 2);

    // WHEN the tenant erases the user (its profile and email: it has no order now)
    let auth = Auth::Tenant(t.clone());
    let erased = h
        .caller(&auth)
        .call("erase-user", &params(&[("userId", "u-gone")]), None)
        .await;
    assert_eq!(erased.status, 200, "{}", erased.body);
    assert_eq!(erased.body["deletedTotal"], 2, "{}", erased.body);
    // AND an operator restores the tenant from the second copy, which holds the orders
    restored_from(&h, &t, &with_orders).await;

    // THEN nothing of the erased user is back: no header, summary, date entry nor line item
    // AND the other user is as the second copy holds it, byte for byte
    gone_and_kept_as_copied(&h, &t, &copied).await;
}

#[tokio::test]
async fn an_operator_erases_a_suspended_keyed_tenants_user_as_the_tenant_would_leaving_the_rest_as_it_was(
) {
    // GIVEN a keyed tenant with two users with orders, and a neighbour with a user of the same id
    let h = Harness::new().await.keyed().await;
    let t = unique("op-erasing");
    let n = unique("op-neighbour");
    onboard_at_max_limits(&h, &t, 4).await;
    onboard_at_max_limits(&h, &n, 4).await;
    for (tenant, user) in [(&t, "u-gone"), (&t, "u-kept"), (&n, "u-gone")] {
        user_with_orders(&h, tenant, user).await;
    }
    // AND the tenant suspended: its own routes are refused
    let suspended = h
        .operator()
        .update_tenant(&t, json!({"status": "suspended"}))
        .await;
    assert_eq!(suspended.status, 200, "{}", suspended.body);
    let before = h.all_items().await;
    assert_eq!(items_of(&before, &t, "u-gone").len(), 12);

    // WHEN an operator erases one of its users, and asks again
    let erased = h.operator().erase_tenant_user(&t, "u-gone").await;
    let again = h.operator().erase_tenant_user(&t, "u-gone").await;

    // THEN 200 with what was deleted, and the same report on the retry
    assert_eq!(erased.status, 200, "{}", erased.body);
    assert_eq!(
        erased.body["deleted"],
        json!({"EMAIL": 1, "ITEM": 4, "ORDER": 2, "ORDERDATE": 2, "ORDER_SUMMARY": 2, "USER": 1})
    );
    assert_eq!((again.status, &again.body), (200, &erased.body));
    // AND in the raw table nothing of the user is left; its tenant's other user and the neighbour's
    // user of the same id are as they were, byte for byte
    let after = h.all_items().await;
    assert!(items_of(&after, &t, "u-gone").is_empty());
    let sorted = |mut items: Vec<Item>| {
        items.sort_by_key(|i| format!("{:?}{:?}", i.get("PK"), i.get("SK")));
        items
    };
    for (tenant, user) in [(&t, "u-kept"), (&n, "u-gone")] {
        assert_eq!(
            sorted(items_of(&after, tenant, user)),
            sorted(items_of(&before, tenant, user)),
            "{tenant}'s {user}"
        );
    }
    // AND once the tenant is resumed, the user reads as erased and its id is not used again, as
    // after the tenant's own erasure; the neighbour's user of the same id reads as before
    let resumed = h
        .operator()
        .update_tenant(&t, json!({"status": "active"}))
        .await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert_eq!(reads_of(&h, &t, "u-gone").await, [404, 404, 404]);
    assert_eq!(reads_of(&h, &t, "u-kept").await, [200, 200, 200]);
    assert_eq!(reads_of(&h, &n, "u-gone").await, [200, 200, 200]);
    let by_tenant = h
        .tenant(&t)
        .call("erase-user", &params(&[("userId", "u-gone")]), None)
        .await;
    assert_eq!((by_tenant.status, &by_tenant.body), (200, &erased.body));
    // AND an unknown tenant or user is 404, and nothing is written for either
    let unchanged = h.all_items().await;
    let none = h.operator().erase_tenant_user(&t, "u-never").await;
    assert_eq!(none.status, 404, "{}", none.body);
    let nobody = h
        .operator()
        .erase_tenant_user(&unique("never-onboarded"), "u-gone")
        .await;
    assert_eq!(nobody.status, 404, "{}", nobody.body);
    assert_eq!(sorted(h.all_items().await), sorted(unchanged));
}

#[tokio::test]
async fn an_operators_erasure_is_charged_to_the_platform_never_to_the_tenant_or_the_operator() {
    // GIVEN an operator of a tenant of its own, and a tenant with a user with two orders
    let h = Harness::new().await;
    let ops = unique("ops-eraser");
    let t = unique("erased-for");
    onboard_at_max_limits(&h, &ops, 1).await;
    onboard_at_max_limits(&h, &t, 1).await;
    user_with_orders(&h, &t, "u-gone").await;
    let route = Some("erase-tenant-user");
    let platform_before = integration::units_used(&h, &[&h.app], "_platform", route).await;

    // WHEN the operator erases the user, served as the runtime serves it (quota, then metering)
    let erased = h
        .caller(&Auth::Operator(ops.clone()))
        .admitted()
        .erase_tenant_user(&t, "u-gone")
        .await;
    assert_eq!(erased.status, 200, "{}", erased.body);

    // THEN the erasure's units are the platform's, under the route's name: the operator caused them
    let platform_after = integration::units_used(&h, &[&h.app], "_platform", route).await;
    assert!(
        platform_after >= platform_before + 10.0,
        "the platform was charged {} units for deleting 12 items",
        platform_after - platform_before
    );
    // AND the tenant is charged nothing at all (its own writes above were not metered), and the
    // operator's own tenant nothing under the erasure's route
    let tenants_units = integration::units_used(&h, &[&h.app], &t, None).await;
    assert_eq!(
        tenants_units, 0.0,
        "the tenant was charged {tenants_units} units"
    );
    let operators_units = integration::units_used(&h, &[&h.app], &ops, route).await;
    assert_eq!(
        operators_units, 0.0,
        "the operator was charged {operators_units} units"
    );
}

#[tokio::test]
async fn an_erasure_cut_off_between_its_transactions_is_finished_by_a_retry_leaving_nothing_of_any_order(
) {
    // GIVEN a user with two orders of 94 line items each: their items take two transactions
    let h = Harness::new().await;
    let t = unique("cutoff");
    onboard_at_max_limits(&h, &t, 1).await;
    user_with(&h, &t, "u-big", 2, 94).await;
    assert_eq!(
        items_of(&h.all_items().await, &t, "u-big").len(),
        2 + 2 * 97
    );

    // WHEN the erasure's second transaction never reaches the table (throttled: the first has
    // committed), and the erasure is asked again once it would
    let finished = erasure_cut_off_then_retried(&h, &t, "u-big", "#ITEM#i1-050").await;

    // THEN the retry answers the whole erasure, and nothing of the user or either order is left
    wholly_erased(&h, &t, "u-big", &finished, 2 + 2 * 97).await;
    // AND the user and both orders have their erasure records
    let mut erased: Vec<String> = erasure_records(&h, &t)
        .await
        .iter()
        .filter_map(|i| i.get("erasedId").and_then(|v| v.as_s().ok()).cloned())
        .collect();
    erased.sort();
    assert_eq!(erased, ["u-big", "u-big-o0", "u-big-o1"]);
}

#[tokio::test]
async fn an_erasure_of_hundreds_of_orders_cut_off_among_their_items_keeps_every_summary_for_the_retry(
) {
    // GIVEN a user with 240 orders of one line item each: its erasure is 241 records, its email and
    // profile, 720 items of its orders and 240 summaries, in phases of transactions side by side
    let h = Harness::new().await;
    let t = unique("many");
    onboard_at_max_limits(&h, &t, 1).await;
    user_with(&h, &t, "u-many", 240, 1).await;
    let before = items_of(&h.all_items().await, &t, "u-many");
    assert_eq!(before.len(), 2 + 240 * 4);
    let summaries = |items: &[Item]| -> usize {
        items
            .iter()
            .filter(|i| i.get("kind") == Some(&AttributeValue::S("ORDER_SUMMARY".into())))
            .count()
    };

    // WHEN one transaction of its orders' items never reaches the table (throttled past the SDK's
    // retries)
    let auth = Auth::Tenant(t.clone());
    let erase = || async {
        h.caller(&auth)
            .call("erase-user", &params(&[("userId", "u-many")]), None)
            .await
    };
    h.faults.refuse_requests_containing(Some("#ITEM#i0-000"));
    let cut = erase().await;
    h.faults.refuse_requests_containing(None);

    // THEN the erasure answers 503, its profile and email are gone, and every summary is left
    // (each leads a retry to its order's items, whichever are left)
    assert_eq!(cut.status, 503, "{}", cut.body);
    let left = items_of(&h.all_items().await, &t, "u-many");
    assert_eq!(summaries(&left), 240, "{left:?}");
    assert!(left.len() < before.len() - 2, "{}", left.len());
    assert_eq!(reads_of(&h, &t, "u-many").await[..2], [404, 404]);

    // WHEN it is asked again
    let finished = erase().await;

    // THEN it answers the whole erasure, as counted at first, and nothing of the user is left
    wholly_erased(&h, &t, "u-many", &finished, 2 + 240 * 4).await;
    assert_eq!(erasure_records(&h, &t).await.len(), 241);
}

#[tokio::test]
async fn once_an_erasure_has_begun_no_order_transfer_code_or_profile_change_of_its_user_is_written()
{
    // GIVEN a user with an order, and a tenant's neighbour user
    let h = Harness::new().await;
    let t = unique("fence");
    onboard_at_max_limits(&h, &t, 1).await;
    user_with(&h, &t, "u-fenced", 1, 2).await;
    user_with(&h, &t, "u-other", 1, 1).await;
    let auth = Auth::Tenant(t.clone());

    // WHEN its erasure is cut off at its first read, and its fence is not taken off (the function
    // died there: its removal throttled past the SDK's retries)
    h.faults
        .refuse_requests_containing(Some("KeyConditionExpression"));
    h.faults
        .throttle_containing_with_reason("REMOVE", "TableWriteKeyRangeThroughputExceeded", 10);
    let cut = h
        .caller(&auth)
        .call("erase-user", &params(&[("userId", "u-fenced")]), None)
        .await;
    h.faults.refuse_requests_containing(None);
    assert_eq!(cut.status, 503, "{}", cut.body);
    assert!(h.faults.throttles_with_reason_left() < 10);
    h.faults.throttle_containing_with_reason("REMOVE", "", 0);
    let fenced = items_of(&h.all_items().await, &t, "u-fenced");

    // THEN an order for the user is 404, a change of its email 409, a transfer code 404: none of
    // them writes anything between the erasure's read and its deletes
    let placed = late_order(&h, &auth, "u-fenced").await;
    assert_eq!(placed.status, 404, "{}", placed.body);
    let changed = h
        .caller(&auth)
        .call(
            "put-user",
            &params(&[("userId", "u-fenced")]),
            Some(json!({"name": "n", "email": "moved@example.com"})),
        )
        .await;
    assert_eq!(changed.status, 409, "{}", changed.body);
    let code = h
        .caller(&auth)
        .call(
            "create-transfer-code",
            &params(&[("userId", "u-fenced")]),
            None,
        )
        .await;
    assert_eq!(code.status, 404, "{}", code.body);
    assert_eq!(items_of(&h.all_items().await, &t, "u-fenced"), fenced);

    // WHEN a second erasure of the user fails at its first read (before any delete: a fence it set
    // itself would come off)
    h.faults
        .refuse_requests_containing(Some("KeyConditionExpression"));
    let second = h
        .caller(&auth)
        .call("erase-user", &params(&[("userId", "u-fenced")]), None)
        .await;
    h.faults.refuse_requests_containing(None);
    assert_eq!(second.status, 503, "{}", second.body);
    // THEN the first one's fence is on still, as it was: the user's items are byte for byte the same
    assert_eq!(items_of(&h.all_items().await, &t, "u-fenced"), fenced);

    // WHEN the erasure is asked again
    let finished = h
        .caller(&auth)
        .call("erase-user", &params(&[("userId", "u-fenced")]), None)
        .await;
    // THEN it erases everything of the user, and the other user is untouched
    assert_eq!(finished.status, 200, "{}", finished.body);
    assert_eq!(finished.body["deletedTotal"], 1 + 1 + 1 + 1 + 2 + 1);
    let left = items_of(&h.all_items().await, &t, "u-fenced");
    assert!(left.is_empty(), "{left:?}");
    let other = items_of(&h.all_items().await, &t, "u-other");
    assert_eq!(other.len(), 1 + 1 + 1 + 1 + 1 + 1, "{other:?}");
}

#[tokio::test]
async fn an_erasure_whose_records_committed_with_every_answer_lost_keeps_its_fence_for_the_retry() {
    // GIVEN a user with two orders of 94 line items each: its records commit in a transaction of
    // their own, before any delete
    let h = Harness::new().await;
    let t = unique("lostrec");
    onboard_at_max_limits(&h, &t, 1).await;
    user_with(&h, &t, "u-lost", 2, 94).await;
    let auth = Auth::Tenant(t.clone());
    let erase = || async {
        h.caller(&auth)
            .call("erase-user", &params(&[("userId", "u-lost")]), None)
            .await
    };

    // WHEN the records' transaction commits, but every one of the SDK's attempts loses its answer
    h.faults.lose_successes_of("TransactWriteItems", 3);
    let cut = erase().await;
    let unlost = h.faults.lost_successes_left();
    h.faults.lose_successes(0);
    assert_eq!(cut.status, 503, "{}", cut.body);
    assert_eq!(unlost, 0, "the SDK stopped short of its three attempts");
    let records = erasure_records(&h, &t).await;
    assert_eq!(records.len(), 3, "{records:?}");

    // THEN the erasure has begun: its fence stays on the profile, and no order of the user is
    // placed before the retry
    let profile = items_of(&h.all_items().await, &t, "u-lost")
        .into_iter()
        .find(|i| i.get("kind") == Some(&AttributeValue::S("USER".into())))
        .expect("the profile is there until the retry");
    assert!(profile.contains_key("erasingSince"), "{profile:?}");
    let placed = late_order(&h, &auth, "u-lost").await;
    assert_eq!(placed.status, 404, "{}", placed.body);

    // WHEN the erasure is asked again
    let finished = erase().await;
    // THEN it answers the whole erasure, and nothing of the user is left
    wholly_erased(&h, &t, "u-lost", &finished, 2 + 2 * 97).await;
}

#[tokio::test]
async fn an_erased_users_order_is_never_answered_again_from_its_idempotency_record() {
    // GIVEN a user who placed an order with an Idempotency-Key, and asked a transfer code with one
    let h = Harness::new().await;
    let t = unique("replayed");
    onboard_at_max_limits(&h, &t, 1).await;
    user_with(&h, &t, "u-gone", 0, 0).await;
    let auth = Auth::Tenant(t.clone());
    let user = params(&[("userId", "u-gone")]);
    let order = json!({"orderId": "o-keyed", "date": "2026-11-20", "amount": 1,
        "items": [{"itemId": "i-1", "sku": "S", "qty": 1, "price": 1}]});
    let place = || {
        h.caller(&auth)
            .headers(&[("Idempotency-Key", "order-once")])
            .call("create-order", &user, Some(order.clone()))
    };
    let code = || {
        h.caller(&auth)
            .headers(&[("Idempotency-Key", "code-once")])
            .call("create-transfer-code", &user, Some(json!({})))
    };
    let placed = place().await;
    assert_eq!(placed.status, 201, "{}", placed.body);
    let made = code().await;
    assert_eq!(made.status, 201, "{}", made.body);
    assert!(place().await.replayed);

    // WHEN the user is erased, and the same requests are sent again with their keys
    let erased = h.caller(&auth).call("erase-user", &user, None).await;
    assert_eq!(erased.status, 200, "{}", erased.body);
    let before = h.all_items().await;
    let again = [place().await, code().await];

    // THEN each is 404 (no such user), never the recorded answer with the order or the code, and
    // nothing is written
    for r in &again {
        r.assert_problem(404);
        assert!(!r.body.to_string().contains("o-keyed"), "{}", r.body);
        assert!(!r.replayed, "{}", r.body);
    }
    assert_eq!(h.all_items().await.len(), before.len());
}

#[tokio::test]
async fn an_erased_orders_id_is_not_used_again_by_a_new_order_of_another_user() {
    // GIVEN a user with an order, erased (the order's erasure record written), and another user
    let h = Harness::new().await;
    let t = unique("reused");
    onboard_at_max_limits(&h, &t, 1).await;
    user_with(&h, &t, "u-old", 1, 1).await;
    user_with(&h, &t, "u-new", 0, 0).await;
    let auth = Auth::Tenant(t.clone());
    let erased = h
        .caller(&auth)
        .call("erase-user", &params(&[("userId", "u-old")]), None)
        .await;
    assert_eq!(erased.status, 200, "{}", erased.body);
    let before = h.all_items().await;

    // WHEN the other user places an order choosing the erased order's id
    let body = json!({"orderId": "u-old-o0", "date": "2026-11-21", "amount": 1,
        "items": [{"itemId": "i-1", "sku": "S", "qty": 1, "price": 1}]});
    let reused = h
        .caller(&auth)
        .call("create-order", &params(&[("userId", "u-new")]), Some(body))
        .await;

    // THEN it is 409 naming the field's reason, and nothing is written (a restore would have
    // dropped that order as the erased one)
    reused.assert_problem(409);
    assert!(
        reused.body["detail"].as_str().unwrap().contains("erased"),
        "{}",
        reused.body
    );
    assert_eq!(h.all_items().await.len(), before.len());
}

/// The request of an order that reuses `u-old-o0`, the order an erasure is about to take.
fn is_reused_orders_transaction(body: &str) -> bool {
    body.contains("TransactItems") && body.contains("#ORDER#u-old-o0#ITEM#")
}

/// The erased-id check is in the order's own transaction: an order choosing the id of an order
/// being erased, sent before the erasure and committed after it, is cancelled (409), never written
/// under an erasure record a restore would drop it by. Before the mend the id was read first, so
/// this order passed the read, then the erasure ran, and it was written (201).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_reusing_the_id_of_an_order_erased_while_it_is_in_flight_is_never_written() {
    // GIVEN a user with an order, and another user, and a second container of the same table
    let h = Harness::new().await;
    let t = unique("reused-race");
    onboard_at_max_limits(&h, &t, 1).await;
    user_with(&h, &t, "u-old", 1, 1).await;
    user_with(&h, &t, "u-new", 0, 0).await;
    let orderer = std::sync::Arc::new(h.another_container().await);
    let auth = Auth::Tenant(t.clone());

    // WHEN the other user places an order choosing that order's id, and its write is held before
    // it is sent (aside: the hold blocks the thread that sends it)
    let mut held = orderer
        .faults
        .hold_next_matching(is_reused_orders_transaction);
    let placing = integration::aside({
        let (orderer, auth) = (orderer.clone(), auth.clone());
        move || async move {
            let body = json!({"orderId": "u-old-o0", "date": "2026-11-21", "amount": 1,
                "items": [{"itemId": "i-new", "sku": "S", "qty": 1, "price": 1}]});
            let user = params(&[("userId", "u-new")]);
            orderer
                .caller(&auth)
                .call("create-order", &user, Some(body))
                .await
        }
    });
    held.reached().await;
    // AND meanwhile the first user is erased, its order with it
    let erased = h
        .caller(&auth)
        .call("erase-user", &params(&[("userId", "u-old")]), None)
        .await;
    assert_eq!(erased.status, 200, "{}", erased.body);
    assert_eq!(erased.body["deleted"]["ORDER"], 1, "{}", erased.body);
    let before = h.all_items().await;
    // AND the order's write is sent
    held.release();
    let reused = placing.ended().await;

    // THEN it is 409, the erased id's, and nothing is written: the table is as the erasure left it
    reused.assert_problem(409);
    assert!(
        reused.body["detail"].as_str().unwrap().contains("erased"),
        "{}",
        reused.body
    );
    assert_eq!(h.all_items().await, before);
}

#[tokio::test]
async fn an_erased_users_transfer_code_never_redeems_nor_replays_its_user() {
    // GIVEN a user with three transfer codes: one redeemed with an Idempotency-Key, two waiting
    let h = Harness::new().await;
    let t = unique("code-gone");
    onboard_at_max_limits(&h, &t, 1).await;
    user_with(&h, &t, "u-gone", 1, 1).await;
    let auth = Auth::Tenant(t.clone());
    let user = params(&[("userId", "u-gone")]);
    let mut codes = Vec::new();
    for _ in 0..3 {
        let made = h
            .caller(&auth)
            .call("create-transfer-code", &user, None)
            .await;
        assert_eq!(made.status, 201, "{}", made.body);
        codes.push(made.body["code"].as_str().unwrap().to_owned());
    }
    let first = redeem(&h, &auth, &codes[0], Some("redeem-once")).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["userId"], "u-gone", "{}", first.body);
    assert!(
        redeem(&h, &auth, &codes[0], Some("redeem-once"))
            .await
            .replayed
    );

    // WHEN its erasure is cut off after setting its fence (the function died there: its removal
    // throttled past the SDK's retries), and a waiting code is redeemed
    h.faults
        .refuse_requests_containing(Some("KeyConditionExpression"));
    h.faults
        .throttle_containing_with_reason("REMOVE", "TableWriteKeyRangeThroughputExceeded", 10);
    let cut = h.caller(&auth).call("erase-user", &user, None).await;
    h.faults.refuse_requests_containing(None);
    h.faults.throttle_containing_with_reason("REMOVE", "", 0);
    assert_eq!(cut.status, 503, "{}", cut.body);
    let fenced = beside_metering(&h, &t).await;
    let during = redeem(&h, &auth, &codes[1], None).await;
    let replayed_during = redeem(&h, &auth, &codes[0], Some("redeem-once")).await;

    // THEN it is 404 (the user is being erased), the keyed redeem's replay too, and nothing is
    // written: the code still waits
    during.assert_problem(404);
    replayed_during.assert_problem(404);
    assert!(!replayed_during.replayed);
    assert_eq!(beside_metering(&h, &t).await, fenced);

    // WHEN the erasure is asked again and finishes, and each code is redeemed again, with and
    // without a key, the redeemed one with its first key
    let erased = h.caller(&auth).call("erase-user", &user, None).await;
    assert_eq!(erased.status, 200, "{}", erased.body);
    let before = beside_metering(&h, &t).await;
    let again = [
        redeem(&h, &auth, &codes[1], None).await,
        redeem(&h, &auth, &codes[2], Some("redeem-late")).await,
        redeem(&h, &auth, &codes[0], Some("redeem-once")).await,
    ];

    // THEN each is 404, never the erased user's id, none replayed, and the tenant's items are byte
    // for byte as they were (its metering aside): the waiting codes are left to expire unredeemed
    for r in &again {
        r.assert_problem(404);
        assert!(!r.body.to_string().contains("u-gone"), "{}", r.body);
        assert!(!r.replayed, "{}", r.body);
    }
    assert_eq!(beside_metering(&h, &t).await, before);
}

/// Every item of the table but `tenant`'s usage counters and quota windows (which every request
/// moves), in the scan's order.
async fn beside_metering(h: &Harness, tenant: &str) -> Vec<Item> {
    use shared::identity::keys::{quota_window_pk_prefix, usage_counter_pk_prefix};
    let t = TenantId::parse(tenant).unwrap();
    let metering = [usage_counter_pk_prefix(&t), quota_window_pk_prefix(&t)];
    let mut items: Vec<Item> = h
        .all_items()
        .await
        .into_iter()
        .filter(|i| match i.get(PK) {
            Some(AttributeValue::S(pk)) => !metering.iter().any(|m| pk.starts_with(m.as_str())),
            _ => true,
        })
        .collect();
    items.sort_by_key(|i| format!("{:?}{:?}", i.get(PK), i.get("SK")));
    items
}

/// Redeems `code` as `auth`, with `key` as its Idempotency-Key if any.
async fn redeem(h: &Harness, auth: &Auth, code: &str, key: Option<&str>) -> Resp {
    let headers: Vec<(&str, &str)> = key.map(|k| ("Idempotency-Key", k)).into_iter().collect();
    h.caller(auth)
        .headers(&headers)
        .call("redeem-transfer-code", &params(&[("code", code)]), None)
        .await
}

/// Two erasures of a user at once (the tenant's and an operator's) answer one report: the second to
/// record its erasure is asked again (409), and its retry answers the recorded one. Before the mend
/// both recorded theirs, the last one's stood, and the two callers kept different answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_erasures_of_a_user_at_once_answer_the_report_recorded_first() {
    // GIVEN a user with two orders, and a second container of the same table
    let h = Harness::new().await;
    let t = unique("erase-twice");
    onboard_at_max_limits(&h, &t, 1).await;
    user_with(&h, &t, "u-1", 2, 1).await;
    let tenant_side = std::sync::Arc::new(h.another_container().await);
    let auth = Auth::Tenant(t.clone());

    // WHEN the tenant's erasure is held as it sends its transaction (aside: the hold blocks the
    // thread that sends it)
    let mut held = tenant_side.faults.hold_next_matching(|body| {
        body.contains("TransactItems") && body.contains("#ERASED#USER#u-1")
    });
    let first = integration::aside({
        let (tenant_side, auth) = (tenant_side.clone(), auth.clone());
        move || async move {
            tenant_side
                .caller(&auth)
                .call("erase-user", &params(&[("userId", "u-1")]), None)
                .await
        }
    });
    held.reached().await;
    // AND an operator's erasure of the same user runs meanwhile, a second later
    h.clock.advance_seconds(1);
    let second = h.operator().erase_tenant_user(&t, "u-1").await;
    assert_eq!(second.status, 200, "{}", second.body);
    // AND the held one is sent
    held.release();
    let first = first.ended().await;

    // THEN it is asked again (409), and its retry answers the operator's report, as does another
    // erasure by either route
    first.assert_problem(409);
    let again = tenant_side
        .caller(&auth)
        .call("erase-user", &params(&[("userId", "u-1")]), None)
        .await;
    assert_eq!((again.status, &again.body), (200, &second.body));
    let by_operator = h.operator().erase_tenant_user(&t, "u-1").await;
    assert_eq!(by_operator.body, second.body);
}

/// `tenant`'s export, every page of it, parsed as `pooltable import` reads it.
async fn exported(h: &Harness, tenant: &str) -> Vec<Item> {
    let operator = Auth::Operator(unique("ops"));
    let pages = integration::export_pages(h, &operator, tenant, "50").await;
    let text: Vec<&str> = pages.iter().map(|p| p.text.as_str()).collect();
    devtools::import::parse_export(&text.join("\n")).unwrap()
}

/// `items` in key order.
fn in_key_order(mut items: Vec<Item>) -> Vec<Item> {
    items.sort_by_key(|i| format!("{:?}{:?}", i.get("PK"), i.get("SK")));
    items
}

/// An export taken before a user was erased holds the user's items: an operator importing it again
/// (`pooltable import`) leaves them out, as a restore does, into the tenant's table (which records
/// the erasure) and into an empty one given a later export too (which carries the records). Before
/// the mend the import wrote every item back, undoing the erasure.
#[tokio::test]
async fn an_export_taken_before_an_erasure_imported_again_leaves_the_erased_user_out() {
    // GIVEN a tenant with two users, each with two orders, exported
    let h = Harness::new().await;
    let t = unique("reimport");
    onboard_at_max_limits(&h, &t, 4).await;
    user_with_orders(&h, &t, "u-gone").await;
    user_with_orders(&h, &t, "u-kept").await;
    let before = devtools::import::last_per_key(exported(&h, &t).await);
    assert_eq!(items_of(&before, &t, "u-gone").len(), 12);
    // AND then one user erased
    let auth = Auth::Tenant(t.clone());
    let erased = h
        .caller(&auth)
        .call("erase-user", &params(&[("userId", "u-gone")]), None)
        .await;
    assert_eq!(erased.status, 200, "{}", erased.body);
    let after = exported(&h, &t).await;
    let kept = in_key_order(items_of(&h.all_items().await, &t, "u-kept"));

    // WHEN an operator imports the earlier export into the tenant's table
    let imported = devtools::import::import(&h.admin, &h.table, before.clone())
        .await
        .unwrap();

    // THEN the erased user's 12 items are left out and every other item is written
    assert_eq!(imported.erased, 12);
    assert_eq!(imported.written, before.len() - 12);
    // AND nothing of the erased user is back, its reads answer 404, and the other user is as it
    // was, byte for byte
    let table = h.all_items().await;
    assert!(items_of(&table, &t, "u-gone").is_empty());
    assert_eq!(reads_of(&h, &t, "u-gone").await, [404, 404, 404]);
    assert_eq!(in_key_order(items_of(&table, &t, "u-kept")), kept);

    // WHEN both exports are imported into an empty table, the earlier first
    let fresh = Harness::new().await;
    let both = [before, after].concat();
    let imported = devtools::import::import(&fresh.admin, &fresh.table, both)
        .await
        .unwrap();

    // THEN the erased user's items are left out there too, and the other user is there as it was
    assert_eq!(imported.erased, 12);
    let table = fresh.all_items().await;
    assert!(items_of(&table, &t, "u-gone").is_empty());
    assert_eq!(in_key_order(items_of(&table, &t, "u-kept")), kept);
}
