//! The request's meta: what its DynamoDB calls cost, counted per call, and the page budget in force.

use super::*;
use crate::identity::ids::TenantId;
use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::oneshot;

/// What the request log line reports beyond status and latency, filled in while the request runs.
#[derive(Debug, Default)]
pub struct RequestMeta {
    pub(super) tenant: OnceLock<String>,
    pub(super) dynamodb_requests: AtomicU32,
    /// DynamoDB attempts under way now, and the most there ever were at once (the fan-out budget's
    /// witness).
    pub(super) in_flight: AtomicU32,
    pub(super) max_in_flight: AtomicU32,
    /// DynamoDB attempts answered with a throttling error.
    pub(super) throttles: AtomicU32,
    /// The route, for the throttling log line (set by the service layer).
    pub(super) route: OnceLock<String>,
    /// Consumed capacity in thousandths of a unit, so concurrent requests add up exactly.
    pub(super) read_milli_units: AtomicU64,
    pub(super) write_milli_units: AtomicU64,
    /// What the request's pulls out of a move's source consumed ([`metered_apart`]), in
    /// thousandths: the operator's move caused them, so they are the platform's, not the tenant's.
    pub(super) pulled_read_milli_units: AtomicU64,
    pub(super) pulled_write_milli_units: AtomicU64,
    /// Hands the verified tenant to whoever waits for it (the usage meter) as soon as it is known.
    pub(super) tenant_listener: Mutex<Option<oneshot::Sender<TenantId>>>,
    /// What the tenant's quota bucket held when the request was admitted (set by the service layer).
    pub(super) budget: OnceLock<PageBudget>,
    /// The page limit the handler read with, after any shrinking: the request's size.
    pub(super) page_limit: OnceLock<u32>,
    /// The items a page returned when it ended before the list did (its next cursor given): a page
    /// cut short by its bytes or its reads cost what it read for these, not for its limit.
    pub(super) page_returned: OnceLock<u32>,
    /// Tenants with a sealed item this container's view of their key could not open (no key, or
    /// an older version than the item's): the service layer meets their keys again.
    pub(super) keys_not_met: Mutex<Vec<TenantId>>,
}

/// An admitted request's capacity budget, for the pages it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageBudget {
    /// What the tenant's bucket held at admission, in thousandths of a unit.
    pub budget_milli: u64,
    /// What one unit of page limit cost on this route last time, when known.
    pub milli_per_item: Option<u64>,
}

impl PageBudget {
    /// `limit`, shrunk to what the budget pays at the route's last cost per item (at least 1).
    pub fn shrink(&self, limit: u32) -> u32 {
        match self.milli_per_item {
            Some(per) if per > 0 => {
                let affordable = (self.budget_milli / per).clamp(1, u64::from(u32::MAX)) as u32;
                limit.min(affordable)
            }
            _ => limit,
        }
    }
}

impl RequestMeta {
    /// A meta whose verified tenant is also sent to the returned receiver (once, when known).
    pub fn with_tenant_listener() -> (Self, oneshot::Receiver<TenantId>) {
        let (tx, rx) = oneshot::channel();
        let meta = Self {
            tenant_listener: Mutex::new(Some(tx)),
            ..Self::default()
        };
        (meta, rx)
    }

    pub fn tenant(&self) -> Option<&str> {
        self.tenant.get().map(String::as_str)
    }

    pub fn dynamodb_requests(&self) -> u32 {
        self.dynamodb_requests.load(Ordering::Relaxed)
    }

    /// How many of this request's DynamoDB attempts were throttled.
    pub fn throttles(&self) -> u32 {
        self.throttles.load(Ordering::Relaxed)
    }

    /// Names the request's route (its template, never ids), for telemetry.
    pub fn set_route(&self, route: &str) {
        let _ = self.route.set(route.to_owned());
    }

    /// The most DynamoDB requests this request ever had in flight at once.
    pub fn max_in_flight(&self) -> u32 {
        self.max_in_flight.load(Ordering::Relaxed)
    }

    /// The capacity units so far, in thousandths: (read, write).
    pub fn capacity_milli_units(&self) -> (u64, u64) {
        (
            self.read_milli_units.load(Ordering::Relaxed),
            self.write_milli_units.load(Ordering::Relaxed),
        )
    }

    /// What the request's pulls out of a move's source consumed, in thousandths: (read, write).
    pub fn pulled_capacity_milli_units(&self) -> (u64, u64) {
        (
            self.pulled_read_milli_units.load(Ordering::Relaxed),
            self.pulled_write_milli_units.load(Ordering::Relaxed),
        )
    }

    /// Read capacity units DynamoDB reported for this request's calls (table and indexes).
    pub fn read_capacity_units(&self) -> f64 {
        self.read_milli_units.load(Ordering::Relaxed) as f64 / 1000.0
    }

    /// Write capacity units DynamoDB reported for this request's calls (table and indexes).
    pub fn write_capacity_units(&self) -> f64 {
        self.write_milli_units.load(Ordering::Relaxed) as f64 / 1000.0
    }

    /// A DynamoDB attempt starts: one more in flight.
    pub(super) fn attempt_started(&self) {
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.max_in_flight.fetch_max(now, Ordering::Relaxed);
    }

    /// A DynamoDB attempt goes on the wire.
    pub(super) fn attempt_sent(&self) {
        self.dynamodb_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// A DynamoDB attempt ends, answered or not.
    pub(super) fn attempt_ended(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    pub(super) fn add_units(&self, units: CapacityUnits) {
        let milli = |u: f64| (u * 1000.0).round().max(0.0) as u64;
        self.read_milli_units
            .fetch_add(milli(units.read), Ordering::Relaxed);
        self.write_milli_units
            .fetch_add(milli(units.write), Ordering::Relaxed);
    }

    /// Sets the request's capacity budget (once, at admission).
    pub fn set_budget(&self, budget: PageBudget) {
        let _ = self.budget.set(budget);
    }

    /// The page limit the handler read with, when it read a page.
    pub fn page_limit(&self) -> Option<u32> {
        self.page_limit.get().copied()
    }

    /// The request's size, what its cost is learned per: its page limit, or the items its page
    /// returned when it was cut short before the list ended (fewer than its limit, a next cursor
    /// given). A last page short of its limit keeps its limit: the list ended, and its reads cost
    /// what a full page's would have up to there. So does a page that returned nothing (its items
    /// expired, or walked already): learned per item, its whole cost would be one item's, and the
    /// next request of the route would be admitted for its limit times that.
    pub fn page_size(&self) -> Option<u32> {
        let limit = self.page_limit()?;
        Some(match self.page_returned.get() {
            Some(&returned) if (1..limit).contains(&returned) => returned,
            _ => limit,
        })
    }

    /// The tenants whose keys the request met sealed items of and did not know ([`note_key_not_met`]).
    pub fn keys_not_met(&self) -> Vec<TenantId> {
        lock(&self.keys_not_met).clone()
    }

    /// Drops the tenant listener: no tenant will be verified any more, so the listener stops waiting.
    pub fn close_tenant_listener(&self) {
        lock(&self.tenant_listener).take();
    }
}

tokio::task_local! {
    pub(super) static REQUEST: Arc<RequestMeta>;
}

/// Runs `fut` with `meta` as the current request's meta.
pub async fn scope<T>(meta: Arc<RequestMeta>, fut: impl Future<Output = T>) -> T {
    REQUEST.scope(meta, fut).await
}

/// Runs `fut` with a fresh [`RequestMeta`] and returns it with the result.
pub async fn with_request_meta<T>(fut: impl Future<Output = T>) -> (T, Arc<RequestMeta>) {
    let meta = Arc::new(RequestMeta::default());
    let out = scope(meta.clone(), fut).await;
    (out, meta)
}

/// Runs `fut` (a pull out of a move's source) metered apart from the current request: what its
/// calls consume is added to the request's pulled units, never to its own.
pub async fn metered_apart<T>(fut: impl Future<Output = T>) -> T {
    let (out, apart) = with_request_meta(fut).await;
    let (read, write) = apart.capacity_milli_units();
    let _ = REQUEST.try_with(|m| {
        m.pulled_read_milli_units.fetch_add(read, Ordering::Relaxed);
        m.pulled_write_milli_units
            .fetch_add(write, Ordering::Relaxed);
        m.dynamodb_requests
            .fetch_add(apart.dynamodb_requests(), Ordering::Relaxed);
    });
    out
}

/// Charges the current request `units` as its own: what a write it made inside work metered apart
/// (a relocation that also wrote it) would have cost sent alone. A moving tenant pays its write,
/// never the move around it.
pub fn charge_own(units: super::CapacityUnits) {
    let _ = REQUEST.try_with(|m| m.add_units(units));
}

/// Sets the current request's capacity budget.
pub fn set_budget(budget: PageBudget) {
    let _ = REQUEST.try_with(|m| m.set_budget(budget));
}

/// The page limit of the current request: `limit` shrunk to what its capacity budget pays, and
/// recorded as the request's size (what its cost is learned per).
pub fn page_limit(limit: u32) -> u32 {
    REQUEST
        .try_with(|m| {
            let limit = m.budget.get().map_or(limit, |b| b.shrink(limit));
            let _ = m.page_limit.set(limit);
            limit
        })
        .unwrap_or(limit)
}

/// Records that the current request's page returned `items` before the end of its list (a next
/// cursor given): see [`RequestMeta::page_size`].
pub fn page_returned(items: usize) {
    let _ = REQUEST.try_with(|m| {
        let _ = m
            .page_returned
            .set(u32::try_from(items).unwrap_or(u32::MAX));
    });
}

/// Records that the current request met an item of `tenant` sealed under a key (or a key version)
/// this container does not know yet.
pub fn note_key_not_met(tenant: TenantId) {
    let _ = REQUEST.try_with(|m| {
        let mut tenants = lock(&m.keys_not_met);
        if !tenants.contains(&tenant) {
            tenants.push(tenant);
        }
    });
}

/// Records the verified tenant of the current request (for the log line and the usage meter).
pub fn note_tenant(tenant: &TenantId) {
    let _ = REQUEST.try_with(|m| {
        let _ = m.tenant.set(tenant.to_string());
        if let Some(tx) = lock(&m.tenant_listener).take() {
            let _ = tx.send(tenant.clone());
        }
    });
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_page_is_sized_by_what_it_returned_unless_it_returned_nothing() {
        let sized = |limit: u32, returned: Option<u32>| {
            let meta = RequestMeta::default();
            let _ = meta.page_limit.set(limit);
            if let Some(returned) = returned {
                let _ = meta.page_returned.set(returned);
            }
            meta.page_size()
        };
        assert_eq!(sized(100, None), Some(100));
        assert_eq!(sized(100, Some(7)), Some(7));
        assert_eq!(sized(100, Some(100)), Some(100));
        // (before the mend: 1, and the next page of the route was admitted for 100 times its cost)
        assert_eq!(sized(100, Some(0)), Some(100));
        assert_eq!(RequestMeta::default().page_size(), None);
    }
}
