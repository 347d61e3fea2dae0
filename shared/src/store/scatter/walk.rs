//! The tenant walk's reader: every item of a sequence of partitions, in table-key order, under a byte budget.

use super::*;
use crate::identity::cursor::{self, CursorKeys, Key};
use crate::identity::keys::{PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
use crate::store::client::size::approximate_bytes;
use aws_sdk_dynamodb::types::AttributeValue;

/// One page of a whole-collection walk of `listing`, starting at `cursor`: partition after partition,
/// in no global order (each partition's items in sort order), for readers that want every item
/// (syncs, exports, admin tools) and not a sorted page. A page reads one partition until it ends or
/// the page is full, then the next, so a walk sends about one Query per partition plus one per page,
/// and reads only the items it returns (an ordered page reads about twice its items and sends one
/// Query per partition per page). The cursor is the last item's key, as for ordered pages, bound to
/// the walk's route (`<route>?order=unordered`), so neither kind of cursor passes for the other.
/// Table listings only (the cursor is the item's `PK` and `SK`).
pub async fn walk(
    db: &TenantDb,
    listing: &Listing,
    keys: &CursorKeys,
    limit: u32,
    byte_budget: usize,
    cursor: Option<&str>,
) -> Result<GatheredPage, StoreError> {
    let source = DynamoPartitions { db, listing };
    walk_from(&source, listing, keys, limit, byte_budget, cursor).await
}

/// [`walk`] over any [`PartitionSource`]. A page also stops before its items pass `byte_budget`
/// (their size as stored, about the size of their JSON): once a page has seen items, each Query asks
/// only for as many as the budget has room for at their average size, so a walk of large items does
/// not read what its response could not carry.
pub async fn walk_from<S: PartitionSource>(
    source: &S,
    listing: &Listing,
    keys: &CursorKeys,
    limit: u32,
    byte_budget: usize,
    cursor: Option<&str>,
) -> Result<GatheredPage, StoreError> {
    let t = source.tenant();
    let partitions: Vec<&String> = listing.groups.iter().flatten().collect();
    let (mut at, mut start) = match cursor {
        None => (0, None),
        Some(raw) => {
            let key = cursor::decode(keys, t, &listing.route, raw, |pk, sk| {
                partitions.iter().any(|p| *p == pk)
                    && (listing.range.contains(sk) || listing.range.start_marker() == Some(sk))
            })?;
            let pk = key.get(PK).and_then(|v| v.as_s().ok());
            let at = partitions
                .iter()
                .position(|p| Some(*p) == pk)
                .ok_or(cursor::InvalidCursor)?;
            (at, Some(key))
        }
    };
    let mut items: Vec<Item> = Vec::with_capacity(limit.min(1000) as usize);
    let mut bytes = 0usize;
    let mut full = false;
    // Whether the last read finished its partition: the next page then starts at the next one.
    let mut at_boundary = false;
    while !full && (items.len() as u32) < limit && at < partitions.len() {
        let by_count = limit - items.len() as u32;
        let want = match bytes.checked_div(items.len()) {
            Some(average) => {
                let room = byte_budget.saturating_sub(bytes) / average.max(1);
                by_count.min(room.max(1) as u32)
            }
            None => by_count,
        };
        let from = start.take();
        // One more than the page takes, to see whether the partition ends with this page: then the
        // next page starts at the next partition instead of reading this one again to find it empty.
        let read = source
            .read(
                partitions[at],
                want.saturating_add(1),
                from.clone(),
                byte_budget.saturating_sub(bytes),
            )
            .await?;
        let mut read_items = read.items;
        let mut finished = read.exhausted;
        if read_items.len() as u32 > want {
            read_items.truncate(want as usize);
            finished = false;
        }
        let read_any = !read_items.is_empty();
        for item in read_items {
            let size = approximate_bytes(&item);
            if !items.is_empty() && bytes + size > byte_budget {
                full = true;
                break;
            }
            bytes += size;
            items.push(item);
        }
        at_boundary = false;
        if full {
            break;
        }
        if finished {
            at += 1;
            at_boundary = true;
        } else if read_any {
            start = items.last().map(table_key);
        } else {
            // Nothing read and not at the end (a budget-limited read): the next page goes on from
            // the same place.
            start = from;
            break;
        }
    }
    let next_start = match (full || at < partitions.len(), items.last()) {
        (false, _) => None,
        // The page ended with a partition: the next one starts at the next partition's beginning.
        (true, _) if at_boundary && !full => listing
            .range
            .start_marker()
            .map(|sk| {
                Key::from([
                    (PK.to_owned(), AttributeValue::S(partitions[at].clone())),
                    (SK.to_owned(), AttributeValue::S(sk.to_owned())),
                ])
            })
            .or_else(|| items.last().map(table_key)),
        (true, Some(last)) => Some(table_key(last)),
        (true, None) => start,
    };
    let next_cursor = next_start.map(|key| cursor::encode(keys, t, &listing.route, &key));
    Ok(GatheredPage { items, next_cursor })
}

pub(super) fn table_key(item: &Item) -> Key {
    [PK, SK]
        .into_iter()
        .filter_map(|k| item.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect()
}
