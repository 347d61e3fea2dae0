//! Scatter-gather: the one way a list reads several partitions as one ordered collection (products
//! and HR over their write shards, orders over month × shard index partitions, usage over its
//! counter shards).
//!
//! A [`Listing`] names the partitions, in groups: every item of a group sorts before every item of
//! the next (orders: one group per month, newest first). A page reads the partitions of one group
//! concurrently (tokio futures on one task, at most the tenant client's fan-out budget at once:
//! [`TenantDb::max_in_flight`], 16 by default), follows each
//! partition's `LastEvaluatedKey`, merges in sort-key order, and opens the next group only once the
//! current one is read to the end, so a page reads only the months it needs.
//!
//! Because the merge emits items in one global order, one key says where every partition stands:
//! the last item returned. The next page starts every partition of that item's group just after its
//! sort key (as its `ExclusiveStartKey`, with the partition's own key), so across pages every item
//! appears exactly once and the cursor stays the same small size at 1 partition or 100. (A cursor
//! holding one position per partition grew with the count: with 36-character ids it passed the 8 KB
//! cursor limit, and API Gateway's 10 KB request line, at about 45 shards.)
//!
//! Items are spread over a group's partitions by a hash of their id, so a page of `limit` items holds
//! about `limit / partitions` from each. The first round asks every partition for about twice its
//! fair share ([`first_round_want`]) instead of a whole page each, so a 16-shard page of 100 reads
//! about 256 items, not 1,600 (Query cost is per item read). The merge only emits an item once every
//! partition that still has items has shown one at or after it; a partition whose buffer runs dry
//! first is read again, for the rest of the page, so the result is exact whatever the distribution,
//! and a skewed page costs one more round trip, never a wrong or short page.

use std::collections::VecDeque;
use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;
use futures::{StreamExt, TryStreamExt};

use crate::identity::cursor::{self, CursorKeys, Key};
use crate::identity::ids::TenantId;
use crate::identity::keys::{entity_sk_prefix, home_shard_pk, shard_pk, PK, SK};
use crate::store::error::StoreError;
use crate::store::query::{string_attr, Item};
use crate::store::scoped::TenantDb;
/// Re-exported: pages are cut by it, and callers read it here.
pub use crate::store::size::approximate_bytes;

/// Which way a listing's sort key runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Ascending,
    Descending,
}

/// The sort-key condition every partition of a listing is queried with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortRange {
    /// `begins_with(sort, prefix)`
    BeginsWith(String),
    /// `sort BETWEEN lo AND hi`
    Between(String, String),
}

impl SortRange {
    /// A sort key before every item of the range, to start a Query at a partition's beginning
    /// (as its `ExclusiveStartKey`): the prefix of a `begins_with` range, which no item equals.
    fn start_marker(&self) -> Option<&str> {
        match self {
            Self::BeginsWith(prefix) => Some(prefix),
            Self::Between(..) => None,
        }
    }

    fn contains(&self, value: &str) -> bool {
        match self {
            Self::BeginsWith(prefix) => value.len() > prefix.len() && value.starts_with(prefix),
            Self::Between(lo, hi) => lo.as_str() <= value && value <= hi.as_str(),
        }
    }
}

/// What a list reads: one Query shape over groups of partitions.
#[derive(Debug, Clone)]
pub struct Listing {
    /// What the cursor is bound to: the route, plus any parameters that define the collection.
    pub route: String,
    /// `None` for the table, or a GSI name.
    pub index: Option<&'static str>,
    /// The attribute that holds the partition key in `index` (`PK` on the table, `SK` on GSI1).
    pub partition_attr: &'static str,
    /// The attribute that holds the sort key in `index`.
    pub sort_attr: &'static str,
    pub range: SortRange,
    pub order: Order,
    /// Partition key values, grouped: every item of a group sorts (in `order`) before every item of
    /// the next group.
    pub groups: Vec<Vec<String>>,
    /// Strongly consistent reads (table listings only): a page across two layouts during a
    /// re-sharding needs them ([`gather_across`]).
    pub consistent: bool,
}

/// The common case: items of `kind` in a tenant's `partition` write shards, in id order.
#[derive(Debug, Clone, Copy)]
pub struct ShardedList<'a> {
    /// The partition space, e.g. `PRODUCT` or `HR`.
    pub partition: &'a str,
    /// The kind in the sort key, e.g. `PRODUCT`, `EMPLOYEE`, `DEPARTMENT`.
    pub kind: &'a str,
    /// The route name the cursor is bound to.
    pub route: &'a str,
}

impl ShardedList<'_> {
    /// The listing over `shard_count` shards of tenant `t`.
    pub fn over(&self, t: &TenantId, shard_count: u32) -> Listing {
        Listing {
            route: self.route.to_owned(),
            index: None,
            partition_attr: PK,
            sort_attr: SK,
            range: SortRange::BeginsWith(entity_sk_prefix(t, self.kind)),
            order: Order::Ascending,
            groups: vec![(0..shard_count)
                .map(|s| shard_pk(t, self.partition, s))
                .collect()],
            consistent: false,
        }
    }
}

pub struct GatheredPage {
    pub items: Vec<Item>,
    pub next_cursor: Option<String>,
}

/// How partitions are queried: concurrently (production) or one after another (benchmark reference).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fanout {
    Parallel,
    Sequential,
}

/// What one partition answered: items in sort order after the start, and whether it has no more.
pub struct LaneRead {
    pub items: Vec<Item>,
    pub exhausted: bool,
}

/// Where partition reads come from: DynamoDB in production, memory in the pagination property test.
pub trait PartitionSource {
    fn tenant(&self) -> &TenantId;
    /// The most reads to have in flight at once (the fan-out budget).
    fn max_in_flight(&self) -> usize {
        crate::store::scoped::DEFAULT_MAX_IN_FLIGHT
    }
    /// Up to `want` items of `partition` after `start`, in the listing's order; it may stop early
    /// (not exhausted) once the items it has read pass `max_bytes` ([`approximate_bytes`]).
    fn read(
        &self,
        partition: &str,
        want: u32,
        start: Option<Key>,
        max_bytes: usize,
    ) -> impl Future<Output = Result<LaneRead, StoreError>>;
}

/// A tenant's partitions in DynamoDB, read through its scoped client.
pub struct DynamoPartitions<'a> {
    pub db: &'a TenantDb,
    pub listing: &'a Listing,
}

impl PartitionSource for DynamoPartitions<'_> {
    fn tenant(&self) -> &TenantId {
        &self.db.tenant
    }

    fn max_in_flight(&self) -> usize {
        self.db.max_in_flight
    }

    fn read(
        &self,
        partition: &str,
        want: u32,
        start: Option<Key>,
        max_bytes: usize,
    ) -> impl Future<Output = Result<LaneRead, StoreError>> {
        read_partition(
            self.db,
            self.listing,
            partition.to_owned(),
            want,
            start,
            max_bytes,
        )
    }
}

/// One page of `listing`, starting at `cursor`.
pub async fn gather(
    db: &TenantDb,
    listing: &Listing,
    keys: &CursorKeys,
    limit: u32,
    cursor: Option<&str>,
    fanout: Fanout,
) -> Result<GatheredPage, StoreError> {
    let source = DynamoPartitions { db, listing };
    gather_from(&source, listing, keys, limit, cursor, fanout).await
}

/// One ordered page of a sharded list while its items move from `from` shards (the listing `old`)
/// to `to` shards (`new`) in a re-sharding ([`crate::store::resharding`]). The two listings differ
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
    keys: &CursorKeys,
    limit: u32,
    cursor: Option<&str>,
) -> Result<GatheredPage, StoreError> {
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
    let before = gather(db, old, keys, limit, cursor, Fanout::Parallel).await?;
    let after = gather(db, new, keys, limit, cursor, Fanout::Parallel).await?;
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

/// One layout's read for [`merge_layouts`]: the items kept, and where the read ended.
pub struct Read {
    /// In ascending sort order.
    pub items: Vec<Item>,
    /// The sort key of the last item read (kept or not) when the read stopped for its limit;
    /// `None` when it read its layout to the end.
    pub ended_at: Option<String>,
}

impl Read {
    /// `page`, keeping the items `keep` accepts.
    fn of(page: GatheredPage, keep: impl Fn(&Item) -> bool) -> Self {
        let ended_at = page
            .next_cursor
            .and(page.items.last())
            .and_then(|last| string_attr(last, SK));
        Self {
            items: page.items.into_iter().filter(|i| keep(i)).collect(),
            ended_at,
        }
    }
}

/// A merged page: its items, and the sort key the next page starts after (if any).
#[derive(Debug)]
pub struct Merged {
    pub items: Vec<Item>,
    pub next: Option<String>,
}

/// The page of [`gather_across`] from its two reads: the items of both up to where both reads
/// reached, one per sort key (the new layout's copy preferred), at most `limit`.
pub fn merge_layouts(old: Read, new: Read, limit: usize, sort_attr: &str) -> Merged {
    let sort = |item: &Item| string_attr(item, sort_attr).unwrap_or_default();
    let covered_to = match (old.ended_at, new.ended_at) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let within = |item: &Item| covered_to.as_ref().is_none_or(|end| sort(item) <= *end);
    let mut old_items = old.items.into_iter().filter(|i| within(i)).peekable();
    let mut new_items = new.items.into_iter().filter(|i| within(i)).peekable();
    let mut items: Vec<Item> = Vec::new();
    loop {
        let take_new = match (old_items.peek(), new_items.peek()) {
            (None, None) => break,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some(o), Some(n)) => {
                let (o, n) = (sort(o), sort(n));
                if o == n {
                    old_items.next();
                }
                n <= o
            }
        };
        let next = if take_new {
            new_items.next()
        } else {
            old_items.next()
        };
        // One per sort key, also within one read: the later copy (a move mid-read) replaces it.
        match next {
            Some(item) if items.last().is_some_and(|l| sort(l) == sort(&item)) => {
                if let Some(last) = items.last_mut() {
                    *last = item;
                }
            }
            Some(item) => items.push(item),
            None => {}
        }
    }
    if items.len() > limit {
        items.truncate(limit);
        let next = items.last().map(sort);
        return Merged { items, next };
    }
    Merged {
        items,
        next: covered_to,
    }
}

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

fn table_key(item: &Item) -> Key {
    [PK, SK]
        .into_iter()
        .filter_map(|k| item.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect()
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
async fn in_waves<F>(reads: Vec<F>, in_flight: usize) -> Result<Vec<LaneRead>, StoreError>
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
    keys: &CursorKeys,
    limit: u32,
    cursor: Option<&str>,
    fanout: Fanout,
) -> Result<GatheredPage, StoreError> {
    let t = source.tenant();
    let (mut group, after) = match cursor {
        None => (0, None),
        Some(raw) => {
            let (group, sort) = decode_position(keys, t, listing, raw)?;
            (group, Some(sort))
        }
    };
    let mut items: Vec<Item> = Vec::with_capacity(limit as usize);
    let mut last_emitted: Option<Key> = None;
    let mut lanes = open_group(listing, group, after.as_deref());
    let first = first_round_want(limit, lanes.len());
    let all: Vec<usize> = (0..lanes.len()).collect();
    refill(source, &mut lanes, &all, first, fanout, listing.sort_attr).await?;

    while (items.len() as u32) < limit {
        // A partition with more items but none buffered could hold the next one: read it first.
        let dry: Vec<usize> = lanes
            .iter()
            .enumerate()
            .filter(|(_, l)| l.buffer.is_empty() && !l.exhausted)
            .map(|(i, _)| i)
            .collect();
        if !dry.is_empty() {
            refill(
                source,
                &mut lanes,
                &dry,
                limit - items.len() as u32,
                fanout,
                listing.sort_attr,
            )
            .await?;
            continue;
        }
        let next = lanes
            .iter_mut()
            .filter(|l| !l.buffer.is_empty())
            .reduce(|best, l| {
                let better = match listing.order {
                    Order::Ascending => l.buffer[0].0 < best.buffer[0].0,
                    Order::Descending => l.buffer[0].0 > best.buffer[0].0,
                };
                if better {
                    l
                } else {
                    best
                }
            });
        match next {
            Some(lane) => {
                if let Some((sort, item)) = lane.buffer.pop_front() {
                    last_emitted = Some(group_position(listing, group, sort));
                    items.push(item);
                }
            }
            // This group is read to the end: open the next one, if any, for the rest of the page.
            None if group + 1 < listing.groups.len() => {
                group += 1;
                lanes = open_group(listing, group, None);
                let want = first_round_want(limit - items.len() as u32, lanes.len());
                let all: Vec<usize> = (0..lanes.len()).collect();
                refill(source, &mut lanes, &all, want, fanout, listing.sort_attr).await?;
            }
            None => break,
        }
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
fn group_position(listing: &Listing, group: usize, sort: String) -> Key {
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
fn same_shard_family(a: &str, b: &str) -> bool {
    let shard = |p: &str| {
        p.rsplit_once('#')
            .filter(|(_, n)| !n.is_empty() && n.len() <= 3 && n.bytes().all(|c| c.is_ascii_digit()))
            .map(|(stem, _)| stem.to_owned())
    };
    matches!((shard(a), shard(b)), (Some(x), Some(y)) if x == y)
}

/// The group and sort key a cursor resumes after. The position must name one of the listing's
/// partitions and a sort key inside its range (and, as every cursor, this tenant and route).
fn decode_position(
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
fn open_group(listing: &Listing, group: usize, after: Option<&str>) -> Vec<Lane> {
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
struct Lane {
    partition: String,
    /// (sort key, item), in the listing's order.
    buffer: VecDeque<(String, Item)>,
    /// The key after which the next read starts: the last item read, or the cursor's position.
    resume: Option<Key>,
    exhausted: bool,
}

/// Reads up to `want` more items into each lane in `which`: concurrently (at most the source's
/// fan-out budget at once) or one after another.
async fn refill<S: PartitionSource>(
    source: &S,
    lanes: &mut [Lane],
    which: &[usize],
    want: u32,
    fanout: Fanout,
    sort_attr: &str,
) -> Result<(), StoreError> {
    let in_flight = match fanout {
        Fanout::Parallel => source.max_in_flight(),
        Fanout::Sequential => 1,
    };
    // Collected first: a lazily mapped iterator here is not `Send` for every lifetime (rust#110338).
    let pending: Vec<_> = which
        .iter()
        .map(|&i| {
            source.read(
                &lanes[i].partition,
                want,
                lanes[i].resume.clone(),
                usize::MAX,
            )
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
            lane.resume = Some(position_after(last));
        }
        lane.buffer.extend(
            r.items
                .into_iter()
                .map(|item| (string_attr(&item, sort_attr).unwrap_or_default(), item)),
        );
    }
    Ok(())
}

fn position_after(item: &Item) -> Key {
    [PK, SK]
        .into_iter()
        .filter_map(|k| item.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect()
}

/// Up to `want` items of one partition after `start`, following `LastEvaluatedKey`.
async fn read_partition(
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
        let out = query
            .clone()
            .set_limit((want != u32::MAX).then_some(remaining.min(i32::MAX as u32) as i32))
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
            Some(k) => start = Some(position_after(&k)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An item with sort key `sk` and a `v` telling which read it came from.
    fn item(sk: &str, v: &str) -> Item {
        Item::from([
            (SK.to_owned(), AttributeValue::S(sk.to_owned())),
            ("v".to_owned(), AttributeValue::S(v.to_owned())),
        ])
    }

    fn read(items: &[(&str, &str)], ended_at: Option<&str>) -> Read {
        Read {
            items: items.iter().map(|(sk, v)| item(sk, v)).collect(),
            ended_at: ended_at.map(str::to_owned),
        }
    }

    fn shown(m: &Merged) -> Vec<String> {
        m.items
            .iter()
            .map(|i| {
                format!(
                    "{}{}",
                    string_attr(i, SK).unwrap(),
                    string_attr(i, "v").unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn a_page_across_layouts_ends_where_the_shorter_read_ended_and_prefers_the_new_copy() {
        // GIVEN an old read that stopped at c, and a new read that went to the end
        let old = read(&[("a", "old"), ("b", "old"), ("c", "old")], Some("c"));
        let new = read(&[("b", "new"), ("d", "new")], None);
        // WHEN they are merged
        let m = merge_layouts(old, new, 10, SK);
        // THEN b is the new copy, d waits for the next page (the old layout was not read past c)
        assert_eq!(shown(&m), ["aold", "bnew", "cold"]);
        assert_eq!(m.next.as_deref(), Some("c"));
    }

    #[test]
    fn a_full_merge_is_cut_at_the_limit_and_a_finished_one_has_no_next_page() {
        let old = read(&[("a", "old"), ("c", "old")], None);
        let new = read(&[("b", "new"), ("d", "new")], None);
        let m = merge_layouts(old, new, 3, SK);
        assert_eq!(shown(&m), ["aold", "bnew", "cold"]);
        assert_eq!(m.next.as_deref(), Some("c"));

        let done = merge_layouts(read(&[("a", "old")], None), read(&[], None), 3, SK);
        assert_eq!(shown(&done), ["aold"]);
        assert_eq!(done.next, None);
    }

    #[test]
    fn a_page_whose_reads_kept_nothing_still_moves_on() {
        // Every item the old read saw was at home in the new layout only (filtered out).
        let m = merge_layouts(read(&[], Some("m")), read(&[], Some("z")), 5, SK);
        assert!(m.items.is_empty());
        assert_eq!(m.next.as_deref(), Some("m"));
    }
}
