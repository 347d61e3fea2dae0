//! The tenant walk's reader: every item of a sequence of partitions, in table-key order, under a byte budget.

use super::*;
use crate::identity::cursor::{self, Key};
use crate::identity::keys::{table_key, PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
use crate::store::client::size::approximate_bytes;
use aws_sdk_dynamodb::types::AttributeValue;

/// One page of a whole-collection walk of `listing`, starting at `cursor`: partition after partition,
/// in no global order (each partition's items in sort order), for readers that want every item
/// (syncs, exports, admin tools) and not a sorted page. A page reads its first partition alone; once
/// one partition was read whole, the next ones are about as large (ids are hashed over the shards),
/// so as many as the page is expected to take are read side by side, within the fan-out budget
/// ([`batch_asks`]). Their items count in walk order, a partition's only once every one before it
/// ended (one larger than its read is read on first), so a walk sends about one Query per partition
/// plus a few per page, reads about the items it returns (an ordered page reads about twice its
/// items and sends one Query per partition per page), and waits for two or three round trips a page,
/// not one a partition. The cursor is the last item's key, as for ordered pages, bound to the walk's
/// route (`<route>?order=unordered`), so neither kind of cursor passes for the other. Table listings
/// only (the cursor is the item's `PK` and `SK`).
pub async fn walk(
    db: &TenantDb,
    listing: &Listing,
    page: PageAsk<'_>,
) -> Result<GatheredPage, StoreError> {
    let source = DynamoPartitions { db, listing };
    walk_from(&source, listing, page).await
}

/// [`walk`] over any [`PartitionSource`]. A page also stops before its items pass `byte_budget`
/// (their size as stored, about the size of their JSON): once a page has seen items, each Query asks
/// only for as many as the budget has room for at their average size, so a walk of large items does
/// not read what its response could not carry.
pub async fn walk_from<S: PartitionSource>(
    source: &S,
    listing: &Listing,
    page: PageAsk<'_>,
) -> Result<GatheredPage, StoreError> {
    let partitions: Vec<&String> = listing.groups.iter().flatten().collect();
    let (keys, limit, cursor, byte_budget) = (page.keys, page.limit, page.cursor, page.byte_budget);
    let t = source.tenant();
    let (mut at, mut start) = resume_at(keys, t, listing, &partitions, cursor)?;
    let mut items: Vec<Item> = Vec::with_capacity(limit.min(1000) as usize);
    let mut bytes = 0usize;
    let mut full = false;
    // Whether the last read finished its partition: the next page then starts at the next one.
    let mut at_boundary = false;
    // The partitions this page read whole, from their start, and their items: ids are hashed over
    // the shards, so the next partitions are about as large, and that many are read side by side.
    let mut whole = (0usize, 0usize);
    // What an earlier page in this container saw stands in for this page's first partition until
    // one is read whole here.
    let hint = source.size_hint();
    // Reads of the partitions after `at`, from their start, made side by side with an earlier one
    // and not yet counted: a partition's items count only once every partition before it ended.
    let mut ahead = std::collections::VecDeque::new();
    while !full && (items.len() as u32) < limit && at < partitions.len() {
        let (item_bytes, want) = page_room(
            limit - items.len() as u32,
            bytes,
            items.len(),
            hint,
            byte_budget,
        );
        let from = start.take();
        // Read from its beginning: no start, or the range's start marker (a page that began at a
        // partition boundary).
        let from_start = reads_from_start(from.as_ref(), listing);
        // A read of the partition at `at` from `from`: made already, side by side with an earlier
        // one, or now: alone while nothing says how large partitions are (or for the rest of one
        // read from its middle), else with as many next ones as the page's room takes at the
        // size of those read whole, within the fan-out budget ([`batch_asks`]).
        if ahead.is_empty() || from.is_some() {
            // The partitions' mean size so far, and over how many it was seen (an earlier
            // page's counts as one).
            let average = match (whole, hint) {
                ((n, total), _) if n > 0 && from_start => Some(((total / n).max(1) as u32, n)),
                ((0, _), Some(hint)) if from_start => Some((hint.items.max(1), 1)),
                _ => None,
            };
            let batch = Batch {
                partitions: &partitions[at..],
                want,
                average,
                room_bytes: byte_budget.saturating_sub(bytes),
                item_bytes,
            };
            read_batch(source, batch, from.clone(), &mut ahead).await?;
        }
        let Some(read) = ahead.pop_front() else {
            break;
        };
        let taken = take_within_budget(read, want, &mut items, &mut bytes, byte_budget);
        let (finished, read_any, count) = (taken.finished, taken.read_any, taken.count);
        full = taken.full;
        at_boundary = false;
        if full {
            break;
        }
        if finished {
            if from_start {
                whole = (whole.0 + 1, whole.1 + count);
            }
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
    if let ((n @ 1.., total), false) = (whole, items.is_empty()) {
        source.remember_size(PartitionSize {
            items: (total / n).max(1) as u32,
            item_bytes: (bytes / items.len()).max(1) as u32,
        });
    }
    let more = full || at < partitions.len();
    let next_start = next_start(
        listing,
        &partitions,
        at,
        more,
        at_boundary && !full,
        &items,
        start,
    );
    let next_cursor = next_start.map(|key| cursor::encode(keys, t, &listing.route, &key));
    Ok(GatheredPage { items, next_cursor })
}

/// The items' mean size (this page's so far, else what an earlier page saw) and how many items the
/// next read should want: what the page still takes by count (`by_count`), no more than the room
/// left in its byte budget holds at that size, and at least one.
fn page_room(
    by_count: u32,
    bytes: usize,
    taken: usize,
    hint: Option<PartitionSize>,
    byte_budget: usize,
) -> (Option<usize>, u32) {
    let item_bytes = bytes
        .checked_div(taken)
        .or(hint.map(|h| h.item_bytes as usize));
    let want = match item_bytes {
        Some(average) => {
            let room = byte_budget.saturating_sub(bytes) / average.max(1);
            by_count.min(room.max(1) as u32)
        }
        None => by_count,
    };
    (item_bytes, want)
}

/// Whether a read from `from` reads its partition from the beginning: no start, or the range's
/// start marker (a page that began at a partition boundary).
fn reads_from_start(from: Option<&Key>, listing: &Listing) -> bool {
    from.is_none_or(|key| {
        let sk = key.get(SK).and_then(|v| v.as_s().ok());
        sk.is_some() && sk.map(String::as_str) == listing.range.start_marker()
    })
}

/// What one read gave the page.
struct Taken {
    /// Its partition has no more items after those taken.
    finished: bool,
    /// It held any item (within the page's want).
    read_any: bool,
    /// How many items it held (within the page's want), taken or not.
    count: usize,
    /// The page's byte budget stopped it before all of them were taken.
    full: bool,
}

/// Appends to `items` what `read` holds, up to the page's `want` and until the items pass
/// `byte_budget` (the page's first item is taken whatever its size).
fn take_within_budget(
    read: LaneRead,
    want: u32,
    items: &mut Vec<Item>,
    bytes: &mut usize,
    byte_budget: usize,
) -> Taken {
    let mut read_items = read.items;
    let mut finished = read.exhausted;
    if read_items.len() as u32 > want {
        read_items.truncate(want as usize);
        finished = false;
    }
    let read_any = !read_items.is_empty();
    let count = read_items.len();
    let mut full = false;
    for item in read_items {
        let size = approximate_bytes(&item);
        if !items.is_empty() && *bytes + size > byte_budget {
            full = true;
            break;
        }
        *bytes += size;
        items.push(item);
    }
    Taken {
        finished,
        read_any,
        count,
        full,
    }
}

/// Where a page that starts at `cursor` resumes: the index of its partition in `partitions` and the
/// key to read after (none from the first partition's start). A cursor of another tenant, route or
/// partition, or outside the listing's range, is refused.
fn resume_at(
    keys: &cursor::CursorKeys,
    t: &TenantId,
    listing: &Listing,
    partitions: &[&String],
    cursor: Option<&str>,
) -> Result<(usize, Option<Key>), StoreError> {
    let Some(raw) = cursor else {
        return Ok((0, None));
    };
    let key = cursor::decode(keys, t, &listing.route, raw, |pk, sk| {
        partitions.iter().any(|p| *p == pk)
            && (listing.range.contains(sk) || listing.range.start_marker() == Some(sk))
    })?;
    let pk = key.get(PK).and_then(|v| v.as_s().ok());
    let at = partitions
        .iter()
        .position(|p| Some(*p) == pk)
        .ok_or(cursor::InvalidCursor)?;
    Ok((at, Some(key)))
}

/// One batch of reads: the partitions from the page's current one on, what the page still wants,
/// the partitions' mean size and how many it was seen over (`None` while nothing says), and the
/// room left in bytes.
struct Batch<'p> {
    partitions: &'p [&'p String],
    want: u32,
    average: Option<(u32, usize)>,
    room_bytes: usize,
    item_bytes: Option<usize>,
}

/// Reads the batch's first partition from `from` and, side by side, as many next ones from their
/// start as the page's room takes at the size of those read whole, within the fan-out budget
/// ([`batch_asks`]); puts them at the front of `ahead`, in partition order.
async fn read_batch<S: PartitionSource>(
    source: &S,
    batch: Batch<'_>,
    from: Option<Key>,
    ahead: &mut std::collections::VecDeque<LaneRead>,
) -> Result<(), StoreError> {
    let Batch {
        partitions,
        want,
        average,
        room_bytes,
        item_bytes,
    } = batch;
    let asks = batch_asks(want, average, source.max_in_flight(), partitions.len());
    // Each asks for one more than the page takes, to see whether its partition ends with
    // this page: then the next page starts at the next partition instead of reading this
    // one again to find it empty.
    // A read made ahead stops at about twice its ask at the items' mean size, so a batch
    // holds about what the page can carry, whatever size later partitions' items are.
    let read_bytes = |j: usize, ask: u32| match (j, item_bytes) {
        (1.., Some(size)) => room_bytes.min((ask as usize + 1).saturating_mul(size * 2)),
        _ => room_bytes,
    };
    let reads = futures::future::join_all(asks.iter().enumerate().map(|(j, ask)| {
        let start = if j == 0 { from.clone() } else { None };
        let max_bytes = read_bytes(j, *ask);
        source.read(LaneAsk {
            partition: partitions[j],
            want: ask.saturating_add(1),
            start,
            max_bytes,
        })
    }))
    .await;
    // The page needs its first read; a read made ahead that failed (a throttle on a
    // partition the page may never reach) is dropped with the ones after it, and made again
    // when the page gets there.
    let mut reads = reads.into_iter();
    let first = reads
        .next()
        .ok_or(StoreError::Internal("no read".into()))??;
    let made_ahead: Vec<_> = reads.map_while(Result::ok).collect();
    for read in made_ahead.into_iter().rev() {
        ahead.push_front(read);
    }
    ahead.push_front(first);
    Ok(())
}

/// Where the next page starts: nowhere when the walk read everything (`more` false); at the next
/// partition's beginning when this page ended with a partition (`at_boundary`); else after the
/// page's last item, or where this page would have started its next read.
fn next_start(
    listing: &Listing,
    partitions: &[&String],
    at: usize,
    more: bool,
    at_boundary: bool,
    items: &[Item],
    start: Option<Key>,
) -> Option<Key> {
    match (more, items.last()) {
        (false, _) => None,
        (true, _) if at_boundary => listing
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
    }
}

/// What each read of one batch asks for (one more each is added, to see where a partition ends):
/// one read of the page's room while nothing says how large partitions are; then one per partition
/// (at most `in_flight`), as many as the page is expected to take at the `average` size of those
/// read whole, the last for only what is left of the page, and never more than add up to a quarter
/// and one partition's likely most over what it takes at that size, so a page that fills before its
/// batch's last partitions drops little of what they read. Each asks for a partition's likely most
/// (the mean and three standard deviations of a hashed share, and three: a partition is rarely read
/// in two parts) at the largest mean the average is a likely sample of: an average of one partition
/// (the first, read alone) can be far below the rest, and every partition of the batch read in two
/// parts then; asking a partition for more than it holds reads only what it holds.
fn batch_asks(want: u32, average: Option<(u32, usize)>, in_flight: usize, left: usize) -> Vec<u32> {
    let Some((average, samples)) = average else {
        return vec![want];
    };
    // Never less than the page's share of each partition left.
    let share = want.div_ceil(left.max(1) as u32);
    let likely_most = likely_most_at(f64::from(average)).max(share);
    let ask_most = likely_most_at(largest_likely_mean(average, samples)).max(likely_most);
    let most = want.saturating_add(want / 4).saturating_add(likely_most);
    let mut asks: Vec<u32> = Vec::new();
    let mut total = 0u32;
    for j in 0..in_flight.max(1).min(left) {
        let expected_before = average.saturating_mul(j as u32);
        if j > 0 && expected_before >= want {
            break;
        }
        // The partition the page is expected to end in asks only for what is left of it (as a
        // partition read alone does): the page's last partition is rarely read whole.
        let room = want - expected_before;
        let ask = if room <= average {
            room
        } else {
            want.min(ask_most)
        };
        // Counted at the average's own likely most: what the batch is expected to read.
        let expected = ask.min(likely_most);
        if j > 0 && total.saturating_add(expected) > most {
            break;
        }
        total = total.saturating_add(expected);
        asks.push(ask);
    }
    if asks.is_empty() {
        asks.push(want);
    }
    asks
}

/// A partition's likely most items at a `mean` share: the mean, three standard deviations of a
/// hashed share (about its square root), and three.
fn likely_most_at(mean: f64) -> u32 {
    (mean + 3.0 * mean.sqrt().ceil() + 3.0).min(f64::from(u32::MAX)) as u32
}

/// The largest mean partition size of which `average`, seen over `samples` partitions, is within
/// three standard deviations: the `m` with `m - 3 * sqrt(m / samples) = average`.
fn largest_likely_mean(average: u32, samples: usize) -> f64 {
    let (average, samples) = (f64::from(average), samples.max(1) as f64);
    let root = (3.0 / samples.sqrt() + (9.0 / samples + 4.0 * average).sqrt()) / 2.0;
    root * root
}

#[cfg(test)]
mod tests {
    use super::batch_asks;

    #[test]
    fn a_first_partition_far_smaller_than_the_rest_does_not_have_the_batch_read_in_two_parts() {
        // GIVEN a page wanting 287 more items, whose first partition held 8 (the rest hold 19 to
        // 38, about 25 each: 8 is a likely sample of a mean up to 22)
        // WHEN its next 16 partitions are asked for side by side
        let asks = batch_asks(287, Some((8, 1)), 16, 19);
        // THEN as many are read as the page is expected to take at 8 each, and each is asked for
        // more than a partition of 38 holds (at the mean of 8 alone: 20, and 10 of them read twice)
        assert_eq!(asks, vec![40; 16]);
    }

    #[test]
    fn an_average_over_many_partitions_is_asked_for_about_its_own_likely_most() {
        // GIVEN a page wanting 300 more items, whose 8 partitions read whole held 25 on average
        // WHEN the next ones are asked for
        let asks = batch_asks(300, Some((25, 8)), 16, 12);
        // THEN as many are read as their likely most (43 each) allows a quarter and one over the
        // page: nine, each asked for a little more than that (51)
        assert_eq!(asks, vec![51; 9]);
    }
}
