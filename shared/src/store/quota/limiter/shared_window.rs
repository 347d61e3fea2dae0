//! The shared window in DynamoDB: counting a container's admissions into it, reserving one, and
//! carrying a second's debt into the next.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

use crate::identity::ids::TenantId;
use crate::identity::keys::{EXPIRES_AT, PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::scoped::TenantDb;
use crate::store::tenancy::tenants::Limits;

use super::window::Window;
use super::{
    capacity_milli, lock, window_pk, window_second, window_shards, window_sk, RateLimiter,
};
use super::{MAX_DEBT_SECONDS, PEER_MEMORY_SECONDS, WINDOW_TTL_SECONDS};

impl RateLimiter {
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
        let update = self.window_add(db, shard, now_second, admitted, units);
        let mut answer = match add_to_window(update, assumed_carry, self.budget).await {
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
            let carried = carried_into(db, shard, now_second, shard_capacity, self.budget).await?;
            answer = record_carried(db, shard, now_second, carried, self.budget).await?;
        }
        self.learn(t, now_second, shards, &answer);
        // A window this write left in debt carries it into the next second itself, so the next
        // second's first writer cannot miss it, whatever it assumed (see `carry_forward`).
        let owed = i64_attr(&answer, CARRIED).unwrap_or(0)
            + i64_attr(&answer, "milliUnits").unwrap_or(0)
            - shard_capacity;
        if owed > 0 {
            if let Err(e) =
                carry_forward(db, shard, now_second + 1, owed, shard_capacity, self.budget).await
            {
                tracing::warn!(tenant = %t, error = %e, "a capacity debt could not be carried forward; the next second's first writer reads it back unless it assumes none");
            }
        }
        Ok(answer)
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
        let out = self
            .window_add(db, shard, now_second, 1, estimate)
            .update_expression(
                "ADD #requests :admitted, milliUnits :units, containers :me \
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
            .expression_attribute_values(":room", AttributeValue::N(room.to_string()))
            .customize()
            .config_override(crate::store::quota::usage::meter_config_within(self.budget))
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
                if crate::store::quota::usage::refused(&e) {
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

    /// An UpdateItem of window `shard` of `second` adding `admitted` requests and `units`
    /// (thousandths) and this container, with the window's expiry and every new attribute returned:
    /// the caller sets the update expression (`ADD #requests :admitted, milliUnits :units,
    /// containers :me SET #exp = if_not_exists(#exp, :exp)`, and more) and any condition.
    fn window_add(
        &self,
        db: &TenantDb,
        shard: u32,
        second: u64,
        admitted: u64,
        units: i64,
    ) -> UpdateItemFluentBuilder {
        window_update(db, shard, second)
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
    budget: Duration,
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
        .config_override(crate::store::quota::usage::meter_config_within(budget))
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
    budget: Duration,
) -> Result<(), StoreError> {
    let owed = owed_milli.min(shard_capacity_milli * MAX_DEBT_SECONDS as i64);
    let out = window_update(db, shard, second)
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
        .config_override(crate::store::quota::usage::meter_config_within(budget))
        .send()
        .await;
    crate::store::client::error::written_unless_condition_failed(out).map(|_| ())
}

/// Sets the debt carried into `second` on `shard` unless a writer already did; answers the item.
async fn record_carried(
    db: &TenantDb,
    shard: u32,
    second: u64,
    carried_milli: i64,
    budget: Duration,
) -> Result<HashMap<String, AttributeValue>, StoreError> {
    let out = window_update(db, shard, second)
        .update_expression("SET #carried = if_not_exists(#carried, :carried)")
        .expression_attribute_names("#carried", CARRIED)
        .expression_attribute_values(":carried", AttributeValue::N(carried_milli.to_string()))
        .return_values(ReturnValue::AllNew)
        .customize()
        .config_override(crate::store::quota::usage::meter_config_within(budget))
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(out.attributes.unwrap_or_default())
}

/// An UpdateItem of window `shard` of `second`: the caller says what it sets.
fn window_update(db: &TenantDb, shard: u32, second: u64) -> UpdateItemFluentBuilder {
    let t = &db.tenant;
    db.sdk_update_at(window_pk(t, shard), window_sk(t, second, shard))
}

/// Sends `update` (a [`RateLimiter::window_add`]) with the debt this container assumed, if any, set
/// unless a writer already did. The error says whether DynamoDB surely did not apply it.
async fn add_to_window(
    update: UpdateItemFluentBuilder,
    assumed_carry: Option<i64>,
    budget: Duration,
) -> Result<HashMap<String, AttributeValue>, (bool, StoreError)> {
    let update = match assumed_carry {
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
        .customize()
        .config_override(crate::store::quota::usage::meter_config_within(budget))
        .send()
        .await
        .map_err(|e| {
            (
                crate::store::quota::usage::refused(&e),
                StoreError::from_sdk(e),
            )
        })?;
    Ok(out.attributes.unwrap_or_default())
}
