//! Figure 16: an offboarding in lanes. For 1, 4, 16 and 64 lanes, a tenant of [`PRODUCTS`]
//! products on 32 shards is offboarded (`tenants::offboard_tenant::advance`, its lanes stepped side
//! by side in the call, each paced at a partition's rate, through the latency model) while a
//! neighbour reads: items deleted a second, and the neighbour's GetItem p99 during it against
//! before (target: at most 1.2×). Beside it, the same number of raw TransactWriteItems of 99
//! deletes sent side by side, unpaced: what DynamoDB Local itself takes at that concurrency, so the
//! figure shows which limit is pooltable's and which the emulator's.

use std::collections::HashMap;
use std::time::Instant;

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem};
use integration::{unique, Auth, Harness};
use serde_json::json;
use shared::identity::clock::{rfc3339, Clock, SystemClock};
use shared::identity::ids::TenantId;
use shared::isolation::policy::Scope;
use shared::store::lifecycle::offboarding::{self, Step};
use shared::store::tenancy::tenants::read_record_consistent;
use shared::App;

use crate::fixtures::seed_products;
use crate::neighbour;
use crate::report::{stat, Report};

const PRODUCTS: usize = 6_000;
const SHARDS: u32 = 32;
pub const LANES: [u32; 4] = [1, 4, 16, 64];

pub async fn lanes_figure(
    h: &Harness,
    app: &App,
    raw: &aws_sdk_dynamodb::Client,
    report: &mut Report,
) {
    let neighbour = unique("neighbour");
    integration::onboard_tier(h, &neighbour, 4, "premium").await;
    seed_products(h, &neighbour, 4, 1).await;
    let neighbour_auth = Auth::Tenant(neighbour);
    let before = stat(neighbour::alone(app, &neighbour_auth).await);
    report.add(
        "16a. neighbour GetItem, no offboarding [latency model]",
        &before,
        String::new(),
    );
    let mut one_lane_rate = None;
    for lanes in LANES {
        let (rate, during) = offboard_in_lanes(h, app, &neighbour_auth, lanes).await;
        let one = *one_lane_rate.get_or_insert(rate);
        let during = stat(during);
        report.add(
            &format!(
                "16b. neighbour GetItem, during an offboarding in {lanes} lanes [latency model]"
            ),
            &during,
            format!(
                "p99 {:.2}× the no-offboarding p99 (target <= 1.2×)",
                during.p99 / before.p99
            ),
        );
        let raw_rate = raw_transactions(h, raw, lanes).await;
        report.fact(
            &format!("16c. offboarding in {lanes} lanes: items per second [latency model]"),
            json!(format!("{rate:.0} items/s")),
            &format!(
                "{PRODUCTS} products on {SHARDS} shards, {:.1}× one lane; beside it, {lanes} raw \
                 TransactWriteItems of 99 deletes at once, unpaced, take {raw_rate:.0} items/s: \
                 DynamoDB Local's own ceiling at that concurrency. At this rate 1,000,000 items take \
                 {:.1} h and 100,000,000 {:.0} h",
                rate / one,
                1e6 / rate / 3600.0,
                1e8 / rate / 3600.0
            ),
        );
    }
}

/// Offboards a new tenant of [`PRODUCTS`] products in `lanes` lanes, its deletion starting at once,
/// while the neighbour reads: items a second, and the neighbour's times meanwhile.
async fn offboard_in_lanes(
    h: &Harness,
    app: &App,
    neighbour_auth: &Auth,
    lanes: u32,
) -> (f64, Vec<f64>) {
    let tenant = unique(&format!("lanes{lanes}"));
    integration::onboard_at_max_limits(h, &tenant, SHARDS).await;
    seed_products(h, &tenant, SHARDS, PRODUCTS).await;
    let t = TenantId::parse(&tenant).unwrap();
    let db = app
        .operator_db(&t, Scope::Operator)
        .await
        .expect("the tenant's client")
        .expect("a record");
    let now_ms = SystemClock.now_millis();
    let platform = TenantId::platform();
    offboarding::begin(&db, &platform, rfc3339(now_ms), now_ms / 1000, None)
        .await
        .expect("begun");
    let record = read_record_consistent(&db).await.unwrap().unwrap();
    let state = record.offboarding.clone().expect("offboarding");
    let count = shared::store::lifecycle::lanes::lane_count(
        lanes,
        tenants::offboard_tenant::walk_sources(&record)
            .unwrap()
            .len(),
    );
    assert!(matches!(
        offboarding::plan_lanes(&db, &state, count, now_ms)
            .await
            .unwrap(),
        Step::Committed(_)
    ));
    let done = std::sync::atomic::AtomicBool::new(false);
    let started = Instant::now();
    let offboard = async {
        let runner = tenants::Lanes::in_process();
        loop {
            let Some(record) = read_record_consistent(&db).await.unwrap() else {
                break;
            };
            let answer = Box::pin(tenants::offboard_tenant::advance(app, &runner, &db, record))
                .await
                .expect("an offboarding call");
            if answer.status() == 200 {
                break;
            }
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
    };
    let neighbour_loop = neighbour::beside(app, neighbour_auth, || {
        done.load(std::sync::atomic::Ordering::SeqCst)
    });
    let ((), (during, refused)) = tokio::join!(offboard, neighbour_loop);
    assert_eq!(refused, 0, "the neighbour was refused");
    (PRODUCTS as f64 / started.elapsed().as_secs_f64(), during)
}

/// `concurrency` raw TransactWriteItems of 99 deletes each, side by side and unpaced, over the
/// products of a tenant seeded for it: items a second.
async fn raw_transactions(h: &Harness, raw: &aws_sdk_dynamodb::Client, concurrency: u32) -> f64 {
    let tenant = unique(&format!("raw{concurrency}"));
    integration::onboard_at_max_limits(h, &tenant, SHARDS).await;
    let items = (99 * concurrency as usize * 3).min(PRODUCTS);
    seed_products(h, &tenant, SHARDS, items).await;
    let keys: Vec<HashMap<String, AttributeValue>> = h
        .items_under(&shared::identity::keys::raw_key(&tenant, "PRODUCT#"))
        .await
        .into_iter()
        .map(|item| {
            ["PK", "SK"]
                .into_iter()
                .map(|k| (k.to_owned(), item[k].clone()))
                .collect()
        })
        .collect();
    let started = Instant::now();
    let batches = keys.chunks(99).map(|chunk| {
        chunk
            .iter()
            .map(|key| {
                let delete = Delete::builder()
                    .table_name(&h.table)
                    .set_key(Some(key.clone()))
                    .build()
                    .unwrap();
                TransactWriteItem::builder().delete(delete).build()
            })
            .collect::<Vec<_>>()
    });
    send_raw_transactions(raw, batches, concurrency).await;
    keys.len() as f64 / started.elapsed().as_secs_f64()
}

/// Sends each of `batches` as one raw TransactWriteItems, `concurrency` at once: the floors of
/// figures 16 and 19d, DynamoDB Local's own ceiling with no pooltable code in the way.
async fn send_raw_transactions(
    raw: &aws_sdk_dynamodb::Client,
    batches: impl Iterator<Item = Vec<TransactWriteItem>>,
    concurrency: u32,
) {
    use futures::StreamExt;
    let sends = batches.map(|actions| async move {
        raw.transact_write_items()
            .set_transact_items(Some(actions))
            .send()
            .await
            .expect("a raw transaction");
    });
    futures::stream::iter(sends)
        .buffer_unordered(concurrency as usize)
        .collect::<Vec<()>>()
        .await;
}

/// Figure 19: a re-sharding in lanes. For each of [`LANES`], a tenant of [`PRODUCTS`] products on
/// 8 shards is re-sharded to 32 (`tenants::reshard_tenant::migrate` on `new_app(lanes)`, its lanes
/// stepped side by side in the call, through the latency model) while a neighbour reads: items a
/// second, and the neighbour's GetItem p99 during it against before.
pub async fn resharding_figure(
    h: &Harness,
    app: &App,
    raw: &aws_sdk_dynamodb::Client,
    new_app: impl Fn(u32) -> App,
    report: &mut Report,
) {
    let neighbour = unique("rsneighbour");
    integration::onboard_tier(h, &neighbour, 4, "premium").await;
    seed_products(h, &neighbour, 4, 1).await;
    let neighbour_auth = Auth::Tenant(neighbour);
    let before = stat(neighbour::alone(app, &neighbour_auth).await);
    report.add(
        "19a. neighbour GetItem, no re-sharding [latency model]",
        &before,
        String::new(),
    );
    for lanes in LANES {
        let mover = new_app(lanes);
        let (rate, during) = reshard_in_lanes(h, app, &mover, &neighbour_auth).await;
        let during = stat(during);
        report.add(
            &format!(
                "19b. neighbour GetItem, during a re-sharding in {lanes} lanes [latency model]"
            ),
            &during,
            format!(
                "p99 {:.2}× the no-re-sharding p99 (target <= 1.2×)",
                during.p99 / before.p99
            ),
        );
        report.fact(
            &format!("19c. re-sharding 8 → 32 in {lanes} lanes: items per second [latency model]"),
            json!(format!("{rate:.0} items/s")),
            &format!(
                "{PRODUCTS} products walked (about three in four move), up to five moved \
                 items to a transaction with the lane's checkpoint; at this rate 1,000,000 \
                 items take {:.1} h and 100,000,000 {:.0} h",
                1e6 / rate / 3600.0,
                1e8 / rate / 3600.0
            ),
        );
        raw_relocations_fact(h, raw, lanes, report).await;
    }
}

/// Figure 19d alone: DynamoDB Local's ceiling for relocations at each of [`LANES`].
pub async fn raw_relocations_figure(
    h: &Harness,
    raw: &aws_sdk_dynamodb::Client,
    report: &mut Report,
) {
    for lanes in LANES {
        raw_relocations_fact(h, raw, lanes, report).await;
    }
}

async fn raw_relocations_fact(
    h: &Harness,
    raw: &aws_sdk_dynamodb::Client,
    lanes: u32,
    report: &mut Report,
) {
    let raw_rate = raw_relocations(h, raw, lanes).await;
    report.fact(
        &format!(
            "19d. raw relocations, {lanes} transactions at once: items per second [latency model]"
        ),
        json!(format!("{raw_rate:.0} items/s")),
        "TransactWriteItems of 5 relocations (a Put of the copy at a new key, a Delete of the \
         original, each conditioned), sent side by side and unpaced: DynamoDB Local's own \
         ceiling for the shape of a move's and a re-sharding's writes",
    );
}

/// `concurrency` raw TransactWriteItems of 5 relocations each (a conditioned Put of a copy at a new
/// partition key and a conditioned Delete of the original), side by side and unpaced, over the
/// products of a tenant seeded for it: items a second.
async fn raw_relocations(h: &Harness, raw: &aws_sdk_dynamodb::Client, concurrency: u32) -> f64 {
    use aws_sdk_dynamodb::types::Put;
    let tenant = unique(&format!("rawmove{concurrency}"));
    integration::onboard_at_max_limits(h, &tenant, SHARDS).await;
    let items = (5 * concurrency as usize * 40).min(PRODUCTS);
    seed_products(h, &tenant, SHARDS, items).await;
    let products = h
        .items_under(&shared::identity::keys::raw_key(&tenant, "PRODUCT#"))
        .await;
    let started = Instant::now();
    let batches = products.chunks(5).map(|chunk| {
        chunk
            .iter()
            .flat_map(|item| {
                let mut copy = item.clone();
                let moved = format!("{}-moved", item["PK"].as_s().unwrap());
                copy.insert("PK".into(), AttributeValue::S(moved));
                let put = Put::builder()
                    .table_name(&h.table)
                    .set_item(Some(copy))
                    .condition_expression("attribute_not_exists(PK)")
                    .build()
                    .unwrap();
                let key: HashMap<String, AttributeValue> = ["PK", "SK"]
                    .into_iter()
                    .map(|k| (k.to_owned(), item[k].clone()))
                    .collect();
                let delete = Delete::builder()
                    .table_name(&h.table)
                    .set_key(Some(key))
                    .condition_expression("attribute_exists(PK)")
                    .build()
                    .unwrap();
                [
                    TransactWriteItem::builder().put(put).build(),
                    TransactWriteItem::builder().delete(delete).build(),
                ]
            })
            .collect::<Vec<_>>()
    });
    send_raw_transactions(raw, batches, concurrency).await;
    products.len() as f64 / started.elapsed().as_secs_f64()
}

/// Re-shards a new tenant of [`PRODUCTS`] products from 8 shards to 32 on `mover`, its moves
/// starting at once, while the neighbour reads on `app`: products walked a second, and the
/// neighbour's times meanwhile.
async fn reshard_in_lanes(
    h: &Harness,
    app: &App,
    mover: &App,
    neighbour_auth: &Auth,
) -> (f64, Vec<f64>) {
    use shared::store::lifecycle::resharding::{self, MOVES_DELAY_SECONDS};
    let tenant = unique("resharded");
    integration::onboard_at_max_limits(h, &tenant, 8).await;
    seed_products(h, &tenant, 8, PRODUCTS).await;
    let t = TenantId::parse(&tenant).unwrap();
    let db = mover
        .operator_db(&t, Scope::Operator)
        .await
        .expect("the tenant's client")
        .expect("a record");
    let record = read_record_consistent(&db).await.unwrap().unwrap();
    // Begun as if its delays had passed: nothing but the neighbour is served here.
    let begun_ms = SystemClock.now_millis() - MOVES_DELAY_SECONDS * 1000;
    let platform = TenantId::platform();
    assert!(matches!(
        resharding::begin(&db, &record, 32, &platform, begun_ms, None)
            .await
            .unwrap(),
        resharding::Step::Committed(_)
    ));
    let done = std::sync::atomic::AtomicBool::new(false);
    let started = Instant::now();
    let reshard = async {
        let runner = tenants::Lanes::in_process();
        loop {
            let record = read_record_consistent(&db).await.unwrap().unwrap();
            let until = Instant::now() + std::time::Duration::from_secs(5);
            let answer = Box::pin(tenants::reshard_tenant::migrate(
                mover, &runner, &db, record, until,
            ))
            .await
            .expect("a re-sharding call");
            if answer.status() == 200 {
                break;
            }
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
    };
    let neighbour_loop = neighbour::beside(app, neighbour_auth, || {
        done.load(std::sync::atomic::Ordering::SeqCst)
    });
    let ((), (during, refused)) = tokio::join!(reshard, neighbour_loop);
    assert_eq!(refused, 0, "the neighbour was refused");
    let record = read_record_consistent(&db).await.unwrap().unwrap();
    assert_eq!(record.shard_count, 32, "the re-sharding ended");
    (PRODUCTS as f64 / started.elapsed().as_secs_f64(), during)
}
