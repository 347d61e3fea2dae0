//! The tier quota: a per-tenant rate limiter shared by every container, kept in DynamoDB.
//!
//! **Algorithm: a fixed one-second window, counted in DynamoDB, decided locally.** A container adds
//! its admitted requests (and the capacity units earlier requests consumed) to the tenant's counter
//! for the current second with one UpdateItem `ADD`, sent beside a handler together with the usage
//! meter's flush and answered with the new totals (`UPDATED_NEW`): every 100 ms while the tenant is
//! far from its limits, and with every request once it is within 80% of one. A container decides
//! each request before the handler runs from what the last answer told it, plus its own admissions
//! since: the tenant's requests and capacity units so far in this second, across all containers. Over either limit, the request gets 429 with
//! `Retry-After: 1` and nothing else happens: no handler, no DynamoDB write (its count rides on the
//! next usage write), so a tenant far over its rate costs the table nothing more.
//!
//! **Accuracy.** Near a limit a container learns the window's total one request late, so in one
//! second a tenant gets at most its limit plus about one request per concurrently busy container; far
//! from it, a container's view of the others is up to 100 ms old, which only matters for a tenant
//! whose burst goes from under 80% to over 100% of its limit within 100 ms across several
//! containers. Capacity units are known only once a request
//! has run, so they count in the window of the request after. When the counter is spread over S
//! shards (below), the total is estimated as S times the shard this container wrote: exact for S = 1,
//! within a few percent at the request rates that need S > 1.
//!
//! **Spread.** The counter is split over S = ⌈requests per second ÷ [`REQUESTS_PER_SHARD`]⌉ items
//! (at most [`MAX_WINDOW_SHARDS`]), chosen round-robin, so no counter item takes more than about 250
//! writes a second (a partition takes 1,000) however high the tier:
//!
//! | item | PK | SK |
//! |---|---|---|
//! | window shard | `TENANT#t#RATE#<shard>` | `TENANT#t#RATE#<epoch second>#<shard>` |
//!
//! Window items expire (TTL) a minute after their second.
//!
//! **Failing open.** When the counter cannot be written (DynamoDB unavailable or throttling), the
//! container logs a warning and keeps deciding from what it knew, so it admits; the limiter never
//! turns an outage of its own store into an outage of the API.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

use crate::identity::ids::TenantId;
use crate::identity::keys::{EXPIRES_AT, PK, SK};
use crate::store::error::StoreError;
use crate::store::query::u64_attr;
use crate::store::scoped::TenantDb;
use crate::store::tenants::Limits;

/// The most admitted requests a second one window item is planned to take.
pub const REQUESTS_PER_SHARD: u32 = 250;
pub const MAX_WINDOW_SHARDS: u32 = 8;
/// Window items expire this long after their second.
pub const WINDOW_TTL_SECONDS: u64 = 60;
/// What a limited request is told to wait: the current window ends within a second.
pub const LIMITED_RETRY_AFTER_SECONDS: u32 = 1;

pub fn window_shards(limits: &Limits) -> u32 {
    limits
        .requests_per_second
        .div_ceil(REQUESTS_PER_SHARD)
        .clamp(1, MAX_WINDOW_SHARDS)
}

pub fn window_pk(t: &TenantId, shard: u32) -> String {
    format!("TENANT#{t}#RATE#{shard}")
}

pub fn window_sk(t: &TenantId, second: u64, shard: u32) -> String {
    format!("TENANT#{t}#RATE#{second}#{shard}")
}

/// Which limit a request is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    Requests,
    CapacityUnits,
}

/// The decision on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    Limited(Exceeded),
}

/// What this container knows of one tenant's current window.
#[derive(Debug, Clone, Copy, Default)]
struct Window {
    second: u64,
    /// Requests in the window, all containers (the last answer, plus this container's admissions since).
    requests: u64,
    /// Capacity units in the window, in thousandths, all containers.
    milli_units: u64,
    /// This container's admissions in the window that the counter does not hold yet.
    uncounted: u64,
}

/// Within this share of a limit, every admitted request is counted at once (not batched), so the
/// decision near the limit is as exact as one answer late allows.
const NEAR_LIMIT_PERCENT: u64 = 80;

/// The per-container side of the limiter: what each tenant's window looked like at the last answer,
/// and the capacity units that finished requests consumed and the counter does not hold yet.
#[derive(Debug, Default)]
pub struct RateLimiter {
    windows: Mutex<HashMap<TenantId, Window>>,
    pending_milli_units: Mutex<HashMap<TenantId, u64>>,
    next_shard: AtomicU32,
}

impl RateLimiter {
    /// Decides a request of `tenant` at `now_second` under `limits`, from what this container knows.
    /// An admitted request is counted locally at once, so concurrent requests in one container see
    /// each other.
    pub fn decide(&self, tenant: &TenantId, limits: &Limits, now_second: u64) -> Admission {
        let mut windows = lock(&self.windows);
        let window = windows.entry(tenant.clone()).or_default();
        if window.second != now_second {
            *window = Window {
                second: now_second,
                ..Window::default()
            };
        }
        if window.requests >= u64::from(limits.requests_per_second) {
            return Admission::Limited(Exceeded::Requests);
        }
        if window.milli_units >= u64::from(limits.capacity_units_per_second) * 1000 {
            return Admission::Limited(Exceeded::CapacityUnits);
        }
        window.requests += 1;
        window.uncounted += 1;
        Admission::Admitted
    }

    /// Whether the tenant's window, as this container knows it, is close enough to a limit that its
    /// count should be written now rather than with the next batch.
    pub fn near_limit(&self, tenant: &TenantId, limits: &Limits, now_second: u64) -> bool {
        let windows = lock(&self.windows);
        let Some(w) = windows.get(tenant).filter(|w| w.second == now_second) else {
            return false;
        };
        w.requests * 100 >= u64::from(limits.requests_per_second) * NEAR_LIMIT_PERCENT
            || w.milli_units * 100
                >= u64::from(limits.capacity_units_per_second) * 1000 * NEAR_LIMIT_PERCENT
    }

    /// Drops what this container knows and holds of `tenant`'s window (a refused tenant's).
    pub fn forget(&self, tenant: &TenantId) {
        lock(&self.windows).remove(tenant);
        lock(&self.pending_milli_units).remove(tenant);
    }

    /// Holds a finished request's capacity units (thousandths) for the tenant's next counter write.
    pub fn defer_units(&self, tenant: &TenantId, milli_units: u64) {
        if milli_units > 0 {
            *lock(&self.pending_milli_units)
                .entry(tenant.clone())
                .or_default() += milli_units;
        }
    }

    /// Counts this container's admissions in the window of `now_second` that the counter does not
    /// hold yet, with the units left pending, and learns the window's totals from the answer. One
    /// UpdateItem on one window shard, with the usage meter's budget (one attempt, 200 ms). When
    /// DynamoDB refuses the write, the counts stay pending; the caller logs the error and admits
    /// (fail open). Admissions of an earlier second are dropped: that window is over.
    pub async fn count(
        &self,
        db: &TenantDb,
        limits: &Limits,
        now_second: u64,
    ) -> Result<(), StoreError> {
        let t = &db.tenant;
        let shards = window_shards(limits);
        let shard = self.next_shard.fetch_add(1, Ordering::Relaxed) % shards;
        let units = lock(&self.pending_milli_units).remove(t).unwrap_or(0);
        let admitted = {
            let mut windows = lock(&self.windows);
            match windows.get_mut(t) {
                Some(w) if w.second == now_second => std::mem::take(&mut w.uncounted),
                _ => 0,
            }
        };
        let sent = db
            .client
            .update_item()
            .table_name(&*db.table)
            .key(PK, AttributeValue::S(window_pk(t, shard)))
            .key(SK, AttributeValue::S(window_sk(t, now_second, shard)))
            .update_expression(
                "ADD #requests :admitted, milliUnits :units SET #exp = if_not_exists(#exp, :exp)",
            )
            .expression_attribute_names("#requests", "requests")
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_values(":admitted", AttributeValue::N(admitted.to_string()))
            .expression_attribute_values(":units", AttributeValue::N(units.to_string()))
            .expression_attribute_values(
                ":exp",
                AttributeValue::N((now_second + WINDOW_TTL_SECONDS).to_string()),
            )
            .return_values(ReturnValue::UpdatedNew)
            .customize()
            .config_override(crate::store::usage::meter_config())
            .send()
            .await;
        let out = match sent {
            Ok(out) => out,
            Err(e) => {
                if crate::store::usage::refused(&e) {
                    self.defer_units(t, units);
                    if let Some(w) = lock(&self.windows).get_mut(t) {
                        if w.second == now_second {
                            w.uncounted += admitted;
                        }
                    }
                }
                return Err(StoreError::from_sdk(e));
            }
        };
        let attrs = out.attributes.unwrap_or_default();
        let scale = u64::from(shards);
        let requests = u64_attr(&attrs, "requests").unwrap_or(0) * scale;
        let milli_units = u64_attr(&attrs, "milliUnits").unwrap_or(0) * scale;
        let mut windows = lock(&self.windows);
        let window = windows.entry(t.clone()).or_default();
        if window.second == now_second {
            window.requests = window.requests.max(requests);
            window.milli_units = window.milli_units.max(milli_units);
        } else if window.second < now_second {
            *window = Window {
                second: now_second,
                requests,
                milli_units,
                uncounted: 0,
            };
        }
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rps: u32, cu: u32) -> Limits {
        Limits {
            requests_per_second: rps,
            capacity_units_per_second: cu,
        }
    }

    #[test]
    fn golden_window_keys_and_shards() {
        let t = TenantId::parse("acme").unwrap();
        assert_eq!(window_pk(&t, 2), "TENANT#acme#RATE#2");
        assert_eq!(
            window_sk(&t, 1_795_240_800, 2),
            "TENANT#acme#RATE#1795240800#2"
        );
        assert_eq!(window_shards(&limits(25, 50)), 1);
        assert_eq!(window_shards(&limits(250, 50)), 1);
        assert_eq!(window_shards(&limits(251, 50)), 2);
        assert_eq!(window_shards(&limits(1_000, 50)), 4);
        assert_eq!(window_shards(&limits(100_000, 50)), MAX_WINDOW_SHARDS);
    }

    #[test]
    fn a_container_admits_up_to_the_limit_per_second_and_then_refuses() {
        // GIVEN a limit of 3 requests a second
        let limiter = RateLimiter::default();
        let t = TenantId::parse("acme").unwrap();
        let l = limits(3, 1_000);
        // WHEN 5 requests arrive in one second
        let decisions: Vec<_> = (0..5).map(|_| limiter.decide(&t, &l, 100)).collect();
        // THEN 3 are admitted and 2 limited; the next second starts afresh
        assert_eq!(
            decisions,
            [
                Admission::Admitted,
                Admission::Admitted,
                Admission::Admitted,
                Admission::Limited(Exceeded::Requests),
                Admission::Limited(Exceeded::Requests)
            ]
        );
        assert_eq!(limiter.decide(&t, &l, 101), Admission::Admitted);
        // and another tenant is not affected
        let other = TenantId::parse("globex").unwrap();
        assert_eq!(limiter.decide(&other, &l, 100), Admission::Admitted);
    }
}
