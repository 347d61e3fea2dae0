//! How a lifecycle step (an offboarding's deletes, a re-sharding's moves) stays within what one
//! DynamoDB partition takes: a step's page holds at most [`STEP_BYTES`] of items (so its
//! transactional writes cost at most about [`STEP_WRITE_UNITS`] on the partition it reads, and its
//! request stays far under the 4 MB a transaction may carry), and the next step waits until the
//! partition has had a second per 1,000 write units of the last ([`pace`]). A tenant of large items
//! is then deleted or moved at a partition's rate, never in bursts of thousands of units that would
//! throttle its neighbours' writes to the same table.

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
}
