//! Writers and walkers against a model of what was written: the products and employees a test
//! writes, updates and deletes while a tenant's items move (a re-sharding, a move between
//! placements), each write's version recorded before it is sent and when it is answered, and the
//! check that a walk made meanwhile saw every live item exactly once, at a version it could see.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use futures::StreamExt;
use integration::{Auth, Harness, Resp};
use serde_json::{json, Value};
use shared::identity::shard::shard_for;

pub const DEPARTMENTS: usize = 10;

/// What one kind of item looks like to the test: its list route, and how to read an item's id and
/// version from the list's view.
#[derive(Clone, Copy)]
pub struct Kind {
    pub list: &'static str,
    pub id: &'static str,
    pub partition: &'static str,
    pub sk_kind: &'static str,
}

pub const PRODUCT: Kind = Kind {
    list: "query-tenant-products",
    id: "productId",
    partition: "PRODUCT",
    sk_kind: "PRODUCT",
};
pub const EMPLOYEE: Kind = Kind {
    list: "list-employees",
    id: "employeeId",
    partition: "HR",
    sk_kind: "EMPLOYEE",
};

/// An item's version as the API shows it: a product's `document.v`, an employee's `name` suffix.
pub fn version_of(kind: Kind, item: &Value) -> u64 {
    match kind.id {
        "productId" => item["document"]["v"].as_u64().expect("a versioned product"),
        _ => item["name"]
            .as_str()
            .and_then(|n| n.rsplit_once(" v"))
            .and_then(|(_, v)| v.parse().ok())
            .expect("a versioned employee"),
    }
}

/// The writes the test makes to one kind: each id's versions, begun and committed.
#[derive(Default)]
pub struct Ledger {
    /// Last version whose write was sent (a write in flight may land any time).
    pub started: Mutex<HashMap<String, u64>>,
    /// Last version whose write was answered.
    pub committed: Mutex<HashMap<String, u64>>,
    /// Ids whose delete was sent, and whose delete was answered.
    pub deleting: Mutex<HashMap<String, bool>>,
}

impl Ledger {
    pub fn committed(&self) -> HashMap<String, u64> {
        self.committed.lock().unwrap().clone()
    }
    pub fn started(&self) -> HashMap<String, u64> {
        self.started.lock().unwrap().clone()
    }
    pub fn deleting(&self) -> HashMap<String, bool> {
        self.deleting.lock().unwrap().clone()
    }
}

pub struct World<'a> {
    pub h: &'a Harness,
    pub tenant: String,
    pub products: Ledger,
    pub employees: Ledger,
}

impl<'a> World<'a> {
    /// `tenant` on `h`, with nothing written yet.
    pub fn new(h: &'a Harness, tenant: &str) -> Self {
        Self {
            h,
            tenant: tenant.to_owned(),
            products: Ledger::default(),
            employees: Ledger::default(),
        }
    }

    pub fn auth(&self) -> Auth {
        Auth::Tenant(self.tenant.clone())
    }

    pub fn ledger(&self, kind: Kind) -> &Ledger {
        if kind.id == "productId" {
            &self.products
        } else {
            &self.employees
        }
    }

    pub async fn put(&self, kind: Kind, id: &str, v: u64) {
        let ledger = self.ledger(kind);
        ledger.started.lock().unwrap().insert(id.to_owned(), v);
        // A put after a delete brings the item back.
        ledger.deleting.lock().unwrap().remove(id);
        let r = if kind.id == "productId" {
            self.h
                .caller(&self.auth())
                .put_product(id, json!({"v": v, "name": id}))
                .await
        } else {
            let home = shard_for(id, DEPARTMENTS as u32) as u64;
            let dept = format!("d-{}", (home + v) % DEPARTMENTS as u64);
            self.h
                .caller(&self.auth())
                .put_employee(
                    id,
                    json!({"name": format!("{id} v{v}"), "departmentId": dept}),
                )
                .await
        };
        assert!(
            r.status == 200 || r.status == 201,
            "put {id} v{v}: {} {}",
            r.status,
            r.body
        );
        self.ledger(kind)
            .committed
            .lock()
            .unwrap()
            .insert(id.to_owned(), v);
    }

    pub async fn delete(&self, kind: Kind, id: &str) {
        self.ledger(kind)
            .deleting
            .lock()
            .unwrap()
            .insert(id.to_owned(), false);
        let (bin, param) = if kind.id == "productId" {
            ("delete-product", "productId")
        } else {
            ("delete-employee", "employeeId")
        };
        let r = self
            .h
            .caller(&self.auth())
            .call(bin, &[(param, id)], None)
            .await;
        assert_eq!(r.status, 204, "delete {id}: {}", r.body);
        self.ledger(kind)
            .deleting
            .lock()
            .unwrap()
            .insert(id.to_owned(), true);
    }

    pub async fn page(&self, kind: Kind, order: &str, cursor: Option<&str>) -> Resp {
        let mut query = vec![("limit", "97"), ("order", order)];
        if let Some(c) = cursor {
            query.push(("cursor", c));
        }
        self.h
            .caller(&self.auth())
            .query(&query)
            .call(kind.list, &integration::api::NO_PATH, None)
            .await
    }

    /// A whole walk of a list: each item's id and version, in the order returned.
    pub async fn walk(&self, kind: Kind, order: &str) -> Vec<(String, u64)> {
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut r = self.page(kind, order, cursor.as_deref()).await;
            // A 503 asks the caller to retry (DynamoDB Local times out now and then when the whole
            // suite loads the machine): the same page is asked again, as a client would. Nothing
            // the walk checks depends on it: every item is still read once, from the same cursor.
            for _ in 0..3 {
                if r.status != 503 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                r = self.page(kind, order, cursor.as_deref()).await;
            }
            assert_eq!(r.status, 200, "{} page: {}", kind.list, r.body);
            for item in r.body["items"].as_array().unwrap() {
                seen.push((
                    item[kind.id].as_str().unwrap().to_owned(),
                    version_of(kind, item),
                ));
            }
            match r.body["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return seen,
            }
        }
    }

    pub async fn record(&self) -> Value {
        let r = self.h.operator().get_tenant(&self.tenant).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }

    /// The ids and versions the API should list now that no write is in flight.
    pub fn expected(&self, kind: Kind) -> BTreeMap<String, u64> {
        let deleted = self.ledger(kind).deleting();
        self.ledger(kind)
            .committed()
            .into_iter()
            .filter(|(id, _)| !deleted.contains_key(id))
            .collect()
    }
}

/// Checks one walk made while writers ran: no id twice; an id that was live and unwritten
/// throughout, exactly once at its version; an id updated meanwhile, exactly once at a version
/// between what was committed before the walk and what was sent before it ended.
pub fn check_concurrent_walk(
    kind: Kind,
    seen: &[(String, u64)],
    before: &HashMap<String, u64>,
    deleting_before: &HashMap<String, bool>,
    after_started: &HashMap<String, u64>,
    deleting_after: &HashMap<String, bool>,
) {
    let mut counts: HashMap<&str, u32> = HashMap::new();
    for (id, v) in seen {
        *counts.entry(id).or_default() += 1;
        let low = before.get(id).copied();
        let high = after_started.get(id).copied();
        if let (Some(low), Some(high)) = (low, high) {
            assert!(
                low <= *v && *v <= high,
                "{} {id} at v{v}, outside v{low}..=v{high}",
                kind.list
            );
        }
        assert!(
            deleting_before.get(id) != Some(&true),
            "{} {id} was deleted before the walk began",
            kind.list
        );
    }
    for (id, n) in &counts {
        assert_eq!(*n, 1, "{} {id} listed {n} times in one walk", kind.list);
    }
    for id in before.keys() {
        if !deleting_after.contains_key(id) {
            assert_eq!(
                counts.get(id.as_str()),
                Some(&1),
                "{} {id} was live throughout but the walk missed it",
                kind.list
            );
        }
    }
}

pub async fn seed(w: &World<'_>, products: usize, employees: usize) {
    let departments = futures::stream::iter(0..DEPARTMENTS)
        .map(|d| async move {
            let r =
                w.h.caller(&w.auth())
                    .put_department(
                        &format!("d-{d}"),
                        json!({"name": format!("Department {d}")}),
                    )
                    .await;
            assert_eq!(r.status, 201, "{}", r.body);
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>();
    departments.await;
    let products = futures::stream::iter(0..products)
        .map(|i| async move { w.put(PRODUCT, &format!("p-{i:04}"), 0).await })
        .buffer_unordered(16)
        .collect::<Vec<_>>();
    products.await;
    let employees = futures::stream::iter(0..employees)
        .map(|i| async move { w.put(EMPLOYEE, &format!("e-{i:03}"), 0).await })
        .buffer_unordered(16)
        .collect::<Vec<_>>();
    employees.await;
}

/// Updates every tenth item of `kind` (ids `0..count`) to the round's version, deletes its
/// neighbour once and creates a new one every fifty, round after round from `first` while `running`
/// holds, and for at least two rounds. Versions only grow: a later call starts above every round of
/// an earlier one.
pub async fn write_while(
    w: &World<'_>,
    kind: Kind,
    count: usize,
    first: u64,
    running: &AtomicBool,
) {
    let prefix = if kind.id == "productId" { "p" } else { "e" };
    let width = if kind.id == "productId" { 4 } else { 3 };
    let mut round = first;
    while running.load(Ordering::SeqCst) || round < first + 2 {
        for i in (0..count).step_by(10) {
            // Updated: i+1; deleted once: i+2; created: a new id per round.
            let id = format!("{prefix}-{:0width$}", i + 1);
            w.put(kind, &id, round).await;
            let gone = format!("{prefix}-{:0width$}", i + 2);
            if round == first && !w.ledger(kind).deleting().contains_key(&gone) {
                w.delete(kind, &gone).await;
            }
            if i % 50 == 0 {
                w.put(kind, &format!("{prefix}-new-{round}-{i}"), 0).await;
            }
        }
        round += 1;
    }
}

/// Walks `kind`'s list in `order` again and again while `running` holds, checking each walk
/// ([`check_concurrent_walk`]) and counting it in `walks`.
pub async fn walk_while(
    w: &World<'_>,
    kind: Kind,
    order: &'static str,
    running: &AtomicBool,
    walks: &AtomicU64,
) {
    while running.load(Ordering::SeqCst) {
        let ledger = w.ledger(kind);
        let (before, deleting_before) = (ledger.committed(), ledger.deleting());
        let seen = w.walk(kind, order).await;
        let (after, deleting_after) = (ledger.started(), ledger.deleting());
        check_concurrent_walk(
            kind,
            &seen,
            &before,
            &deleting_before,
            &after,
            &deleting_after,
        );
        walks.fetch_add(1, Ordering::SeqCst);
    }
}

/// Reads products one by one (ids `0..count`, in a scattered order) while `running` holds, each
/// checked against the model: an item live throughout is found, at a version between what was
/// committed before the read and what was sent before it was answered; an item whose delete was
/// answered before the read is not found. Counts the reads in `reads`.
pub async fn read_while(w: &World<'_>, count: usize, running: &AtomicBool, reads: &AtomicU64) {
    let ledger = w.ledger(PRODUCT);
    let mut n = 0usize;
    while running.load(Ordering::SeqCst) {
        let id = format!("p-{:04}", (n * 7919) % count);
        n += 1;
        let (before, deleting_before) = (ledger.committed(), ledger.deleting());
        let r = w.h.caller(&w.auth()).get_product(&id).await;
        let (after, deleting_after) = (ledger.started(), ledger.deleting());
        match r.status {
            200 => {
                let v = version_of(PRODUCT, &r.body);
                assert!(
                    deleting_before.get(&id) != Some(&true),
                    "{id} read at v{v} after its delete was answered"
                );
                if let (Some(low), Some(high)) = (before.get(&id), after.get(&id)) {
                    assert!(
                        *low <= v && v <= *high,
                        "{id} read at v{v}, outside v{low}..=v{high}"
                    );
                }
            }
            404 => assert!(
                !before.contains_key(&id) || deleting_after.contains_key(&id),
                "{id} was live throughout but its read found nothing"
            ),
            status => panic!("read {id}: {status} {}", r.body),
        }
        reads.fetch_add(1, Ordering::SeqCst);
    }
}
