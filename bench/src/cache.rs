//! Figure 10 (issue #16, part 3): read caching under a Zipf load, decided by measurement. The same
//! sequence of product reads is served three ways, through the latency model:
//! - no cache: one GetItem per read;
//! - an LRU in each container, entries trusted for [`STALENESS`] (so a write elsewhere shows within
//!   that bound);
//! - Redis (the stand-in for ElastiCache/Valkey), shared by every container, entries expiring after
//!   the same bound, reached through its own latency model (an in-region cache hop), and logged in as
//!   a per-tenant ACL user whose key pattern mirrors `dynamodb:LeadingKeys` (`~TENANT#<t>#*`).
//!
//! Reads arrive open-loop at a fixed rate (`BENCH_CACHE_RATE`, 500 a second by default: a busy
//! tenant) and go round-robin to [`CONTAINERS`] containers, as a function's traffic spreads over its
//! warm environments; each container's LRU sees only its share. The hit rate depends on the rate:
//! an entry serves the reads of its key that arrive within the staleness bound.

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::StreamExt;
use integration::{onboard_at_max_limits as onboard, unique, Harness};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use serde_json::json;
use shared::identity::ids::{EntityId, TenantId};
use shared::store::client::items::get_item;
use shared::store::client::query::Item;
use shared::store::client::scoped::TenantDb;
use shared::store::lifecycle::tenant_items::{item_from_json, item_to_json};

use crate::apps::Target;
use crate::fixtures::seed_products;
use crate::report::{stat, Report, Stat};

/// Products the tenant holds, and the Zipf exponent of their popularity.
pub const PRODUCTS: usize = 1_000;
pub const ZIPF_EXPONENT: f64 = 1.1;
pub const CONTAINERS: usize = 4;
/// Items one container's LRU holds (a quarter of the catalogue).
pub const LRU_ITEMS: usize = 256;
/// How stale a cached read may be.
pub const STALENESS: Duration = Duration::from_secs(1);

/// Zipf-distributed ranks `0..n` (rank 0 the most popular), by inverse CDF.
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Self {
        let weights: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64).powf(s)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cdf = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        Self { cdf }
    }

    /// The rank for a uniform `u` in [0, 1).
    pub fn rank(&self, u: f64) -> usize {
        self.cdf.partition_point(|c| *c < u).min(self.cdf.len() - 1)
    }
}

/// xorshift64*: a fixed sequence, so every option serves the same reads.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The product ids read, in order.
pub fn zipf_reads(count: usize) -> Vec<String> {
    let zipf = Zipf::new(PRODUCTS, ZIPF_EXPONENT);
    let mut rng = Rng::new(0x5eed);
    (0..count)
        .map(|_| format!("p-{:05}", zipf.rank(rng.next_f64())))
        .collect()
}

/// One read's answer and whether a cache served it.
struct Served {
    ms: f64,
    hit: bool,
}

/// One read: the product's key, and the name a cache holds it under.
struct Read {
    key: Item,
    name: String,
}

fn key_string(key: &Item) -> String {
    let s = |k: &str| {
        key.get(k)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    format!("{}|{}", s("PK"), s("SK"))
}

async fn from_table(db: &TenantDb, key: &Item) -> Item {
    get_item(db, key.clone())
        .await
        .expect("GetItem")
        .expect("a seeded product")
}

/// Serves `reads` open-loop at `rate` reads a second (read `i` starts at `i / rate` s, whatever the
/// earlier ones are doing, as independent clients do), `serve(i, read)` each (answering whether a
/// cache served it), and collects the answers, each timed.
async fn at_rate<'a, F, Fut>(reads: &'a [Read], rate: f64, serve: F) -> Vec<Served>
where
    F: Fn(usize, &'a Read) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = tokio::time::Instant::now();
    let pending: Vec<_> = reads
        .iter()
        .enumerate()
        .map(|(i, read)| {
            let at = start + Duration::from_secs_f64(i as f64 / rate);
            let served = serve(i, read);
            async move {
                tokio::time::sleep_until(at).await;
                let t0 = Instant::now();
                let hit = served.await;
                Served {
                    ms: t0.elapsed().as_secs_f64() * 1000.0,
                    hit,
                }
            }
        })
        .collect();
    futures::stream::iter(pending)
        .buffer_unordered(512)
        .collect()
        .await
}

/// Figure 10: a tenant of [`PRODUCTS`] products on 4 shards, read with a Zipf popularity
/// (`BENCH_CACHE_READS` reads at `BENCH_CACHE_RATE` a second; Redis at `BENCH_REDIS_URL`, its hop
/// delayed `BENCH_REDIS_DELAY_US` each way).
pub async fn cache_figure(h: &Harness, target: &Target, report: &mut Report) {
    let tenant = unique("cache");
    onboard(h, &tenant, 4).await;
    seed_products(h, &tenant, 4, PRODUCTS).await;
    let t = TenantId::parse(&tenant).unwrap();
    let db = target.app.db(&t).await.expect("the tenant's client");
    let reads = zipf_reads(crate::env_or("BENCH_CACHE_READS", 3_000));
    let redis_delay_us: u64 = crate::env_or("BENCH_REDIS_DELAY_US", 0);
    let redis_url = std::env::var("BENCH_REDIS_URL").ok();
    let rate: f64 = crate::env_or("BENCH_CACHE_RATE", 500.0);
    cache_figures(
        &db,
        4,
        &reads,
        rate,
        redis_url.as_deref(),
        Duration::from_micros(redis_delay_us),
        report,
    )
    .await;
}

/// Runs the three options over `reads` of `tenant`'s products (on `shards` shards) at `rate` reads a
/// second, and adds the figures. `redis_url` is the admin URL of a local redis-server; `redis_delay`
/// its latency model.
async fn cache_figures(
    db: &TenantDb,
    shards: u32,
    reads: &[String],
    rate: f64,
    redis_url: Option<&str>,
    redis_delay: Duration,
    report: &mut Report,
) {
    let reads = product_reads(&db.tenant, shards, reads);
    let reads = reads.as_slice();

    // No cache.
    let none = at_rate(reads, rate, |_, read| async move {
        let _item = from_table(db, &read.key).await;
        false
    })
    .await;
    let (none_stat, _) = summary(&none);
    report.add(
        &label(rate, "no cache"),
        &none_stat,
        "GetItem every read".into(),
    );

    lru_figure(db, reads, rate, &none_stat, report).await;

    // Redis, shared.
    let Some(admin_url) = redis_url else {
        report.fact(
            &label(rate, "Redis"),
            json!("not measured"),
            "BENCH_REDIS_URL unset: run through scripts/bench.sh",
        );
        return;
    };
    redis_figures(db, reads, rate, admin_url, redis_delay, &none_stat, report).await;
}

/// The reads of products `ids` of `t` on `shards` shards.
fn product_reads(t: &TenantId, shards: u32, ids: &[String]) -> Vec<Read> {
    ids.iter()
        .map(|id| {
            let key = products::product_key(t, &EntityId::parse(id).expect("an id"), shards);
            let name = key_string(&key);
            Read { key, name }
        })
        .collect()
}

/// The name of figure 10's option `what` at `rate` reads a second.
fn label(rate: f64, what: &str) -> String {
    format!(
        "10. Zipf reads (s={ZIPF_EXPONENT}, {rate:.0}/s, {CONTAINERS} containers): {what} [latency model]"
    )
}

/// The reads' latency, and the percentage a cache served.
fn summary(served: &[Served]) -> (Stat, f64) {
    let hits = served.iter().filter(|s| s.hit).count();
    let stat = stat(served.iter().map(|s| s.ms).collect());
    (stat, hits as f64 / served.len().max(1) as f64 * 100.0)
}

/// The reads served through an LRU per container, against `none_stat` (no cache).
async fn lru_figure(
    db: &TenantDb,
    reads: &[Read],
    rate: f64,
    none_stat: &Stat,
    report: &mut Report,
) {
    let capacity = NonZeroUsize::new(LRU_ITEMS).expect("a capacity");
    let lrus: Vec<Mutex<lru::LruCache<String, (Instant, Item)>>> = (0..CONTAINERS)
        .map(|_| Mutex::new(lru::LruCache::new(capacity)))
        .collect();
    let lrus = &lrus;
    let local = at_rate(reads, rate, |i, read| async move {
        let lru = &lrus[i % CONTAINERS];
        let cached = lock(lru)
            .get(&read.name)
            .filter(|(at, _)| at.elapsed() < STALENESS)
            .map(|(_, item)| item.clone());
        let hit = cached.is_some();
        if !hit {
            let item = from_table(db, &read.key).await;
            lock(lru).put(read.name.clone(), (Instant::now(), item));
        }
        hit
    })
    .await;
    let (lru_stat, lru_hits) = summary(&local);
    report.add(
        &label(rate, &format!("LRU per container ({LRU_ITEMS} items, 1 s)")),
        &lru_stat,
        format!(
            "hit rate {lru_hits:.0}%; p50 {:.2}x, p99 {:.2}x of no cache",
            lru_stat.median / none_stat.median,
            lru_stat.p99 / none_stat.p99
        ),
    );
}

/// The password of the tenant's ACL user.
const TENANT_PASSWORD: &str = "bench-tenant-password";

/// The reads served through Redis shared by every container, logged in as the tenant's ACL user
/// (first shown to refuse another tenant's key), against `none_stat` (no cache).
async fn redis_figures(
    db: &TenantDb,
    reads: &[Read],
    rate: f64,
    admin_url: &str,
    redis_delay: Duration,
    none_stat: &Stat,
    report: &mut Report,
) {
    let t = &db.tenant;
    reset_redis_for(admin_url, t).await;
    // A delay of 0 reaches Redis directly (loopback: its best case). tokio's timers have a 1 ms
    // resolution, so a delay under 1 ms each way costs about 1 ms each way in the model.
    let direct = admin_url.trim_start_matches("redis://").to_owned();
    let hop = if redis_delay.is_zero() {
        None
    } else {
        let upstream = crate::proxy::socket_of(&format!("http://{direct}"));
        Some(crate::proxy::LatencyProxy::start(upstream, redis_delay).await)
    };
    let address = hop
        .as_ref()
        .map_or(direct, |h| h.url.trim_start_matches("http://").to_owned());
    let tenant_url = format!("redis://{}:{TENANT_PASSWORD}@{address}", t.as_str());
    let connections = tenant_connections(&tenant_url).await;
    acl_isolation_fact(&connections[0], report).await;
    let shared_cache = through_redis(db, reads, rate, &connections).await;
    let (redis_stat, redis_hits) = summary(&shared_cache);
    report.add(
        &label(
            rate,
            &match redis_delay.as_micros() {
                0 => "Redis, shared, 1 s (loopback, no added delay)".to_owned(),
                us => format!("Redis, shared, 1 s ({us} us each way, ~1 ms by tokio's timer)"),
            },
        ),
        &redis_stat,
        format!(
            "hit rate {redis_hits:.0}%; p50 {:.2}x, p99 {:.2}x of no cache",
            redis_stat.median / none_stat.median,
            redis_stat.p99 / none_stat.p99
        ),
    );
}

/// As Redis's admin: `t`'s ACL user (on, [`TENANT_PASSWORD`], its keys only, GET and SET alone),
/// and every key flushed.
async fn reset_redis_for(admin_url: &str, t: &TenantId) {
    let admin = redis::Client::open(admin_url).expect("a redis URL");
    let mut admin = admin
        .get_multiplexed_async_connection()
        .await
        .expect("redis-server");
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(t.as_str())
        .arg("reset")
        .arg("on")
        .arg(format!(">{TENANT_PASSWORD}"))
        .arg(format!("~{}*", shared::identity::keys::tenant_prefix(t)))
        .arg("+get")
        .arg("+set")
        .arg("+psetex")
        .query_async(&mut admin)
        .await
        .expect("ACL SETUSER");
    let _: () = redis::cmd("FLUSHALL")
        .query_async(&mut admin)
        .await
        .expect("FLUSHALL");
}

/// A connection to `tenant_url` for each container.
async fn tenant_connections(tenant_url: &str) -> Vec<MultiplexedConnection> {
    let mut connections = Vec::new();
    for _ in 0..CONTAINERS {
        let client = redis::Client::open(tenant_url).expect("a redis URL");
        connections.push(
            client
                .get_multiplexed_async_connection()
                .await
                .expect("redis as the tenant's ACL user"),
        );
    }
    connections
}

/// The ACL is the isolation: another tenant's key is refused on the tenant's `connection`.
async fn acl_isolation_fact(connection: &MultiplexedConnection, report: &mut Report) {
    let other = TenantId::parse("someone-else").expect("an id");
    let refused: redis::RedisResult<Option<String>> = connection
        .clone()
        .get(format!(
            "{}|x",
            shared::identity::keys::shard_pk(&other, "PRODUCT", 0)
        ))
        .await;
    report.fact(
        "10. Redis ACL: another tenant's key",
        json!(match &refused {
            Err(e) if e.to_string().contains("NOPERM") => "refused (NOPERM)".to_owned(),
            other => format!("NOT refused: {other:?}"),
        }),
        "user per tenant, keys ~<tenant prefix>* (mirrors dynamodb:LeadingKeys)",
    );
}

/// The reads served through Redis, each container on its own connection: a cached item when Redis
/// holds one, else the table's, cached for [`STALENESS`].
async fn through_redis(
    db: &TenantDb,
    reads: &[Read],
    rate: f64,
    connections: &[MultiplexedConnection],
) -> Vec<Served> {
    at_rate(reads, rate, |i, read| {
        let mut conn = connections[i % CONTAINERS].clone();
        async move {
            let cached: Option<String> = conn.get(&read.name).await.expect("GET");
            match cached {
                Some(text) => {
                    let json: serde_json::Value = serde_json::from_str(&text).expect("cached JSON");
                    let _item = item_from_json(&json).expect("a cached item");
                    true
                }
                None => {
                    let item = from_table(db, &read.key).await;
                    let _: () = conn
                        .pset_ex(
                            &read.name,
                            item_to_json(&item).to_string(),
                            STALENESS.as_millis() as u64,
                        )
                        .await
                        .expect("SET PX");
                    false
                }
            }
        }
    })
    .await
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
