//! Online re-sharding (`PATCH /tenants/{tenantId}` `{shardCount}`): a tenant's products and HR items
//! move to a new shard count while writers update and delete them and readers walk their lists.
//! Every walk during a migration returns each live item exactly once, at its latest version; the
//! migrator, killed part-way again and again, finishes when called again; afterwards the raw table
//! holds every item in the new layout only.

use shared::identity::keys::raw_key;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use integration::{Auth, Harness, Resp};
use serde_json::{json, Value};
use shared::identity::clock::Clock;
use shared::identity::shard::shard_for;
use shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS;

const PRODUCTS: usize = 2_000;
const EMPLOYEES: usize = 200;
const DEPARTMENTS: usize = 10;

use integration::operator;

use crate::churn::{seed, version_of, walk_while, write_while, Kind, World, EMPLOYEE, PRODUCT};

impl World<'_> {
    async fn reshard(&self, to: u32) -> Resp {
        self.h.operator().reshard(&self.tenant, to).await
    }

    /// Every raw item of `kind` in the table: its id, and the shard of its `PK`.
    async fn raw(&self, kind: Kind) -> Vec<(String, u32)> {
        self.raw_of(kind.partition, kind.sk_kind).await
    }

    async fn raw_of(&self, partition: &str, sk_kind: &str) -> Vec<(String, u32)> {
        let prefix = raw_key(&self.tenant, format!("{partition}#"));
        let sk_prefix = raw_key(&self.tenant, format!("{sk_kind}#"));
        self.h
            .items_under(&prefix)
            .await
            .into_iter()
            .filter_map(|item| {
                let pk = item["PK"].as_s().unwrap();
                let sk = item["SK"].as_s().unwrap();
                let id = sk.strip_prefix(&sk_prefix)?.to_owned();
                Some((id, pk[prefix.len()..].parse().unwrap()))
            })
            .collect()
    }

    /// After a migration to `shards`: the record says so, the raw table holds every item once, on
    /// its shard among `shards`, and the lists show exactly the expected items and versions.
    async fn assert_settled(&self, shards: u32) {
        let record = self.record().await;
        assert_eq!(record["shardCount"], shards, "{record}");
        assert!(record.get("migration").is_none(), "{record}");
        for kind in [PRODUCT, EMPLOYEE] {
            let expected = self.expected(kind);
            let raw = self.raw(kind).await;
            let extra: Vec<_> = raw
                .iter()
                .filter(|(id, _)| !expected.contains_key(id))
                .collect();
            assert!(
                extra.is_empty(),
                "{}: in the table but not live: {extra:?}",
                kind.list
            );
            assert_eq!(
                raw.len(),
                expected.len(),
                "{}: one raw item per live item",
                kind.list
            );
            for (id, shard) in &raw {
                assert_eq!(
                    *shard,
                    shard_for(id, shards),
                    "{id} is on its shard of {shards}"
                );
                assert!(
                    expected.contains_key(id),
                    "{id} was deleted but is in the table"
                );
            }
            for order in ["id", "unordered"] {
                let listed: BTreeMap<String, u64> =
                    self.walk(kind, order).await.into_iter().collect();
                assert_eq!(listed, expected, "{} {order}", kind.list);
            }
        }
        let departments = self.raw_of("HR", "DEPARTMENT").await;
        assert_eq!(departments.len(), DEPARTMENTS);
        for (id, shard) in departments {
            assert_eq!(shard, shard_for(&id, shards), "department {id}");
        }
    }
}

/// Runs the migrator to `to` by calls that are each killed after a few hundred milliseconds (the
/// first ones mid-step), until one answers 200. Returns how many calls were killed.
async fn migrate_with_kills(w: &World<'_>, to: u32) -> usize {
    // Mostly short calls (killed mid-step), and now and then a long one, so a slow machine still
    // makes progress.
    let budget = |attempt| match attempt % 4 {
        3 => Duration::from_secs(5),
        n => Duration::from_millis(150 + n * 150),
    };
    integration::step_to_end_with_kills("the migration", 2_000, budget, || w.reshard(to)).await
}

/// Starts a migration to `to` and lets its delay pass: 202 with the progress, writes still in the
/// old layout until the clock passes `writesMoveAt`.
async fn start(w: &World<'_>, from: u32, to: u32) {
    let r = w.reshard(to).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(
        r.retry_after.as_deref(),
        Some(MOVES_DELAY_SECONDS.to_string().as_str())
    );
    assert_eq!(r.body["migration"]["fromShardCount"], from);
    assert_eq!(r.body["migration"]["toShardCount"], to);
    // Another count while this one runs: 409, nothing changed.
    w.reshard(to + 1).await.assert_problem(409);
    // The same call again: the same progress.
    let again = w.reshard(to).await;
    assert_eq!(again.status, 202);
    assert_eq!(again.body["migration"], r.body["migration"]);
    w.h.clock.advance_seconds(MOVES_DELAY_SECONDS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_migrations_under_writers_and_walkers_keep_every_item_exactly_once() {
    let (h, tenant) = Harness::with_tenant("grow", 4).await;
    let w = World::new(&h, &tenant);
    seed(&w, PRODUCTS, EMPLOYEES).await;
    w.assert_settled(4).await;

    // GIVEN an ordered walk begun before the migration, and an unordered one.
    let ordered = w.page(PRODUCT, "id", None).await;
    let unordered = w.page(PRODUCT, "unordered", None).await;
    let seeded_products = w.expected(PRODUCT);

    // WHEN the tenant moves from 4 to 16 shards while writers update, delete and create, and
    // readers walk both lists in both orders.
    start(&w, 4, 16).await;
    let ordered_next = ordered.body["nextCursor"].as_str().unwrap().to_owned();
    let r = w.page(PRODUCT, "id", Some(&ordered_next)).await;
    assert_eq!(
        r.status, 200,
        "an ordered cursor outlives the layout: {}",
        r.body
    );
    // A walk's cursor names a partition of the old layout: the walk goes on in id order from how
    // far it had come, and with its first page it has every product exactly once.
    assert_eq!(
        finish_walk(&w, &unordered).await,
        w.expected(PRODUCT).into_keys().collect::<Vec<_>>()
    );

    let migrating = AtomicBool::new(true);
    let walks = AtomicU64::new(0);
    let migrator = async {
        let killed = migrate_with_kills(&w, 16).await;
        migrating.store(false, Ordering::SeqCst);
        killed
    };
    let (killed, ..) = tokio::join!(
        migrator,
        write_while(&w, PRODUCT, PRODUCTS, 1, &migrating),
        write_while(&w, EMPLOYEE, EMPLOYEES, 1, &migrating),
        walk_while(&w, PRODUCT, "id", &migrating, &walks),
        walk_while(&w, PRODUCT, "unordered", &migrating, &walks),
        walk_while(&w, EMPLOYEE, "id", &migrating, &walks),
    );

    // THEN the migrator was killed part-way and still finished; the walks during it were exact.
    assert!(killed >= 3, "only {killed} migrator calls were killed");
    assert!(
        walks.load(Ordering::SeqCst) >= 3,
        "walks ran during the migration"
    );
    w.assert_settled(16).await;

    // WHEN the tenant moves from 16 down to 3 shards, with writes between the pages of walks and
    // the migrator's steps (each page then sees a state no write is changing).
    start(&w, 16, 3).await;
    let mut cursors: HashMap<(&str, &str), Option<String>> = HashMap::new();
    let mut seen: HashMap<(&str, &str), Vec<String>> = HashMap::new();
    let mut starts: HashMap<(&str, &str), BTreeMap<String, u64>> = HashMap::new();
    let mut round = 100u64;
    loop {
        let budget = Duration::from_millis(if round % 4 == 3 { 5_000 } else { 200 });
        let done = match tokio::time::timeout(budget, w.reshard(3)).await {
            Ok(r) if r.status == 200 => true,
            Ok(r) => {
                assert_eq!(r.status, 202, "{}", r.body);
                false
            }
            Err(_) => false,
        };
        if done {
            break;
        }
        for (kind, order) in [(PRODUCT, "id"), (PRODUCT, "unordered"), (EMPLOYEE, "id")] {
            let key = (kind.list, order);
            let cursor = cursors.entry(key).or_default().clone();
            if cursor.is_none() && seen.contains_key(&key) {
                continue; // this walk has ended
            }
            let expected = w.expected(kind);
            starts.entry(key).or_insert_with(|| expected.clone());
            let r = w.page(kind, order, cursor.as_deref()).await;
            assert_eq!(r.status, 200, "{}", r.body);
            for item in r.body["items"].as_array().unwrap() {
                let id = item[kind.id].as_str().unwrap().to_owned();
                // THEN each page holds the latest version of every item in it.
                assert_eq!(
                    expected.get(&id),
                    Some(&version_of(kind, item)),
                    "{} {order}: {id} not at its latest version",
                    kind.list
                );
                seen.entry(key).or_default().push(id);
            }
            seen.entry(key).or_default();
            cursors.insert(key, r.body["nextCursor"].as_str().map(str::to_owned));
        }
        // Writes between pages: an update, and a delete of an item not yet listed.
        round += 1;
        let n = (round as usize * 37) % PRODUCTS;
        w.put(PRODUCT, &format!("p-{n:04}"), round).await;
        w.put(EMPLOYEE, &format!("e-{:03}", n % EMPLOYEES), round)
            .await;
        if round.is_multiple_of(3) {
            let gone = format!("p-{:04}", (n + 500) % PRODUCTS);
            if !w.products.deleting().contains_key(&gone) {
                w.delete(PRODUCT, &gone).await;
            }
        }
    }
    // The walks begun during the migration go on after it, to their end, by the same cursors.
    for (kind, order) in [(PRODUCT, "id"), (PRODUCT, "unordered"), (EMPLOYEE, "id")] {
        let key = (kind.list, order);
        while let Some(cursor) = cursors.get(&key).cloned().flatten() {
            let r = w.page(kind, order, Some(&cursor)).await;
            assert_eq!(
                r.status, 200,
                "{} {order} after the migration: {}",
                kind.list, r.body
            );
            for item in r.body["items"].as_array().unwrap() {
                seen.entry(key)
                    .or_default()
                    .push(item[kind.id].as_str().unwrap().to_owned());
            }
            cursors.insert(key, r.body["nextCursor"].as_str().map(str::to_owned));
        }
    }
    // THEN no walk listed an item twice, and each listed every item live from its start to its end
    // (an item deleted during a walk may or may not appear).
    for ((list, order), ids) in &seen {
        let mut unique_ids = ids.clone();
        unique_ids.sort();
        unique_ids.dedup();
        assert_eq!(
            unique_ids.len(),
            ids.len(),
            "{list} {order}: an item listed twice"
        );
        let kind = if *list == PRODUCT.list {
            PRODUCT
        } else {
            EMPLOYEE
        };
        let live_now = w.expected(kind);
        for id in starts[&(*list, *order)].keys() {
            if live_now.contains_key(id) {
                assert!(
                    unique_ids.binary_search(id).is_ok(),
                    "{list} {order} missed {id}"
                );
            }
        }
    }
    w.assert_settled(3).await;
    // AND a walk's cursor from before both re-shardings still finishes (its layout is gone; the
    // rest of the walk is read in id order): no product twice, and every product that was there
    // when it began and still is
    let walked = finish_walk(&w, &unordered).await;
    let mut once = walked.clone();
    once.dedup();
    assert_eq!(once, walked, "a product came twice");
    for id in w.expected(PRODUCT).keys() {
        if seeded_products.contains_key(id) {
            assert!(walked.binary_search(id).is_ok(), "the walk missed {id}");
        }
    }
}

/// The ids of a walk's `first` page and of every page after it, sorted.
async fn finish_walk(w: &World<'_>, first: &Resp) -> Vec<String> {
    let mut seen = first.ids("productId");
    let mut cursor = first.body["nextCursor"].as_str().map(str::to_owned);
    while let Some(c) = cursor {
        let r = w.page(PRODUCT, "unordered", Some(&c)).await;
        assert_eq!(r.status, 200, "{}", r.body);
        seen.extend(r.ids("productId"));
        cursor = r.body["nextCursor"].as_str().map(str::to_owned);
    }
    seen.sort();
    seen
}

#[tokio::test]
async fn resharding_is_operator_only_validated_and_refused_while_offboarding() {
    let (h, tenant) = Harness::with_tenant("shape", 2).await;
    let patch = |body: Value, auth: Auth| {
        let h = &h;
        let tenant = tenant.clone();
        async move { h.caller(&auth).update_tenant(&tenant, body).await }
    };
    // A tenant user cannot re-shard, not even its own tenant.
    patch(json!({"shardCount": 8}), Auth::Tenant(tenant.clone()))
        .await
        .assert_problem(403);
    for bad in [
        json!({"shardCount": 0}),
        json!({"shardCount": 101}),
        json!({"shardCount": 8, "tier": "basic"}),
    ] {
        let r = patch(bad.clone(), operator()).await;
        r.assert_problem(400);
        assert_eq!(r.body["field"], "shardCount", "{bad}: {}", r.body);
    }
    // The same count: nothing to do.
    let same = patch(json!({"shardCount": 2}), operator()).await;
    assert_eq!(same.status, 200);
    assert!(same.body.get("migration").is_none());
    // An unknown tenant: 404.
    h.operator()
        .update_tenant("nobody-here", json!({"shardCount": 3}))
        .await
        .assert_problem(404);
    // While re-sharding: no offboarding and no export (items are moving between partitions).
    let r = patch(json!({"shardCount": 5}), operator()).await;
    assert_eq!(r.status, 202);
    let gone = h.operator().offboard_tenant(&tenant).await;
    gone.assert_problem(409);
    h.operator()
        .export_tenant(&tenant)
        .await
        .assert_problem(409);
    let view = h.operator().get_tenant(&tenant).await;
    assert_eq!(view.body["migration"]["toShardCount"], 5, "{}", view.body);
    assert_eq!(view.body["shardCount"], 2);
}

/// A product id whose shard among 4 differs from its shard among 16.
fn moving_id(prefix: &str, n: usize) -> String {
    (0..)
        .map(|i| format!("{prefix}-{n}-{i}"))
        .find(|id| shard_for(id, 4) != shard_for(id, 16))
        .unwrap()
}

#[tokio::test]
async fn a_write_that_chose_the_old_layout_never_leaves_a_second_copy() {
    // GIVEN a tenant moving from 4 to 16 shards, and two containers: A still before writesMoveAt
    // (writing the old layout), B after it (writing the new one)
    let (a, tenant) = Harness::with_tenant("race", 4).await;
    let b = a.another_container().await;
    b.clock.set_millis(a.clock.now_millis());
    let wa = World::new(&a, &tenant);
    let wb = World::new(&b, &tenant);
    for d in 0..DEPARTMENTS {
        let r = a
            .caller(&wa.auth())
            .put_department(&format!("d-{d}"), json!({"name": "D"}))
            .await;
        assert_eq!(r.status, 201);
    }
    assert_eq!(wa.reshard(16).await.status, 202);
    b.clock
        .advance_seconds(shared::store::lifecycle::resharding::WRITES_MOVE_DELAY_SECONDS + 1);

    let (x, y, z) = (moving_id("x", 0), moving_id("y", 1), moving_id("z", 2));
    // WHEN A and B write the same items, each in its own phase, in every order
    wa.put(PRODUCT, &x, 1).await; // A: old layout
    wb.put(PRODUCT, &x, 2).await; // B: moves it to the new layout
    wa.put(PRODUCT, &x, 3).await; // A: finds it there, and leaves it there
    wb.put(PRODUCT, &y, 1).await; // B: a new item, new layout
    wa.put(PRODUCT, &y, 2).await;
    wa.put(PRODUCT, &z, 1).await; // A: a new item, old layout
    wb.put(PRODUCT, &z, 2).await; // B: moves it
    let e = moving_id("e", 3);
    wa.put(EMPLOYEE, &e, 1).await;
    wb.put(EMPLOYEE, &e, 2).await;
    wa.put(EMPLOYEE, &e, 3).await;

    // THEN every item has exactly one copy, on its new shard, at its last version
    let raw = wa.raw(PRODUCT).await;
    for (id, v) in [(&x, 3), (&y, 2), (&z, 2)] {
        let copies: Vec<_> = raw.iter().filter(|(i, _)| i == id).collect();
        assert_eq!(copies.len(), 1, "{id}: {copies:?}");
        assert_eq!(copies[0].1, shard_for(id, 16), "{id} moved back");
        let r = a.caller(&wa.auth()).get_product(id).await;
        assert_eq!(r.body["document"]["v"], v, "{id}");
    }
    let employees = wa.raw(EMPLOYEE).await;
    assert_eq!(employees.len(), 1, "{employees:?}");
    assert_eq!(employees[0].1, shard_for(&e, 16));
    // AND the employee is a member of exactly one department: its last one
    let members = a
        .items_under(&raw_key(&tenant, "DEPARTMENT#"))
        .await
        .into_iter()
        .filter(|i| i["SK"].as_s().unwrap().ends_with(&format!("#{e}")))
        .map(|i| i["PK"].as_s().unwrap().clone())
        .collect::<Vec<_>>();
    let home = shard_for(&e, DEPARTMENTS as u32) as u64;
    let last = raw_key(
        &tenant,
        format!("DEPARTMENT#d-{}#MEMBERS", (home + 3) % DEPARTMENTS as u64),
    );
    assert_eq!(members, vec![last]);
}

/// Puts products `p-0000…` (`n` of them, version 1) for `tenant`, 16 at a time; their ids, sorted.
async fn put_products(h: &Harness, tenant: &str, n: usize) -> Vec<String> {
    let ids: Vec<String> = (0..n).map(|i| format!("p-{i:04}")).collect();
    futures::stream::iter(ids.iter().map(|id| async move {
        let r = h.tenant(tenant).put_product(id, json!({"v": 1})).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }))
    .buffer_unordered(16)
    .collect::<Vec<()>>()
    .await;
    ids
}

/// One page of `list` for `tenant` from container `h`, `order` `unordered` or `id`.
async fn page_from(h: &Harness, tenant: &str, order: &str, cursor: Option<&str>) -> Resp {
    let mut query = vec![("limit", "97"), ("order", order)];
    if let Some(c) = cursor {
        query.push(("cursor", c));
    }
    h.tenant(tenant)
        .query(&query)
        .call(PRODUCT.list, &integration::api::NO_PATH, None)
        .await
}

/// A walk in progress: which container serves its next page, its cursor, and what it has seen.
struct Walker {
    order: &'static str,
    next_on_x: bool,
    cursor: Option<String>,
    seen: Vec<String>,
    done: bool,
}

impl Walker {
    fn new(order: &'static str, first_on_x: bool) -> Self {
        Self {
            order,
            next_on_x: first_on_x,
            cursor: None,
            seen: Vec::new(),
            done: false,
        }
    }

    /// One page, from the container whose turn it is; the cursor goes to the other one.
    async fn step(&mut self, x: &Harness, y: &Harness, tenant: &str) {
        if self.done {
            return;
        }
        let h = if self.next_on_x { x } else { y };
        let r = page_from(h, tenant, self.order, self.cursor.as_deref()).await;
        assert_eq!(
            r.status,
            200,
            "{} walk, page {} from {}: {}",
            self.order,
            self.seen.len() / 97,
            if self.next_on_x { "X" } else { "Y" },
            r.body
        );
        for item in r.body["items"].as_array().unwrap() {
            self.seen
                .push(item["productId"].as_str().unwrap().to_owned());
        }
        self.cursor = r.body["nextCursor"].as_str().map(str::to_owned);
        self.done = self.cursor.is_none();
        self.next_on_x = !self.next_on_x;
    }
}

#[tokio::test]
async fn walk_cursors_pass_between_containers_with_and_without_the_migration_cached() {
    use shared::store::lifecycle::resharding::WRITES_MOVE_DELAY_SECONDS;
    // GIVEN a tenant with 600 products on 4 shards, container X that has its record cached (no
    // migration), and container Y, where an operator starts a re-sharding to 16
    let (x, t) = Harness::with_tenant("handoff", 4).await;
    let y = x.another_container().await;
    let ids = put_products(&x, &t, 600).await;
    assert_eq!(page_from(&x, &t, "unordered", None).await.status, 200);
    let started = y.operator().reshard(&t, 16).await;
    assert_eq!(started.status, 202, "{}", started.body);
    // WHEN four walks (a walk and an id-order listing, each begun on X and on Y) hand their
    // cursors from one container to the other on every page: two pages each while X does not know
    // of the migration, two after writes have moved (X knows then, and 100 products are updated,
    // which moves them), and the rest once Y has seen the migration finish while X still has it
    // cached
    let mut walkers = [
        Walker::new("unordered", true),
        Walker::new("unordered", false),
        Walker::new("id", true),
        Walker::new("id", false),
    ];
    for _ in 0..2 {
        for w in walkers.iter_mut() {
            w.step(&x, &y, &t).await;
        }
    }
    x.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS);
    y.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS);
    for id in ids.iter().step_by(6) {
        let r = x.tenant(&t).put_product(id, json!({"v": 2})).await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    for _ in 0..2 {
        for w in walkers.iter_mut() {
            w.step(&x, &y, &t).await;
        }
    }
    y.clock.advance_seconds(MOVES_DELAY_SECONDS);
    let mut calls = 0;
    loop {
        let r = y.operator().reshard(&t, 16).await;
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 202, "{}", r.body);
        calls += 1;
        assert!(calls < 50, "the migration does not end");
    }
    for _ in 0..20 {
        for w in walkers.iter_mut() {
            w.step(&x, &y, &t).await;
        }
    }
    // THEN every walk finished with every product exactly once
    for w in &walkers {
        assert!(w.done, "a {} walk did not finish", w.order);
        let mut seen = w.seen.clone();
        seen.sort();
        assert_eq!(
            seen,
            ids,
            "a {} walk (begun on {})",
            w.order,
            if w.seen.is_empty() { "?" } else { "X or Y" }
        );
    }
}

#[tokio::test]
async fn a_resharding_finishes_with_no_client_after_its_first_call_even_when_its_driver_is_killed()
{
    // GIVEN a tenant with 400 products on 4 shards, whose re-sharding to 16 an operator starts with
    // one call and never calls again
    let (h, t) = Harness::with_tenant("driven", 4).await;
    let ids = put_products(&h, &t, 400).await;
    let started = h.operator().reshard(&t, 16).await;
    assert_eq!(started.status, 202, "{}", started.body);
    // WHEN the driver runs in another container once moves may start, is killed part-way three
    // times, and is then left to run
    let driver = h.another_container().await;
    driver.clock.advance_seconds(MOVES_DELAY_SECONDS);
    integration::drive_killed_after(&driver.app, &[20, 60, 150]).await;
    integration::drive_to_end(&driver.app).await;
    // THEN the record shows 16 shards and no migration (GET /tenants/{id} showed its progress)
    h.clock.advance_seconds(MOVES_DELAY_SECONDS);
    let r = h.operator().get_tenant(&t).await;
    assert_eq!(r.body["shardCount"], 16, "{}", r.body);
    assert!(r.body.get("migration").is_none(), "{}", r.body);
    // AND every product is on its new shard, once
    let prefix = raw_key(&t, "PRODUCT#");
    let raw = h.items_under(&prefix).await;
    assert_eq!(raw.len(), ids.len());
    for item in &raw {
        let id = item["productId"].as_s().unwrap();
        assert_eq!(
            item["PK"].as_s().unwrap(),
            &format!("{prefix}{}", shard_for(id, 16)),
            "{id}"
        );
    }
}
