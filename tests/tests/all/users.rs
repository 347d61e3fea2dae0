//! Users, orders, transfer codes and integration tokens against DynamoDB Local: email uniqueness
//! under a race, orders written whole, the sharded date-range listing, single-use codes, expiry and
//! isolation, and bad input that writes nothing.

use shared::identity::keys::raw_key;
use std::collections::{HashMap, HashSet};

use futures::StreamExt;
use integration::{onboard, resp, Harness, Resp};
use serde_json::{json, Value};

integration::tenant_client!();

impl<'a> Tenant<'a> {
    async fn put_user(&self, id: &str, body: Value) -> Resp {
        self.client().put_user(id, body).await
    }

    async fn user(&self, id: &str, name: &str, email: &str) -> Resp {
        self.put_user(id, json!({"name": name, "email": email}))
            .await
    }

    async fn get_user(&self, id: &str) -> Resp {
        self.client().get_user(id).await
    }

    async fn find(&self, query: &[(&str, &str)]) -> Resp {
        self.client().query(query).find_user_by_email().await
    }

    async fn find_email(&self, email: &str) -> Resp {
        self.find(&[("email", email)]).await
    }

    async fn create_order(&self, user: &str, body: Value) -> Resp {
        self.client().create_order(user, body).await
    }

    async fn get_order(&self, id: &str) -> Resp {
        self.client().get_order(id).await
    }

    async fn list_orders(&self, query: &[(&str, &str)]) -> Resp {
        self.client().query(query).list_tenant_orders().await
    }

    /// Every page from `from` to `to` at `limit`: the order ids in the order they came.
    async fn walk_orders(&self, from: &str, to: &str, limit: u32) -> Vec<String> {
        let query = [("from", from), ("to", to), ("limit", &limit.to_string())];
        let pages = self
            .client()
            .pages(&query, |c| c.list_tenant_orders())
            .await;
        let mut ids = Vec::new();
        for page in &pages {
            let page = page.ids("orderId");
            assert!(page.len() as u32 <= limit);
            ids.extend(page);
        }
        ids
    }

    async fn create_code(&self, user: &str) -> Resp {
        self.client().create_transfer_code(user).await
    }

    async fn code_for(&self, user: &str) -> String {
        let r = self.create_code(user).await;
        assert_eq!(r.status, 201, "{}", r.body);
        r.body["code"].as_str().unwrap().to_owned()
    }

    async fn redeem(&self, code: &str) -> Resp {
        self.client().redeem_transfer_code(code).await
    }

    async fn put_token(&self, service: &str, body: Value) -> Resp {
        self.client().put_integration_token(service, body).await
    }

    async fn get_token(&self, service: &str) -> Resp {
        self.client().get_integration_token(service).await
    }
}

fn s(item: &HashMap<String, aws_sdk_dynamodb::types::AttributeValue>, attr: &str) -> String {
    item.get(attr)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}

fn count_kind(
    items: &[HashMap<String, aws_sdk_dynamodb::types::AttributeValue>],
    k: &str,
) -> usize {
    items.iter().filter(|i| s(i, "kind") == k).count()
}

fn order_body(id: &str, date: &str, lines: usize) -> Value {
    json!({
        "orderId": id,
        "date": date,
        "amount": 10.5 * lines as f64,
        "items": (0..lines)
            .map(|n| json!({"itemId": format!("line-{n:03}"), "sku": format!("SKU-{n}"), "qty": n + 1, "price": 10.5}))
            .collect::<Vec<_>>(),
    })
}

fn assert_field(r: &Resp, field: &str) {
    r.assert_problem(400);
    assert_eq!(r.body["field"], field, "{}", r.body);
}

#[tokio::test]
async fn a_user_is_created_updated_found_by_email_and_read_with_its_orders_in_one_query() {
    // GIVEN an onboarded tenant
    let h = Harness::new().await;
    let a = Tenant::with_shards(&h, "users", 4).await;

    // WHEN a user is created, then renamed
    let r = a.user("u-1", "Ada", "Ada.Lovelace@Example.com").await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = a.user("u-1", "Ada L.", "Ada.Lovelace@Example.com").await;
    assert_eq!(r.status, 200, "{}", r.body);

    // THEN it is found by email, case-insensitively, with its new name
    let r = a.find_email("ada.lovelace@example.COM").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body,
        json!({"userId": "u-1", "name": "Ada L.", "email": "Ada.Lovelace@Example.com"})
    );
    a.find_email("nobody@example.com").await.assert_problem(404);

    // WHEN it places 12 orders with default (UUIDv7, time-ordered) ids, one second apart
    let mut created = Vec::new();
    for n in 0..12 {
        h.clock.advance_seconds(1);
        let mut body = order_body("unused", "2026-11-01", 1);
        body.as_object_mut().unwrap().remove("orderId");
        body["amount"] = json!(n);
        let r = a.create_order("u-1", body).await;
        assert_eq!(r.status, 201, "{}", r.body);
        created.push(r.body["orderId"].as_str().unwrap().to_owned());
    }

    // THEN one Query returns the profile and its 10 newest orders, newest first
    h.requests.reset();
    let r = a.get_user("u-1").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        h.requests.by_operation(),
        HashMap::from([("Query".to_owned(), 1)])
    );
    assert_eq!(r.body["userId"], "u-1");
    assert_eq!(r.body["name"], "Ada L.");
    assert_eq!(r.body["email"], "Ada.Lovelace@Example.com");
    let orders: Vec<&str> = r.body["orders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["orderId"].as_str().unwrap())
        .collect();
    let newest: Vec<&str> = created.iter().rev().take(10).map(String::as_str).collect();
    assert_eq!(orders, newest);
    assert_eq!(r.body["orders"][0]["amount"], 11.0);

    // AND a user without orders has an empty list; an unknown user is 404, a bad id 400
    a.user("u-2", "Grace", "grace@example.com").await;
    assert_eq!(a.get_user("u-2").await.body["orders"], json!([]));
    a.get_user("u-404").await.assert_problem(404);
    assert_field(&a.get_user("u#1").await, "userId");

    // AND another tenant sees none of it
    let b = Tenant::new(&h, "other").await;
    b.get_user("u-1").await.assert_problem(404);
    b.find_email("ada.lovelace@example.com")
        .await
        .assert_problem(404);
}

#[tokio::test]
async fn twenty_concurrent_signups_with_one_email_give_exactly_one_user() {
    // GIVEN a tenant
    let h = Harness::new().await;
    let a = Tenant::new(&h, "race").await;

    // WHEN 20 different users claim the same email (in different cases) at once
    let results: Vec<(String, u16)> = futures::future::join_all((0..20).map(|n| {
        let a = &a;
        async move {
            let id = format!("racer-{n:02}");
            let email = if n % 2 == 0 {
                "shared@example.com"
            } else {
                "SHARED@example.com"
            };
            let r = a.user(&id, "Racer", email).await;
            (id, r.status)
        }
    }))
    .await;

    // THEN exactly one succeeds and 19 get 409
    let winners: Vec<&String> = results
        .iter()
        .filter(|(_, s)| *s == 201)
        .map(|(id, _)| id)
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    assert_eq!(
        results.iter().filter(|(_, s)| *s == 409).count(),
        19,
        "{results:?}"
    );

    // AND the table holds one profile and one email item, both the winner's
    let items = h.all_items().await;
    assert_eq!(count_kind(&items, "USER"), 1);
    assert_eq!(count_kind(&items, "EMAIL"), 1);
    let r = a.find_email("Shared@Example.com").await;
    assert_eq!(r.body["userId"], winners[0].as_str());
}

#[tokio::test]
async fn changing_an_email_moves_its_uniqueness_atomically() {
    // GIVEN u-1 owns old@example.com
    let h = Harness::new().await;
    let a = Tenant::new(&h, "move").await;
    assert_eq!(a.user("u-1", "One", "old@example.com").await.status, 201);

    // WHEN u-2 tries to take it THEN 409 and nothing is written
    let before = h.all_items().await.len();
    a.user("u-2", "Two", "OLD@example.com")
        .await
        .assert_problem(409);
    assert_eq!(h.all_items().await.len(), before);
    a.get_user("u-2").await.assert_problem(404);

    // WHEN u-1 moves to new@example.com
    let r = a.user("u-1", "One", "new@example.com").await;
    assert_eq!(r.status, 200, "{}", r.body);

    // THEN the old email is free, the new one is u-1's, and u-2 can take the old one
    a.find_email("old@example.com").await.assert_problem(404);
    assert_eq!(a.find_email("new@example.com").await.body["userId"], "u-1");
    assert_eq!(a.user("u-2", "Two", "old@example.com").await.status, 201);

    // AND u-2 cannot take u-1's new email: 409, and u-2 keeps its own
    a.user("u-2", "Two", "new@example.com")
        .await
        .assert_problem(409);
    assert_eq!(a.get_user("u-2").await.body["email"], "old@example.com");
    assert_eq!(a.find_email("old@example.com").await.body["userId"], "u-2");
    let items = h.all_items().await;
    assert_eq!(count_kind(&items, "USER"), 2);
    assert_eq!(count_kind(&items, "EMAIL"), 2);

    // AND the same email in another case is still one item, still u-1's
    assert_eq!(a.user("u-1", "One", "NEW@example.com").await.status, 200);
    assert_eq!(count_kind(&h.all_items().await, "EMAIL"), 2);
}

#[tokio::test]
async fn an_order_with_line_items_is_written_whole_and_read_back_in_one_query() {
    // GIVEN a user
    let h = Harness::new().await;
    let a = Tenant::with_shards(&h, "orders", 4).await;
    a.user("u-1", "Buyer", "buyer@example.com").await;

    // WHEN an order with 3 line items is created
    let r = a
        .create_order("u-1", order_body("ord-1", "2026-02-28", 3))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);

    // THEN one transaction wrote header, summary, date index and 3 line items
    let items = h.all_items().await;
    assert_eq!(count_kind(&items, "ORDER"), 1);
    assert_eq!(count_kind(&items, "ORDER_SUMMARY"), 1);
    assert_eq!(count_kind(&items, "ORDERDATE"), 1);
    assert_eq!(count_kind(&items, "ITEM"), 3);
    let index = items.iter().find(|i| s(i, "kind") == "ORDERDATE").unwrap();
    let t = a.name();
    assert_eq!(s(index, "PK"), raw_key(&t, "ORDERDATE#2026-02-28#ord-1"));
    assert!(s(index, "SK").starts_with(&raw_key(&t, "ORDERS#2026-02#")));
    for i in &items {
        for key in ["PK", "SK"] {
            assert!(s(i, key).starts_with(&raw_key(&t, "")), "{i:?}");
        }
    }

    // AND it reads back whole in one Query, without the user id
    h.requests.reset();
    let r = a.get_order("ord-1").await;
    assert_eq!(
        h.requests.by_operation(),
        HashMap::from([("Query".into(), 1)])
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["orderId"], "ord-1");
    assert_eq!(r.body["userId"], "u-1");
    assert_eq!(r.body["date"], "2026-02-28");
    assert_eq!(r.body["amount"], 31.5);
    assert_eq!(r.body["itemCount"], 3);
    assert_eq!(
        r.body["items"],
        json!([
            {"itemId": "line-000", "sku": "SKU-0", "qty": 1, "price": 10.5},
            {"itemId": "line-001", "sku": "SKU-1", "qty": 2, "price": 10.5},
            {"itemId": "line-002", "sku": "SKU-2", "qty": 3, "price": 10.5},
        ])
    );

    // AND the same orderId again is 409, an unknown user 404, an unknown order 404; nothing written
    let before = h.all_items().await.len();
    a.create_order("u-1", order_body("ord-1", "2026-03-01", 1))
        .await
        .assert_problem(409);
    a.create_order("u-404", order_body("ord-2", "2026-03-01", 1))
        .await
        .assert_problem(404);
    a.get_order("ord-2").await.assert_problem(404);
    assert_eq!(h.all_items().await.len(), before);

    // AND the largest order that fits one transaction (94 line items), with every other action it
    // can hold (a chosen id's erased-id check, an idempotency record), is written whole
    let r = a
        .client()
        .header("Idempotency-Key", "largest")
        .create_order("u-1", order_body("ord-94", "2026-03-01", 94))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = a.get_order("ord-94").await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 94);

    // AND another tenant cannot read it
    Tenant::new(&h, "other")
        .await
        .get_order("ord-1")
        .await
        .assert_problem(404);
}

#[tokio::test]
async fn bad_orders_answer_400_naming_the_field_and_write_nothing() {
    // GIVEN a user
    let h = Harness::new().await;
    let a = Tenant::with_shards(&h, "badorders", 4).await;
    a.user("u-1", "Buyer", "buyer@example.com").await;
    let before = h.all_items().await;

    let with = |change: &dyn Fn(&mut Value)| {
        let mut b = order_body("ord-x", "2026-01-31", 2);
        change(&mut b);
        b
    };
    let cases: Vec<(Value, &str)> = vec![
        // over the transaction limit: 95 line items
        (order_body("ord-x", "2026-01-31", 95), "items"),
        (with(&|b| b["items"] = json!([])), "items"),
        (with(&|b| b["date"] = json!("2026-02-29")), "date"),
        (with(&|b| b["date"] = json!("2026-13-01")), "date"),
        (with(&|b| b["date"] = json!("31/01/2026")), "date"),
        (with(&|b| b["amount"] = json!(-1)), "amount"),
        (with(&|b| b["amount"] = json!("10")), "amount"),
        (with(&|b| b["items"][1]["qty"] = json!(0)), "items[1].qty"),
        (with(&|b| b["items"][0]["qty"] = json!(-2)), "items[0].qty"),
        (
            with(&|b| b["items"][0]["price"] = json!(-0.5)),
            "items[0].price",
        ),
        (
            with(&|b| b["items"][1]["itemId"] = json!("line-000")),
            "items[1].itemId",
        ),
        (
            with(&|b| b["items"][0]["itemId"] = json!("a#b")),
            "items[0].itemId",
        ),
        (with(&|b| b["orderId"] = json!("o#1")), "orderId"),
        (with(&|b| b["extra"] = json!(1)), "extra"),
        (
            with(&|b| {
                b.as_object_mut().unwrap().remove("date");
            }),
            "date",
        ),
    ];
    for (body, field) in cases {
        assert_field(&a.create_order("u-1", body).await, field);
    }
    assert_field(
        &a.create_order("u#1", order_body("ord-x", "2026-01-31", 1))
            .await,
        "userId",
    );
    assert_field(&a.get_order("o#1").await, "orderId");
    assert_eq!(h.all_items().await.len(), before.len());
}

#[tokio::test]
async fn a_thousand_orders_over_three_months_list_exactly_once_newest_first() {
    // GIVEN a tenant with 4 shards and 1,000 orders from 2026-08-01 to 2026-10-31 (92 days), plus
    // orders just outside the range, and another tenant's orders inside it
    let h = Harness::new().await;
    let a = Tenant::with_shards(&h, "big", 4).await;
    let b = Tenant::with_shards(&h, "small", 2).await;
    for t in [&a, &b] {
        assert_eq!(
            t.user("u-1", "Buyer", "buyer@example.com").await.status,
            201
        );
    }
    let day = |n: usize| {
        let (m, d) = match n {
            0..=30 => (8, n + 1),
            31..=60 => (9, n - 30),
            _ => (10, n - 60),
        };
        format!("2026-{m:02}-{d:02}")
    };
    let mut orders: Vec<(String, String)> = (0..1000)
        .map(|i| (format!("o-{i:04}"), day(i % 92)))
        .collect();
    let outside = [
        ("x-before".to_owned(), "2026-07-31".to_owned()),
        ("x-after".to_owned(), "2026-11-01".to_owned()),
    ];
    let statuses: Vec<u16> = futures::stream::iter(orders.iter().chain(outside.iter()))
        .map(|(id, date)| {
            let a = &a;
            async move { a.create_order("u-1", order_body(id, date, 1)).await.status }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    for (id, date) in [("b-1", "2026-09-15"), ("b-2", "2026-10-01")] {
        assert_eq!(
            b.create_order("u-1", order_body(id, date, 1)).await.status,
            201
        );
    }

    // the expected listing: newest date first, then orderId descending (the GSI1 sort key)
    orders.sort_by(|x, y| (&y.1, &y.0).cmp(&(&x.1, &x.0)));
    let expected: Vec<String> = orders.iter().map(|(id, _)| id.clone()).collect();

    // WHEN the whole range is walked at page sizes 7 and 100
    // THEN every order in the range appears exactly once, newest first, and nothing else
    for limit in [7, 100] {
        let got = a.walk_orders("2026-08-01", "2026-10-31", limit).await;
        assert_eq!(got.len(), 1000, "limit {limit}");
        assert_eq!(
            got.iter().collect::<HashSet<_>>().len(),
            1000,
            "duplicates at limit {limit}"
        );
        assert_eq!(got, expected, "limit {limit}");
    }

    // AND a page reads only the months it needs: the newest month's N = 4 partitions, concurrently,
    // not months × N (the newest month alone holds more than 50 orders)
    h.requests.reset();
    let r = a
        .list_orders(&[
            ("from", "2026-08-01"),
            ("to", "2026-10-31"),
            ("limit", "50"),
        ])
        .await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 50);
    assert_eq!(
        h.requests.by_operation(),
        HashMap::from([("Query".into(), 4)])
    );
    assert!(
        h.requests
            .peak_in_flight
            .load(std::sync::atomic::Ordering::SeqCst)
            > 1
    );

    // AND page size 1 over five days (55 orders) walks them exactly once, in order
    let subset: Vec<String> = orders
        .iter()
        .filter(|(_, d)| ("2026-09-10".to_owned()..="2026-09-14".to_owned()).contains(d))
        .map(|(id, _)| id.clone())
        .collect();
    assert!(subset.len() > 50);
    assert_eq!(a.walk_orders("2026-09-10", "2026-09-14", 1).await, subset);

    // AND a one-day range inside one month lists only that day
    let one_day = a.walk_orders("2026-10-31", "2026-10-31", 100).await;
    assert_eq!(
        one_day.len(),
        orders.iter().filter(|(_, d)| d == "2026-10-31").count()
    );

    // AND the other tenant lists only its own two orders
    assert_eq!(
        b.walk_orders("2026-01-01", "2026-12-31", 100).await,
        vec!["b-2".to_owned(), "b-1".to_owned()]
    );

    // AND a cursor is refused when edited, reused for another range, or used by another tenant
    let first = a
        .list_orders(&[("from", "2026-08-01"), ("to", "2026-10-31"), ("limit", "5")])
        .await;
    let cursor = first.body["nextCursor"].as_str().unwrap().to_owned();
    let mut tampered = cursor.clone();
    tampered.insert(5, 'A');
    for (who, from, c) in [
        (&a, "2026-08-01", tampered.as_str()),
        (&a, "2026-08-02", cursor.as_str()),
        (&b, "2026-08-01", cursor.as_str()),
        (&a, "2026-08-01", "not-a-cursor"),
    ] {
        assert_field(
            &who.list_orders(&[("from", from), ("to", "2026-10-31"), ("cursor", c)])
                .await,
            "cursor",
        );
    }
}

#[tokio::test]
async fn bad_listing_parameters_answer_400_naming_the_field() {
    let h = Harness::new().await;
    let a = Tenant::with_shards(&h, "params", 2).await;
    for (query, field) in [
        (vec![("to", "2026-01-31")], "from"),
        (vec![("from", "2026-01-01")], "to"),
        (vec![("from", "2026-02-30"), ("to", "2026-03-01")], "from"),
        (vec![("from", "2026-01-01"), ("to", "2026-1-31")], "to"),
        (vec![("from", "2026-02-01"), ("to", "2026-01-31")], "from"),
        (vec![("from", "2024-01-01"), ("to", "2026-01-01")], "to"),
        (
            vec![("from", "2026-01-01"), ("to", "2026-01-31"), ("limit", "0")],
            "limit",
        ),
    ] {
        assert_field(&a.list_orders(&query).await, field);
    }
    // 24 calendar months is the longest range
    let r = a
        .list_orders(&[("from", "2025-01-01"), ("to", "2026-12-31")])
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, json!({"items": [], "nextCursor": null}));
}

#[tokio::test]
async fn a_transfer_code_is_redeemed_once_expires_and_stays_in_its_tenant() {
    // GIVEN a user with a fresh transfer code
    let h = Harness::new().await;
    let (a, b) = Tenant::two(&h, ["codes", "thief"]).await;
    a.user("u-1", "Owner", "owner@example.com").await;
    let now = h.app.clock.now_millis() / 1000;
    let r = a.create_code("u-1").await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["expiresAt"], now + 900);
    let code = r.body["code"].as_str().unwrap().to_owned();
    assert_eq!(code.len(), 32);
    assert!(code.bytes().all(|c| c.is_ascii_hexdigit()));

    // WHEN it is redeemed 10 times concurrently
    let results: Vec<Resp> = futures::future::join_all((0..10).map(|_| a.redeem(&code))).await;

    // THEN exactly one redeem succeeds, with the user id, and the others get 404
    let ok: Vec<&Resp> = results.iter().filter(|r| r.status == 200).collect();
    assert_eq!(ok.len(), 1, "{results:?}");
    assert_eq!(ok[0].body, json!({"userId": "u-1"}));
    assert_eq!(results.iter().filter(|r| r.status == 404).count(), 9);
    a.redeem(&code).await.assert_problem(404);

    // AND another tenant can never redeem A's code, which stays valid for A
    let code = a.code_for("u-1").await;
    b.redeem(&code).await.assert_problem(404);
    assert_eq!(a.redeem(&code).await.status, 200);

    // AND an expired code is not redeemable
    let code = a.code_for("u-1").await;
    h.clock.advance_seconds(900);
    a.redeem(&code).await.assert_problem(404);

    // AND codes are unique, unknown users get none, bad codes are 400; nothing is written
    assert_ne!(a.code_for("u-1").await, a.code_for("u-1").await);
    let before = h.all_items().await.len();
    a.create_code("u-404").await.assert_problem(404);
    assert_field(&a.create_code("u#1").await, "userId");
    for bad in [
        "xyz",
        &code.to_uppercase(),
        &code[..31],
        &format!("{code}0"),
        "0123456789abcdef0123456789abcdeg",
    ] {
        assert_field(&a.redeem(bad).await, "code");
    }
    assert_eq!(h.all_items().await.len(), before);
}

#[tokio::test]
async fn an_integration_token_expires_and_stays_in_its_tenant() {
    // GIVEN a token for github that expires in an hour
    let h = Harness::new().await;
    let (a, b) = Tenant::two(&h, ["tokens", "spy"]).await;
    let now = h.app.clock.now_millis() / 1000;
    let r = a
        .put_token(
            "github",
            json!({"token": "ghp_secret", "expiresAt": now + 3600}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body,
        json!({"service": "github", "expiresAt": now + 3600})
    );

    // THEN the tenant reads it; another tenant does not find it
    let r = a.get_token("github").await;
    assert_eq!(
        r.body,
        json!({"service": "github", "token": "ghp_secret", "expiresAt": now + 3600})
    );
    b.get_token("github").await.assert_problem(404);
    a.get_token("gitlab").await.assert_problem(404);

    // AND replacing it takes effect; once expired it is 404 (before TTL deletes it)
    a.put_token("github", json!({"token": "ghp_new", "expiresAt": now + 60}))
        .await;
    assert_eq!(a.get_token("github").await.body["token"], "ghp_new");
    h.clock.advance_seconds(60);
    a.get_token("github").await.assert_problem(404);
    assert_eq!(h.data_items().await.len(), 1, "the item waits for TTL");

    // AND bad input is 400 naming the field, and nothing is written
    let now = h.app.clock.now_millis() / 1000;
    let before = h.all_items().await;
    for (service, body, field) in [
        ("s", json!({"token": "t", "expiresAt": now}), "expiresAt"),
        (
            "s",
            json!({"token": "t", "expiresAt": now + 367 * 86400}),
            "expiresAt",
        ),
        ("s", json!({"token": "t", "expiresAt": -5}), "expiresAt"),
        ("s", json!({"token": "", "expiresAt": now + 60}), "token"),
        (
            "s",
            json!({"token": "x".repeat(4097), "expiresAt": now + 60}),
            "token",
        ),
        ("s", json!({"expiresAt": now + 60}), "token"),
        ("s", json!({"token": "t"}), "expiresAt"),
        (
            "s",
            json!({"token": "t", "expiresAt": now + 60, "x": 1}),
            "x",
        ),
        (
            "a#b",
            json!({"token": "t", "expiresAt": now + 60}),
            "service",
        ),
    ] {
        assert_field(&a.put_token(service, body).await, field);
    }
    assert_eq!(h.all_items().await.len(), before.len());
    let r = a
        .put_token(
            "s",
            json!({"token": "x".repeat(4096), "expiresAt": now + 366 * 86400}),
        )
        .await;
    assert_eq!(
        r.status, 200,
        "the limits themselves are accepted: {}",
        r.body
    );
}

#[tokio::test]
async fn bad_user_input_answers_400_naming_the_field_and_writes_nothing() {
    let h = Harness::new().await;
    let a = Tenant::new(&h, "badusers").await;
    for (id, body, field) in [
        (
            "u-1",
            json!({"name": "A", "email": "not-an-email"}),
            "email",
        ),
        (
            "u-1",
            json!({"name": "A", "email": "a#b@example.com"}),
            "email",
        ),
        ("u-1", json!({"name": "A", "email": "a@example.c"}), "email"),
        (
            "u-1",
            json!({"name": "A", "email": format!("{}@example.com", "a".repeat(250))}),
            "email",
        ),
        ("u-1", json!({"name": "", "email": "a@example.com"}), "name"),
        ("u-1", json!({"email": "a@example.com"}), "name"),
        ("u-1", json!({"name": "A"}), "email"),
        (
            "u-1",
            json!({"name": "A", "email": "a@example.com", "role": "admin"}),
            "role",
        ),
        (
            "u#1",
            json!({"name": "A", "email": "a@example.com"}),
            "userId",
        ),
    ] {
        assert_field(&a.put_user(id, body).await, field);
    }
    assert_field(&a.find(&[]).await, "email");
    assert_field(&a.find_email("nope").await, "email");
    assert!(h.data_items().await.is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn transfer_codes_and_tokens_never_reach_the_log() {
    // GIVEN logs captured in the production JSON format
    let (logs, _guard) = integration::CapturedLogs::install();
    let h = Harness::new().await;
    let a = Tenant::new(&h, "quiet").await;
    a.user("u-1", "Quiet", "quiet@example.com").await;
    let token = "tok-secret-5d1e9b";
    let now = h.app.clock.now_millis() / 1000;

    // WHEN codes are created and redeemed (twice) and a token is stored and read, through `respond`
    let run = |ev: lambda_http::Request, bin: &'static str, route: &'static str| {
        let h = &h;
        async move {
            let handled = integration::dispatch(&h.app, bin, ev);
            let r = shared::service::runtime::respond("req".into(), route.into(), handled).await;
            resp(Ok(r))
        }
    };
    let created = run(
        h.caller(&a.auth)
            .request("create-transfer-code", &[("userId", "u-1")], None),
        "create-transfer-code",
        "POST /users/{userId}/transfer-code",
    )
    .await;
    let code = created.body["code"].as_str().unwrap().to_owned();
    for want in [200, 404] {
        let r = run(
            h.caller(&a.auth)
                .request("redeem-transfer-code", &[("code", &code)], None),
            "redeem-transfer-code",
            "POST /transfer-codes/{code}/redeem",
        )
        .await;
        assert_eq!(r.status, want);
    }
    run(
        h.caller(&a.auth).request(
            "put-integration-token",
            &[("service", "github")],
            Some(json!({"token": token, "expiresAt": now + 60})),
        ),
        "put-integration-token",
        "PUT /integrations/{service}/token",
    )
    .await;
    let r = run(
        h.caller(&a.auth)
            .request("get-integration-token", &[("service", "github")], None),
        "get-integration-token",
        "GET /integrations/{service}/token",
    )
    .await;
    assert_eq!(r.body["token"], token);

    // THEN the log has one line per request and neither the code nor the token
    let text = logs.text();
    assert_eq!(text.matches("\"request\"").count(), 5, "{text}");
    assert!(!text.contains(&code), "{text}");
    assert!(!text.contains(token), "{text}");
}

/// The e2e order (scripts/e2e.sh) of this crate's sample events, with the statuses it expects.
const SAMPLE_EVENTS: [(&str, u16); 10] = [
    ("put-user", 201),
    ("get-user", 200),
    ("find-user-by-email", 200),
    ("create-order", 201),
    ("get-order", 200),
    ("list-tenant-orders", 200),
    ("create-transfer-code", 201),
    ("redeem-transfer-code", 404),
    ("put-integration-token", 200),
    ("get-integration-token", 200),
];

#[tokio::test]
async fn the_sample_events_answer_the_e2e_statuses_in_order_on_an_empty_table() {
    // GIVEN an empty table where tenant acme is onboarded, at the time the events were sent
    let h = Harness::new().await;
    onboard(&h, "acme", 4).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../events");
    for (bin, want) in SAMPLE_EVENTS {
        let raw = std::fs::read_to_string(root.join(format!("{bin}.json"))).unwrap();
        let sent: Value = serde_json::from_str(&raw).unwrap();
        h.clock
            .set_millis(sent["requestContext"]["timeEpoch"].as_u64().unwrap());
        let req = lambda_http::request::from_str(&raw).unwrap();
        // WHEN each event is handled by its function (the event as sent: its own claims)
        let r = h.tenant("acme").send(bin, req).await;
        // THEN it answers what scripts/e2e.sh expects
        assert_eq!(r.status, want, "{bin}: {}", r.body);
        if bin == "list-tenant-orders" {
            assert_eq!(r.body["items"][0]["orderId"], "ord-1001");
        }
    }
}
