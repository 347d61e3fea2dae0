//! The eight session access patterns against DynamoDB Local, with a child's request count, expiry, paging,
//! children and isolation.

use shared::identity::keys::{primary_key, raw_key};
use std::collections::HashSet;

use integration::{Auth, Harness, Resp};
use serde_json::{json, Value};
use sessions::*;

integration::tenant_client!();

/// The id of the session a create answered (201).
fn created(r: Resp) -> String {
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["sessionId"].as_str().unwrap().to_owned()
}

impl<'a> Tenant<'a> {
    async fn create(&self, body: Value) -> Resp {
        self.client().create_session(body).await
    }

    async fn create_id(&self, customer: &str) -> String {
        created(self.create(json!({"customerId": customer})).await)
    }

    async fn create_child(&self, customer: &str, parent: &str) -> Resp {
        self.create(json!({"customerId": customer, "parentSessionId": parent}))
            .await
    }

    /// Creates `n` children of `parent` for `customer`: their ids, in order.
    async fn create_children(&self, customer: &str, parent: &str, n: usize) -> Vec<String> {
        let mut ids = Vec::new();
        for _ in 0..n {
            ids.push(created(self.create_child(customer, parent).await));
        }
        ids
    }

    async fn get(&self, id: &str) -> Resp {
        self.client().get_session_by_session_id(id).await
    }

    async fn expire(&self, id: &str) -> Resp {
        self.client().expire_session(id).await
    }

    async fn children(&self, id: &str, query: &[(&str, &str)]) -> Resp {
        self.client()
            .query(query)
            .get_child_sessions_by_session_id(id)
            .await
    }

    async fn parent_of(&self, child: &str) -> Resp {
        self.client().get_session_by_child_session_id(child).await
    }

    async fn last_login(&self, customer: &str) -> Resp {
        self.client()
            .get_last_login_time_by_customer_id(customer)
            .await
    }

    async fn session_of_customer(&self, customer: &str, id: &str) -> Resp {
        self.client()
            .get_session_id_by_customer_id(customer, id)
            .await
    }

    async fn sessions_of(&self, customer: &str, query: &[(&str, &str)]) -> Resp {
        self.client()
            .query(query)
            .get_sessions_by_customer_id(customer)
            .await
    }

    /// Walks a customer's sessions page by page and returns the ids in order.
    async fn all_sessions_of(&self, customer: &str, limit: u32) -> Vec<String> {
        let pages = self
            .client()
            .pages(&[("limit", &limit.to_string())], |c| {
                c.get_sessions_by_customer_id(customer)
            })
            .await;
        let mut ids = Vec::new();
        for (n, page) in pages.iter().enumerate() {
            let page = page.ids("sessionId");
            assert!(page.len() <= limit as usize);
            if n + 1 < pages.len() {
                assert!(!page.is_empty(), "a page with a cursor must not be empty");
            }
            ids.extend(page);
        }
        ids
    }
}

fn ids_of(r: &Resp) -> Vec<String> {
    r.ids("sessionId")
}

/// Every route's common case is counted in `request_counts.rs`; this is create-session's other case.
#[tokio::test]
async fn creating_a_child_session_sends_a_read_of_its_parent_and_one_transaction() {
    // GIVEN a tenant with one session, credentials already cached
    let h = Harness::new().await;
    let t = Tenant::new(&h, "count").await;
    let root = t.create_id("c1").await;
    h.requests.reset();
    // WHEN a child of it is created
    let child = t.create_child("c1", &root).await;
    assert_eq!(child.status, 201, "{}", child.body);
    // THEN it sent what routes.yaml's note says: a consistent GetItem and a TransactWriteItems
    let expected = [
        ("GetItem".to_owned(), 1),
        ("TransactWriteItems".to_owned(), 1),
    ];
    assert_eq!(h.requests.by_operation(), expected.into());
}

#[tokio::test]
async fn a_child_never_outlives_its_parent_and_its_pages_end_with_it() {
    // GIVEN a parent created now and, half its lifetime later, a child with three siblings
    let h = Harness::new().await;
    let t = Tenant::new(&h, "cap").await;
    let root = t.create_id("c").await;
    let parent_expires = t.get(&root).await.body["expiresAt"].clone();
    h.clock.advance_seconds(1800);
    let mut children = Vec::new();
    for _ in 0..4 {
        let r = t.create_child("c", &root).await;
        assert_eq!(r.status, 201, "{}", r.body);
        children.push(r.body);
    }
    // THEN each child expires no later than its parent
    for c in &children {
        assert_eq!(c["expiresAt"], parent_expires);
    }
    // AND once the parent has expired, a cursor page of its children answers 404, like the first
    let page = t.children(&root, &[("limit", "2")]).await;
    let cursor = page.body["nextCursor"].as_str().unwrap().to_owned();
    h.clock.advance_seconds(1801);
    t.children(&root, &[("limit", "2"), ("cursor", cursor.as_str())])
        .await
        .assert_problem(404);
    t.children(&root, &[]).await.assert_problem(404);
}

#[tokio::test]
async fn every_pattern_answers_for_its_own_data() {
    // GIVEN a session with a child
    let h = Harness::new().await;
    let t = Tenant::new(&h, "pat").await;
    let root = t.create_id("alice").await;
    let child = created(t.create_child("alice", &root).await);
    // THEN every read pattern finds them
    assert_eq!(t.get(&root).await.body["customerId"], "alice");
    assert_eq!(ids_of(&t.children(&root, &[]).await), vec![child.clone()]);
    let parent = t.parent_of(&child).await;
    assert_eq!(parent.body["sessionId"], root.as_str());
    assert_eq!(parent.body["childSessionId"], child.as_str());
    assert_eq!(t.last_login("alice").await.body["sessionId"], root.as_str());
    assert_eq!(t.session_of_customer("alice", &root).await.status, 200);
    t.session_of_customer("bob", &root)
        .await
        .assert_problem(404);
    assert_eq!(
        ids_of(&t.sessions_of("alice", &[]).await),
        vec![root.clone()]
    );
    t.last_login("bob").await.assert_problem(404);
    t.parent_of(&root).await.assert_problem(404);
}

#[tokio::test]
async fn last_login_is_the_latest_even_when_created_out_of_id_order() {
    // GIVEN sessions created in the order t+3s, t+1s, t+2s (so creation order differs from id order)
    let h = Harness::new().await;
    let t = Tenant::new(&h, "last").await;
    let t0 = integration::real_now_millis();
    let mut by_time = Vec::new();
    for offset in [3_000, 1_000, 2_000] {
        h.clock.set_millis(t0 + offset);
        by_time.push((offset, t.create_id("c").await));
    }
    h.clock.set_millis(t0 + 4_000);
    // WHEN the last login is asked for
    let r = t.last_login("c").await;
    // THEN it is the session stamped latest, with its time
    let latest = &by_time.iter().max_by_key(|(o, _)| *o).unwrap().1;
    assert_eq!(r.body["sessionId"], latest.as_str(), "{}", r.body);
    assert_eq!(
        r.body["lastLoginTime"],
        shared::identity::clock::rfc3339(t0 + 3_000)
    );
    // AND the list is newest first
    let mut expected: Vec<_> = by_time.clone();
    expected.sort_by_key(|(o, _)| std::cmp::Reverse(*o));
    assert_eq!(
        ids_of(&t.sessions_of("c", &[]).await),
        expected.into_iter().map(|(_, id)| id).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn pagination_over_250_sessions_returns_each_exactly_once() {
    // GIVEN 250 sessions of one customer (and noise from another customer)
    let h = Harness::new().await;
    let t = Tenant::new(&h, "pages").await;
    let mut created = HashSet::new();
    for i in 0..250 {
        created.insert(t.create_id("big").await);
        if i % 50 == 0 {
            t.create_id("other").await;
        }
    }
    // WHEN they are listed with page sizes 1, 7 and 100
    for limit in [1, 7, 100] {
        let ids = t.all_sessions_of("big", limit).await;
        // THEN every session comes exactly once, newest first
        assert_eq!(ids.len(), 250, "limit {limit}");
        assert_eq!(
            ids.iter().cloned().collect::<HashSet<_>>(),
            created,
            "limit {limit}"
        );
        let mut sorted = ids.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        assert_eq!(ids, sorted, "limit {limit}: newest first");
    }
}

#[tokio::test]
async fn expired_sessions_are_never_returned_and_never_shorten_a_page() {
    // GIVEN 5 long-lived sessions, then 20 newer ones that expire after 60 s
    let h = Harness::new().await;
    let short = Harness::on_table(&h.admin, &h.table, 60, &h.sts_endpoint).await;
    let tenant = integration::onboarded(&h, "exp").await;
    let long_lived = Tenant {
        h: &h,
        auth: Auth::Tenant(tenant.clone()),
    };
    let short_lived = Tenant {
        h: &short,
        auth: Auth::Tenant(tenant.clone()),
    };
    let t0 = integration::real_now_millis();
    h.clock.set_millis(t0);
    let mut live = Vec::new();
    for _ in 0..5 {
        live.push(long_lived.create_id("c").await);
    }
    short.clock.set_millis(t0 + 10_000);
    let mut doomed = Vec::new();
    for _ in 0..20 {
        doomed.push(short_lived.create_id("c").await);
    }
    let child = short_lived.create_child("c", &live[0]).await;
    assert_eq!(child.status, 201);
    let child = child.body["sessionId"].as_str().unwrap().to_owned();
    // WHEN reading two minutes later (the newest 20 and the child have expired)
    h.clock.set_millis(t0 + 120_000);
    // THEN pages of 3 are full, hold only live sessions, and cover all of them
    let r = long_lived.sessions_of("c", &[("limit", "3")]).await;
    assert_eq!(
        ids_of(&r).len(),
        3,
        "a page must not come back short: {}",
        r.body
    );
    let mut all = long_lived.all_sessions_of("c", 3).await;
    all.sort();
    live.sort();
    assert_eq!(all, live);
    // AND no read pattern returns an expired item
    long_lived.get(&doomed[0]).await.assert_problem(404);
    long_lived
        .session_of_customer("c", &doomed[0])
        .await
        .assert_problem(404);
    long_lived.parent_of(&child).await.assert_problem(404);
    assert!(ids_of(&long_lived.children(&live[0], &[]).await).is_empty());
    assert_eq!(
        long_lived.last_login("c").await.body["sessionId"],
        live.iter().max().unwrap().as_str()
    );
    long_lived.expire(&doomed[1]).await.assert_problem(404);
}

#[tokio::test]
async fn expiring_a_parent_removes_its_children_in_the_same_transaction() {
    // GIVEN a session with three children
    let h = Harness::new().await;
    let t = Tenant::new(&h, "tree").await;
    let root = t.create_id("c").await;
    let kids = t.create_children("c", &root, 3).await;
    assert_eq!(ids_of(&t.children(&root, &[]).await).len(), 3);
    h.requests.reset();
    // WHEN the parent is expired
    assert_eq!(t.expire(&root).await.status, 204);
    // THEN one transaction removed everything, and nothing of the session is left in the table
    assert_eq!(
        h.requests.by_operation().get("TransactWriteItems"),
        Some(&1)
    );
    assert!(h.data_items().await.is_empty());
    t.get(&root).await.assert_problem(404);
    for k in &kids {
        t.parent_of(k).await.assert_problem(404);
    }
    t.expire(&root).await.assert_problem(404);
}

#[tokio::test]
async fn a_child_under_a_missing_or_foreign_parent_is_404_and_writes_nothing() {
    let h = Harness::new().await;
    let (a, b) = Tenant::two(&h, ["pa", "pb"]).await;
    let a_root = a.create_id("c").await;
    let before = h.all_items().await.len();
    // a parent that never existed
    let missing =
        shared::identity::ids::SessionId::new_at(integration::real_now_millis()).to_string();
    a.create_child("c", &missing).await.assert_problem(404);
    // another tenant's parent
    b.create_child("c", &a_root).await.assert_problem(404);
    // the right parent, but another customer's
    a.create_child("someone-else", &a_root)
        .await
        .assert_problem(404);
    assert_eq!(h.all_items().await.len(), before);
}

#[tokio::test]
async fn a_child_under_an_expired_parent_is_404() {
    let h = Harness::new().await;
    let t = Tenant::new(&h, "old").await;
    let root = t.create_id("c").await;
    h.clock.advance_seconds(3601);
    t.create_child("c", &root).await.assert_problem(404);
    assert_eq!(h.data_items().await.len(), 1);
}

#[tokio::test]
async fn tenant_b_can_neither_see_nor_expire_tenant_a_sessions() {
    // GIVEN tenant A's session with a child
    let h = Harness::new().await;
    let (a, b) = Tenant::two(&h, ["a", "b"]).await;
    let root = a.create_id("shared-customer").await;
    let child = created(a.create_child("shared-customer", &root).await);
    // WHEN tenant B uses A's ids on every route, even with the same customer id
    b.get(&root).await.assert_problem(404);
    b.expire(&root).await.assert_problem(404);
    b.children(&root, &[]).await.assert_problem(404);
    b.parent_of(&child).await.assert_problem(404);
    b.last_login("shared-customer").await.assert_problem(404);
    b.session_of_customer("shared-customer", &root)
        .await
        .assert_problem(404);
    assert!(ids_of(&b.sessions_of("shared-customer", &[]).await).is_empty());
    // THEN A's session is intact
    assert_eq!(a.get(&root).await.status, 200);
    assert_eq!(ids_of(&a.children(&root, &[]).await), vec![child]);
}

#[tokio::test]
async fn cursors_tampered_with_or_from_another_tenant_or_route_are_400() {
    // GIVEN a cursor of tenant A's customer listing
    let h = Harness::new().await;
    let (a, b) = Tenant::two(&h, ["ca", "cb"]).await;
    for _ in 0..3 {
        a.create_id("c").await;
        b.create_id("c").await;
    }
    let root = a.create_id("c").await;
    for _ in 0..3 {
        a.create_child("c", &root).await;
    }
    let cursor = a.sessions_of("c", &[("limit", "1")]).await.body["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let child_cursor = a.children(&root, &[("limit", "1")]).await.body["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    h.requests.reset();
    // WHEN it is tampered with, replayed by tenant B, used for another customer or another route
    let mut flipped = cursor.clone().into_bytes();
    flipped[10] = if flipped[10] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).unwrap();
    let cases = [
        a.sessions_of("c", &[("cursor", &flipped)]).await,
        a.sessions_of("c", &[("cursor", "not-a-cursor")]).await,
        a.sessions_of("other", &[("cursor", &cursor)]).await,
        b.sessions_of("c", &[("cursor", &cursor)]).await,
        a.sessions_of("c", &[("cursor", &child_cursor)]).await,
        a.children(&root, &[("cursor", &cursor)]).await,
    ];
    // THEN each is a 400 naming the cursor, and no request reached DynamoDB
    for r in &cases {
        r.assert_problem(400);
        assert_eq!(r.body["field"], "cursor");
    }
    assert_eq!(h.requests.total(), 0);
    // AND a forged cursor naming tenant B's keys is refused before the guard is even needed
    let forged_key = primary_key(
        raw_key(b.name(), format!("SESSION#{root}")),
        raw_key(b.name(), "CUSTOMER#c"),
    );
    let forged = shared::identity::cursor::encode(
        &integration::test_cursor_keys(),
        &shared::identity::ids::TenantId::parse(&a.name()).unwrap(),
        get_sessions_by_customer_id::ROUTE,
        &forged_key,
    );
    let r = a.sessions_of("c", &[("cursor", &forged)]).await;
    r.assert_problem(400);
    assert_eq!(r.body["field"], "cursor");
}

#[tokio::test]
async fn bad_input_is_a_precise_400_and_writes_nothing() {
    let h = Harness::new().await;
    let t = Tenant::new(&h, "bad").await;
    let cases = [
        (json!({}), Some("customerId")),
        (json!({"customerId": 7}), Some("customerId")),
        (json!({"customerId": "a#b"}), Some("customerId")),
        (json!({"customerId": "c", "extra": 1}), Some("extra")),
        (
            json!({"customerId": "c", "parentSessionId": "not-a-uuid"}),
            Some("parentSessionId"),
        ),
        (
            json!({"customerId": "c", "state": "x".repeat(5000)}),
            Some("state"),
        ),
    ];
    for (body, field) in cases {
        let r = t.create(body.clone()).await;
        r.assert_problem(400);
        if let Some(f) = field {
            assert_eq!(r.body["field"], f, "{body}: {}", r.body);
        }
    }
    let big = h
        .caller(&t.auth)
        .create_session(json!({"customerId": "c", "state": "x".repeat(70_000)}))
        .await;
    big.assert_problem(413);
    let bare_tenant = format!("{}x", shared::identity::keys::TENANT_SEGMENT);
    t.get(&bare_tenant).await.assert_problem(400);
    t.sessions_of("c", &[("limit", "0")])
        .await
        .assert_problem(400);
    t.sessions_of("c", &[("limit", "101")])
        .await
        .assert_problem(400);
    t.sessions_of("a*", &[]).await.assert_problem(400);
    assert!(h.data_items().await.is_empty());
}

#[tokio::test]
async fn children_page_newest_first_and_an_unknown_parent_is_404() {
    // GIVEN a session with five children
    let h = Harness::new().await;
    let t = Tenant::new(&h, "kids").await;
    let root = t.create_id("c").await;
    let mut kids = t.create_children("c", &root, 5).await;
    // WHEN they are listed two at a time
    let pages = t
        .client()
        .pages(&[("limit", "2")], |c| {
            c.get_child_sessions_by_session_id(&root)
        })
        .await;
    let seen: Vec<String> = pages.iter().flat_map(ids_of).collect();
    // THEN each child comes once, newest (highest UUIDv7) first
    kids.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, kids);
    // AND an unknown parent is 404, while a parent without children is an empty list
    let unknown =
        shared::identity::ids::SessionId::new_at(integration::real_now_millis()).to_string();
    t.children(&unknown, &[]).await.assert_problem(404);
    let lonely = t.create_id("c").await;
    assert!(ids_of(&t.children(&lonely, &[]).await).is_empty());
}

#[tokio::test]
async fn thousands_of_expired_sessions_ahead_of_a_live_one_cost_a_bounded_number_of_queries() {
    use aws_sdk_dynamodb::types::{AttributeValue::N, AttributeValue::S, PutRequest, WriteRequest};
    use shared::identity::ids::{EntityId, SessionId, TenantId};
    use shared::identity::keys::{customer_sk, session_pk};
    // GIVEN one live session for customer c, then 3,000 newer ones that have expired (TTL deletion
    // lags, so they are still in the table)
    let h = Harness::new().await;
    let t = Tenant::new(&h, "expired").await;
    let live = t.create_id("c").await;
    let tenant = TenantId::parse(&t.name()).unwrap();
    let customer = EntityId::parse("c").unwrap();
    let now_ms = integration::real_now_millis();
    let expired: Vec<WriteRequest> = (0..3000u64)
        .map(|i| {
            let id = SessionId::new_at(now_ms + 1_000 + i);
            let item = [
                ("PK", S(session_pk(&tenant, &id))),
                ("SK", S(customer_sk(&tenant, &customer))),
                ("kind", S("SESSION".into())),
                ("tenantId", S(tenant.to_string())),
                ("sessionId", S(id.to_string())),
                ("customerId", S("c".into())),
                ("lastLoginTime", S("2026-01-01T00:00:00.000Z".into())),
                ("expiresAt", N("1".into())),
                ("childCount", N("0".into())),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
            let put = PutRequest::builder().set_item(Some(item)).build().unwrap();
            WriteRequest::builder().put_request(put).build()
        })
        .collect();
    for batch in expired.chunks(25) {
        h.admin
            .batch_write_item()
            .request_items(&h.table, batch.to_vec())
            .send()
            .await
            .unwrap();
    }
    let max = shared::store::client::query::MAX_ROUNDS as usize;
    // WHEN the last login is asked for, THEN it is the live session, within the Query budget
    h.requests.reset();
    let r = t.last_login("c").await;
    assert_eq!(r.body["sessionId"], live.as_str(), "{}", r.body);
    let queries = h.requests.by_operation()["Query"];
    assert!(queries <= max, "{queries} Queries");
    // AND the session list walks to it: only the live session, each page within the budget
    let mut cursor: Option<String> = None;
    let mut found = Vec::new();
    loop {
        h.requests.reset();
        let mut q = vec![("limit", "25")];
        if let Some(c) = cursor.as_deref() {
            q.push(("cursor", c));
        }
        let page = t.sessions_of("c", &q).await;
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(h.requests.by_operation()["Query"] <= max);
        found.extend(ids_of(&page));
        match page.body["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(found, vec![live]);
}
