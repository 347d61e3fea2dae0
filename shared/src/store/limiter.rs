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
//! ([`crate::store::meter::page_budget`]).
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
//! | item | PK | SK |
//! |---|---|---|
//! | window shard | `TENANT#t#RATE#<shard>` | `TENANT#t#RATE#<epoch second>#<shard>` |
//!
//! Window items expire (TTL) [`WINDOW_TTL_SECONDS`] after their second.
//!
//! **When the store refuses: open, within a local share.** Each write adds this container's id to
//! the window's `containers`, so a container knows how many served the tenant in the last minute
//! (N). When its counter write is refused (throttled, unavailable, timed out), the container keeps
//! deciding alone, holding the tenant to 1/N of each limit on its own admissions until a write
//! succeeds. Failing closed would turn a throttled counter partition (not the tenant's data) into an
//! outage of the API; failing open without a share would let N containers admit N times the quota.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

use crate::identity::ids::TenantId;
use crate::identity::keys::{EXPIRES_AT, PK, SK};
use crate::store::error::StoreError;
use crate::store::scoped::TenantDb;
use crate::store::tenants::{Limits, MAX_REQUESTS_PER_SECOND};

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

pub fn window_pk(t: &TenantId, shard: u32) -> String {
    crate::identity::keys::shard_pk(t, crate::identity::entities::RATE.kind, shard)
}

pub fn window_sk(t: &TenantId, second: u64, shard: u32) -> String {
    format!("TENANT#{t}#RATE#{second}#{shard}")
}

/// The second of a window's sort key.
fn window_second(sk: &str) -> Option<u64> {
    sk.rsplit('#').nth(1)?.parse().ok()
}

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

/// What this container knows of one tenant's current window. Units are thousandths, signed: a
/// refund can take a window below zero.
#[derive(Debug, Clone, Copy, Default)]
struct Window {
    second: u64,
    /// Requests in the window, all containers (the last answer, plus this container's admissions since).
    requests: u64,
    /// Capacity units charged in the window, all containers.
    milli_units: i64,
    /// Debt carried into the window, all containers: from the answer, else projected.
    carried_milli: i64,
    /// This container's admissions in the window that the counter does not hold yet.
    uncounted: u64,
    /// This container's own admissions and units in the window (decided alone when degraded).
    own_requests: u64,
    own_milli_units: i64,
    /// The last counter write was refused: decide on a 1/N share of the limits.
    degraded: bool,
    /// The second of the last answer this container had for the tenant (0: none).
    learned_at: u64,
    /// The capacity (thousandths a second) the window was last decided under.
    capacity_milli: i64,
}

impl Window {
    /// The debt this container may assume without reading it back: none, when its knowledge is of
    /// this second or the last and the tenant has used under half of a second's units. `None` when
    /// it must read the last window.
    fn assumed_carry(&self, capacity_milli: i64) -> Option<i64> {
        let fresh = self.learned_at + 1 >= self.second && self.learned_at > 0;
        let light = self.carried_milli <= 0 && self.milli_units * 2 < capacity_milli;
        (fresh && light).then_some(0)
    }

    /// Moves the window to `second`, carrying what is left unpaid of the last one.
    fn roll_to(&mut self, second: u64, capacity_milli: i64) {
        if self.second == second {
            self.capacity_milli = capacity_milli;
            return;
        }
        let elapsed = second.saturating_sub(self.second) as i64;
        let carried = match self.second {
            0 => 0,
            _ => (self.carried_milli + self.milli_units - capacity_milli * elapsed)
                .clamp(0, capacity_milli * MAX_DEBT_SECONDS as i64),
        };
        *self = Window {
            second,
            carried_milli: carried,
            degraded: self.degraded,
            capacity_milli,
            learned_at: self.learned_at,
            ..Window::default()
        };
    }
}

/// Within this share of a limit, every admitted request is counted at once (not batched), so the
/// decision near the limit is as exact as one answer late allows.
const NEAR_LIMIT_PERCENT: u64 = 80;

/// The per-container side of the limiter: what each tenant's window looked like at the last answer,
/// the units charged and not yet written, what each route cost, and which containers share the
/// tenant.
#[derive(Debug)]
pub struct RateLimiter {
    windows: Mutex<HashMap<TenantId, Window>>,
    pending_milli_units: Mutex<HashMap<TenantId, i64>>,
    /// (tenant, route) → what the route cost, as last measured.
    costs: Mutex<HashMap<(TenantId, String), RouteCost>>,
    /// tenant → container id → the last second it was seen writing the tenant's windows.
    peers: Mutex<HashMap<TenantId, HashMap<String, u64>>>,
    container: String,
    next_shard: AtomicU32,
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
    /// (the debt carries it on), and learns its route's cost: per item of `page_limit` when the
    /// handler read a page of it, else per request.
    pub fn settle(
        &self,
        tenant: &TenantId,
        route: &str,
        page_limit: Option<u32>,
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
        let cost = RouteCost {
            milli_per_size: consumed_milli / u64::from(page_limit.unwrap_or(1).max(1)),
            pages: page_limit.is_some(),
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

    /// Counts this container's admissions and units in the window of `now_second` that the counter
    /// does not hold yet, and learns the window's totals and debt from the answer. One UpdateItem on
    /// one window shard, with the usage meter's budget (one attempt, 200 ms); plus, when this is the
    /// second's first write to that shard, one Query for the debt carried into it and one UpdateItem
    /// to record it. When DynamoDB refuses the write, the counts stay pending and the container
    /// decides alone on its share until a write succeeds; the caller logs the error.
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
        let capacity = capacity_milli(limits);
        let (admitted, assumed_carry) = {
            let mut windows = lock(&self.windows);
            match windows.get_mut(t) {
                Some(w) if w.second == now_second => {
                    (std::mem::take(&mut w.uncounted), w.assumed_carry(capacity))
                }
                _ => (0, None),
            }
        };
        // Far from its limits on fresh knowledge, the tenant owes nothing, and a first writer sets
        // that without reading back; otherwise the debt is read from the last window (below).
        let assumed_carry = assumed_carry.map(|c| c / i64::from(shards));
        let mut answer = match self
            .add_to_window(db, shard, now_second, admitted, units, assumed_carry)
            .await
        {
            Ok(answer) => answer,
            Err((not_applied, e)) => {
                let mut windows = lock(&self.windows);
                let window = windows.entry(t.clone()).or_default();
                window.degraded = true;
                // Only a write DynamoDB surely did not apply is sent again; one that timed out
                // may have been, and counting it twice would refuse the tenant for nothing.
                if not_applied {
                    if window.second == now_second {
                        window.uncounted += admitted;
                    }
                    drop(windows);
                    *lock(&self.pending_milli_units)
                        .entry(t.clone())
                        .or_default() += units;
                }
                return Err(e);
            }
        };
        answer = self
            .absorb(db, shard, shards, capacity, now_second, answer)
            .await?;
        drop(answer);
        Ok(())
    }

    /// Learns a window shard's answer: when its second has no recorded debt yet, reads it from the
    /// last window and records it first; a window left in debt carries it into the next second.
    async fn absorb(
        &self,
        db: &TenantDb,
        shard: u32,
        shards: u32,
        capacity: i64,
        now_second: u64,
        mut answer: HashMap<String, AttributeValue>,
    ) -> Result<HashMap<String, AttributeValue>, StoreError> {
        let t = &db.tenant;
        let shard_capacity = capacity / i64::from(shards);
        if !answer.contains_key(CARRIED) {
            let carried = carried_into(db, shard, now_second, shard_capacity).await?;
            answer = record_carried(db, shard, now_second, carried).await?;
        }
        self.learn(t, now_second, shards, &answer);
        // A window this write left in debt carries it into the next second itself, so the next
        // second's first writer cannot miss it, whatever it assumed (see `carry_forward`).
        let owed = i64_attr(&answer, CARRIED).unwrap_or(0)
            + i64_attr(&answer, "milliUnits").unwrap_or(0)
            - shard_capacity;
        if owed > 0 {
            if let Err(e) = carry_forward(db, shard, now_second + 1, owed, shard_capacity).await {
                tracing::warn!(tenant = %t, error = %e, "a capacity debt could not be carried forward; the next second's first writer reads it back unless it assumes none");
            }
        }
        Ok(answer)
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

    /// Reserves a request admitted by [`Self::decide`] in the shared window: one conditional
    /// UpdateItem that adds it (one request, `estimate_milli` units) only while the window shard,
    /// with the debt carried into it, holds something. Answers whether it was reserved; on `false`
    /// the local admission is undone and the window learned again. A refused write (throttled) is
    /// an error: the caller decides alone (fails open), and the admission stays to be counted.
    pub async fn reserve(
        &self,
        db: &TenantDb,
        limits: &Limits,
        now_second: u64,
        estimate_milli: u64,
    ) -> Result<bool, StoreError> {
        let t = &db.tenant;
        let shards = window_shards(limits);
        let shard = self.next_shard.fetch_add(1, Ordering::Relaxed) % shards;
        let capacity = capacity_milli(limits);
        let shard_capacity = capacity / i64::from(shards);
        let carried = lock(&self.windows)
            .get(t)
            .filter(|w| w.second == now_second)
            .map_or(0, |w| w.carried_milli)
            / i64::from(shards);
        // Admitted while the shard's bucket holds something before this request.
        let room = shard_capacity - carried - 1;
        let estimate = estimate_milli as i64;
        // From here the reservation counts this admission, not this container's next count (taken
        // before any await, so a count running meanwhile never writes it a second time).
        self.counted(t, now_second, estimate);
        let out = db
            .client
            .update_item()
            .table_name(&*db.table)
            .key(PK, AttributeValue::S(window_pk(t, shard)))
            .key(SK, AttributeValue::S(window_sk(t, now_second, shard)))
            .update_expression(
                "ADD #requests :one, milliUnits :units, containers :me \
                 SET #exp = if_not_exists(#exp, :exp)",
            )
            // The debt this container assumed must be the window's, or more than it: a larger one
            // recorded by another container refuses the reservation, and is learned.
            .condition_expression(
                "(attribute_not_exists(milliUnits) OR milliUnits <= :room) \
                 AND (attribute_not_exists(#carried) OR #carried <= :carried)",
            )
            .expression_attribute_names("#carried", CARRIED)
            .expression_attribute_values(":carried", AttributeValue::N(carried.to_string()))
            .expression_attribute_names("#requests", "requests")
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(":units", AttributeValue::N(estimate.to_string()))
            .expression_attribute_values(":room", AttributeValue::N(room.to_string()))
            .expression_attribute_values(":me", AttributeValue::Ss(vec![self.container.clone()]))
            .expression_attribute_values(
                ":exp",
                AttributeValue::N((now_second + WINDOW_TTL_SECONDS).to_string()),
            )
            .return_values(ReturnValue::AllNew)
            .customize()
            .config_override(crate::store::usage::meter_config())
            .send()
            .await;
        match out {
            Ok(out) => {
                let answer = out.attributes.unwrap_or_default();
                self.absorb(db, shard, shards, capacity, now_second, answer)
                    .await?;
                Ok(true)
            }
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                self.undo(t, now_second, estimate);
                // What the other containers spent: learned for this decision and the next. The
                // window refused this request whatever that read answers.
                if let Err(e) = self.count(db, limits, now_second).await {
                    tracing::warn!(tenant = %t, error = %e, "the quota window could not be read after a refused reservation");
                }
                Ok(false)
            }
            Err(e) => {
                // Not reserved: the admission stands (fail open) and the container decides alone on
                // its share until a write succeeds. Only a write DynamoDB surely did not apply is
                // counted again; one that timed out may have been, and counting it twice would
                // refuse the tenant for nothing.
                self.degrade(t);
                if crate::store::usage::refused(&e) {
                    self.uncounted(t, now_second, estimate);
                }
                Err(StoreError::from_sdk(e))
            }
        }
    }

    /// The shared window could not be written: decide alone on a share until a write succeeds.
    fn degrade(&self, tenant: &TenantId) {
        lock(&self.windows)
            .entry(tenant.clone())
            .or_default()
            .degraded = true;
    }

    /// An admission of this second handed back to this container's next count.
    fn uncounted(&self, tenant: &TenantId, now_second: u64, estimate: i64) {
        if let Some(w) = lock(&self.windows)
            .get_mut(tenant)
            .filter(|w| w.second == now_second)
        {
            w.uncounted += 1;
        }
        *lock(&self.pending_milli_units)
            .entry(tenant.clone())
            .or_default() += estimate;
    }

    /// An admission of this second that the shared window now holds: not counted again.
    fn counted(&self, tenant: &TenantId, now_second: u64, estimate: i64) {
        if let Some(w) = lock(&self.windows)
            .get_mut(tenant)
            .filter(|w| w.second == now_second)
        {
            w.uncounted = w.uncounted.saturating_sub(1);
        }
        *lock(&self.pending_milli_units)
            .entry(tenant.clone())
            .or_default() -= estimate;
    }

    /// Takes back an admission of this second that the shared window refused (already handed from
    /// this container's count to the reservation).
    fn undo(&self, tenant: &TenantId, now_second: u64, estimate: i64) {
        if let Some(w) = lock(&self.windows)
            .get_mut(tenant)
            .filter(|w| w.second == now_second)
        {
            w.requests = w.requests.saturating_sub(1);
            w.own_requests = w.own_requests.saturating_sub(1);
            w.milli_units -= estimate;
            w.own_milli_units -= estimate;
        }
    }

    async fn add_to_window(
        &self,
        db: &TenantDb,
        shard: u32,
        second: u64,
        admitted: u64,
        units: i64,
        assumed_carry: Option<i64>,
    ) -> Result<HashMap<String, AttributeValue>, (bool, StoreError)> {
        let t = &db.tenant;
        let mut update = db
            .client
            .update_item()
            .table_name(&*db.table)
            .key(PK, AttributeValue::S(window_pk(t, shard)))
            .key(SK, AttributeValue::S(window_sk(t, second, shard)));
        update = match assumed_carry {
            Some(carry) => update
                .update_expression(
                    "ADD #requests :admitted, milliUnits :units, containers :me \
                     SET #exp = if_not_exists(#exp, :exp), #carried = if_not_exists(#carried, :carried)",
                )
                .expression_attribute_names("#carried", CARRIED)
                .expression_attribute_values(":carried", AttributeValue::N(carry.to_string())),
            None => update.update_expression(
                "ADD #requests :admitted, milliUnits :units, containers :me \
                 SET #exp = if_not_exists(#exp, :exp)",
            ),
        };
        let out = update
            .expression_attribute_names("#requests", "requests")
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_values(":admitted", AttributeValue::N(admitted.to_string()))
            .expression_attribute_values(":units", AttributeValue::N(units.to_string()))
            .expression_attribute_values(":me", AttributeValue::Ss(vec![self.container.clone()]))
            .expression_attribute_values(
                ":exp",
                AttributeValue::N((second + WINDOW_TTL_SECONDS).to_string()),
            )
            .return_values(ReturnValue::AllNew)
            .customize()
            .config_override(crate::store::usage::meter_config())
            .send()
            .await
            .map_err(|e| (crate::store::usage::refused(&e), StoreError::from_sdk(e)))?;
        Ok(out.attributes.unwrap_or_default())
    }

    /// Learns the window's totals (S times this shard's), its debt, and the containers writing it.
    fn learn(
        &self,
        t: &TenantId,
        now_second: u64,
        shards: u32,
        answer: &HashMap<String, AttributeValue>,
    ) {
        let scale = i64::from(shards);
        let requests = i64_attr(answer, "requests").unwrap_or(0).max(0) as u64 * scale as u64;
        let milli_units = i64_attr(answer, "milliUnits").unwrap_or(0) * scale;
        let carried = i64_attr(answer, CARRIED).unwrap_or(0) * scale;
        if let Some(AttributeValue::Ss(ids)) = answer.get("containers") {
            let mut peers = lock(&self.peers);
            let seen = peers.entry(t.clone()).or_default();
            for id in ids {
                seen.insert(id.clone(), now_second);
            }
            seen.retain(|_, at| *at + PEER_MEMORY_SECONDS >= now_second);
        }
        let mut windows = lock(&self.windows);
        let window = windows.entry(t.clone()).or_default();
        if window.second > now_second {
            return;
        }
        if window.second < now_second {
            *window = Window {
                second: now_second,
                capacity_milli: window.capacity_milli,
                ..Window::default()
            };
        }
        // The answer holds every write before this one; local admissions since may add to it.
        window.requests = window.requests.max(requests);
        window.milli_units = window.milli_units.max(milli_units);
        window.carried_milli = carried;
        window.degraded = false;
        window.learned_at = now_second;
    }
}

const CARRIED: &str = "carriedMilli";

/// Whole seconds until a bucket `debt_milli` beyond empty, refilled `capacity_milli` a second,
/// holds something again: the debt is repaid, then one more second starts with a full refill.
fn repaid_after(debt_milli: i64, capacity_milli: i64) -> u32 {
    let seconds = debt_milli.max(0) / capacity_milli.max(1) + 1;
    u32::try_from(seconds).unwrap_or(u32::MAX)
}

fn i64_attr(item: &HashMap<String, AttributeValue>, name: &str) -> Option<i64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
}

/// The debt carried into `second` on `shard`: the shard's last window within [`MAX_DEBT_SECONDS`],
/// its `carried + units`, less one second's quota for each second since (a consistent read).
async fn carried_into(
    db: &TenantDb,
    shard: u32,
    second: u64,
    shard_capacity_milli: i64,
) -> Result<i64, StoreError> {
    let t = &db.tenant;
    let out = db
        .client
        .query()
        .table_name(&*db.table)
        .key_condition_expression("#pk = :pk AND #sk BETWEEN :from AND :to")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_names("#sk", SK)
        .expression_attribute_values(":pk", AttributeValue::S(window_pk(t, shard)))
        .expression_attribute_values(
            ":from",
            AttributeValue::S(window_sk(t, second.saturating_sub(MAX_DEBT_SECONDS), shard)),
        )
        .expression_attribute_values(
            ":to",
            AttributeValue::S(window_sk(t, second.saturating_sub(1), shard)),
        )
        .scan_index_forward(false)
        .limit(1)
        .consistent_read(true)
        .customize()
        .config_override(crate::store::usage::meter_config())
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    let Some(last) = out.items().first() else {
        return Ok(0);
    };
    let Some(at) = last
        .get(SK)
        .and_then(|v| v.as_s().ok())
        .and_then(|sk| window_second(sk))
    else {
        return Ok(0);
    };
    if at >= second {
        return Ok(0);
    }
    let owed = i64_attr(last, CARRIED).unwrap_or(0) + i64_attr(last, "milliUnits").unwrap_or(0);
    let repaid = shard_capacity_milli * (second - at) as i64;
    Ok((owed - repaid).clamp(0, shard_capacity_milli * MAX_DEBT_SECONDS as i64))
}

/// Sets the debt carried into `second` on `shard` to at least `owed_milli` (capped like
/// [`carried_into`]). Written by a writer of the second before that saw the window end in debt: a
/// later writer of it sees more units, so the largest value wins. Without it, a container whose
/// fresh, light knowledge let it assume no debt (its ADD sets 0 `if_not_exists`) would write 0
/// into the next second first, and the debt another container ran up would be lost.
async fn carry_forward(
    db: &TenantDb,
    shard: u32,
    second: u64,
    owed_milli: i64,
    shard_capacity_milli: i64,
) -> Result<(), StoreError> {
    let t = &db.tenant;
    let owed = owed_milli.min(shard_capacity_milli * MAX_DEBT_SECONDS as i64);
    let out = db
        .client
        .update_item()
        .table_name(&*db.table)
        .key(PK, AttributeValue::S(window_pk(t, shard)))
        .key(SK, AttributeValue::S(window_sk(t, second, shard)))
        .update_expression("SET #carried = :owed, #exp = if_not_exists(#exp, :exp)")
        .condition_expression("attribute_not_exists(#carried) OR #carried < :owed")
        .expression_attribute_names("#carried", CARRIED)
        .expression_attribute_names("#exp", EXPIRES_AT)
        .expression_attribute_values(":owed", AttributeValue::N(owed.to_string()))
        .expression_attribute_values(
            ":exp",
            AttributeValue::N((second + WINDOW_TTL_SECONDS).to_string()),
        )
        .customize()
        .config_override(crate::store::usage::meter_config())
        .send()
        .await;
    match out {
        Ok(_) => Ok(()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
        {
            Ok(())
        }
        Err(e) => Err(StoreError::from_sdk(e)),
    }
}

/// Sets the debt carried into `second` on `shard` unless a writer already did; answers the item.
async fn record_carried(
    db: &TenantDb,
    shard: u32,
    second: u64,
    carried_milli: i64,
) -> Result<HashMap<String, AttributeValue>, StoreError> {
    let t = &db.tenant;
    let out = db
        .client
        .update_item()
        .table_name(&*db.table)
        .key(PK, AttributeValue::S(window_pk(t, shard)))
        .key(SK, AttributeValue::S(window_sk(t, second, shard)))
        .update_expression("SET #carried = if_not_exists(#carried, :carried)")
        .expression_attribute_names("#carried", CARRIED)
        .expression_attribute_values(":carried", AttributeValue::N(carried_milli.to_string()))
        .return_values(ReturnValue::AllNew)
        .customize()
        .config_override(crate::store::usage::meter_config())
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(out.attributes.unwrap_or_default())
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
    fn golden_window_keys_and_shards() {
        let t = TenantId::parse("acme").unwrap();
        assert_eq!(window_pk(&t, 2), "TENANT#acme#RATE#2");
        assert_eq!(
            window_sk(&t, 1_795_240_800, 2),
            "TENANT#acme#RATE#1795240800#2"
        );
        assert_eq!(
            window_second("TENANT#acme#RATE#1795240800#2"),
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
