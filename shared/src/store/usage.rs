//! Usage metering: a per-tenant, per-route, per-day counter of calls and of the read and write
//! capacity units they consumed, updated with UpdateItem `ADD`.
//!
//! A call's capacity units are known only once it has run, but its metering write is sent as soon as
//! the tenant is verified, beside the handler, so that metering adds no latency. So a call's units
//! ride on the next metered call of the same tenant and route in the same container ([`defer`]);
//! the units a container still holds when it stops are lost, at most those of its last call per
//! tenant and route. Units are stored in thousandths (`readMilliUnits`, `writeMilliUnits`), so sums
//! stay exact.
//!
//! One counter item per tenant, route and day would be a hot key (one partition, about 1,000 writes a
//! second, and its GSI1 partition too), so each counter is spread over [`COUNTER_SHARDS`] items summed
//! on read:
//!
//! | item | PK | SK |
//! |---|---|---|
//! | counter shard | `TENANT#t#USAGE#<shard>` | `TENANT#t#USAGE#<YYYY-MM-DD>#<route>#<shard>` |
//!
//! The shard is in the SK as well, so the GSI1 partitions (SK) of one counter differ too. Writes for a
//! tenant spread over 8 table partitions: about 8,000 metered calls a second per tenant before
//! throttling, and a throttled increment only loses a count (it never fails the request). Reading a
//! date range is 8 Queries, one per shard, concurrently, whatever the range.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::ids::TenantId;
use crate::identity::keys::{EXPIRES_AT, PK, SK};
use crate::store::error::StoreError;
use crate::store::scatter::{gather_all, Listing, Order, SortRange};
use crate::store::scoped::TenantDb;

pub const COUNTER_SHARDS: u32 = 8;

/// Round-robin over the counter shards, per container.
static NEXT_SHARD: AtomicU32 = AtomicU32::new(0);

pub fn next_shard() -> u32 {
    NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % COUNTER_SHARDS
}

pub fn counter_pk(t: &TenantId, shard: u32) -> String {
    format!("TENANT#{t}#USAGE#{shard}")
}

pub fn counter_sk(t: &TenantId, date: &str, route: &str, shard: u32) -> String {
    format!("TENANT#{t}#USAGE#{date}#{route}#{shard}")
}

/// `YYYY-MM-DD` (UTC) of epoch milliseconds.
pub fn utc_date(unix_millis: u64) -> String {
    let mut s = crate::identity::clock::rfc3339(unix_millis);
    s.truncate(10);
    s
}

/// Counter items expire (DynamoDB TTL) this long after their first count: 400 days, so a year of
/// usage can always be read back, and a departed tenant's counters do not stay forever.
pub const COUNTER_TTL_SECONDS: u64 = 400 * 24 * 3600;

/// The meter's budget: one attempt, at most 200 ms. The count is best-effort and the request waits
/// for it (a frozen Lambda loses detached work), so a slow counter partition may cost a request at
/// most this long, never the SDK's full retry schedule.
pub const METER_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(200);

/// The client settings the meter's UpdateItem runs with, overriding the tenant client's own.
pub fn meter_config() -> aws_sdk_dynamodb::config::Builder {
    aws_sdk_dynamodb::config::Builder::new()
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::standard().with_max_attempts(1))
        .timeout_config(
            aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
                .operation_timeout(METER_TIMEOUT)
                .operation_attempt_timeout(METER_TIMEOUT)
                .build(),
        )
}

/// What finished calls left for the counters and the counters do not hold yet, per (tenant, route).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pending {
    /// Capacity units, in thousandths.
    pub read_milli: u64,
    pub write_milli: u64,
    /// DynamoDB attempts answered with a throttling error.
    pub throttles: u64,
    /// Calls refused by the tier quota (429): counted here, never with a write of their own.
    pub limited: u64,
}

static PENDING: Mutex<BTreeMap<(String, String), Pending>> = Mutex::new(BTreeMap::new());

fn pending() -> std::sync::MutexGuard<'static, BTreeMap<(String, String), Pending>> {
    PENDING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Holds what a finished call left (capacity units, throttled attempts, or that it was limited)
/// for the next metering write of `tenant` and `route` in this container.
pub fn defer(tenant: &str, route: &str, left: Pending) {
    if left == Pending::default() {
        return;
    }
    restore(tenant, route, left);
}

fn restore(tenant: &str, route: &str, left: Pending) {
    let mut map = pending();
    let entry = map
        .entry((tenant.to_owned(), route.to_owned()))
        .or_default();
    entry.read_milli += left.read_milli;
    entry.write_milli += left.write_milli;
    entry.throttles += left.throttles;
    entry.limited += left.limited;
}

fn take_pending(tenant: &str, route: &str) -> Pending {
    pending()
        .remove(&(tenant.to_owned(), route.to_owned()))
        .unwrap_or_default()
}

/// Adds one call of `route` on `date` to one shard of the tenant's counter, with the capacity units
/// earlier calls left pending ([`defer`]); if DynamoDB refuses the write, they stay pending,
/// and units are never counted twice. A new counter item gets `expiresAt` = `now_seconds` +
/// [`COUNTER_TTL_SECONDS`].
pub async fn increment(
    db: &TenantDb,
    date: &str,
    route: &str,
    shard: u32,
    now_seconds: u64,
) -> Result<(), StoreError> {
    let t = &db.tenant;
    let pending = take_pending(t.as_str(), route);
    let sent = db
        .client
        .update_item()
        .table_name(&*db.table)
        .key(PK, AttributeValue::S(counter_pk(t, shard)))
        .key(SK, AttributeValue::S(counter_sk(t, date, route, shard)))
        .update_expression(
            "ADD calls :one, readMilliUnits :r, writeMilliUnits :w, throttles :th, #limited :lim \
             SET #date = :date, #route = :route, #exp = if_not_exists(#exp, :exp)",
        )
        .expression_attribute_names("#date", "date")
        .expression_attribute_names("#route", "route")
        .expression_attribute_names("#limited", "limited")
        .expression_attribute_names("#exp", EXPIRES_AT)
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .expression_attribute_values(":r", number(pending.read_milli))
        .expression_attribute_values(":w", number(pending.write_milli))
        .expression_attribute_values(":th", number(pending.throttles))
        .expression_attribute_values(":lim", number(pending.limited))
        .expression_attribute_values(":date", AttributeValue::S(date.to_owned()))
        .expression_attribute_values(":route", AttributeValue::S(route.to_owned()))
        .expression_attribute_values(
            ":exp",
            AttributeValue::N((now_seconds + COUNTER_TTL_SECONDS).to_string()),
        )
        .customize()
        .config_override(meter_config())
        .send()
        .await;
    if let Err(e) = sent {
        // DynamoDB refused the write (throttled, say), so nothing was added: the units wait for the
        // next write. A write whose outcome is unknown (a timeout, a lost answer) may have been
        // applied, so its units are dropped rather than risk counting them twice.
        if refused(&e) {
            restore(t.as_str(), route, pending);
        }
        return Err(StoreError::from_sdk(e));
    }
    Ok(())
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
        // '~' sorts after every character a route name or shard can hold.
        range: SortRange::Between(
            format!("TENANT#{t}#USAGE#{from}#"),
            format!("TENANT#{t}#USAGE#{to}#~"),
        ),
        order: Order::Ascending,
        groups: vec![(0..COUNTER_SHARDS).map(|s| counter_pk(t, s)).collect()],
    };
    let counters = gather_all(db, &listing).await?;
    let mut days: BTreeMap<String, BTreeMap<String, RouteUsage>> = BTreeMap::new();
    for item in counters {
        let (Some(date), Some(route), Some(calls)) = (
            crate::store::query::string_attr(&item, "date"),
            crate::store::query::string_attr(&item, "route"),
            crate::store::query::u64_attr(&item, "calls"),
        ) else {
            continue;
        };
        let units = |name| crate::store::query::u64_attr(&item, name).unwrap_or(0);
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
    fn golden_counter_keys_and_dates() {
        let t = TenantId::parse("acme").unwrap();
        assert_eq!(counter_pk(&t, 3), "TENANT#acme#USAGE#3");
        assert_eq!(
            counter_sk(&t, "2026-11-21", "get-product", 3),
            "TENANT#acme#USAGE#2026-11-21#get-product#3"
        );
        assert_eq!(utc_date(1_795_240_800_000), "2026-11-21");
        assert_eq!(utc_date(0), "1970-01-01");
    }
}
