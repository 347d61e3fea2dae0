//! Usage metering: a per-tenant, per-route, per-day counter of calls, of the read and write capacity
//! units they consumed, of throttled attempts and of calls the tier quota refused, updated with
//! UpdateItem `ADD`.
//!
//! **Batched per container.** A container adds each call to its [`UsageMeter`] and writes a tenant's
//! counts at most every [`FLUSH_INTERVAL_MS`] (sooner when its quota is close: see
//! `store::quota::limiter`), one UpdateItem per route with counts, sent beside a handler, so metering costs
//! about one write per tenant and route every 100 ms instead of one per call, and adds no latency to
//! the calls that do not flush. A call's capacity units are known only once it has run, so they
//! always ride on a later flush. What a container holds when it stops is lost: at most its last
//! 100 ms of counts per tenant. Units are stored in thousandths (`readMilliUnits`,
//! `writeMilliUnits`), so sums stay exact.
//!
//! One counter item per tenant, route and day would be a hot key (one partition, about 1,000 writes a
//! second, and its GSI1 partition too), so each counter is spread over [`COUNTER_SHARDS`] items summed
//! on read:
//!
//! Their keys are built in `shared::identity::keys`; the key table (generated from it) is in
//! `docs/key-scheme.md`.
//!
//! The shard is in the SK as well, so the GSI1 partitions (SK) of one counter differ too. Writes for a
//! tenant spread over 8 table partitions: about 8,000 metered calls a second per tenant before
//! throttling, and a throttled increment only loses a count (it never fails the request). Reading a
//! date range is 8 Queries, one per shard, concurrently, whatever the range.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::ids::TenantId;
use crate::identity::keys::{usage_counter_sk_bounds, EXPIRES_AT, PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::scoped::TenantDb;
use crate::store::scatter::{gather_all, Listing, Order, SortRange};

pub const COUNTER_SHARDS: u32 = match crate::identity::entities::USAGE.partitions {
    crate::identity::entities::Partitions::Constant(n) => n,
    _ => panic!("usage counters are a constant number of partitions"),
};

/// The counters' keys (`TENANT#t#USAGE#…`), built where every key is.
pub use crate::identity::keys::{usage_counter_pk as counter_pk, usage_counter_sk as counter_sk};

/// `YYYY-MM-DD` (UTC) of epoch milliseconds.
pub fn utc_date(unix_millis: u64) -> String {
    let mut s = crate::identity::clock::rfc3339(unix_millis);
    s.truncate(10);
    s
}

/// Counter items expire (DynamoDB TTL) this long after their first count: 400 days, so a year of
/// usage can always be read back, and a departed tenant's counters do not stay forever.
pub const COUNTER_TTL_SECONDS: u64 = 400 * 24 * 3600;

/// The meter's budget: one attempt, at most 200 ms. The count is best-effort and the request that
/// flushes waits for it (a frozen Lambda loses detached work), so a slow counter partition may cost
/// that request at most this long, never the SDK's full retry schedule.
pub const METER_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(200);

/// The budget of a drain ([`crate::service::app::App::flush_usage`]-style flushes that no request
/// waits on: the end of an import batch, a container told it is stopping). A write that runs out
/// of its budget has an unknown outcome and its counts are dropped (never counted twice), so a
/// drain, which has the time, gives a loaded table 10 times the meter's budget before it loses them.
pub const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The client settings the meter's UpdateItem runs with, overriding the tenant client's own.
pub fn meter_config() -> aws_sdk_dynamodb::config::Builder {
    meter_config_within(METER_TIMEOUT)
}

/// [`meter_config`] with another budget: one attempt, at most `budget`.
pub fn meter_config_within(budget: std::time::Duration) -> aws_sdk_dynamodb::config::Builder {
    aws_sdk_dynamodb::config::Builder::new()
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::standard().with_max_attempts(1))
        .timeout_config(
            aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
                .operation_timeout(budget)
                .operation_attempt_timeout(budget)
                .build(),
        )
}

/// What calls left for a tenant's counter of one route and the counter does not hold yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pending {
    /// Calls the handler ran.
    pub calls: u64,
    /// Capacity units, in thousandths.
    pub read_milli: u64,
    pub write_milli: u64,
    /// DynamoDB attempts answered with a throttling error.
    pub throttles: u64,
    /// Calls refused by the tier quota (429).
    pub limited: u64,
}

impl Pending {
    fn add(&mut self, other: Pending) {
        self.calls += other.calls;
        self.read_milli += other.read_milli;
        self.write_milli += other.write_milli;
        self.throttles += other.throttles;
        self.limited += other.limited;
    }
}

/// A tenant's counts are written at most this often per container, unless its quota is close.
pub const FLUSH_INTERVAL_MS: u64 = 100;

/// One container's usage counts not yet written, per tenant and route.
#[derive(Debug, Default)]
pub struct UsageMeter {
    pending: Mutex<BTreeMap<(TenantId, String), Pending>>,
    /// When each tenant's counts were last written (epoch ms).
    flushed_at: Mutex<HashMap<TenantId, u64>>,
    next_shard: AtomicU32,
}

impl UsageMeter {
    /// Adds what a call left (counted, its units, or that it was refused) to `tenant`'s `route`.
    pub fn add(&self, tenant: &TenantId, route: &str, left: Pending) {
        if left != Pending::default() {
            lock(&self.pending)
                .entry((tenant.clone(), route.to_owned()))
                .or_default()
                .add(left);
        }
    }

    /// Whether `tenant`'s counts are due to be written: never written by this container, or not for
    /// [`FLUSH_INTERVAL_MS`].
    pub fn due(&self, tenant: &TenantId, now_millis: u64) -> bool {
        lock(&self.flushed_at)
            .get(tenant)
            .is_none_or(|at| now_millis.saturating_sub(*at) >= FLUSH_INTERVAL_MS)
    }

    /// Drops `tenant`'s counts not yet written (a refused tenant's: see `App::forget_counts`).
    pub fn forget(&self, tenant: &TenantId) {
        lock(&self.pending).retain(|(t, _), _| t != tenant);
        lock(&self.flushed_at).remove(tenant);
    }

    /// The tenants with counts not yet written.
    pub fn tenants_pending(&self) -> Vec<TenantId> {
        let mut tenants: Vec<TenantId> =
            lock(&self.pending).keys().map(|(t, _)| t.clone()).collect();
        tenants.dedup();
        tenants
    }

    /// Writes everything pending for `db`'s tenant: one UpdateItem `ADD` per route, concurrently, each
    /// on one counter shard (round-robin). Counts DynamoDB refuses (throttled) stay pending for the
    /// next flush; counts whose write has an unknown outcome (a timeout, a lost answer; it may have
    /// been applied) are dropped, so nothing is ever counted twice. A new counter item gets
    /// `expiresAt` = now + [`COUNTER_TTL_SECONDS`]. Each write has `budget` ([`METER_TIMEOUT`]
    /// beside a request, [`DRAIN_TIMEOUT`] when nothing waits on it).
    pub async fn flush(
        &self,
        db: &TenantDb,
        now_millis: u64,
        budget: std::time::Duration,
    ) -> Result<(), StoreError> {
        let t = &db.tenant;
        lock(&self.flushed_at).insert(t.clone(), now_millis);
        let routes: Vec<(String, Pending)> = {
            let mut pending = lock(&self.pending);
            let keys: Vec<_> = pending.keys().filter(|(k, _)| k == t).cloned().collect();
            keys.into_iter()
                .filter_map(|k| pending.remove(&k).map(|p| (k.1, p)))
                .collect()
        };
        let date = utc_date(now_millis);
        let writes = routes.iter().map(|(route, counts)| {
            let shard = self.next_shard.fetch_add(1, Ordering::Relaxed) % COUNTER_SHARDS;
            write(db, &date, route, shard, now_millis / 1000, *counts, budget)
        });
        let mut first_error = None;
        for ((route, counts), result) in routes.iter().zip(futures::future::join_all(writes).await)
        {
            if let Err(e) = result {
                if e.refused {
                    self.add(t, route, *counts);
                }
                first_error.get_or_insert(e.error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A failed counter write, and whether DynamoDB certainly did not apply it.
#[derive(Debug)]
pub struct WriteError {
    pub error: StoreError,
    pub refused: bool,
}

/// Adds `counts` to one shard of the tenant's counter of `route` on `date`. One UpdateItem, one
/// attempt within `budget` ([`meter_config_within`]).
pub async fn write(
    db: &TenantDb,
    date: &str,
    route: &str,
    shard: u32,
    now_seconds: u64,
    counts: Pending,
    budget: std::time::Duration,
) -> Result<(), WriteError> {
    let t = &db.tenant;
    db.sdk_update_at(counter_pk(t, shard), counter_sk(t, date, route, shard))
        .update_expression(
            "ADD calls :calls, readMilliUnits :r, writeMilliUnits :w, throttles :th, #limited :lim \
             SET #date = :date, #route = :route, #exp = if_not_exists(#exp, :exp)",
        )
        .expression_attribute_names("#date", "date")
        .expression_attribute_names("#route", "route")
        .expression_attribute_names("#limited", "limited")
        .expression_attribute_names("#exp", EXPIRES_AT)
        .expression_attribute_values(":calls", number(counts.calls))
        .expression_attribute_values(":r", number(counts.read_milli))
        .expression_attribute_values(":w", number(counts.write_milli))
        .expression_attribute_values(":th", number(counts.throttles))
        .expression_attribute_values(":lim", number(counts.limited))
        .expression_attribute_values(":date", AttributeValue::S(date.to_owned()))
        .expression_attribute_values(":route", AttributeValue::S(route.to_owned()))
        .expression_attribute_values(
            ":exp",
            AttributeValue::N((now_seconds + COUNTER_TTL_SECONDS).to_string()),
        )
        .customize()
        .config_override(meter_config_within(budget))
        .send()
        .await
        .map(|_| ())
        .map_err(|e| WriteError {
            refused: refused(&e),
            error: StoreError::from_sdk(e),
        })
}

fn number(n: u64) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

/// Whether DynamoDB certainly did not apply a failed write: throttling and validation errors are
/// refusals; a 500, a timeout or a lost answer may have been applied.
pub fn refused<E, R>(e: &aws_sdk_dynamodb::error::SdkError<E, R>) -> bool
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata,
{
    use aws_sdk_dynamodb::error::SdkError;
    match e {
        SdkError::ConstructionFailure(_) => true,
        SdkError::ServiceError(s) => matches!(
            s.err().code(),
            Some(
                "ProvisionedThroughputExceededException"
                    | "ThrottlingException"
                    | "RequestLimitExceeded"
                    | "ValidationException"
            )
        ),
        _ => false,
    }
}

/// One route's usage on one day.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteUsage {
    pub calls: u64,
    /// Capacity units consumed, in thousandths.
    pub read_milli_units: u64,
    pub write_milli_units: u64,
    /// DynamoDB attempts answered with a throttling error.
    pub throttles: u64,
    /// Calls refused by the tier quota (429).
    pub limited: u64,
}

/// Daily usage per route between `from` and `to` (inclusive, `YYYY-MM-DD`): one Query per shard.
pub async fn read(
    db: &TenantDb,
    from: &str,
    to: &str,
) -> Result<BTreeMap<String, BTreeMap<String, RouteUsage>>, StoreError> {
    let t = &db.tenant;
    let listing = Listing {
        route: "usage".into(),
        index: None,
        partition_attr: PK,
        sort_attr: SK,
        range: {
            let (low, high) = usage_counter_sk_bounds(t, from, to);
            SortRange::Between(low, high)
        },
        order: Order::Ascending,
        groups: vec![(0..COUNTER_SHARDS).map(|s| counter_pk(t, s)).collect()],
        consistent: false,
    };
    let counters = gather_all(db, &listing).await?;
    let mut days: BTreeMap<String, BTreeMap<String, RouteUsage>> = BTreeMap::new();
    for item in counters {
        let (Some(date), Some(route), Some(calls)) = (
            crate::store::client::query::string_attr(&item, "date"),
            crate::store::client::query::string_attr(&item, "route"),
            crate::store::client::query::u64_attr(&item, "calls"),
        ) else {
            continue;
        };
        let units = |name| crate::store::client::query::u64_attr(&item, name).unwrap_or(0);
        let usage = days.entry(date).or_default().entry(route).or_default();
        usage.calls += calls;
        usage.read_milli_units += units("readMilliUnits");
        usage.write_milli_units += units("writeMilliUnits");
        usage.throttles += units("throttles");
        usage.limited += units("limited");
    }
    Ok(days)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meter_has_one_attempt_and_a_200_ms_budget() {
        let config = meter_config().build();
        assert_eq!(config.retry_config().unwrap().max_attempts(), 1);
        let timeouts = config.timeout_config().unwrap();
        assert_eq!(timeouts.operation_timeout(), Some(METER_TIMEOUT));
        assert_eq!(timeouts.operation_attempt_timeout(), Some(METER_TIMEOUT));
        assert!(METER_TIMEOUT <= std::time::Duration::from_millis(200));
    }

    #[test]
    fn a_drain_has_one_attempt_and_a_longer_budget() {
        let config = meter_config_within(DRAIN_TIMEOUT).build();
        assert_eq!(config.retry_config().unwrap().max_attempts(), 1);
        assert_eq!(
            config.timeout_config().unwrap().operation_timeout(),
            Some(DRAIN_TIMEOUT)
        );
        assert!(DRAIN_TIMEOUT > METER_TIMEOUT);
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc_date(1_795_240_800_000), "2026-11-21");
        assert_eq!(utc_date(0), "1970-01-01");
    }
}
