//! Figure 13: a per-tenant restore. A tenant of [`PRODUCTS`] products on 8 shards is snapshotted
//! into a source table, then damaged (a third deleted, a third overwritten); the restore's steps
//! (`shared::store::lifecycle::restoring`, through the latency model, paced as in production) bring
//! it back while a neighbour reads. Reports items restored per second (every item the restore
//! compared, and those it changed) and the neighbour's GetItem p99 during the restore against
//! before (target: at most 1.2×).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::{unique, Auth, Harness};
use serde_json::json;
use shared::identity::clock::{Clock, SystemClock};
use shared::identity::ids::TenantId;
use shared::store::client::scoped::TenantDb;
use shared::store::lifecycle::restoring::{self, Restore, Step};
use shared::store::tenancy::tenants::read_record_consistent;
use shared::App;

use crate::fixtures::{seed_products, seed_products_with};
use crate::neighbour;
use crate::report::{stat, Report};

const PRODUCTS: usize = 3_000;

/// Figure `fig` (13, or 18 in `label`'s lanes): the neighbour served by `app` while `restorer` (an
/// app whose `LIFECYCLE_LANES` is the figure's) restores the tenant.
pub async fn restore_figure(
    h: &Harness,
    app: &App,
    restorer: &App,
    fig: &str,
    label: &str,
    report: &mut Report,
) {
    let (tenant, neighbour) = (unique("restored"), unique("neighbour"));
    integration::onboard_at_max_limits(h, &tenant, 8).await;
    integration::onboard_tier(h, &neighbour, 4, "premium").await;
    seed_products(h, &tenant, 8, PRODUCTS).await;
    seed_products(h, &neighbour, 4, 1).await;
    // The snapshot: the whole table copied into a source table, as a point-in-time restore makes it.
    let source = h.snapshot(&tenant).await;
    let t = TenantId::parse(&tenant).unwrap();
    damage(h, &tenant).await;

    let neighbour_auth = Auth::Tenant(neighbour);
    let before = neighbour::alone(app, &neighbour_auth).await;

    let db = begin_restore(restorer, &t, &source).await;
    let started = Instant::now();
    let done = AtomicBool::new(false);
    let neighbour_loop = neighbour::beside(app, &neighbour_auth, || done.load(Ordering::SeqCst));
    let (ended, (during, refused)) =
        tokio::join!(restore_to_end(restorer, &db, &done), neighbour_loop);
    assert_eq!(refused, 0, "the neighbour was refused");
    let seconds = started.elapsed().as_secs_f64();
    report_restore(&ended, before, during, seconds, fig, label, report);
}

/// The damage: a third of `tenant`'s products deleted, a third overwritten.
async fn damage(h: &Harness, tenant: &str) {
    for item in h
        .items_under(&shared::identity::keys::raw_key(tenant, "PRODUCT#"))
        .await
    {
        let n: usize = item["productId"].as_s().unwrap()[2..].parse().unwrap();
        let key: HashMap<String, AttributeValue> = ["PK", "SK"]
            .into_iter()
            .map(|k| (k.to_owned(), item[k].clone()))
            .collect();
        if n.is_multiple_of(3) {
            let delete = h
                .admin
                .delete_item()
                .table_name(&h.table)
                .set_key(Some(key));
            delete.send().await.expect("damage");
        }
    }
    seed_products_with(h, tenant, 8, PRODUCTS / 3, |i| {
        AttributeValue::M(HashMap::from([(
            "name".into(),
            AttributeValue::S(format!("overwritten {i}")),
        )]))
    })
    .await;
}

/// The restore of `t` from table `source`, begun with no delay (nothing else writes the tenant
/// here). The tenant's client it runs with.
async fn begin_restore(restorer: &App, t: &TenantId, source: &str) -> TenantDb {
    let db = restorer.db_to_change(t).await.expect("the tenant's client");
    let record = read_record_consistent(&db).await.unwrap().unwrap();
    let reader = restorer.tenants.source_reader(t, source);
    let source_shards = restoring::source_shards(&reader, &record)
        .await
        .unwrap()
        .unwrap();
    let now_ms = SystemClock.now_millis();
    let platform = TenantId::PLATFORM.to_owned();
    let state = Restore::new(
        source.to_owned(),
        None,
        now_ms,
        platform,
        now_ms / 1000,
        Some(source_shards),
    );
    assert!(matches!(
        restoring::begin(&db, &state, None).await.unwrap(),
        Step::Committed(_)
    ));
    db
}

/// The restore stepped to its end, then `done` set. Its report.
async fn restore_to_end(restorer: &App, db: &TenantDb, done: &AtomicBool) -> Restore {
    // Its lanes stepped side by side in each call, as with no lane queue.
    let runner = tenants::Lanes::in_process();
    loop {
        let record = read_record_consistent(db).await.unwrap().unwrap();
        let answer = Box::pin(tenants::restore_tenant::advance(
            restorer,
            &runner,
            db,
            record,
            tenants::restore_tenant::Stepper::CallOrDriver,
        ))
        .await
        .expect("a restore call");
        if answer.status() == 200 {
            done.store(true, Ordering::SeqCst);
            let record = read_record_consistent(db).await.unwrap().unwrap();
            return record.last_restore.expect("its report");
        }
    }
}

/// Adds figure `fig`: the neighbour's GetItem before and during the restore `ended`, and the
/// restore's rate over its `seconds`.
fn report_restore(
    ended: &Restore,
    before: Vec<f64>,
    during: Vec<f64>,
    seconds: f64,
    fig: &str,
    label: &str,
    report: &mut Report,
) {
    let changed: u64 = [&ended.put_back, &ended.overwritten, &ended.deleted]
        .iter()
        .flat_map(|c| c.values())
        .sum();
    let (before, during) = (stat(before), stat(during));
    report.add(
        &format!("{fig}a. neighbour GetItem, no restore{label} [latency model]"),
        &before,
        String::new(),
    );
    report.add(
        &format!("{fig}b. neighbour GetItem, during a restore{label} [latency model]"),
        &during,
        format!(
            "p99 {:.2}× the no-restore p99 (target <= 1.2×)",
            during.p99 / before.p99
        ),
    );
    report.fact(
        &format!("{fig}c. per-tenant restore{label}: items per second [latency model]"),
        json!(format!("{:.0} items/s", PRODUCTS as f64 / seconds)),
        &format!(
            "{PRODUCTS} products compared in {seconds:.1} s ({:.0} changed: put back {:?}, \
             overwritten {:?}, deleted {:?}), paced at a partition's write rate",
            changed as f64, ended.put_back, ended.overwritten, ended.deleted
        ),
    );
}
