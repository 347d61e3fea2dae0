//! The tier quota: a per-tenant limiter shared by every container, kept in DynamoDB.
//!
//! **Requests: a fixed one-second window.** **Capacity units: a token bucket that carries debt.**
//! Both are counted in the same window items, with one UpdateItem `ADD`, sent beside a handler
//! together with the usage meter's flush and answered with the whole item (`ALL_NEW`): every 100 ms
//! while the tenant is far from its limits, and with every request once it is within 80% of one.
//! A container decides each request before the handler runs from what the last answer told it, plus
//! its own admissions since. Over a limit, the request gets 429 with a `Retry-After` computed from
//! the debt, and nothing else happens: no handler, no DynamoDB write.
//!
//! **Capacity units: estimate, then correct.** A request's units are known only once it has run,
//! so at admission it is charged an estimate: its route's last cost per unit of size in this
//! container (size is the page `limit`, else 1), or one unit for a route not seen yet. When it ends,
//! the difference to what DynamoDB reported is charged (or refunded) in the window it ends in. A
//! request is admitted only while the tenant's bucket holds something, and it is handed the
//! bucket's balance as its budget: a list page shrinks its `limit` to what that budget pays
//! ([`crate::store::client::meter::page_budget`]).
//!
//! **Debt.** Each window item holds `carriedMilli`, the debt brought into its second: its shard's
//! last window (within [`MAX_DEBT_SECONDS`]) had `carried + units`, and each second since repaid one
//! second's quota. The first writer of a second that finds no `carriedMilli` reads that last window
//! (one Query) and sets it `if_not_exists`; writes into a second end with the second, so every
//! writer computes the same value. A container whose own answer of this second or the last showed
//! the tenant under half its units and owing nothing sets 0 in its ADD instead, without reading
//! back; so that this never loses a debt another container ran up meanwhile, a writer whose answer
//! shows its window ending in debt sets that debt into the next second's item itself (the largest
//! such value wins). A container that refuses on debt projects the repayment itself,
//! so a tenant in debt is refused until the bucket holds something again, with `Retry-After`
//! the whole seconds that takes, and is never told to come back sooner.
//!
//! **Overshoot.** Per second, in one container, a tenant gets its quota, plus what requests
//! admitted while the bucket still held something consume beyond it; those units are debt, repaid
//! before the next admission. Over any T seconds a tenant consumes at most
//! `quota × (T + 1) + C × (in flight × largest request)` units, where C is the number of containers
//! serving it and one request is bounded by its budget (a page) or by the largest item (a write).
//!
//! **Spread.** The counter is split over S = ⌈requests per second ÷ [`REQUESTS_PER_SHARD`]⌉ partitions
//! (up to [`MAX_WINDOW_SHARDS`], which the maximum custom limit needs), chosen round-robin, so no
//! counter item takes more than about 250 writes a second (a partition takes 1,000) at any allowed
//! limit. The window's totals are estimated as S times the shard this container wrote: exact for
//! S = 1, within a few percent at the rates that need S > 1.
//!
//! Their keys are built in `shared::identity::keys`; the key table (generated from it) is in
//! `docs/key-scheme.md`.
//!
//! Window items expire (TTL) [`WINDOW_TTL_SECONDS`] after their second.
//!
//! **When the store refuses: open, within a local share.** Each write adds this container's id to
//! the window's `containers`, so a container knows how many served the tenant in the last minute
//! (N). When its counter write is refused (throttled, unavailable, timed out), the container keeps
//! deciding alone, holding the tenant to 1/N of each limit on its own admissions until a write
//! succeeds. Failing closed would turn a throttled counter partition (not the tenant's data) into an
//! outage of the API; failing open without a share would let N containers admit N times the quota.

mod decide;
mod shared_window;
mod window;

use std::collections::HashMap;
use std::sync::atomic::AtomicU32;
use std::sync::Mutex;

use crate::identity::ids::TenantId;
use crate::store::tenancy::tenants::{Limits, MAX_REQUESTS_PER_SECOND};

/// The most admitted requests a second one window item is planned to take.
pub const REQUESTS_PER_SHARD: u32 = 250;
/// The shards the maximum custom request rate needs.
pub const MAX_WINDOW_SHARDS: u32 = MAX_REQUESTS_PER_SECOND.div_ceil(REQUESTS_PER_SHARD);
/// Debt older than this many seconds of quota is forgiven: a window looks back no further.
pub const MAX_DEBT_SECONDS: u64 = 60;
/// Window items expire this long after their second (they must outlive the look-back).
pub const WINDOW_TTL_SECONDS: u64 = MAX_DEBT_SECONDS + 60;
/// What a request refused on its rate is told to wait: the current window ends within a second.
pub const LIMITED_RETRY_AFTER_SECONDS: u32 = 1;
/// A route's first request, before any cost is known, is estimated at one capacity unit.
pub const FIRST_ESTIMATE_MILLI: u64 = 1_000;
/// A container that has had no answer of a tenant's window for this many seconds reads it before
/// its next admission of the tenant ([`RateLimiter::knows`]).
pub const KNOWLEDGE_SECONDS: u64 = 1;
/// Containers seen writing a tenant's windows within this many seconds share its limits when
/// the store refuses.
const PEER_MEMORY_SECONDS: u64 = 60;

pub fn window_shards(limits: &Limits) -> u32 {
    limits
        .requests_per_second
        .div_ceil(REQUESTS_PER_SHARD)
        .clamp(1, MAX_WINDOW_SHARDS)
}

/// The window partitions a walk of the tenant's items (offboarding, export) reads: its current
/// limits' shards, and never fewer than the 8 any limit up to 2,000 requests a second uses (a
/// tenant whose limits were lowered keeps windows on higher shards only until their TTL).
pub fn walked_window_shards(limits: &Limits) -> u32 {
    window_shards(limits).max(8)
}

/// The quota windows' keys (`TENANT#t#RATE#…`), built where every key is.
pub use crate::identity::keys::{
    parse_quota_window_second as window_second, quota_window_pk as window_pk,
    quota_window_sk as window_sk,
};

/// Which limit a request is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    Requests,
    CapacityUnits,
}

/// What an admitted request was charged, and what it may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge {
    /// The estimate charged at admission, in thousandths of a unit.
    pub estimate_milli: u64,
    /// What the tenant's bucket held at admission, in thousandths: the request's budget.
    pub budget_milli: u64,
}

/// The decision on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Admitted(Charge),
    Limited {
        exceeded: Exceeded,
        /// Whole seconds until the tenant's bucket holds something again.
        retry_after_seconds: u32,
    },
}

/// Within this share of a limit, every admitted request is counted at once (not batched), so the
/// decision near the limit is as exact as one answer late allows.
const NEAR_LIMIT_PERCENT: u64 = 80;

/// The per-container side of the limiter: what each tenant's window looked like at the last answer,
/// the units charged and not yet written, what each route cost, and which containers share the
/// tenant.
#[derive(Debug)]
pub struct RateLimiter {
    windows: Mutex<HashMap<TenantId, window::Window>>,
    pending_milli_units: Mutex<HashMap<TenantId, i64>>,
    /// (tenant, route) → what the route cost, as last measured.
    costs: Mutex<HashMap<(TenantId, String), RouteCost>>,
    /// tenant → container id → the last second it was seen writing the tenant's windows.
    peers: Mutex<HashMap<TenantId, HashMap<String, u64>>>,
    container: String,
    next_shard: AtomicU32,
    /// Each write and read of the shared window: one attempt within this
    /// ([`crate::store::quota::usage::METER_TIMEOUT`] as deployed).
    budget: std::time::Duration,
}

impl RateLimiter {
    /// This limiter with `budget` for each request of the shared window: a test that counts a
    /// route's requests on a loaded machine gives it the time the deployed 200 ms may not be.
    pub fn with_budget(self, budget: std::time::Duration) -> Self {
        Self { budget, ..self }
    }
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self {
            windows: Mutex::default(),
            pending_milli_units: Mutex::default(),
            costs: Mutex::default(),
            peers: Mutex::default(),
            container: uuid::Uuid::now_v7().simple().to_string(),
            next_shard: AtomicU32::new(0),
            budget: crate::store::quota::usage::METER_TIMEOUT,
        }
    }
}

/// What a route cost its last request: per item of its page when it read one, else per request.
#[derive(Debug, Clone, Copy)]
struct RouteCost {
    milli_per_size: u64,
    pages: bool,
}

fn capacity_milli(limits: &Limits) -> i64 {
    i64::from(limits.capacity_units_per_second) * 1000
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

    fn admitted(a: Admission) -> Charge {
        match a {
            Admission::Admitted(c) => c,
            other => panic!("limited: {other:?}"),
        }
    }

    #[test]
    fn window_seconds_and_shards() {
        let t = TenantId::parse("acme").unwrap();
        assert_eq!(
            window_second(&window_sk(&t, 1_795_240_800, 2)),
            Some(1_795_240_800)
        );
        assert_eq!(window_shards(&limits(25, 50)), 1);
        assert_eq!(window_shards(&limits(250, 50)), 1);
        assert_eq!(window_shards(&limits(251, 50)), 2);
        assert_eq!(window_shards(&limits(1_000, 50)), 4);
        // the maximum custom rate: 400 shards, each planned for 250 of its 100,000 a second
        assert_eq!(window_shards(&limits(100_000, 50)), MAX_WINDOW_SHARDS);
        assert_eq!(MAX_WINDOW_SHARDS, 400);
    }

    #[test]
    fn a_container_admits_up_to_the_limit_per_second_and_then_refuses() {
        // GIVEN a limit of 3 requests a second
        let limiter = RateLimiter::default();
        let t = TenantId::parse("acme").unwrap();
        let l = limits(3, 1_000);
        // WHEN 5 requests arrive in one second
        let decisions: Vec<_> = (0..5)
            .map(|_| match limiter.decide(&t, &l, 100, 1_000) {
                Admission::Admitted(_) => None,
                Admission::Limited {
                    exceeded,
                    retry_after_seconds,
                } => Some((exceeded, retry_after_seconds)),
            })
            .collect();
        // THEN 3 are admitted and 2 limited for a second; the next second starts afresh
        assert_eq!(
            decisions,
            [
                None,
                None,
                None,
                Some((Exceeded::Requests, 1)),
                Some((Exceeded::Requests, 1))
            ]
        );
        admitted(limiter.decide(&t, &l, 101, 1_000));
        // and another tenant is not affected
        let other = TenantId::parse("globex").unwrap();
        admitted(limiter.decide(&other, &l, 100, 1_000));
    }

    #[test]
    fn a_request_that_costs_far_more_than_its_estimate_leaves_debt_repaid_before_the_next() {
        // GIVEN a tenant of 50 units a second whose first request is estimated at one unit
        let limiter = RateLimiter::default();
        let t = TenantId::parse("acme").unwrap();
        let l = limits(1_000, 50);
        let estimate = limiter.estimate(&t, "query-tenant-products", 1000);
        assert_eq!(estimate, FIRST_ESTIMATE_MILLI);
        let charge = admitted(limiter.decide(&t, &l, 100, estimate));
        assert_eq!(charge.budget_milli, 50_000);
        // WHEN it consumes 2,000 units
        limiter.settle(
            &t,
            "query-tenant-products",
            Some(1000),
            charge,
            2_000_000,
            100,
        );
        // THEN the bucket is 1,950 units in debt after this second, which the next 39 seconds repay
        // at 50 a second: refused until then, each time told exactly when, and admitted in the 40th
        for second in [100, 101, 120, 139] {
            match limiter.decide(&t, &l, second, 1_000) {
                Admission::Limited {
                    exceeded: Exceeded::CapacityUnits,
                    retry_after_seconds,
                } => assert_eq!(u64::from(retry_after_seconds), 140 - second, "at {second}"),
                other => panic!("admitted at {second}: {other:?}"),
            }
        }
        let later = admitted(limiter.decide(&t, &l, 140, 1_000));
        assert!(later.budget_milli <= 50_000);
        // AND the route's cost is learned per unit of size: 2 units an item of limit
        assert_eq!(limiter.estimate(&t, "query-tenant-products", 10), 20_000);
    }

    #[test]
    fn a_request_that_read_nothing_or_little_never_teaches_a_route_to_cost_nothing() {
        // GIVEN a route whose page of 1,000 cost 2,000 units: 2 units an item
        let limiter = RateLimiter::default();
        let t = TenantId::parse("acme").unwrap();
        let l = limits(1_000, 100_000);
        let route = "query-tenant-products";
        let settle = |consumed_milli: u64| {
            let charge = admitted(limiter.decide(&t, &l, 100, 1_000));
            limiter.settle(&t, route, Some(1000), charge, consumed_milli, 100);
        };
        settle(2_000_000);
        // WHEN a request of it is refused before it reads anything (a bad cursor): it cost nothing
        settle(0);
        // THEN the route still costs 2 units an item: the next page is estimated and shrunk so
        assert_eq!(limiter.cost_per_item(&t, route), Some(2_000));
        assert_eq!(limiter.estimate(&t, route, 10), 20_000);
        // WHEN a short last page of 1,000 costs half a unit
        settle(500);
        // THEN an item costs at least a thousandth of a unit: never nothing
        assert_eq!(limiter.cost_per_item(&t, route), Some(1));
    }

    #[test]
    fn a_cheaper_request_than_estimated_is_refunded() {
        let limiter = RateLimiter::default();
        let t = TenantId::parse("acme").unwrap();
        let l = limits(1_000, 5);
        let charge = admitted(limiter.decide(&t, &l, 100, 4_000));
        limiter.settle(&t, "get-product", None, charge, 500, 100);
        // a route that reads no page is estimated per request, whatever `limit` it is sent
        assert_eq!(limiter.estimate(&t, "get-product", 1000), 500);
        // 0.5 of 5 units spent: 4.5 left for the next request's budget
        assert_eq!(
            admitted(limiter.decide(&t, &l, 100, 500)).budget_milli,
            4_500
        );
    }
}
