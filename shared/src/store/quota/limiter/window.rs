//! What one container knows of one tenant's current window, and how it rolls to the next second.

use super::MAX_DEBT_SECONDS;
/// What this container knows of one tenant's current window. Units are thousandths, signed: a
/// refund can take a window below zero.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Window {
    pub(super) second: u64,
    /// Requests in the window, all containers (the last answer, plus this container's admissions since).
    pub(super) requests: u64,
    /// Capacity units charged in the window, all containers.
    pub(super) milli_units: i64,
    /// Debt carried into the window, all containers: from the answer, else projected.
    pub(super) carried_milli: i64,
    /// This container's admissions in the window that the counter does not hold yet.
    pub(super) uncounted: u64,
    /// This container's own admissions and units in the window (decided alone when degraded).
    pub(super) own_requests: u64,
    pub(super) own_milli_units: i64,
    /// The last counter write was refused: decide on a 1/N share of the limits.
    pub(super) degraded: bool,
    /// The second of the last answer this container had for the tenant (0: none).
    pub(super) learned_at: u64,
    /// The capacity (thousandths a second) the window was last decided under.
    pub(super) capacity_milli: i64,
}

impl Window {
    /// The debt this container may assume without reading it back: none, when its knowledge is of
    /// this second or the last and the tenant has used under half of a second's units. `None` when
    /// it must read the last window.
    pub(super) fn assumed_carry(&self, capacity_milli: i64) -> Option<i64> {
        let fresh = self.learned_at + 1 >= self.second && self.learned_at > 0;
        let light = self.carried_milli <= 0 && self.milli_units * 2 < capacity_milli;
        (fresh && light).then_some(0)
    }

    /// Moves the window to `second`, carrying what is left unpaid of the last one.
    pub(super) fn roll_to(&mut self, second: u64, capacity_milli: i64) {
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

/// Whole seconds until a bucket `debt_milli` beyond empty, refilled `capacity_milli` a second,
/// holds something again: the debt is repaid, then one more second starts with a full refill.
pub(super) fn repaid_after(debt_milli: i64, capacity_milli: i64) -> u32 {
    let seconds = debt_milli.max(0) / capacity_milli.max(1) + 1;
    u32::try_from(seconds).unwrap_or(u32::MAX)
}
