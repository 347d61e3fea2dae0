//! Figure 15: a tenant's move from the pool into its own table while it is served. A tenant of
//! [`PRODUCTS`] products on 8 shards reads and writes its products (through the latency model)
//! before the move, then during it: writes moved to the target, each request first pulling what it
//! touches out of the source, while the backfill (`tenants::move_tenant::advance`, paced as in
//! production) moves the rest. Reports items moved per second, and the tenant's own GetItem and
//! PutItem p99 during the move against before (target: at most 2×), each p99 of about a thousand
//! samples.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use integration::{unique, Auth, Harness};
use serde_json::json;
use shared::identity::clock::{Clock, SystemClock};
use shared::identity::ids::TenantId;
use shared::store::lifecycle::moving::{self, Placement};
use shared::store::lifecycle::resharding::{Step, MOVES_DELAY_SECONDS};
use shared::store::tenancy::placement::{create_own_table, own_table_name};
use shared::store::tenancy::tenants::TenantRecord;
use shared::App;

use crate::fixtures::seed_products;
use crate::report::{stat, Report};
use crate::requests;

const PRODUCTS: usize = 3_000;
/// The tenant's requests before the move (half reads, half writes).
const BEFORE: usize = 2_000;

/// One of the tenant's own requests, as the runtime serves it: the `n`th reads a seeded product,
/// or (every other one) overwrites one. Answers (is it a write, ms).
async fn own_request(app: &App, auth: &Auth, n: usize) -> (bool, f64) {
    let id = format!("p-{:05}", (n * 7919) % PRODUCTS);
    let write = n % 2 == 1;
    let (ms, status) = if write {
        let body = json!({"name": format!("written {n}")});
        requests::put_product_admitted(app, auth, &id, body).await
    } else {
        requests::get_product_admitted(app, auth, &id).await
    };
    assert!(status == 200 || status == 201, "{id}: {status}");
    (write, ms)
}

/// The tenant's own GetItems' and PutItems' times.
#[derive(Default)]
struct Served {
    reads: Vec<f64>,
    writes: Vec<f64>,
}

impl Served {
    fn push(&mut self, (write, ms): (bool, f64)) {
        if write {
            self.writes.push(ms);
        } else {
            self.reads.push(ms);
        }
    }
}

/// Figure `fig` (15, or 17 in `label`'s lanes): the tenant served by `app` while `backfill` moves
/// it, in the lanes asked (`?lanes=`: a move runs in one, `move_tenant::MOVE_LANES`, unless asked,
/// whatever `LIFECYCLE_LANES` says).
pub async fn move_figure(
    h: &Harness,
    app: &App,
    backfill: &App,
    lanes_asked: Option<u32>,
    fig: &str,
    label: &str,
    report: &mut Report,
) {
    let tenant = unique("moved");
    integration::onboard_at_max_limits(h, &tenant, 8).await;
    seed_products(h, &tenant, 8, PRODUCTS).await;
    let auth = Auth::Tenant(tenant.clone());
    // As many as a move serves (about 700 to 1,000 here): a p99 of a few hundred samples moves by a
    // third from run to run, and the figure is a ratio of two of them.
    let mut before = Served::default();
    for n in 0..BEFORE {
        before.push(own_request(app, &auth, n).await);
    }

    let t = TenantId::parse(&tenant).unwrap();
    let record = begin_move(h, app, &t, lanes_asked).await;
    let started = Instant::now();
    let done = AtomicBool::new(false);
    let ((), during) = tokio::join!(
        backfill_to_end(backfill, &t, record, &done),
        served_until(app, &auth, &done)
    );
    let seconds = started.elapsed().as_secs_f64();
    let left = h
        .items_under(&shared::identity::keys::raw_key(&tenant, "PRODUCT#"))
        .await
        .len();
    assert_eq!(left, 0, "products left in the pool after the move");
    report_move(before, during, seconds, fig, label, report);
}

/// The move into `t`'s own table, begun as if its delays had passed (nothing but the figure's loop
/// serves the tenant), and known to `app`, the serving container, at once. The record it committed.
async fn begin_move(
    h: &Harness,
    app: &App,
    t: &TenantId,
    lanes_asked: Option<u32>,
) -> TenantRecord {
    let own = own_table_name(app.tenants.table_name(), t).unwrap();
    let operator = app.db_to_change(t).await.expect("the operator's client");
    let manager = operator.own_table_manager().expect("its table manager");
    // A new table, made here: nothing an operator put in it to look for.
    let nothing = std::future::ready(Ok(None));
    create_own_table(
        &app.tenants.table_manager(),
        manager,
        &h.table,
        &own,
        t,
        nothing,
    )
    .await
    .expect("the own table");
    let db = app.db_to_change(t).await.expect("the tenant's client");
    let before = shared::store::tenancy::tenants::read_record_consistent(&db)
        .await
        .unwrap()
        .unwrap();
    let begun_ms = SystemClock.now_millis() - MOVES_DELAY_SECONDS * 1000;
    let platform = TenantId::platform();
    let Step::Committed(record) = moving::begin(
        &db,
        &before,
        Placement::Own,
        &own,
        &platform,
        begun_ms,
        lanes_asked,
    )
    .await
    .unwrap() else {
        panic!("the move did not begin");
    };
    app.directory.remember(t, Some(Arc::new((*record).clone())));
    *record
}

/// The backfill (paced as in production) stepped until the move is done, then `done` set.
async fn backfill_to_end(
    backfill: &App,
    t: &TenantId,
    mut record: TenantRecord,
    done: &AtomicBool,
) {
    loop {
        let db = backfill.db_to_change(t).await.unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        let answer = tenants::move_tenant::advance(
            backfill,
            &tenants::Lanes::in_process(),
            &db,
            record,
            until,
        )
        .await
        .expect("a backfill step");
        if answer.status() == 200 {
            done.store(true, Ordering::SeqCst);
            return;
        }
        record = shared::store::tenancy::tenants::read_record_consistent(&db)
            .await
            .unwrap()
            .unwrap();
    }
}

/// The tenant's own requests, one after another, until `done`.
async fn served_until(app: &App, auth: &Auth, done: &AtomicBool) -> Served {
    let mut served = Served::default();
    let mut n = 0;
    while !done.load(Ordering::SeqCst) {
        served.push(own_request(app, auth, n).await);
        n += 1;
    }
    served
}

/// Adds figure `fig`: the tenant's GetItem and PutItem before and during the move, and the move's
/// rate over its `seconds`.
fn report_move(
    before: Served,
    during: Served,
    seconds: f64,
    fig: &str,
    label: &str,
    report: &mut Report,
) {
    for (name, before, during) in [
        ("GetItem", before.reads, during.reads),
        ("PutItem", before.writes, during.writes),
    ] {
        let (before, during) = (stat(before), stat(during));
        let letter = if name == "GetItem" {
            ('a', 'b')
        } else {
            ('c', 'd')
        };
        report.add(
            &format!(
                "{fig}{}. the tenant's {name}, no move{label} [latency model]",
                letter.0
            ),
            &before,
            String::new(),
        );
        report.add(
            &format!(
                "{fig}{}. the tenant's {name}, during its move{label} [latency model]",
                letter.1
            ),
            &during,
            format!(
                "p99 {:.2}× the no-move p99 (target <= 2×)",
                during.p99 / before.p99
            ),
        );
    }
    report.fact(
        &format!("{fig}e. a move pool → own table{label}: items per second [latency model]"),
        json!(format!("{:.0} items/s", PRODUCTS as f64 / seconds)),
        &format!(
            "{PRODUCTS} products moved in {seconds:.1} s by the backfill and the tenant's own \
             requests' pulls, paced at a partition's write rate"
        ),
    );
}
