//! Moving a tenant between the pool and its own table while it is served
//! (`shared::store::lifecycle::moving`, issue #42 item 4): a tenant of 5,000 items on 16 shards
//! moves pool → own → pool while writers update, delete and create products and employees, readers
//! walk the lists and read single products, an import lands and a session tree grows; the
//! backfill's calls are killed part-way again and again. Against a model of what was written
//! (`churn`): every walk during a move sees each live item exactly once, and every single read
//! finds a live item at a version it could see; afterwards the target holds every live item once,
//! at its latest version, and the source ZERO items of the tenant (the pool keeps only its record;
//! an own source is deleted); the neighbours' items are byte for byte as they were.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::import_queue::{drain, Consumer, ImportQueues};
use integration::{onboarded_on_shards, sorted_text, unique, Harness, Resp};
use serde_json::{json, Value};
use shared::identity::ids::TenantId;
use shared::identity::keys::{raw_key, tenant_record_key, PK, SK};
use shared::isolation::policy::{session_policy, session_policy_for, TableLocation, TenantTables};
use shared::store::lifecycle::resharding::{MOVES_DELAY_SECONDS, WRITES_MOVE_DELAY_SECONDS};

use crate::churn::{read_while, seed, walk_while, write_while, Kind, World, EMPLOYEE, PRODUCT};
use shared::identity::keys::KeySpace;

/// 4,400 products, 560 employees, 10 departments and a session tree of 30: 5,000 items.
const PRODUCTS: usize = 4_400;
const EMPLOYEES: usize = 560;
const CHILD_SESSIONS: usize = 29;

type Item = HashMap<String, AttributeValue>;

impl World<'_> {
    async fn move_to(&self, placement: &str) -> Resp {
        self.h.operator().move_to(&self.tenant, placement).await
    }

    /// Asserts nothing of the tenant is left in `table` but its record.
    async fn assert_only_its_record_in(&self, table: &str) {
        let left: Vec<String> = self
            .raw_in(table)
            .await
            .iter()
            .map(|i| i[PK].as_s().unwrap().clone())
            .collect();
        let record_key = tenant_record_key(&TenantId::parse(&self.tenant).unwrap());
        assert_eq!(left, vec![record_key], "left in {table}");
    }

    /// Every raw item of the tenant in `table`.
    async fn raw_in(&self, table: &str) -> Vec<Item> {
        let prefix = raw_key(&self.tenant, "");
        self.h
            .admin_scan(table)
            .await
            .into_iter()
            .filter(|i| i[PK].as_s().is_ok_and(|pk| pk.starts_with(&prefix)))
            .collect()
    }
}

/// The ids of `kind`'s raw items in `items`, each as often as it is there.
fn raw_ids(w: &World<'_>, kind: Kind, items: &[Item]) -> Vec<String> {
    let sk_prefix = raw_key(&w.tenant, format!("{}#", kind.sk_kind));
    let partition = raw_key(&w.tenant, format!("{}#", kind.partition));
    let mut ids: Vec<String> = items
        .iter()
        .filter(|i| i[PK].as_s().is_ok_and(|pk| pk.starts_with(&partition)))
        .filter_map(|i| {
            i[SK]
                .as_s()
                .ok()?
                .strip_prefix(&sk_prefix)
                .map(str::to_owned)
        })
        .collect();
    ids.sort();
    ids
}

/// An import of `n` products at version 0, as the walks read versions (`document.v`).
fn versioned_products(prefix: &str, n: usize) -> Value {
    let items: Vec<Value> = (0..n)
        .map(|i| json!({"productId": format!("{prefix}-{i:04}"), "document": {"v": 0, "name": prefix}}))
        .collect();
    json!({"kind": "products", "items": items})
}

/// Runs the backfill to `placement` by calls of which the first few are killed after a few hundred
/// milliseconds (mid-step), then by whole calls, until one answers 200. Returns how many calls were
/// killed.
async fn backfill_with_kills(w: &World<'_>, placement: &str) -> usize {
    let budget = |attempt| match attempt {
        0..6 => Duration::from_millis(150 + (attempt % 3) * 150),
        _ => Duration::from_secs(30),
    };
    integration::step_to_end_with_kills("the move", 500, budget, || w.move_to(placement)).await
}

/// The session tree: a parent, and the children the test created.
struct Sessions {
    parent: String,
    children: std::sync::Mutex<BTreeSet<String>>,
}

impl Sessions {
    async fn create(w: &World<'_>) -> Self {
        let r =
            w.h.tenant(&w.tenant)
                .create_session(json!({"customerId": "c1", "state": "{}"}))
                .await;
        assert_eq!(r.status, 201, "{}", r.body);
        let sessions = Self {
            parent: r.body["sessionId"].as_str().unwrap().to_owned(),
            children: Default::default(),
        };
        for _ in 0..CHILD_SESSIONS - 10 {
            sessions.add_child(w).await;
        }
        sessions
    }

    async fn add_child(&self, w: &World<'_>) {
        let r =
            w.h.tenant(&w.tenant)
                .create_session(json!({"customerId": "c1", "parentSessionId": self.parent}))
                .await;
        assert_eq!(r.status, 201, "{}", r.body);
        let id = r.body["sessionId"].as_str().unwrap().to_owned();
        self.children.lock().unwrap().insert(id);
    }

    /// THEN the parent lists exactly the children created.
    async fn assert_listed(&self, w: &World<'_>) {
        let r =
            w.h.tenant(&w.tenant)
                .query(&[("limit", "100")])
                .get_child_sessions_by_session_id(&self.parent)
                .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let listed: BTreeSet<String> = r.ids("sessionId").into_iter().collect();
        assert_eq!(listed, *self.children.lock().unwrap());
    }
}

/// After a move: the record names the placement; the target holds every live product and employee
/// once (its versions are the API's, which the walks compare to the model); the source holds none
/// of the tenant's items.
async fn assert_moved(w: &World<'_>, placement: &str, source: &str, target: &str) {
    let record = w.h.operator().get_tenant(&w.tenant).await;
    assert_eq!(record.status, 200, "{}", record.body);
    assert_eq!(record.body["placement"], placement, "{}", record.body);
    assert!(record.body.get("move").is_none(), "{}", record.body);
    let in_target = w.raw_in(target).await;
    for kind in [PRODUCT, EMPLOYEE] {
        let expected: Vec<String> = w.expected(kind).into_keys().collect();
        assert_eq!(
            raw_ids(w, kind, &in_target),
            expected,
            "{} in {target}",
            kind.list
        );
        for order in ["id", "unordered"] {
            let listed: BTreeMap<String, u64> = w.walk(kind, order).await.into_iter().collect();
            assert_eq!(listed, w.expected(kind), "{} {order}", kind.list);
        }
    }
    if source == w.h.table {
        // ZERO items of the tenant are left in the pool: its record only.
        w.assert_only_its_record_in(source).await;
    } else {
        // The own source is deleted with its items.
        let gone = w.h.admin.describe_table().table_name(source).send().await;
        assert!(gone.is_err(), "{source} is still there");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_of_5000_items_moves_pool_to_own_and_back_under_load_and_nothing_is_lost_or_doubled(
) {
    // GIVEN a pooled neighbour, and a pooled tenant of 5,000 items on 16 shards with a session tree
    let (h, neighbour) = Harness::with_neighbour("beside", 20).await;
    let tenant = onboarded_on_shards(&h, "mover", 16).await;
    let w = World::new(&h, &tenant);
    seed(&w, PRODUCTS, EMPLOYEES).await;
    let sessions = Sessions::create(&w).await;
    let neighbours_before = sorted_text(h.items_under(&raw_key(&neighbour, "")).await);
    let own_table = format!("{}-tenant-{tenant}", h.table);
    let queues = ImportQueues::create(3, 1).await;

    for (placement, source, target, first_round) in [
        ("own", h.table.clone(), own_table.clone(), 1),
        ("pool", own_table.clone(), h.table.clone(), 1_000),
    ] {
        // A consumer container started for each move: one kept from the first would hold the
        // first move's record for its cache's real-time seconds, while this test's clock jumps
        // past the delays that, in production, let every container's cached record expire (it
        // would look for the import's sealing key where the first move found it).
        let consumer = Consumer::start(&h.table, &queues).await;
        // WHEN the move starts
        let r = w.move_to(placement).await;
        assert_eq!(r.status, 202, "{}", r.body);
        assert_eq!(r.body["move"]["to"], placement, "{}", r.body);
        assert_eq!(r.body["move"]["fromTable"], source.as_str());
        assert_eq!(r.body["move"]["toTable"], target.as_str());
        // THEN the same call again is the same progress; a move the other way, a re-sharding and
        // an offboarding are refused while it runs
        let again = w.move_to(placement).await;
        assert_eq!(again.status, 202, "{}", again.body);
        assert_eq!(again.body["move"], r.body["move"]);
        let back = if placement == "own" { "pool" } else { "own" };
        w.move_to(back).await.assert_problem(409);
        h.operator().reshard(&tenant, 8).await.assert_problem(409);
        h.operator()
            .offboard_tenant(&tenant)
            .await
            .assert_problem(409);

        // AND an import accepted before writes move lands while they still use the source
        let posted = crate::imports::post_import(
            &h,
            &queues,
            &tenant,
            versioned_products(&format!("imp-{placement}"), 20),
            &[],
        )
        .await;
        assert_eq!(posted.status, 202, "{}", posted.body);
        drain(&queues, &[&consumer], 10).await;
        for i in 0..20 {
            w.products
                .committed
                .lock()
                .unwrap()
                .insert(format!("imp-{placement}-{i:04}"), 0);
        }

        // WHEN writers, walkers, a reader of single products and new child sessions run through the move's phases: writes in
        // the source, then in the target with pulls, then the backfill, killed again and again
        let moving = AtomicBool::new(true);
        let walks = AtomicU64::new(0);
        let reads = AtomicU64::new(0);
        let mover = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            sessions.add_child(&w).await;
            h.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS);
            tokio::time::sleep(Duration::from_millis(500)).await;
            for _ in 0..4 {
                sessions.add_child(&w).await;
            }
            sessions.assert_listed(&w).await;
            h.clock
                .advance_seconds(MOVES_DELAY_SECONDS - WRITES_MOVE_DELAY_SECONDS);
            let killed = backfill_with_kills(&w, placement).await;
            moving.store(false, Ordering::SeqCst);
            killed
        };
        let (killed, ..) = tokio::join!(
            mover,
            write_while(&w, PRODUCT, PRODUCTS, first_round, &moving),
            write_while(&w, EMPLOYEE, EMPLOYEES, first_round, &moving),
            walk_while(&w, PRODUCT, "id", &moving, &walks),
            walk_while(&w, PRODUCT, "unordered", &moving, &walks),
            walk_while(&w, EMPLOYEE, "id", &moving, &walks),
            read_while(&w, PRODUCTS, &moving, &reads),
        );

        // THEN the backfill was killed part-way and still finished, and the walks during the move
        // saw every live item exactly once (each checked as it ended), every page and every write
        // answered 2xx: no 5xx
        assert!(killed >= 3, "only {killed} backfill calls were killed");
        assert!(
            walks.load(Ordering::SeqCst) >= 3,
            "walks ran during the move"
        );
        // AND every single read during the move found its item at a version it could see
        assert!(
            reads.load(Ordering::SeqCst) >= 50,
            "reads ran during the move"
        );
        // AND every live item is in the target once, at its latest version, none in the source
        assert_moved(&w, placement, &source, &target).await;
        sessions.assert_listed(&w).await;
        // AND the neighbour's items are byte for byte as they were
        assert_eq!(
            sorted_text(h.items_under(&raw_key(&neighbour, "")).await),
            neighbours_before
        );
    }
}

#[test]
fn a_move_shows_as_started_and_finished_events() {
    // GIVEN a record before a move, during it, and after it
    let record = |moving: Option<Value>, own: Option<&str>| -> serde_dynamo::Item {
        let key = tenant_record_key(&TenantId::parse("acme").unwrap());
        let mut r = json!({
            "PK": key, "SK": key, "tenantId": "acme",
            "tier": "basic", "shardCount": 4, "createdAt": "2026-01-01T00:00:00Z", "status": "active",
        });
        if let Some(m) = moving {
            r["move"] = m;
        }
        if let Some(own) = own {
            r["ownTable"] = json!(own);
        }
        serde_dynamo::to_item(r).unwrap()
    };
    let state = json!({
        "to": "own", "fromTable": "pool", "toTable": "pool-tenant-acme",
        "requestedAt": "2026-01-01T00:00:00Z", "requestedBy": "ops",
        "writesMoveAt": 50, "movesStartAt": 80, "steps": 7, "moved": 4990,
    });
    use shared::store::lifecycle::events::{events_of, Change};
    // WHEN the move appears, then goes
    let started = events_of(
        Change::Modify,
        "e1",
        Some(&record(None, None)),
        Some(&record(Some(state.clone()), None)),
    )
    .unwrap();
    let finished = events_of(
        Change::Modify,
        "e2",
        Some(&record(Some(state), None)),
        Some(&record(None, Some("pool-tenant-acme"))),
    )
    .unwrap();
    // THEN one tenantMoveStarted, then one tenantMoveFinished with the count
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].detail_type, "tenantMoveStarted");
    assert_eq!(started[0].detail["operator"]["tenantId"], "ops");
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0].detail_type, "tenantMoveFinished");
    assert_eq!(finished[0].detail["moved"], 4990);
    assert_eq!(finished[0].detail["toTable"], "pool-tenant-acme");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_codes_idempotent_retries_cursors_and_usage_cross_a_move_the_driver_runs_alone() {
    // GIVEN a pooled tenant with a user, an order of 3 lines, an unredeemed transfer code, a session
    // created with an Idempotency-Key, 30 products with a list cursor from before, and its usage
    let (h, tenant) = Harness::with_tenant("carried", 4).await;
    let t = || h.tenant(&tenant);
    let r = t()
        .put_user("u-1", json!({"name": "Ann", "email": "ann@example.com"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let order = json!({"orderId": "ord-1", "date": "2026-03-01", "amount": 31.5, "items": [
        {"itemId": "line-0", "sku": "A", "qty": 1, "price": 10.5},
        {"itemId": "line-1", "sku": "B", "qty": 1, "price": 10.5},
        {"itemId": "line-2", "sku": "C", "qty": 1, "price": 10.5},
    ]});
    assert_eq!(t().create_order("u-1", order.clone()).await.status, 201);
    let code = t().create_transfer_code("u-1").await;
    assert_eq!(code.status, 201, "{}", code.body);
    let code = code.body["code"].as_str().unwrap().to_owned();
    let keyed = || {
        h.tenant(&tenant)
            .header("Idempotency-Key", "k-move")
            .create_session(json!({"customerId": "c9", "state": "{}"}))
    };
    let first = keyed().await;
    assert_eq!(first.status, 201, "{}", first.body);
    t().put_new_products((0..30).map(|i| (format!("p{i:02}"), json!({"v": i}))))
        .await;
    let page = t()
        .query(&[("limit", "10"), ("order", "id")])
        .call("query-tenant-products", &integration::api::NO_PATH, None)
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    let cursor = page.body["nextCursor"].as_str().unwrap().to_owned();
    for _ in 0..5 {
        assert_eq!(t().admitted().get_order("ord-1").await.status, 200);
    }
    h.app.flush_usage().await.unwrap();
    let today = shared::store::quota::usage::utc_date(h.app.clock.now_millis());
    let usage = || {
        h.tenant(&tenant)
            .query(&[("from", &today), ("to", &today)])
            .get_usage()
    };
    let usage_before = usage().await;
    assert_eq!(
        usage_before.body["days"][0]["routes"]["get-order"], 5,
        "{}",
        usage_before.body
    );

    // WHEN an operator starts its move into its own table, and writes move
    let started = h.operator().move_to(&tenant, "own").await;
    assert_eq!(started.status, 202, "{}", started.body);
    h.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS);
    // THEN, with every item still in the pool, the retry answers as the first call did
    let retried = keyed().await;
    assert_eq!((retried.status, &retried.body), (first.status, &first.body));
    // AND the order reads whole, the code redeems once, and the cursor finishes the list
    let read = t().get_order("ord-1").await;
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(
        read.body["items"].as_array().unwrap().len(),
        3,
        "{}",
        read.body
    );
    let redeemed = t().redeem_transfer_code(&code).await;
    assert_eq!(redeemed.status, 200, "{}", redeemed.body);
    t().redeem_transfer_code(&code).await.assert_problem(404);
    let mut listed: Vec<String> = Vec::new();
    let mut next = Some(cursor);
    while let Some(c) = next {
        let r = t()
            .query(&[("limit", "10"), ("order", "id"), ("cursor", &c)])
            .call("query-tenant-products", &integration::api::NO_PATH, None)
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        listed.extend(r.ids("productId"));
        next = r.body["nextCursor"].as_str().map(str::to_owned);
    }
    assert_eq!(
        listed,
        (10..30).map(|i| format!("p{i:02}")).collect::<Vec<_>>()
    );

    // WHEN the lifecycle driver, in another container, runs the move to its end with no client
    let driver = h.another_container().await;
    driver.clock.advance_seconds(MOVES_DELAY_SECONDS);
    h.clock
        .advance_seconds(MOVES_DELAY_SECONDS - WRITES_MOVE_DELAY_SECONDS);
    let mut runs = 0;
    loop {
        tenants::drive_lifecycle::drive(&driver.app, &tenants::Lanes::in_process())
            .await
            .unwrap();
        let record = h.operator().get_tenant(&tenant).await;
        if record.body.get("move").is_none() {
            assert_eq!(record.body["placement"], "own", "{}", record.body);
            break;
        }
        runs += 1;
        assert!(runs < 60, "the lifecycle driver does not finish the move");
    }

    // THEN of the pool only its record is left, and its own table holds the rest
    let own_table = format!("{}-tenant-{tenant}", h.table);
    let w = World::new(&h, &tenant);
    w.assert_only_its_record_in(&h.table).await;
    assert!(!w.raw_in(&own_table).await.is_empty());
    // AND the retry still answers as the first call did, the order reads whole, the code stays
    // redeemed, and the usage counted before the move is still counted
    let retried = keyed().await;
    assert_eq!((retried.status, &retried.body), (first.status, &first.body));
    assert_eq!(
        t().get_order("ord-1").await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    t().redeem_transfer_code(&code).await.assert_problem(404);
    let usage_after = usage().await;
    assert_eq!(usage_after.status, 200, "{}", usage_after.body);
    assert_eq!(usage_after.body["days"], usage_before.body["days"]);
    // AND the session policies it was vended name the pool, then both tables, then its own table
    let location =
        TableLocation::from_role_arn(integration::ROLE_ARN, "us-east-1", &h.table).unwrap();
    let id = TenantId::parse(&tenant).unwrap();
    let policies = h.recorded_policies(&tenant).await;
    let both = |p: &String| {
        p.contains(&format!("table/{own_table}\"")) && p.contains(&format!("table/{}\"", h.table))
    };
    assert!(policies.iter().any(both), "{policies:?}");
    let pooled = session_policy(&id, &location).unwrap();
    let own = session_policy_for(&id, &location, &TenantTables::own(&own_table, &h.table)).unwrap();
    for p in &policies {
        assert!(
            *p == pooled || *p == own || both(p),
            "an unexpected policy: {p}"
        );
    }
}

/// Moves `tenant` (small) to `placement` to its end: the start, the delays passed, calls until 200.
async fn move_to_end(h: &Harness, tenant: &str, placement: &str) {
    let what = format!("the move to {placement}");
    let step = || h.operator().move_to(tenant, placement);
    integration::step_to_end(h, &what, MOVES_DELAY_SECONDS, 50, step).await;
}

#[tokio::test]
async fn a_request_admitted_before_writes_move_that_sends_after_goes_to_the_target() {
    // GIVEN a pooled tenant with a product, moving into its own table, and a client of it made
    // before writes move (its requests name the pool)
    let (h, tenant) = Harness::with_tenant("straddle", 1).await;
    let r = h.tenant(&tenant).put_product("p1", json!({"v": 1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = h.operator().move_to(&tenant, "own").await;
    assert_eq!(r.status, 202, "{}", r.body);
    let id = TenantId::parse(&tenant).unwrap();
    let before = h.app.db(&id).await.unwrap();
    assert_eq!(&*before.table, h.table.as_str());
    // WHEN writes move, and that client sends a write of the product
    h.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS);
    let own_table = format!("{}-tenant-{tenant}", h.table);
    let pk = shared::identity::entities::PRODUCTS.key(&id, 0);
    let sk = shared::identity::entities::PRODUCT.key(&id, "p1");
    before
        .sdk_client()
        .update_item()
        .table_name(&*before.table)
        .key(PK, AttributeValue::S(pk.clone()))
        .key(SK, AttributeValue::S(sk.clone()))
        .update_expression("SET #d = :d")
        .expression_attribute_names("#d", "document")
        .expression_attribute_values(
            ":d",
            AttributeValue::M(HashMap::from([(
                "v".to_owned(),
                AttributeValue::N("2".into()),
            )])),
        )
        .condition_expression("attribute_exists(PK)")
        .send()
        .await
        .expect("the write finds the product where it now is");
    // THEN the product was pulled into the target and written there; the pool holds none of it
    let w = World::new(&h, &tenant);
    let in_own = w.raw_in(&own_table).await;
    assert_eq!(in_own.len(), 1, "{in_own:?}");
    assert_eq!(
        in_own[0]["document"].as_m().unwrap()["v"],
        AttributeValue::N("2".into())
    );
    w.assert_only_its_record_in(&h.table).await;
    // AND the API reads it there
    let r = h
        .tenant(&tenant)
        .call("get-product", &[("productId", "p1")], None)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["document"]["v"], 2, "{}", r.body);
}

#[tokio::test]
async fn a_restore_from_a_copy_taken_while_the_tenant_was_in_its_own_table_is_refused() {
    // GIVEN a tenant in its own table with a product, a copy of the pool taken then, and the
    // tenant moved back into the pool since
    let h = Harness::new().await;
    let tenant = unique("wasown");
    integration::onboard_own(&h, &tenant, 1).await;
    let r = h.tenant(&tenant).put_product("p1", json!({"v": 1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let source = h.snapshot("wasown").await;
    move_to_end(&h, &tenant, "pool").await;
    // WHEN it is restored from that copy (which holds only its record)
    let r = h
        .operator()
        .restore_tenant(&tenant, json!({"from": {"table": source}}))
        .await;
    // THEN 422 naming why, and its product is still there
    r.assert_problem_naming(422, "own table");
    let r = h
        .tenant(&tenant)
        .call("get-product", &[("productId", "p1")], None)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test]
async fn a_read_during_a_move_finds_the_item_where_it_is_and_moves_nothing() {
    // GIVEN a pooled tenant with products p1..p3, moving into its own table
    let (h, tenant) = Harness::with_tenant("readmove", 1).await;
    h.tenant(&tenant)
        .put_new_products(["p1", "p2", "p3"].map(|id| (id.to_owned(), json!({"v": 1}))))
        .await;
    let stale_p2 = raw_product(&h, &h.table, &tenant, "p2").await.unwrap();
    let r = h.operator().move_to(&tenant, "own").await;
    assert_eq!(r.status, 202, "{}", r.body);
    let own_table = format!("{}-tenant-{tenant}", h.table);
    // AND, once writes moved, p2 rewritten (pulled into the target, then written there) and a stale
    // copy of it written back to the pool, as a request in flight when writes moved can
    h.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS);
    let r = h.tenant(&tenant).put_product("p2", json!({"v": 2})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(raw_product(&h, &h.table, &tenant, "p2").await.is_none());
    h.put_raw(&h.table, stale_p2).await;
    // AND then past `movesStartAt` (nothing writes the pool any more), before any backfill step,
    // p3 deleted
    h.clock
        .advance_seconds(MOVES_DELAY_SECONDS - WRITES_MOVE_DELAY_SECONDS);
    let r = h.tenant(&tenant).delete_product("p3").await;
    assert!(r.status == 200 || r.status == 204, "{}", r.body);

    // WHEN each is read, and one that never was
    let api = h.tenant(&tenant);
    let (p1, p2, p3, p4) = tokio::join!(
        api.get_product("p1"),
        api.get_product("p2"),
        api.get_product("p3"),
        api.get_product("p4"),
    );

    // THEN p1 is the pool's copy, p2 the target's, p3 and p4 are not found
    assert_eq!(p1.status, 200, "{}", p1.body);
    assert_eq!(p1.body["document"]["v"], 1, "{}", p1.body);
    assert_eq!(p2.status, 200, "{}", p2.body);
    assert_eq!(p2.body["document"]["v"], 2, "{}", p2.body);
    p3.assert_problem(404);
    p4.assert_problem(404);
    // AND the reads moved nothing: p1 is still in the pool only
    assert!(raw_product(&h, &h.table, &tenant, "p1").await.is_some());
    assert!(raw_product(&h, &own_table, &tenant, "p1").await.is_none());

    // WHEN p2 is written again over its stale pooled copy, and p5 is written new
    let again = h.tenant(&tenant).put_product("p2", json!({"v": 3})).await;
    let new = h.tenant(&tenant).put_product("p5", json!({"v": 1})).await;
    // THEN p2 replaced the target's copy and the stale one is gone; p5 is new, in the target
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(new.status, 201, "{}", new.body);
    assert!(raw_product(&h, &h.table, &tenant, "p2").await.is_none());
    let p2 = raw_product(&h, &own_table, &tenant, "p2").await.unwrap();
    assert_eq!(
        p2["document"].as_m().unwrap()["v"],
        AttributeValue::N("3".into())
    );
    assert!(raw_product(&h, &own_table, &tenant, "p5").await.is_some());
}

/// Product `id` of `tenant` (1 shard) as stored in `table`.
async fn raw_product(h: &Harness, table: &str, tenant: &str, id: &str) -> Option<Item> {
    let t = TenantId::parse(tenant).unwrap();
    h.admin
        .get_item()
        .table_name(table)
        .key(
            PK,
            AttributeValue::S(shared::identity::entities::PRODUCTS.key(&t, 0)),
        )
        .key(
            SK,
            AttributeValue::S(shared::identity::entities::PRODUCT.key(&t, id)),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
}

/// Issue 58, item 5: an export during a move never returns a silently partial result.
#[tokio::test]
async fn an_export_during_a_move_is_refused_and_after_it_returns_every_item() {
    // GIVEN a pooled tenant of 30 products, moving into its own table
    let (h, tenant) = Harness::with_tenant("exmove", 2).await;
    for i in 0..30 {
        let r = h
            .tenant(&tenant)
            .put_product(&format!("p-{i:02}"), json!({"n": i}))
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    assert_eq!(h.operator().move_to(&tenant, "own").await.status, 202);
    // WHEN an operator exports it while it moves
    let operator = integration::operator();
    let during = integration::export_page(&h, &operator, &tenant, &[("limit", "1000")]).await;
    // THEN it is refused, naming both tables, rather than answered with what one table holds
    during.assert_problem_naming(409, "moved");
    let detail = during.body["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        detail.contains(&format!("{}-tenant-{tenant}", h.table)),
        "{detail}"
    );
    // WHEN the move has ended
    move_to_end(&h, &tenant, "own").await;
    // THEN the export returns every product
    let pages = integration::export_pages(&h, &operator, &tenant, "1000").await;
    let products = pages
        .iter()
        .flat_map(|p| p.text.lines().map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| l.contains("PRODUCT#p-"))
        .count();
    assert_eq!(products, 30);
}

/// Issue 58, item 5: what a request's pull out of a move's source costs is the platform's (the
/// operator's move caused it), never the tenant's usage or quota.
#[tokio::test]
async fn a_requests_pull_during_a_move_is_charged_to_the_platform_not_the_tenant() {
    // GIVEN a pooled tenant with a product, moving into its own table, writes moved
    let (h, tenant) = Harness::with_tenant("pullcost", 1).await;
    let apps = [&h.app];
    let r = h.tenant(&tenant).put_product("p1", json!({"v": 1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(h.operator().move_to(&tenant, "own").await.status, 202);
    h.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS);
    let platform_before =
        integration::units_used(&h, &apps, "_platform", Some("update-tenant")).await;
    let tenant_before = integration::units_used(&h, &apps, &tenant, Some("put-product")).await;
    // WHEN the tenant rewrites it (the request pulls it out of the pool first), and writes a new one
    let pulled = h
        .tenant(&tenant)
        .admitted()
        .put_product("p1", json!({"v": 2}))
        .await;
    let after_pulled = integration::units_used(&h, &apps, &tenant, Some("put-product")).await;
    let fresh = h
        .tenant(&tenant)
        .admitted()
        .put_product("p2", json!({"v": 2}))
        .await;
    assert_eq!((pulled.status, fresh.status), (200, 201), "{}", pulled.body);
    // THEN the tenant is charged the same for both puts (the put alone, where it lands), and the
    // pull's units are the platform's, under the route that asked for the move
    let tenant_after = integration::units_used(&h, &apps, &tenant, Some("put-product")).await;
    assert_eq!(
        after_pulled - tenant_before,
        tenant_after - after_pulled,
        "the tenant pays its put only, not the pull before it"
    );
    let platform_after =
        integration::units_used(&h, &apps, "_platform", Some("update-tenant")).await;
    assert!(
        platform_after > platform_before,
        "the pull is the platform's: {platform_before} → {platform_after}"
    );
}

/// Issue 58, item 5: a tenant that stays within its quota before its move sees no 429 during it:
/// what the move costs (a request's pull, the backfill) is the platform's, not the tenant's.
#[tokio::test]
async fn a_tenant_writing_at_80_percent_of_its_quota_through_its_move_is_never_refused() {
    // GIVEN what a put of a small product costs, measured on a scout tenant
    let h = Harness::new().await;
    let scout = unique("scout");
    integration::onboard_custom(&h, &scout, 4, 20, 1000).await;
    let apps = [&h.app];
    let before = integration::units_used(&h, &apps, &scout, Some("put-product")).await;
    let r = h
        .tenant(&scout)
        .admitted()
        .put_product("p00", json!({"v": 0}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let per_put = integration::units_used(&h, &apps, &scout, Some("put-product")).await - before;
    assert!(per_put > 0.0);
    // AND a pooled tenant of 40 products held to 20 requests a second, and to capacity units for
    // 16 puts a second at 80%
    let t = unique("eighty");
    let units = (16.0 * per_put / 0.8).ceil() as u32;
    integration::onboard_custom(&h, &t, 4, 20, units).await;
    h.tenant(&t)
        .put_new_products((0..40).map(|i| (format!("p{i:02}"), json!({"v": i}))))
        .await;
    // (a second of its writes: 16 puts of small products, 80% of both limits)
    let second = |s: usize| {
        let (h, t) = (&h, &t);
        async move {
            h.clock.advance_seconds(1);
            let mut refused = Vec::new();
            for i in 0..16 {
                let id = format!("p{:02}", (s * 16 + i) % 40);
                let r = h
                    .tenant(t)
                    .admitted()
                    .put_product(&id, json!({"v": s}))
                    .await;
                if r.status != 200 && r.status != 201 {
                    refused.push((s, r.status, r.body.to_string()));
                }
            }
            refused
        }
    };
    // WHEN it writes so for 5 seconds before its move
    let mut refused = Vec::new();
    for s in 0..5 {
        refused.extend(second(s).await);
    }
    // THEN none of it is refused: the load is within its quota
    assert_eq!(refused, Vec::new(), "before the move");
    // WHEN its move into its own table starts, writes move (each put of an item still in the pool
    // pulls it first), then the backfill runs beside its writes, a move call each second
    assert_eq!(h.operator().move_to(&t, "own").await.status, 202);
    h.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS);
    for s in 5..10 {
        refused.extend(second(s).await);
    }
    h.clock
        .advance_seconds(MOVES_DELAY_SECONDS - WRITES_MOVE_DELAY_SECONDS);
    for s in 10..20 {
        let u0 = integration::units_used(&h, &apps, &t, Some("put-product")).await;
        let (answers, mv) = tokio::join!(second(s), h.operator().move_to(&t, "own"));
        let u1 = integration::units_used(&h, &apps, &t, Some("put-product")).await;
        eprintln!(
            "DIAG s={s} units={} refused={} move={} {}",
            u1 - u0,
            answers.len(),
            mv.status,
            mv.body
                .get("move")
                .map(|m| m.to_string())
                .unwrap_or_default()
        );
        refused.extend(answers);
    }
    // THEN still none of its writes is refused
    assert_eq!(refused, Vec::new(), "during the move");
}

#[tokio::test]
async fn a_moving_tenants_tier_and_limits_change_only_once_its_move_has_ended() {
    // GIVEN a tenant of a few products moving into its own table in 4 lanes (its walk dealt to the
    // lanes by the quota windows its limits give)
    let (h, t) = Harness::with_tenant("moving-limits", 4).await;
    for i in 0..6 {
        let r = h
            .tenant(&t)
            .put_product(&format!("p-{i}"), json!({"i": i}))
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let moving = h
        .operator()
        .query(&[("lanes", "4")])
        .move_to(&t, "own")
        .await;
    assert_eq!(moving.status, 202, "{}", moving.body);
    let record_before = h
        .items_under(&tenant_record_key(&TenantId::parse(&t).unwrap()))
        .await;

    // WHEN an operator changes its tier, and its limits, meanwhile
    let tier = h
        .operator()
        .update_tenant(&t, json!({"tier": "premium"}))
        .await;
    let limits = h
        .operator()
        .update_tenant(
            &t,
            json!({"tier": "custom", "limits": {"requestsPerSecond": 2250, "capacityUnitsPerSecond": 500}}),
        )
        .await;

    // THEN both are refused (409, naming the move), and the record is byte for byte as it was
    for r in [&tier, &limits] {
        r.assert_problem_naming(409, "moving");
    }
    assert_eq!(
        h.items_under(&tenant_record_key(&TenantId::parse(&t).unwrap()))
            .await,
        record_before
    );
    // AND once the move has ended, the tier changes
    h.clock.advance_seconds(MOVES_DELAY_SECONDS + 1);
    let mut ended = false;
    for _ in 0..100 {
        let r = h
            .operator()
            .query(&[("lanes", "4")])
            .move_to(&t, "own")
            .await;
        assert!(r.status == 200 || r.status == 202, "{}", r.body);
        if r.status == 200 {
            ended = true;
            break;
        }
    }
    assert!(ended, "the move does not end");
    let after = h
        .operator()
        .update_tenant(&t, json!({"tier": "premium"}))
        .await;
    assert_eq!(after.status, 200, "{}", after.body);
}
