//! Figure 11 (issue #16, parts 1-2): levelling the inflow through the import queue. A tenant writes 5,000
//! products in a burst, once straight to the table (`PUT /products/{id}`, as fast as a client with
//! [`DIRECT_CONCURRENCY`] requests in flight can) and once through `POST /imports` and the import
//! queue, drained by the release consumer binary at the template's defaults (`MaximumConcurrency`
//! 2 invocations, 4 writes in flight each). Meanwhile another tenant reads its products with
//! GetItem at a steady [`READ_RATE`] a second, open-loop; its latency, quiet and during each burst,
//! is the figure. Both run through the latency model, on the same DynamoDB Local.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use integration::import_queue::{drain, Consumer, ImportQueues};
use integration::process::built_bin;
use integration::{onboard_at_max_limits as onboard, unique, Auth, Harness};
use serde_json::json;
use shared::identity::ids::{EntityId, TenantId};
use shared::store::client::items::get_item;
use shared::store::client::scoped::TenantDb;
use shared::App;

use crate::apps::Target;
use crate::fixtures::seed_products;
use crate::report::{stat, Report};

pub const WRITES: usize = 5_000;
pub const DIRECT_CONCURRENCY: usize = 64;
pub const READ_RATE: f64 = 100.0;
/// The template's defaults: `ImportConsumerConcurrency` and `ImportConsumerWritesInFlight`.
pub const CONSUMERS: usize = 2;
pub const WRITES_IN_FLIGHT: usize = 4;

/// What a figure's steady reads saw: each answered read's ms, and how many failed (unavailable:
/// the server could not answer in the SDK's time). A failure is a finding of the figure, reported
/// beside it, never a crash: how often it happens depends on the machine's load.
struct Reads {
    ms: Vec<f64>,
    failed: usize,
}

impl Reads {
    fn note(&self) -> String {
        match self.failed {
            0 => String::new(),
            n => format!("; {n} reads unavailable"),
        }
    }
}

/// GetItems of `db`'s products at [`READ_RATE`] a second until `stop` resolves.
async fn steady_reads(
    db: &TenantDb,
    tenant: &TenantId,
    products: usize,
    stop: impl std::future::Future<Output = ()>,
) -> Reads {
    let interval = Duration::from_secs_f64(1.0 / READ_RATE);
    let start = tokio::time::Instant::now();
    let reads = futures::stream::iter(0..)
        .then(|i| async move {
            tokio::time::sleep_until(start + interval * i).await;
            i
        })
        .map(|i| async move {
            let id = EntityId::parse(&format!("p-{:05}", i as usize % products)).unwrap();
            let key = products::product_key(tenant, &id, 4);
            let t = Instant::now();
            get_item(db, key)
                .await
                .ok()
                .map(|_| t.elapsed().as_secs_f64() * 1000.0)
        })
        .buffer_unordered(256)
        .take_until(stop)
        .collect::<Vec<Option<f64>>>();
    let all = reads.await;
    let failed = all.iter().filter(|r| r.is_none()).count();
    Reads {
        ms: all.into_iter().flatten().collect(),
        failed,
    }
}

fn products_body(prefix: &str, from: usize, n: usize) -> serde_json::Value {
    let items: Vec<_> = (from..from + n)
        .map(|i| json!({"productId": format!("{prefix}-{i:05}"), "document": {"n": i, "name": format!("imported {i}")}}))
        .collect();
    json!({"kind": "products", "items": items})
}

/// Figure 11: a quiet tenant of 1,000 products on 4 shards reads them while a 16-shard tenant
/// writes its burst.
pub async fn queue_figure(h: &Harness, target: &Target, report: &mut Report) {
    let (quiet, bulk) = (unique("quiet"), unique("bulk"));
    onboard(h, &quiet, 4).await;
    onboard(h, &bulk, 16).await;
    seed_products(h, &quiet, 4, 1_000).await;
    queue_figures(
        h,
        &target.app,
        &TenantId::parse(&quiet).unwrap(),
        1_000,
        &bulk,
        &built_bin("release", "import-consumer"),
        &target.dynamodb_url,
        report,
    )
    .await;
}

/// The tenant whose steady reads are the figure: its client, its id, and how many products
/// (`p-00000…`) it holds.
struct Quiet<'a> {
    db: &'a TenantDb,
    tenant: &'a TenantId,
    products: usize,
}

impl Quiet<'_> {
    /// Its steady reads until `stop` resolves.
    async fn reads_until(&self, stop: impl std::future::Future<Output = ()>) -> Reads {
        steady_reads(self.db, self.tenant, self.products, stop).await
    }
}

/// Figure 11. `quiet` holds products `p-00000…` on 4 shards; `bulk` is a 16-shard tenant.
#[allow(clippy::too_many_arguments)]
async fn queue_figures(
    h: &Harness,
    app: &App,
    quiet: &TenantId,
    quiet_products: usize,
    bulk: &str,
    consumer_bin: &std::path::Path,
    dynamodb_url: &str,
    report: &mut Report,
) {
    let db = app.db(quiet).await.expect("the quiet tenant's client");
    let quiet = Quiet {
        db: &db,
        tenant: quiet,
        products: quiet_products,
    };
    // Quiet: no burst, for 5 s.
    let quiet_ms = quiet
        .reads_until(tokio::time::sleep(Duration::from_secs(5)))
        .await;
    report.add(
        "11. other tenant's GetItem, no burst [latency model]",
        &stat(quiet_ms.ms.clone()),
        format!("{READ_RATE} reads/s, open-loop{}", quiet_ms.note()),
    );
    direct_burst_figure(app, &quiet, bulk, report).await;
    queued_burst_figure(h, app, &quiet, bulk, consumer_bin, dynamodb_url, report).await;
}

/// A burst straight to the table: `bulk`'s [`WRITES`] PUTs, [`DIRECT_CONCURRENCY`] in flight,
/// while the quiet tenant reads.
async fn direct_burst_figure(app: &App, quiet: &Quiet<'_>, bulk: &str, report: &mut Report) {
    let started = Instant::now();
    let burst = futures::stream::iter(0..WRITES)
        .map(|i| async move {
            let id = format!("direct-{i:05}");
            let req = integration::Client::new(app, Auth::Tenant(bulk.into())).request(
                "put-product",
                &[("productId", id.as_str())],
                Some(json!({"n": i})),
            );
            let r = products::put_product::handle(app, req).await;
            r.is_ok_and(|r| r.status().is_success())
        })
        .buffer_unordered(DIRECT_CONCURRENCY)
        .collect::<Vec<bool>>();
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let (reads, refused) = tokio::join!(
        quiet.reads_until(async {
            finished.await.ok();
        }),
        async {
            let refused = burst.await.into_iter().filter(|ok| !ok).count();
            let _ = done.send(());
            refused
        }
    );
    let direct_s = started.elapsed().as_secs_f64();
    report.add(
        "11. other tenant's GetItem, 5,000 direct writes [latency model]",
        &stat(reads.ms.clone()),
        format!(
            "the burst: {DIRECT_CONCURRENCY} PUTs in flight, {:.1} s, {:.0} writes/s, {refused} refused{}",
            direct_s,
            WRITES as f64 / direct_s,
            reads.note()
        ),
    );
}

/// The same burst through the queue: enqueued by `POST /imports`, then drained by [`CONSUMERS`]
/// release consumers while the quiet tenant reads.
async fn queued_burst_figure(
    h: &Harness,
    app: &App,
    quiet: &Quiet<'_>,
    bulk: &str,
    consumer_bin: &std::path::Path,
    dynamodb_url: &str,
    report: &mut Report,
) {
    let queues = ImportQueues::create(5, 60).await;
    let producer = queues.producer();
    let started = Instant::now();
    enqueue_burst(app, &producer, bulk).await;
    let enqueued_s = started.elapsed().as_secs_f64();
    let consumers = start_consumers(h, consumer_bin, dynamodb_url).await;
    let consumers: Vec<&Consumer> = consumers.iter().collect();
    let drained = Arc::new(tokio::sync::Notify::new());
    let started = Instant::now();
    let (reads, _) = tokio::join!(quiet.reads_until(drained.notified()), async {
        drain(&queues, &consumers, 10).await;
        drained.notify_one();
    });
    let drain_s = started.elapsed().as_secs_f64();
    let rate = WRITES as f64 / drain_s;
    report.add(
        "11. other tenant's GetItem, 5,000 writes via the queue [latency model]",
        &stat(reads.ms.clone()),
        format!(
            "enqueued in {enqueued_s:.1} s; drained in {drain_s:.1} s by {CONSUMERS} consumers × {WRITES_IN_FLIGHT} writes in flight{}",
            reads.note()
        ),
    );
    report.fact(
        "11. import consumer: sustained write rate [latency model]",
        json!(format!("{rate:.0} items/s")),
        &format!(
            "MaximumConcurrency {CONSUMERS}, IMPORT_WRITES_IN_FLIGHT {WRITES_IN_FLIGHT}: one transaction per item"
        ),
    );
}

/// `bulk`'s [`WRITES`] products sent to the queue by `POST /imports`, 1,000 an import.
async fn enqueue_burst(app: &App, producer: &imports::ImportQueue, bulk: &str) {
    for part in 0..WRITES / 1000 {
        let req = integration::Client::new(app, Auth::Tenant(bulk.into())).request(
            "create-import",
            &Vec::<(&str, &str)>::new(),
            Some(products_body("queued", part * 1000, 1000)),
        );
        let r = imports::create_import::handle(app, producer, req).await;
        assert!(
            r.is_ok_and(|r| r.status().as_u16() == 202),
            "an import was refused"
        );
    }
}

/// [`CONSUMERS`] release consumer binaries at the template's defaults, writing to `dynamodb_url`.
async fn start_consumers(
    h: &Harness,
    consumer_bin: &std::path::Path,
    dynamodb_url: &str,
) -> Vec<Consumer> {
    let env = [
        ("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_url.to_owned()),
        ("IMPORT_MAX_RECEIVES", "5".to_owned()),
        ("IMPORT_WRITES_IN_FLIGHT", WRITES_IN_FLIGHT.to_string()),
        ("RUST_LOG", "warn".to_owned()),
    ];
    let mut consumers = Vec::new();
    for _ in 0..CONSUMERS {
        consumers.push(Consumer::start_bin(consumer_bin, &h.table, &env).await);
    }
    consumers
}
