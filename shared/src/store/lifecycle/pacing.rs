//! How a lifecycle step (an offboarding's deletes, a re-sharding's moves) stays within what one
//! DynamoDB partition takes: a step's page holds at most [`STEP_BYTES`] of items (so its
//! transactional writes cost at most about [`STEP_WRITE_UNITS`] on the partition it reads, and its
//! request stays far under the 4 MB a transaction may carry), and the next step waits until the
//! partition has had a second per 1,000 write units of the last ([`pace`]). A tenant of large items
//! is then deleted or moved at a partition's rate, never in bursts of thousands of units that would
//! throttle its neighbours' writes to the same table. When DynamoDB throttles a step anyway, its
//! reasons say how far ([`throttle_scope`]): a lane whose partition is throttled backs off and
//! slows itself; a lane whose table or index is throttled stops for [`TABLE_THROTTLE_WAIT`].

use std::time::{Duration, Instant};

use crate::store::client::query::Item;
use crate::store::client::size::approximate_bytes;

/// What one partition takes a second, in write units (DynamoDB's per-partition limit).
pub const PARTITION_WRITE_UNITS_PER_SECOND: u64 = 1_000;
/// What one step may write on one partition: half a partition's second, leaving room for the
/// tenant's own writes and the step's index copies.
pub const STEP_WRITE_UNITS: u64 = 500;
/// The bytes of items one step takes: a transactional write costs two units per started kilobyte.
pub const STEP_BYTES: usize = (STEP_WRITE_UNITS as usize / 2) * 1024;
/// The most a transaction may carry (DynamoDB's limit).
pub const TRANSACTION_MAX_BYTES: usize = 4 * 1024 * 1024;

/// The write units a transactional write (a Put or a Delete) of each of `items` costs: two per
/// started kilobyte, at least two.
pub fn transactional_write_units<'a>(items: impl IntoIterator<Item = &'a Item>) -> u64 {
    items
        .into_iter()
        .map(|item| 2 * (approximate_bytes(item) as u64).div_ceil(1024).max(1))
        .sum()
}

/// Waits until a step that started at `started` and wrote `units` on a partition is paid for at
/// [`PARTITION_WRITE_UNITS_PER_SECOND`] (at most about half a second: a step's budget).
pub async fn pace(started: Instant, units: u64) {
    let paid = started + Duration::from_millis(units * 1000 / PARTITION_WRITE_UNITS_PER_SECOND);
    tokio::time::sleep_until(paid.into()).await;
}

/// How far a throttle reaches, by DynamoDB's reasons (`StoreError::Throttled`): what a lane does
/// about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottleScope {
    /// One partition (a key range's limit), or unknown (no reason given, or a transaction's
    /// cancellation, which names none): the lane backs off, retries, and slows itself.
    Partition,
    /// The table's or an index's capacity (provisioned, the account's per-table limit, or an
    /// on-demand maximum): every lane adds to it, so the lane ends its turn and waits
    /// [`TABLE_THROTTLE_WAIT`].
    Table,
}

/// The scope of a throttle DynamoDB explained with `reasons` (`ResourceType` + `OperationType` +
/// `LimitType`, e.g. `TableWriteKeyRangeThroughputExceeded`).
pub fn throttle_scope(reasons: &[String]) -> ThrottleScope {
    const TABLE_WIDE: [&str; 3] = [
        "ProvisionedThroughputExceeded",
        "AccountLimitExceeded",
        "MaxOnDemandThroughputExceeded",
    ];
    match reasons
        .iter()
        .any(|r| TABLE_WIDE.iter().any(|limit| r.ends_with(limit)))
    {
        true => ThrottleScope::Table,
        false => ThrottleScope::Partition,
    }
}

/// How often in a row a lane retries a step its partition throttled before it ends its turn.
pub const PARTITION_RETRIES: u32 = 5;

/// The wait before a lane's `attempt`th retry (from 1) of a step its partition throttled: 100 ms,
/// doubling to 1.6 s; the lane's pace is halved each time as well ([`pace_slowed`]).
pub fn partition_backoff(attempt: u32) -> Duration {
    Duration::from_millis(100 << attempt.saturating_sub(1).min(4))
}

/// How long a lane waits before its next turn when its table or an index is throttled: long enough
/// for the table's capacity to recover or scale, short against an operation of hours.
pub const TABLE_THROTTLE_WAIT: Duration = Duration::from_secs(30);

/// [`pace`], for a lane slowed `slowdown` times by its partition's throttling.
pub async fn pace_slowed(started: Instant, units: u64, slowdown: u64) {
    pace(started, units.saturating_mul(slowdown.max(1))).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;

    fn item_of(bytes: usize) -> Item {
        [("blob".to_owned(), AttributeValue::S("x".repeat(bytes)))].into()
    }

    #[test]
    fn a_step_of_the_largest_page_fits_a_partitions_second_and_a_transaction() {
        // GIVEN pages as the byte budget cuts them: many small items, or large ones
        let small: Vec<Item> = (0..99).map(|_| item_of(200)).collect();
        let large: Vec<Item> = (0..4).map(|_| item_of(60 * 1024)).collect();
        // WHEN their transactional cost is estimated
        // THEN each is under a partition's second of writes
        assert_eq!(transactional_write_units(&small), 198);
        assert!(transactional_write_units(&large) <= PARTITION_WRITE_UNITS_PER_SECOND);
        const { assert!(4 * 60 * 1024 <= STEP_BYTES) };
        // AND the budget itself is far under a transaction's 4 MB
        const { assert!(STEP_BYTES * 2 < TRANSACTION_MAX_BYTES) };
    }

    #[test]
    fn a_key_ranges_throttle_slows_its_lane_and_a_tables_stops_every_lane() {
        let of = |reasons: &[&str]| {
            throttle_scope(&reasons.iter().map(|r| r.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(
            of(&["TableWriteKeyRangeThroughputExceeded"]),
            ThrottleScope::Partition
        );
        assert_eq!(of(&[]), ThrottleScope::Partition);
        for table_wide in [
            "TableWriteProvisionedThroughputExceeded",
            "IndexWriteAccountLimitExceeded",
            "TableReadMaxOnDemandThroughputExceeded",
        ] {
            assert_eq!(of(&[table_wide]), ThrottleScope::Table, "{table_wide}");
        }
        assert_eq!(
            (1..=6).map(partition_backoff).collect::<Vec<_>>(),
            [100, 200, 400, 800, 1600, 1600].map(Duration::from_millis)
        );
    }
}
