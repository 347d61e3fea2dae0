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

use std::future::Future;

use crate::identity::cursor::{CursorKeys, Key};
use crate::identity::entities::{EntityKind, Home};
use crate::identity::ids::TenantId;
use crate::identity::keys::{entity_sk_prefix, shard_pk, PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
/// Re-exported: pages are cut by it, and callers read it here.
pub use crate::store::client::size::approximate_bytes;
use crate::store::client::walk_sizes::PartitionSize;

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

/// The common case: the items of one entity kind in its tenant's write shards, in id order.
#[derive(Debug, Clone, Copy)]
pub struct ShardedList {
    /// The kind listed, as declared (`entities::PRODUCT`, `EMPLOYEE`, `DEPARTMENT`).
    entity: EntityKind,
    /// The space of write shards it lives in (`PRODUCT`, `HR`): its declaration's home.
    space: &'static str,
    /// The route name the cursor is bound to.
    route: &'static str,
}

impl ShardedList {
    /// The list of `entity`'s items that route `route` serves. Its kind must live in a fixed space
    /// of write shards (`Home::Fixed`): a `const` list of a kind found by id does not compile.
    pub const fn new(entity: EntityKind, route: &'static str) -> Self {
        let Home::Fixed(space) = entity.home else {
            panic!("a sharded list lists a kind that lives in write shards");
        };
        Self {
            entity,
            space,
            route,
        }
    }

    /// The kind in the sort key, e.g. `PRODUCT`, `EMPLOYEE`, `DEPARTMENT`.
    pub fn kind(&self) -> &'static str {
        self.entity.kind
    }

    /// The partition space, e.g. `PRODUCT` or `HR`.
    pub fn space(&self) -> &'static str {
        self.space
    }

    /// The route name the cursor is bound to.
    pub fn route(&self) -> &'static str {
        self.route
    }

    /// The listing over `shard_count` shards of tenant `t`.
    pub fn over(&self, t: &TenantId, shard_count: u32) -> Listing {
        Listing {
            route: self.route.to_owned(),
            index: None,
            partition_attr: PK,
            sort_attr: SK,
            range: SortRange::BeginsWith(entity_sk_prefix(t, self.kind())),
            order: Order::Ascending,
            groups: vec![(0..shard_count)
                .map(|s| shard_pk(t, self.space, s))
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

/// One page asked of a listing: up to `limit` items after `cursor` (signed with `keys`), its
/// partitions read `fanout` (ordered pages), within `byte_budget` (walks).
#[derive(Debug, Clone, Copy)]
pub struct PageAsk<'a> {
    pub keys: &'a CursorKeys,
    pub limit: u32,
    pub cursor: Option<&'a str>,
    pub fanout: Fanout,
    pub byte_budget: usize,
}

impl<'a> PageAsk<'a> {
    /// Its partitions read in parallel, with no byte budget.
    pub fn new(keys: &'a CursorKeys, limit: u32, cursor: Option<&'a str>) -> Self {
        Self {
            keys,
            limit,
            cursor,
            fanout: Fanout::Parallel,
            byte_budget: usize::MAX,
        }
    }

    pub fn with_fanout(self, fanout: Fanout) -> Self {
        Self { fanout, ..self }
    }

    /// A page that stops before its items pass `byte_budget` (their size as stored).
    pub fn within_bytes(self, byte_budget: usize) -> Self {
        Self {
            byte_budget,
            ..self
        }
    }
}

/// One read of a partition: up to `want` items of `partition` after `start`, in the listing's
/// order; it may stop early (not exhausted) once the items it has read pass `max_bytes`
/// ([`approximate_bytes`]).
#[derive(Debug, Clone)]
pub struct LaneAsk<'a> {
    pub partition: &'a str,
    pub want: u32,
    pub start: Option<Key>,
    pub max_bytes: usize,
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
        crate::store::client::scoped::DEFAULT_MAX_IN_FLIGHT
    }
    /// The sizes of this listing's partitions and items a walk last saw, if remembered.
    fn size_hint(&self) -> Option<PartitionSize> {
        None
    }
    /// Remembers the sizes a walk page saw.
    fn remember_size(&self, _size: PartitionSize) {}
    /// What `ask` asks of one partition.
    fn read(&self, ask: LaneAsk<'_>) -> impl Future<Output = Result<LaneRead, StoreError>>;
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

    fn size_hint(&self) -> Option<PartitionSize> {
        let sizes = self.db.walk_sizes.as_ref()?;
        sizes.get(&self.db.tenant, &self.listing.route)
    }

    fn remember_size(&self, size: PartitionSize) {
        if let Some(sizes) = &self.db.walk_sizes {
            sizes.remember(&self.db.tenant, &self.listing.route, size);
        }
    }

    fn read(&self, ask: LaneAsk<'_>) -> impl Future<Output = Result<LaneRead, StoreError>> {
        let partition = ask.partition.to_owned();
        read_partition(
            self.db,
            self.listing,
            partition,
            ask.want,
            ask.start,
            ask.max_bytes,
        )
    }
}

mod gather;
mod merge;
mod read;
#[cfg(test)]
mod tests;
mod walk;
pub use gather::{first_round_want, gather, gather_across, gather_all, gather_from};
pub use merge::{merge_layouts, Merged, Read};
use read::read_partition;
pub use walk::{walk, walk_from};
