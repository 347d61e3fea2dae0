//! A concurrent multi-tenant workload through the real handlers: 20 tenants, mixed operations, 32 in
//! flight. Afterwards: no 5xx, every acknowledged write is present, every item is under its own
//! tenant's prefix, and no response carried another tenant's data (every stored document embeds its
//! tenant, and every response is checked for the other tenants' names).
//!
//! CI runs 2,000 operations; the full size is `LOAD_OPS=10000 ./scripts/test.sh` (or run this test
//! alone with the local stack's environment, see README).

use shared::identity::keys::raw_key;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use integration::{onboard, unique, Auth, Harness};
use serde_json::json;

const TENANTS: usize = 20;
const IN_FLIGHT: usize = 32;

#[derive(Default)]
struct Ledger {
    sessions: Vec<(String, String)>,
    products: HashSet<(String, String)>,
    statuses: BTreeMap<u16, usize>,
}

fn pick(i: usize, salt: u64, n: usize) -> usize {
    // A fixed-seed LCG: the workload is the same on every run.
    let x = (i as u64)
        .wrapping_mul(6364136223846793005)
        .wrapping_add(salt.wrapping_mul(1442695040888963407));
    ((x >> 33) % n as u64) as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_multi_tenant_workload_keeps_tenants_apart_and_loses_nothing() {
    let ops: usize = std::env::var("LOAD_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let h = Arc::new(Harness::new().await);
    let tenants: Vec<String> = (0..TENANTS).map(|_| unique("load")).collect();
    for (i, t) in tenants.iter().enumerate() {
        onboard(&h, t, [1, 4, 16][i % 3]).await;
    }
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let started = std::time::Instant::now();

    futures::stream::iter(0..ops)
        .map(|i| {
            let (h, tenants, ledger) = (h.clone(), tenants.clone(), ledger.clone());
            async move {
                let t = &tenants[pick(i, 1, TENANTS)];
                let auth = Auth::Tenant(t.clone());
                let op = pick(i, 2, 10);
                let r = match op {
                    0..=2 => {
                        let r = h
                            .caller(&auth)
                            .create_session(
                                json!({"customerId": format!("c{}", i % 7), "state": t}),
                            )
                            .await;
                        if r.status == 201 {
                            ledger.lock().unwrap().sessions.push((
                                t.clone(),
                                r.body["sessionId"].as_str().unwrap().to_owned(),
                            ));
                        }
                        r
                    }
                    3 => {
                        let known = ledger
                            .lock()
                            .unwrap()
                            .sessions
                            .iter()
                            .filter(|(o, _)| o == t)
                            .map(|(_, s)| s.clone())
                            .next_back();
                        let id =
                            known.unwrap_or_else(|| "01a1fcba-9139-7bdd-8e68-8992306e0b9d".into());
                        h.caller(&auth).get_session_by_session_id(&id).await
                    }
                    4 => {
                        h.caller(&auth)
                            .query(&[("limit", "10")])
                            .get_sessions_by_customer_id(&format!("c{}", i % 7))
                            .await
                    }
                    5..=6 => {
                        let id = format!("p{}", pick(i, 3, 200));
                        let r = h
                            .caller(&auth)
                            .put_product(&id, json!({"owner": t, "i": i}))
                            .await;
                        if r.status == 200 || r.status == 201 {
                            ledger.lock().unwrap().products.insert((t.clone(), id));
                        }
                        r
                    }
                    7..=8 => {
                        h.caller(&auth)
                            .get_product(&format!("p{}", pick(i, 3, 200)))
                            .await
                    }
                    _ => {
                        h.caller(&auth)
                            .query(&[("limit", "20")])
                            .query_tenant_products()
                            .await
                    }
                };
                // no response ever carries another tenant's data
                let text = r.body.to_string();
                for other in tenants.iter().filter(|o| *o != t) {
                    assert!(
                        !text.contains(other.as_str()),
                        "a response to {t} carried {other}'s data: {text}"
                    );
                }
                *ledger.lock().unwrap().statuses.entry(r.status).or_default() += 1;
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;

    let elapsed = started.elapsed();
    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    println!("load: {ops} operations, {IN_FLIGHT} in flight, {TENANTS} tenants, {elapsed:?}, statuses {:?}", ledger.statuses);
    // no 5xx
    assert!(
        ledger.statuses.keys().all(|s| *s < 500),
        "{:?}",
        ledger.statuses
    );
    // every acknowledged write is present, under its own tenant's prefix
    let items = h.all_items().await;
    let keys: HashSet<(String, String)> = items
        .iter()
        .map(|i| {
            (
                i["PK"].as_s().unwrap().clone(),
                i["SK"].as_s().unwrap().clone(),
            )
        })
        .collect();
    for (t, id) in &ledger.sessions {
        assert!(
            keys.iter()
                .any(|(pk, _)| pk == &raw_key(t, format!("SESSION#{id}"))),
            "session {id} of {t} is missing"
        );
    }
    for (t, id) in &ledger.products {
        assert!(
            keys.iter()
                .any(|(_, sk)| sk == &raw_key(t, format!("PRODUCT#{id}"))),
            "product {id} of {t} is missing"
        );
    }
    for item in &items {
        let pk = item["PK"].as_s().unwrap();
        let owner = tenants
            .iter()
            .find(|t| pk.starts_with(&raw_key(t, "")))
            .unwrap_or_else(|| panic!("{pk} belongs to no tenant"));
        assert!(item["SK"].as_s().unwrap().starts_with(&raw_key(owner, "")));
        for field in ["state", "document"] {
            if let Some(v) = item.get(field) {
                assert!(
                    format!("{v:?}").contains(owner.as_str()),
                    "{pk}: {field} does not embed its tenant"
                );
            }
        }
    }
}
