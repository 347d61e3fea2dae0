//! Deciding a request on what this container knows, and learning what routes cost.

use crate::identity::ids::TenantId;
use crate::store::tenancy::tenants::Limits;

use super::window::repaid_after;
use super::{capacity_milli, lock, Admission, Charge, Exceeded, RateLimiter, RouteCost};
use super::{
    FIRST_ESTIMATE_MILLI, KNOWLEDGE_SECONDS, LIMITED_RETRY_AFTER_SECONDS, NEAR_LIMIT_PERCENT,
    PEER_MEMORY_SECONDS,
};

impl RateLimiter {
    /// What a request of `route` asking for pages of `limit` is estimated to cost: the route's last
    /// cost per item times `limit` when it reads pages, its last cost per request otherwise (a
    /// `limit` sent to a route that reads no page changes nothing).
    pub fn estimate(&self, tenant: &TenantId, route: &str, limit: u32) -> u64 {
        match lock(&self.costs).get(&(tenant.clone(), route.to_owned())) {
            None => FIRST_ESTIMATE_MILLI,
            Some(cost) if cost.pages => cost.milli_per_size * u64::from(limit.max(1)),
            Some(cost) => cost.milli_per_size,
        }
    }

    /// Whether this container has measured what `route` costs for `tenant` (a request of it ended).
    pub fn cost_known(&self, tenant: &TenantId, route: &str) -> bool {
        lock(&self.costs).contains_key(&(tenant.clone(), route.to_owned()))
    }

    /// What one item of a page cost on `route` last time, when it reads pages and that is known.
    pub fn cost_per_item(&self, tenant: &TenantId, route: &str) -> Option<u64> {
        lock(&self.costs)
            .get(&(tenant.clone(), route.to_owned()))
            .filter(|cost| cost.pages)
            .map(|cost| cost.milli_per_size)
    }

    /// Decides a request of `tenant` at `now_second` under `limits`, charged `estimate_milli`, from
    /// what this container knows. An admitted request is counted locally at once, so concurrent
    /// requests in one container see each other.
    pub fn decide(
        &self,
        tenant: &TenantId,
        limits: &Limits,
        now_second: u64,
        estimate_milli: u64,
    ) -> Admission {
        let share = self.containers_seen(tenant, now_second);
        let mut windows = lock(&self.windows);
        let capacity = capacity_milli(limits);
        let window = windows.entry(tenant.clone()).or_default();
        window.roll_to(now_second, capacity);
        let (requests, spent) = match window.degraded {
            false => (window.requests, window.carried_milli + window.milli_units),
            // Alone, on a 1/N share: this container's own admissions, this one included, count N
            // times, so N containers together stay within the limit.
            true => (
                (window.own_requests + 1) * share - 1,
                window.carried_milli + window.own_milli_units * share as i64,
            ),
        };
        if requests >= u64::from(limits.requests_per_second) {
            return Admission::Limited {
                exceeded: Exceeded::Requests,
                retry_after_seconds: LIMITED_RETRY_AFTER_SECONDS,
            };
        }
        if spent >= capacity {
            return Admission::Limited {
                exceeded: Exceeded::CapacityUnits,
                retry_after_seconds: repaid_after(spent - capacity, capacity),
            };
        }
        let estimate = estimate_milli as i64;
        window.requests += 1;
        window.uncounted += 1;
        window.own_requests += 1;
        window.milli_units += estimate;
        window.own_milli_units += estimate;
        drop(windows);
        *lock(&self.pending_milli_units)
            .entry(tenant.clone())
            .or_default() += estimate;
        Admission::Admitted(Charge {
            estimate_milli,
            budget_milli: (capacity - spent) as u64,
        })
    }

    /// Corrects an admitted request's estimate to what it consumed, in the window of `now_second`
    /// (the debt carries it on), and learns its route's cost: per item of `page_size` when the
    /// handler read a page (`RequestMeta::page_size`: its limit, or the items a page cut short
    /// returned), else per request; never from a request that consumed nothing.
    pub fn settle(
        &self,
        tenant: &TenantId,
        route: &str,
        page_size: Option<u32>,
        charge: Charge,
        consumed_milli: u64,
        now_second: u64,
    ) {
        let difference = consumed_milli as i64 - charge.estimate_milli as i64;
        if difference != 0 {
            *lock(&self.pending_milli_units)
                .entry(tenant.clone())
                .or_default() += difference;
            if let Some(w) = lock(&self.windows).get_mut(tenant) {
                if w.second == now_second {
                    w.milli_units += difference;
                    w.own_milli_units += difference;
                } else if w.second < now_second {
                    // The window moved on: the difference is debt (or a refund) carried into it.
                    w.carried_milli = (w.carried_milli + difference).max(0);
                }
            }
        }
        // A request that read nothing (refused before its first call, or served from a cache)
        // teaches nothing, and a page's cost per item is rounded up: a learned cost of 0 would
        // leave the next request's page unshrunk by the budget, and admitted on this container's
        // view alone.
        if consumed_milli == 0 {
            return;
        }
        let cost = RouteCost {
            milli_per_size: consumed_milli.div_ceil(u64::from(page_size.unwrap_or(1).max(1))),
            pages: page_size.is_some(),
        };
        lock(&self.costs).insert((tenant.clone(), route.to_owned()), cost);
    }

    /// Whether the tenant's window, as this container knows it, is close enough to a limit that its
    /// count should be written now rather than with the next batch.
    pub fn near_limit(&self, tenant: &TenantId, limits: &Limits, now_second: u64) -> bool {
        let windows = lock(&self.windows);
        let Some(w) = windows.get(tenant).filter(|w| w.second == now_second) else {
            return false;
        };
        let near = |used: u64, limit: u64| used * 100 >= limit * NEAR_LIMIT_PERCENT;
        let spent = (w.carried_milli + w.milli_units).max(0) as u64;
        w.degraded
            || near(w.requests, u64::from(limits.requests_per_second))
            || near(spent, capacity_milli(limits) as u64)
    }

    /// Drops what this container knows and holds of `tenant`'s window (a refused tenant's).
    pub fn forget(&self, tenant: &TenantId) {
        lock(&self.windows).remove(tenant);
        lock(&self.pending_milli_units).remove(tenant);
        lock(&self.costs).retain(|(t, _), _| t != tenant);
        lock(&self.peers).remove(tenant);
    }

    /// Charges units consumed outside a request (an import's writes) to `tenant`'s next count, in
    /// this container's current window.
    pub fn charge(&self, tenant: &TenantId, now_second: u64, milli: u64) {
        if milli == 0 {
            return;
        }
        let mut windows = lock(&self.windows);
        let window = windows.entry(tenant.clone()).or_default();
        let capacity = window.capacity_milli;
        window.roll_to(now_second, capacity);
        window.milli_units += milli as i64;
        window.own_milli_units += milli as i64;
        drop(windows);
        *lock(&self.pending_milli_units)
            .entry(tenant.clone())
            .or_default() += milli as i64;
    }

    /// How long `tenant` must wait before its bucket holds something, as this container knows it
    /// (0 when it does now).
    pub fn wait_seconds(&self, tenant: &TenantId, limits: &Limits, now_second: u64) -> u32 {
        let capacity = capacity_milli(limits);
        let mut windows = lock(&self.windows);
        let window = windows.entry(tenant.clone()).or_default();
        window.roll_to(now_second, capacity);
        let spent = window.carried_milli + window.milli_units;
        match spent >= capacity {
            true => repaid_after(spent - capacity, capacity),
            false => 0,
        }
    }

    /// How many containers served `tenant` in the last minute, as far as this one has seen (≥ 1).
    fn containers_seen(&self, tenant: &TenantId, now_second: u64) -> u64 {
        let peers = lock(&self.peers);
        let seen = peers.get(tenant).map_or(0, |p| {
            p.iter()
                .filter(|(id, at)| {
                    **id != self.container && **at + PEER_MEMORY_SECONDS >= now_second
                })
                .count()
        });
        seen as u64 + 1
    }

    /// Whether this container has learned `tenant`'s shared window recently enough to decide on
    /// its own view: an answer within [`KNOWLEDGE_SECONDS`]. A container without one (its first
    /// request of the tenant, or after a pause) reads the window and its debt first
    /// ([`Self::count`]), so a fresh container never admits into a debt it has not seen.
    pub fn knows(&self, tenant: &TenantId, now_second: u64) -> bool {
        lock(&self.windows)
            .get(tenant)
            .is_some_and(|w| w.learned_at > 0 && w.learned_at + KNOWLEDGE_SECONDS >= now_second)
    }

    /// Whether a request admitted locally at `estimate_milli` may run on this container's view
    /// alone: its view is of this second or the last, the window stays under half its units with
    /// this request, which is under a tenth of a second's units, and this container's own
    /// admissions this second stay within its share of that half (÷ the containers seen serving the
    /// tenant in the last minute). Any other admission is reserved in the shared window first
    /// ([`Self::reserve`]). So what containers admit alone in a second is at most half the bucket
    /// however many serve the tenant, and the other half is never given out twice.
    pub fn admits_alone(
        &self,
        tenant: &TenantId,
        limits: &Limits,
        now_second: u64,
        estimate_milli: u64,
    ) -> bool {
        let capacity = capacity_milli(limits);
        let containers = self.containers_seen(tenant, now_second) as i64;
        let windows = lock(&self.windows);
        let Some(w) = windows.get(tenant).filter(|w| w.second == now_second) else {
            return false;
        };
        let fresh = w.learned_at > 0 && w.learned_at + 1 >= now_second;
        // `decide` has already added this request's estimate to the window.
        let spent = w.carried_milli + w.milli_units;
        let within_share = w.own_milli_units * 2 * containers <= capacity;
        fresh
            && !w.degraded
            && within_share
            && spent * 2 < capacity
            && (estimate_milli as i64) * 10 < capacity
    }
}
