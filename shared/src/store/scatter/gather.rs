//! A page of a listing: its groups' partitions read concurrently and merged in sort-key order.

use super::*;
use crate::identity::cursor::{self, CursorKeys, Key};
use crate::identity::ids::TenantId;
use crate::identity::keys::{home_shard_pk, table_key, PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::pages::page_key;
use crate::store::client::query::{string_attr, Item};
use crate::store::client::scoped::TenantDb;
use aws_sdk_dynamodb::types::AttributeValue;
use futures::{StreamExt, TryStreamExt};
use std::collections::VecDeque;
use std::future::Future;

/// One page of `listing`, starting at `cursor`: from the list-page cache when the tenant's tier has
/// it and the listing reads eventually consistent ([`crate::store::client::pages`]), else read now.
pub async fn gather(
    db: &TenantDb,
    listing: &Listing,
    page: PageAsk<'_>,
) -> Result<GatheredPage, StoreError> {
    let (keys, limit, cursor) = (page.keys, page.limit, page.cursor);
    let source = DynamoPartitions { db, listing };
    let read = || gather_from(&source, listing, page);
    match &db.pages {
        Some(pages) if !listing.consistent => {
            // A cursor no longer signed by this container's keys (a rotation dropped its key) is
            // refused before a cached page could answer it.
            if let Some(raw) = cursor {
                if cursor::signed_route(keys, &db.tenant, raw)? != listing.route {
                    return Err(cursor::InvalidCursor.into());
                }
            }
            // Everything that makes the page: the listing (route and its parameters, partitions,
            // range, order), the page size, the cursor and the byte budget.
            let budget = page.byte_budget;
            let key = page_key(format_args!("{listing:?}|{limit}|{cursor:?}|{budget}"));
            let page = pages
                .page(&db.tenant, key, || async {
                    let page = read().await?;
                    Ok((page.items, page.next_cursor))
                })
                .await?;
            Ok(GatheredPage {
                items: page.items.clone(),
                next_cursor: page.next_cursor.clone(),
            })
        }
        _ => read().await,
    }
}

/// One ordered page of a sharded list while its items move from `from` shards (the listing `old`)
/// to `to` shards (`new`) in a re-sharding ([`crate::store::lifecycle::resharding`]). The two listings differ
/// only in their partitions, which may overlap; an item is on its home shard of one count or of the
/// other, and moves one way, old to new, in one transaction (the migrator's or a writer's).
///
/// The old layout is read first, then the new one, from the same cursor; each read keeps only the
/// items on their home shard in its layout (a read of an overlapping partition also sees the other
/// layout's items, or an item twice, when it moves between two lanes of one read). An item the old
/// read missed because it had already moved is in the new layout when the new read comes; an item
/// seen in both is the same one, and the new copy, read later, wins. The page ends where the shorter
/// of the two reads ended, so every item up to the page's end was looked for in both layouts: across
/// pages, each live item appears exactly once. The cursor is a sort key, valid in either layout and
/// after the migration ends. It costs the reads of two pages.
pub async fn gather_across(
    db: &TenantDb,
    (old, from): (&Listing, u32),
    (new, to): (&Listing, u32),
    page: PageAsk<'_>,
) -> Result<GatheredPage, StoreError> {
    let PageAsk { keys, limit, .. } = page;
    let page = page.with_fanout(Fanout::Parallel);
    // Consistent reads: an eventually consistent new read could lag behind the move that the old
    // read already saw, and the item would be in neither.
    let old = &Listing {
        consistent: true,
        ..old.clone()
    };
    let new = &Listing {
        consistent: true,
        ..new.clone()
    };
    let before = gather(db, old, page).await?;
    let after = gather(db, new, page).await?;
    let t = &db.tenant;
    let at_home = |shards: u32| {
        move |item: &Item| {
            let (Some(pk), Some(sk)) = (string_attr(item, PK), string_attr(item, SK)) else {
                return true;
            };
            home_shard_pk(t, &pk, &sk, shards).is_none_or(|home| home == pk)
        }
    };
    let merged = merge_layouts(
        Read::of(before, at_home(from)),
        Read::of(after, at_home(to)),
        limit as usize,
        new.sort_attr,
    );
    let next_cursor = merged
        .next
        .map(|sort| cursor::encode(keys, t, &new.route, &group_position(new, 0, sort)));
    Ok(GatheredPage {
        items: merged.items,
        next_cursor,
    })
}

/// Every item of `listing`, unpaged (small collections such as usage counters).
pub async fn gather_all(db: &TenantDb, listing: &Listing) -> Result<Vec<Item>, StoreError> {
    let pending: Vec<_> = listing
        .groups
        .iter()
        .flatten()
        .map(|p| read_partition(db, listing, p.clone(), u32::MAX, None, usize::MAX))
        .collect();
    let reads = in_waves(pending, db.max_in_flight).await?;
    Ok(reads.into_iter().flat_map(|r| r.items).collect())
}

/// Runs `reads`, at most `in_flight` at once, and returns their answers in order.
pub(super) async fn in_waves<F>(
    reads: Vec<F>,
    in_flight: usize,
) -> Result<Vec<LaneRead>, StoreError>
where
    F: Future<Output = Result<LaneRead, StoreError>>,
{
    futures::stream::iter(reads)
        .buffered(in_flight)
        .try_collect()
        .await
}

/// [`gather`] over any [`PartitionSource`].
pub async fn gather_from<S: PartitionSource>(
    source: &S,
    listing: &Listing,
    page: PageAsk<'_>,
) -> Result<GatheredPage, StoreError> {
    let (keys, limit, cursor, fanout) = (page.keys, page.limit, page.cursor, page.fanout);
    let byte_budget = page.byte_budget;
    let t = source.tenant();
    let (mut group, after) = match cursor {
        None => (0, None),
        Some(raw) => {
            let (group, sort) = decode_position(keys, t, listing, raw)?;
            (group, Some(sort))
        }
    };
    let mut items: Vec<Item> = Vec::with_capacity(limit as usize);
    let mut emitted_bytes = 0usize;
    let mut last_emitted: Option<Key> = None;
    let mut lanes = open_group(listing, group, after.as_deref());
    let first = first_round_want(limit, lanes.len());
    let all: Vec<usize> = (0..lanes.len()).collect();
    // A lane's read asks no more items than its share of the budget holds at the items' size: this
    // page's mean once it has items, else what an earlier page of this listing saw in this
    // container. DynamoDB stops a Query at 1 MB, not at a share.
    let hint = source.size_hint().map(|h| h.item_bytes as usize);
    // A refill's lanes share what the page still holds: its budget less what it emitted and what
    // its lanes hold read (a second round sized by the whole budget read it again).
    let reading = |lanes: &[Lane], (bytes, count): (usize, usize)| Reading {
        fanout,
        sort_attr: listing.sort_attr,
        max_bytes: lane_bytes(unread_budget(byte_budget, bytes, lanes), lanes.len()),
        item_bytes: bytes.checked_div(count).or(hint),
    };
    let how = reading(&lanes, (emitted_bytes, items.len()));
    refill(source, &mut lanes, &all, first, how).await?;

    while (items.len() as u32) < limit {
        // A partition with more items but none buffered could hold the next one: read it first.
        let dry: Vec<usize> = lanes
            .iter()
            .enumerate()
            .filter(|(_, l)| l.buffer.is_empty() && !l.exhausted)
            .map(|(i, _)| i)
            .collect();
        if !dry.is_empty() {
            let how = reading(&lanes, (emitted_bytes, items.len()));
            refill(source, &mut lanes, &dry, limit - items.len() as u32, how).await?;
            continue;
        }
        match next_in_order(&mut lanes, listing.order) {
            Some(lane) => {
                if let Some((sort, item)) = lane.buffer.pop_front() {
                    last_emitted = Some(group_position(listing, group, sort));
                    if byte_budget != usize::MAX {
                        emitted_bytes += approximate_bytes(&item);
                    }
                    items.push(item);
                    // A page of large items stops once it holds its budget: the rest is the next
                    // page's, after this item.
                    if emitted_bytes >= byte_budget {
                        break;
                    }
                }
            }
            // This group is read to the end: open the next one, if any, for the rest of the page.
            None if group + 1 < listing.groups.len() => {
                group += 1;
                lanes = open_group(listing, group, None);
                let want = first_round_want(limit - items.len() as u32, lanes.len());
                let all: Vec<usize> = (0..lanes.len()).collect();
                let how = reading(&lanes, (emitted_bytes, items.len()));
                refill(source, &mut lanes, &all, want, how).await?;
            }
            None => break,
        }
    }

    if byte_budget != usize::MAX && !items.is_empty() {
        source.remember_size(PartitionSize {
            items: (items.len() / lanes.len().max(1)).max(1) as u32,
            item_bytes: (emitted_bytes / items.len()).max(1) as u32,
        });
    }
    let group_done = lanes.iter().all(|l| l.exhausted && l.buffer.is_empty());
    let all_done = group_done && group + 1 >= listing.groups.len();
    Ok(GatheredPage {
        items,
        next_cursor: match (all_done, last_emitted) {
            (false, Some(last)) => Some(cursor::encode(keys, t, &listing.route, &last)),
            _ => None,
        },
    })
}

/// A cursor position: the group's first partition and a sort key. Every partition of a group
/// resumes after the same sort key, so the partition only names the group; naming the first one
/// (not the emitting item's) keeps a sharded list's cursor valid when its shard count changes (a
/// re-sharding: shard 0 exists in every layout).
pub(super) fn group_position(listing: &Listing, group: usize, sort: String) -> Key {
    let partition = listing.groups[group].first().cloned().unwrap_or_default();
    Key::from([
        (
            listing.partition_attr.to_owned(),
            AttributeValue::S(partition),
        ),
        (listing.sort_attr.to_owned(), AttributeValue::S(sort)),
    ])
}

/// Whether `a` and `b` are write shards of one partition space (`…#<n>` with the same stem): a
/// cursor position on any shard names that space's group, whatever its shard count now is.
pub(super) fn same_shard_family(a: &str, b: &str) -> bool {
    let shard = |p: &str| {
        p.rsplit_once('#')
            .filter(|(_, n)| !n.is_empty() && n.len() <= 3 && n.bytes().all(|c| c.is_ascii_digit()))
            .map(|(stem, _)| stem.to_owned())
    };
    matches!((shard(a), shard(b)), (Some(x), Some(y)) if x == y)
}

/// The group and sort key a cursor resumes after. The position must name one of the listing's
/// partitions and a sort key inside its range (and, as every cursor, this tenant and route).
pub(super) fn decode_position(
    keys: &CursorKeys,
    t: &TenantId,
    listing: &Listing,
    raw: &str,
) -> Result<(usize, String), StoreError> {
    let named = |pk: &str, sk: &str| -> (String, String) {
        if listing.partition_attr == PK {
            (pk.to_owned(), sk.to_owned())
        } else {
            (sk.to_owned(), pk.to_owned())
        }
    };
    let group_of = |partition: &str| {
        listing.groups.iter().position(|g| {
            g.iter()
                .any(|p| p == partition || same_shard_family(p, partition))
        })
    };
    let key = cursor::decode(keys, t, &listing.route, raw, |pk, sk| {
        let (partition, sort) = named(pk, sk);
        group_of(&partition).is_some() && listing.range.contains(&sort)
    })?;
    let value = |attr: &str| key.get(attr).and_then(|v| v.as_s().ok()).cloned();
    match (value(listing.partition_attr), value(listing.sort_attr)) {
        (Some(partition), Some(sort)) => match group_of(&partition) {
            Some(group) => Ok((group, sort)),
            None => Err(cursor::InvalidCursor.into()),
        },
        _ => Err(cursor::InvalidCursor.into()),
    }
}

/// The lanes of `group`, each resuming after `after` (a sort key) when given.
pub(super) fn open_group(listing: &Listing, group: usize, after: Option<&str>) -> Vec<Lane> {
    listing.groups[group]
        .iter()
        .map(|partition| Lane {
            partition: partition.clone(),
            buffer: VecDeque::new(),
            resume: after.map(|sort| {
                Key::from([
                    (
                        listing.partition_attr.to_owned(),
                        AttributeValue::S(partition.clone()),
                    ),
                    (
                        listing.sort_attr.to_owned(),
                        AttributeValue::S(sort.to_owned()),
                    ),
                ])
            }),
            exhausted: false,
        })
        .collect()
}

/// How many items the first round asks each of `open` partitions for: twice the fair share plus two,
/// never more than the page. With ids hashed over shards the share is binomial, so this covers
/// all but a small fraction of pages in one round (16 shards, page 100: 16 each).
pub fn first_round_want(limit: u32, open: usize) -> u32 {
    let open = (open as u32).max(1);
    (2 * limit.div_ceil(open) + 2).min(limit)
}

/// One open partition during a page: what was read and not yet emitted, and where to read on from.
pub(super) struct Lane {
    partition: String,
    /// (sort key, item), in the listing's order.
    buffer: VecDeque<(String, Item)>,
    /// The key after which the next read starts: the last item read, or the cursor's position.
    resume: Option<Key>,
    exhausted: bool,
}

/// The lane whose first buffered item comes next in `order`, if any lane has one.
fn next_in_order(lanes: &mut [Lane], order: Order) -> Option<&mut Lane> {
    lanes
        .iter_mut()
        .filter(|l| !l.buffer.is_empty())
        .reduce(|best, l| {
            let better = match order {
                Order::Ascending => l.buffer[0].0 < best.buffer[0].0,
                Order::Descending => l.buffer[0].0 > best.buffer[0].0,
            };
            if better {
                l
            } else {
                best
            }
        })
}

/// What a page of `byte_budget` bytes still holds once it emitted `emitted` bytes and `lanes` hold
/// their buffered items.
fn unread_budget(byte_budget: usize, emitted: usize, lanes: &[Lane]) -> usize {
    if byte_budget == usize::MAX {
        return usize::MAX;
    }
    let buffered: usize = lanes
        .iter()
        .flat_map(|l| &l.buffer)
        .map(|(_, item)| approximate_bytes(item))
        .sum();
    byte_budget.saturating_sub(emitted + buffered)
}

/// What each of `lanes` partitions may read in one refill when a page holds at most `byte_budget`
/// bytes: its share (at least one item), so that a page of large items never reads far past its
/// budget before it is cut.
fn lane_bytes(byte_budget: usize, lanes: usize) -> usize {
    match byte_budget {
        usize::MAX => usize::MAX,
        budget => (budget / lanes.max(1)).max(1),
    }
}

/// How a refill reads: side by side or not, the listing's sort attribute, what each lane may read
/// in bytes, and the size of an item when an earlier page saw it.
#[derive(Clone, Copy)]
pub(super) struct Reading<'a> {
    fanout: Fanout,
    sort_attr: &'a str,
    max_bytes: usize,
    item_bytes: Option<usize>,
}

/// Reads up to `want` more items into each lane in `which` (no more than twice and two over what
/// `max_bytes` holds at `item_bytes`, the margin of a first round), each read stopping after the
/// item that passes `max_bytes`: concurrently (at most the source's fan-out budget at once) or one
/// after another.
pub(super) async fn refill<S: PartitionSource>(
    source: &S,
    lanes: &mut [Lane],
    which: &[usize],
    want: u32,
    reading: Reading<'_>,
) -> Result<(), StoreError> {
    let Reading {
        fanout,
        sort_attr,
        max_bytes,
        item_bytes,
    } = reading;
    let want = match item_bytes {
        Some(size) if max_bytes != usize::MAX => {
            let share = (max_bytes / size.max(1))
                .saturating_mul(2)
                .saturating_add(2);
            want.min(u32::try_from(share).unwrap_or(u32::MAX))
        }
        _ => want,
    };
    let in_flight = match fanout {
        Fanout::Parallel => source.max_in_flight(),
        Fanout::Sequential => 1,
    };
    // Collected first: a lazily mapped iterator here is not `Send` for every lifetime (rust#110338).
    let pending: Vec<_> = which
        .iter()
        .map(|&i| {
            source.read(LaneAsk {
                partition: &lanes[i].partition,
                want,
                start: lanes[i].resume.clone(),
                max_bytes,
            })
        })
        .collect();
    let reads = in_waves(pending, in_flight).await?;
    for (i, r) in which.iter().zip(reads) {
        let lane = &mut lanes[*i];
        if r.items.is_empty() && !r.exhausted {
            // A read that neither returns items nor ends the partition would loop forever.
            return Err(StoreError::Internal(format!(
                "partition {} returned no items and no end",
                lane.partition
            )));
        }
        lane.exhausted = r.exhausted;
        if let Some(last) = r.items.last() {
            lane.resume = Some(table_key(last));
        }
        lane.buffer.extend(
            r.items
                .into_iter()
                .map(|item| (string_attr(&item, sort_attr).unwrap_or_default(), item)),
        );
    }
    Ok(())
}
