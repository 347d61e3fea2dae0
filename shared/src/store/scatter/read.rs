//! One partition's read: a Query page under the listing's key condition and expiry filter.

use super::*;
use crate::identity::cursor::Key;
use crate::identity::keys::table_key;
use crate::store::client::error::StoreError;
use crate::store::client::scoped::TenantDb;
use crate::store::client::size::approximate_bytes;
use aws_sdk_dynamodb::types::AttributeValue;

/// Up to `want` items of one partition after `start`, following `LastEvaluatedKey`.
pub(super) async fn read_partition(
    db: &TenantDb,
    listing: &Listing,
    partition: String,
    want: u32,
    start: Option<Key>,
    max_bytes: usize,
) -> Result<LaneRead, StoreError> {
    let condition = match &listing.range {
        SortRange::BeginsWith(_) => format!(
            "{} = :part AND begins_with({}, :lo)",
            listing.partition_attr, listing.sort_attr
        ),
        SortRange::Between(..) => format!(
            "{} = :part AND {} BETWEEN :lo AND :hi",
            listing.partition_attr, listing.sort_attr
        ),
    };
    let mut query = db
        .client
        .query()
        .table_name(&*db.table)
        .set_index_name(listing.index.map(str::to_owned))
        .key_condition_expression(condition)
        .set_consistent_read(listing.consistent.then_some(true))
        .expression_attribute_values(":part", AttributeValue::S(partition))
        .scan_index_forward(listing.order == Order::Ascending);
    query = match &listing.range {
        SortRange::BeginsWith(prefix) => {
            query.expression_attribute_values(":lo", AttributeValue::S(prefix.clone()))
        }
        SortRange::Between(lo, hi) => query
            .expression_attribute_values(":lo", AttributeValue::S(lo.clone()))
            .expression_attribute_values(":hi", AttributeValue::S(hi.clone())),
    };
    let mut items = Vec::new();
    let mut bytes = 0usize;
    let mut start = start;
    loop {
        let remaining = want.saturating_sub(items.len() as u32);
        // A Query stopped at 1 MB short of `max_bytes` goes on for what the rest holds at the size
        // of the items read so far, not for the whole ask (another 1 MB).
        let rest = match items.len() {
            0 => remaining,
            n if max_bytes != usize::MAX => {
                let mean = (bytes / n).max(1);
                let fits = (max_bytes - bytes).div_ceil(mean).max(1);
                remaining.min(u32::try_from(fits).unwrap_or(u32::MAX))
            }
            _ => remaining,
        };
        let out = query
            .clone()
            .set_limit((want != u32::MAX).then_some(rest.min(i32::MAX as u32) as i32))
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        let read = out.items.unwrap_or_default();
        if max_bytes != usize::MAX {
            bytes += read.iter().map(approximate_bytes).sum::<usize>();
        }
        items.extend(read);
        match out.last_evaluated_key.filter(|k| !k.is_empty()) {
            None => {
                return Ok(LaneRead {
                    items,
                    exhausted: true,
                })
            }
            Some(_) if items.len() as u32 >= want || bytes >= max_bytes => {
                return Ok(LaneRead {
                    items,
                    exhausted: false,
                })
            }
            Some(k) => start = Some(table_key(&k)),
        }
    }
}
