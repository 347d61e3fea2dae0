//! Property: scatter-gather pagination returns every item exactly once, in order, for random ids,
//! shard counts 1–100 and page sizes 1–100; and, for a grouped descending listing (the orders shape:
//! months newest first × shards), every item once, newest first. Partitions live in memory here; the
//! same code runs against DynamoDB Local in the integration tests.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_dynamodb::types::AttributeValue;
use proptest::prelude::*;
use shared::identity::cursor::CursorKeys;
use shared::identity::entities::{ORDER_DATE, PRODUCT};
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{entity_sk, order_date_pk, order_month_sk, KeySpace, PK, SK};
use shared::identity::shard::shard_for;
use shared::store::client::error::StoreError;
use shared::store::client::walk_sizes::PartitionSize;
use shared::store::scatter::{
    first_round_want, gather_from, walk_from, GatheredPage, LaneAsk, LaneRead, Listing, Order,
    PageAsk, PartitionSource, ShardedList, SortRange,
};

const LIST: ShardedList = ShardedList::new(PRODUCT, "query-tenant-products");

/// Partitions in memory, each holding (PK, SK) items. (Following DynamoDB's own page boundaries is
/// covered against DynamoDB Local.)
struct MemoryPartitions {
    tenant: TenantId,
    listing: Listing,
    partitions: BTreeMap<String, Vec<(String, String)>>,
    /// Items returned by every read so far: what DynamoDB would bill.
    items_read: AtomicUsize,
    /// Partition reads (Queries) so far, and the most of them one page sent.
    reads: AtomicUsize,
    most_reads_in_a_page: AtomicUsize,
    /// Reads under way, and the rounds of reads: a read that starts while none is under way starts one.
    in_flight: AtomicUsize,
    rounds: AtomicUsize,
    /// Whether it remembers the partition sizes a walk page saw (as a container does), and what.
    remembers: bool,
    sizes: std::sync::Mutex<Option<PartitionSize>>,
    /// Whether a read returns what it is asked for whatever its bytes, as a Query does up to 1 MB
    /// (else it stops after the item that passes its `max_bytes`).
    whole_reads: bool,
}

impl MemoryPartitions {
    /// `ids` of `LIST`'s kind hashed over `shard_count` shards.
    fn sharded(tenant: &TenantId, ids: &BTreeSet<String>, shard_count: u32) -> Self {
        let listing = LIST.over(tenant, shard_count);
        let mut items = Vec::new();
        for id in ids {
            let e = EntityId::parse(id).unwrap();
            let key = shared::identity::keys::sharded_entity_key(
                tenant,
                LIST.space(),
                LIST.kind(),
                &e,
                shard_count,
            );
            items.push((
                key[PK].as_s().unwrap().clone(),
                key[SK].as_s().unwrap().clone(),
            ));
        }
        Self::new(tenant, listing, items)
    }

    fn new(tenant: &TenantId, listing: Listing, items: Vec<(String, String)>) -> Self {
        let mut partitions: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        for (pk, sk) in items {
            let partition = if listing.partition_attr == PK {
                &pk
            } else {
                &sk
            };
            partitions
                .entry(partition.clone())
                .or_default()
                .push((pk.clone(), sk.clone()));
        }
        for items in partitions.values_mut() {
            items.sort_by_key(|(pk, sk)| sort_of(&listing, pk, sk).to_owned());
            if listing.order == Order::Descending {
                items.reverse();
            }
        }
        Self {
            tenant: tenant.clone(),
            listing,
            partitions,
            items_read: AtomicUsize::new(0),
            reads: AtomicUsize::new(0),
            most_reads_in_a_page: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            rounds: AtomicUsize::new(0),
            remembers: false,
            sizes: std::sync::Mutex::new(None),
            whole_reads: false,
        }
    }
}

fn sort_of<'a>(listing: &Listing, pk: &'a str, sk: &'a str) -> &'a str {
    if listing.sort_attr == SK {
        sk
    } else {
        pk
    }
}

impl PartitionSource for MemoryPartitions {
    fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    fn size_hint(&self) -> Option<PartitionSize> {
        *self.sizes.lock().unwrap()
    }

    fn remember_size(&self, size: PartitionSize) {
        if self.remembers {
            *self.sizes.lock().unwrap() = Some(size);
        }
    }

    async fn read(&self, ask: LaneAsk<'_>) -> Result<LaneRead, StoreError> {
        let LaneAsk {
            partition,
            want,
            start,
            max_bytes,
        } = ask;
        if self.in_flight.fetch_add(1, Ordering::SeqCst) == 0 {
            self.rounds.fetch_add(1, Ordering::SeqCst);
        }
        // A round trip: reads sent side by side are all under way at once.
        tokio::task::yield_now().await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let all = self.partitions.get(partition).cloned().unwrap_or_default();
        let sort_attr = self.listing.sort_attr;
        let after = start.and_then(|k| k.get(sort_attr).and_then(|v| v.as_s().ok()).cloned());
        let descending = self.listing.order == Order::Descending;
        let rest: Vec<_> = all
            .into_iter()
            .filter(|(pk, sk)| {
                let sort = sort_of(&self.listing, pk, sk);
                after
                    .as_deref()
                    .is_none_or(|a| if descending { sort < a } else { sort > a })
            })
            .collect();
        // up to `want` items, stopping after the item that passes `max_bytes`
        let mut take = 0;
        let mut bytes = 0usize;
        for (pk, sk) in rest.iter().take(want as usize) {
            take += 1;
            bytes += shared::store::scatter::approximate_bytes(&HashMap::from([
                (PK.to_string(), AttributeValue::S(pk.clone())),
                (SK.to_string(), AttributeValue::S(sk.clone())),
            ]));
            if bytes >= max_bytes && !self.whole_reads {
                break;
            }
        }
        self.items_read.fetch_add(take, Ordering::SeqCst);
        self.reads.fetch_add(1, Ordering::SeqCst);
        let items = rest[..take]
            .iter()
            .map(|(pk, sk)| {
                HashMap::from([
                    (PK.to_string(), AttributeValue::S(pk.clone())),
                    (SK.to_string(), AttributeValue::S(sk.clone())),
                ])
            })
            .collect();
        Ok(LaneRead {
            items,
            exhausted: take == rest.len(),
        })
    }
}

fn keys() -> CursorKeys {
    CursorKeys::new(&[7; 32], None).unwrap()
}

/// The sort keys of the products `ids` of `tenant`, in order: what a whole walk must return.
fn sorted_sort_keys(tenant: &TenantId, ids: &BTreeSet<String>) -> Vec<String> {
    let sort_key = |id: &String| entity_sk(tenant, LIST.kind(), &EntityId::parse(id).unwrap());
    let mut keys: Vec<String> = ids.iter().map(sort_key).collect();
    keys.sort();
    keys
}

/// A page of the source's own listing, from `cursor`, its shards read side by side.
async fn page_of(
    source: &MemoryPartitions,
    limit: u32,
    cursor: Option<&str>,
) -> Result<GatheredPage, StoreError> {
    let keys = keys();
    gather_from(source, &source.listing, PageAsk::new(&keys, limit, cursor)).await
}

/// Every page of the source's listing, as the sort keys returned, in order.
fn walk(source: &MemoryPartitions, limit: u32) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let sort_attr = source.listing.sort_attr;
    rt.block_on(async {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10_000 {
            let page = page_of(source, limit, cursor.as_deref()).await.unwrap();
            let reads = source.reads.swap(0, Ordering::SeqCst);
            source
                .most_reads_in_a_page
                .fetch_max(reads, Ordering::SeqCst);
            assert!(page.items.len() as u32 <= limit);
            // only the last page may be short
            assert!(page.next_cursor.is_none() || page.items.len() as u32 == limit);
            out.extend(
                page.items
                    .iter()
                    .map(|i| i[sort_attr].as_s().unwrap().clone()),
            );
            match page.next_cursor {
                // one position for every partition: the cursor does not grow with their count
                Some(c) => {
                    assert!(c.len() <= 1024, "cursor of {} bytes", c.len());
                    cursor = Some(c)
                }
                None => return out,
            }
        }
        panic!("pagination did not end");
    })
}

/// An order id of the tests' orders.
fn order(id: &str) -> EntityId {
    EntityId::parse(id).unwrap()
}

/// An orders-shaped listing: `months` groups (newest first) of `shards` GSI1 partitions each, sorted
/// by the date-index key, descending; `orders` are (month, day, id).
fn orders_listing(
    tenant: &TenantId,
    months: u32,
    shards: u32,
    orders: &BTreeSet<(u32, u32, String)>,
) -> MemoryPartitions {
    let part = |m: u32, s: u32| order_month_sk(tenant, format_args!("2026-{m:02}"), s);
    let listing = Listing {
        route: "list-tenant-orders:test".into(),
        index: Some("GSI1"),
        partition_attr: SK,
        sort_attr: PK,
        range: SortRange::Between(ORDER_DATE.prefix(tenant), ORDER_DATE.key(tenant, "~")),
        order: Order::Descending,
        groups: (1..=months)
            .rev()
            .map(|m| (0..shards).map(|s| part(m, s)).collect())
            .collect(),
        consistent: false,
    };
    let items = orders
        .iter()
        .map(|(m, d, id)| {
            (
                order_date_pk(tenant, format_args!("2026-{m:02}-{d:02}"), &order(id)),
                part(*m, shard_for(id, shards)),
            )
        })
        .collect();
    MemoryPartitions::new(tenant, listing, items)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_item_exactly_once_in_order(
        ids in proptest::collection::btree_set("[A-Za-z0-9_-]{1,12}", 0..400),
        shard_count in 1u32..=100,
        limit in 1u32..=100,
    ) {
        let tenant = TenantId::parse("acme").unwrap();
        let source = MemoryPartitions::sharded(&tenant, &ids, shard_count);
        let walked = walk(&source, limit);
        let expected = sorted_sort_keys(&tenant, &ids);
        prop_assert_eq!(walked, expected);
    }

    #[test]
    fn grouped_descending_listings_return_every_item_once_newest_first(
        orders in proptest::collection::btree_set((1u32..=6, 1u32..=28, "[a-z0-9]{1,8}"), 0..300),
        shards in 1u32..=20,
        limit in 1u32..=60,
    ) {
        let tenant = TenantId::parse("acme").unwrap();
        let source = orders_listing(&tenant, 6, shards, &orders);
        let walked = walk(&source, limit);
        let mut expected: Vec<String> = orders
            .iter()
            .map(|(m, d, id)| order_date_pk(&tenant, format_args!("2026-{m:02}-{d:02}"), &order(id)))
            .collect();
        expected.sort();
        expected.dedup();
        expected.reverse();
        prop_assert_eq!(walked, expected);
    }

    #[test]
    fn an_unordered_walk_returns_every_item_exactly_once_with_about_one_query_per_shard_and_page(
        ids in proptest::collection::btree_set("[A-Za-z0-9_-]{1,12}", 0..600),
        shard_count in 1u32..=100,
        limit in 1u32..=1000,
        remembers in proptest::bool::ANY,
    ) {
        let tenant = TenantId::parse("acme").unwrap();
        let mut source = MemoryPartitions::sharded(&tenant, &ids, shard_count);
        // a container that remembers the sizes pages saw reads side by side from a page's start
        source.remembers = remembers;
        let (mut walked, reads) = walk_unordered(&source, limit);
        // every item once (in shard order, so sorted only for the comparison)
        walked.sort();
        let expected = sorted_sort_keys(&tenant, &ids);
        prop_assert_eq!(&walked, &expected);
        let pages = (ids.len() as u32).div_ceil(limit).max(1) as usize;
        // about only the items returned are read: shards read side by side ask for at most a
        // quarter more than their page takes, plus one each looks ahead at (to see whether its
        // shard ends with the page), plus at most a shard's likely most a page (the read of a
        // batch beyond the page's end)
        let items_read = source.items_read.load(Ordering::SeqCst);
        let largest = source.partitions.values().map(Vec::len).max().unwrap_or(0);
        let likely_most = largest + 3 * (largest as f64).sqrt().ceil() as usize + 3;
        prop_assert!(items_read <= ids.len() + ids.len() / 4 + reads + pages * likely_most, "{} items read of {}, {} reads", items_read, ids.len(), reads);
        // a Query per shard, plus a few per page (the shard a page ends in is read again by the
        // next page, and so are the one or two its batch read beyond it: its reads add up to a
        // quarter and one shard more than it takes), plus a second part for a shard read side by side that was larger than
        // its likely most (from the sizes seen so far: a first shard far smaller than the rest
        // makes that a quarter of the shards at most)
        prop_assert!(reads <= shard_count as usize + 4 * pages + shard_count as usize / 4, "{} reads, {} shards, {} pages", reads, shard_count, pages);
    }
}

#[test]
fn a_page_reads_an_older_month_only_once_the_newer_one_is_exhausted() {
    // GIVEN 24 months × 4 shards, with 30 orders in the newest month only
    let tenant = TenantId::parse("acme").unwrap();
    let orders: BTreeSet<(u32, u32, String)> =
        (0..30).map(|i| (24, 1 + i % 28, format!("o{i}"))).collect();
    let source = orders_listing(&tenant, 24, 4, &orders);
    // WHEN the first page of 10 is read
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let page = rt.block_on(page_of(&source, 10, None)).unwrap();
    // THEN it came from the newest month's 4 partitions alone: each asked for 2 × ceil(10/4) + 2
    assert_eq!(page.items.len(), 10);
    assert!(page.next_cursor.is_some());
    assert!(source.items_read.load(Ordering::SeqCst) <= 4 * 8);
}

#[test]
fn a_16_shard_walk_reads_a_small_multiple_of_its_items_not_16_pages_per_page() {
    // GIVEN 2,000 products hashed over 16 shards
    let tenant = TenantId::parse("acme").unwrap();
    let ids: BTreeSet<String> = (0..2000).map(|i| format!("product-{i}")).collect();
    let source = MemoryPartitions::sharded(&tenant, &ids, 16);
    // WHEN every page of 100 is walked
    let walked = walk(&source, 100);
    // THEN every item came back once, and the shards were asked for far fewer than
    // 16 shards x 100 items x 20 pages = 32,000 reads (each shard's first round is 16 items)
    assert_eq!(walked.len(), 2000);
    assert_eq!(first_round_want(100, 16), 16);
    let read = source.items_read.load(Ordering::SeqCst);
    assert!(read <= 3 * 2000, "read {read} items to return 2,000");
}

#[test]
fn the_first_round_asks_for_about_twice_the_fair_share_and_never_more_than_the_page() {
    assert_eq!(first_round_want(100, 1), 100);
    assert_eq!(first_round_want(100, 4), 52);
    assert_eq!(first_round_want(100, 64), 6);
    assert_eq!(first_round_want(1, 16), 1);
    assert_eq!(first_round_want(10, 0), 10);
}

#[test]
fn a_page_whose_items_all_sit_in_one_shard_is_still_full_and_exact() {
    // GIVEN 16 shards where the first 50 ids (in order) all hash to one shard
    let tenant = TenantId::parse("acme").unwrap();
    let mut ids: BTreeSet<String> = BTreeSet::new();
    let mut n = 0;
    while ids.len() < 50 {
        let id = format!("a{n:05}");
        if shard_for(&id, 16) == 3 {
            ids.insert(id);
        }
        n += 1;
    }
    ids.extend((0..200).map(|i| format!("z{i:05}")));
    let source = MemoryPartitions::sharded(&tenant, &ids, 16);
    // WHEN pages of 100 are walked
    let walked = walk(&source, 100);
    // THEN the skew costs more reads, never a short, repeated or missing item
    let expected = sorted_sort_keys(&tenant, &ids);
    assert_eq!(walked, expected);
}

#[test]
fn a_100_shard_walk_with_the_longest_ids_keeps_a_small_cursor() {
    // GIVEN the longest tenant id (64) and entity ids (128), over 100 shards
    let tenant = TenantId::parse(&"t".repeat(64)).unwrap();
    let ids: BTreeSet<String> = (0..1500).map(|i| format!("{i:0>128}")).collect();
    let source = MemoryPartitions::sharded(&tenant, &ids, 100);
    // WHEN every page of 50 is walked (walk asserts each cursor is at most 1 KB)
    let walked = walk(&source, 50);
    // THEN every item came back once
    assert_eq!(walked.len(), 1500);
}

#[test]
fn orders_over_100_shards_and_24_months_with_the_longest_ids_keep_a_small_cursor() {
    // GIVEN a 64-character tenant, 128-character order ids, 100 shards and a 24-month range, with a
    // month boundary inside almost every page
    let tenant = TenantId::parse(&"t".repeat(64)).unwrap();
    let orders: BTreeSet<(u32, u32, String)> = (0..600u32)
        .map(|i| (1 + i % 24, 1 + i % 28, format!("{i:0>128}")))
        .collect();
    let month = |m: u32| format!("20{:02}-{:02}", 24 + (m - 1) / 12, 1 + (m - 1) % 12);
    let part = |m: u32, s: u32| order_month_sk(&tenant, month(m), s);
    let listing = Listing {
        route: "list-tenant-orders:2024-01-01:2025-12-31".into(),
        index: Some("GSI1"),
        partition_attr: SK,
        sort_attr: PK,
        range: SortRange::Between(ORDER_DATE.prefix(&tenant), ORDER_DATE.key(&tenant, "~")),
        order: Order::Descending,
        groups: (1..=24)
            .rev()
            .map(|m| (0..100).map(|s| part(m, s)).collect())
            .collect(),
        consistent: false,
    };
    let date = |m: u32, d: u32| format!("{}-{d:02}", month(m));
    let items = orders
        .iter()
        .map(|(m, d, id)| {
            (
                order_date_pk(&tenant, date(*m, *d), &order(id)),
                part(*m, shard_for(id, 100)),
            )
        })
        .collect();
    let source = MemoryPartitions::new(&tenant, listing, items);
    // WHEN every page of 25 is walked (walk asserts every cursor is at most 1 KB)
    let walked = walk(&source, 25);
    // THEN a page of 25 (25 orders a month, so it spans at most two months) reads at most the two
    // months' 100 partitions once each, never the 24 × 100 of the whole range
    let most = source.most_reads_in_a_page.load(Ordering::SeqCst);
    assert!(most <= 2 * 100, "{most} partition reads in one page");
    // THEN every order came back once, newest first
    let mut expected: Vec<String> = orders
        .iter()
        .map(|(m, d, id)| order_date_pk(&tenant, date(*m, *d), &order(id)))
        .collect();
    expected.sort();
    expected.reverse();
    assert_eq!(walked, expected);
}

/// Every page of an unordered walk of the source's listing: the sort keys returned, and the reads
/// (Queries) sent in all.
fn walk_unordered(source: &MemoryPartitions, limit: u32) -> (Vec<String>, usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut listing = source.listing.clone();
    listing.route = format!("{}?order=unordered", listing.route);
    rt.block_on(async {
        source.reads.store(0, Ordering::SeqCst);
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        let keys = keys();
        for _ in 0..100_000 {
            let ask = PageAsk::new(&keys, limit, cursor.as_deref());
            let page = walk_from(source, &listing, ask).await.unwrap();
            assert!(page.items.len() as u32 <= limit);
            assert!(page.next_cursor.is_none() || page.items.len() as u32 == limit);
            out.extend(page.items.iter().map(|i| i[SK].as_s().unwrap().clone()));
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return (out, source.reads.load(Ordering::SeqCst)),
            }
        }
        panic!("the walk did not end");
    })
}

#[test]
fn a_16_shard_unordered_walk_reads_its_shards_side_by_side() {
    // GIVEN 2,000 items on 16 shards
    let tenant = TenantId::parse("acme").unwrap();
    let ids: BTreeSet<String> = (0..2000).map(|i| format!("p{i:05}")).collect();
    let source = MemoryPartitions::sharded(&tenant, &ids, 16);
    // WHEN they are walked in pages of 1,000
    let (walked, reads) = walk_unordered(&source, 1000);
    // THEN every item comes once
    assert_eq!(walked.len(), 2000);
    assert_eq!(walked.iter().collect::<BTreeSet<_>>().len(), 2000);
    // AND each page waits for a few rounds of reads, not one a shard: a first shard alone, then
    // the rest of the page's shards side by side (and a shard larger than its likely most, again)
    let rounds = source.rounds.load(Ordering::SeqCst);
    assert!(rounds <= 6, "{rounds} rounds of reads for 16 shards");
    // AND it reads about the items it returns, with about one Query a shard
    assert!(reads <= 16 + 4, "{reads} reads");
    assert!(source.items_read.load(Ordering::SeqCst) <= 2000 + 2000 / 4 + reads);
}

#[test]
fn a_walk_cursor_is_not_an_ordered_cursor_and_vice_versa() {
    let tenant = TenantId::parse("acme").unwrap();
    let ids: BTreeSet<String> = (0..50).map(|i| format!("p{i}")).collect();
    let source = MemoryPartitions::sharded(&tenant, &ids, 4);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let keys = keys();
    rt.block_on(async {
        let mut unordered = source.listing.clone();
        unordered.route = format!("{}?order=unordered", unordered.route);
        let walk_page = walk_from(&source, &unordered, PageAsk::new(&keys, 10, None))
            .await
            .unwrap();
        let walk_cursor = walk_page.next_cursor.unwrap();
        let ordered = page_of(&source, 10, Some(&walk_cursor)).await;
        assert!(ordered.is_err(), "a walk cursor passed for an ordered page");
        let ordered_page = page_of(&source, 10, None).await.unwrap();
        let after_ordered = PageAsk::new(&keys, 10, ordered_page.next_cursor.as_deref());
        let walked = walk_from(&source, &unordered, after_ordered).await;
        assert!(walked.is_err(), "an ordered cursor passed for a walk");
    });
}

#[test]
fn a_walk_under_a_byte_budget_stops_pages_before_it_and_still_returns_every_item_once() {
    let tenant = TenantId::parse("acme").unwrap();
    let ids: BTreeSet<String> = (0..300).map(|i| format!("p{i:04}")).collect();
    let source = MemoryPartitions::sharded(&tenant, &ids, 7);
    let mut listing = source.listing.clone();
    listing.route = format!("{}?order=unordered", listing.route);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let budget = 1_000;
    let keys = keys();
    let walked = rt.block_on(async {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let ask = PageAsk::new(&keys, 1000, cursor.as_deref()).within_bytes(budget);
            let page = walk_from(&source, &listing, ask).await.unwrap();
            let bytes: usize = page
                .items
                .iter()
                .map(shared::store::scatter::approximate_bytes)
                .sum();
            assert!(bytes <= budget, "a page of {bytes} bytes");
            assert!(!page.items.is_empty());
            out.extend(page.items.iter().map(|i| i[SK].as_s().unwrap().clone()));
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return out,
            }
        }
    });
    let mut walked = walked;
    walked.sort();
    let expected = sorted_sort_keys(&tenant, &ids);
    assert_eq!(walked, expected);
    // the budget bounded what was read, not only what was returned: at most a few items over
    assert!(source.items_read.load(Ordering::SeqCst) <= ids.len() + 7 * 25);
}

/// The tenant and 300 product ids of the byte-budget tests (spread over 7 shards by each).
fn three_hundred() -> (TenantId, BTreeSet<String>) {
    let tenant = TenantId::parse("acme").unwrap();
    (tenant, (0..300).map(|i| format!("p{i:04}")).collect())
}

/// The stored bytes of `page`'s items.
fn page_bytes(page: &GatheredPage) -> usize {
    page.items
        .iter()
        .map(shared::store::scatter::approximate_bytes)
        .sum()
}

/// Every page of `source`'s listing in id order, up to 1,000 items each within `budget` bytes,
/// each with the items the source had returned by the time it was read.
fn ordered_pages_within(source: &MemoryPartitions, budget: usize) -> Vec<(GatheredPage, usize)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let keys = keys();
    rt.block_on(async {
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let ask = PageAsk::new(&keys, 1000, cursor.as_deref()).within_bytes(budget);
            let page = gather_from(source, &source.listing, ask).await.unwrap();
            cursor = page.next_cursor.clone();
            pages.push((page, source.items_read.load(Ordering::SeqCst)));
            if cursor.is_none() {
                return pages;
            }
        }
    })
}

/// The sort keys of `pages`' items, in the order they came.
fn listed(pages: &[(GatheredPage, usize)]) -> Vec<String> {
    pages
        .iter()
        .flat_map(|(page, _)| page.items.iter().map(|i| i[SK].as_s().unwrap().clone()))
        .collect()
}

#[test]
fn an_ordered_page_under_a_byte_budget_stops_at_it_reads_little_past_it_and_still_returns_every_item_once(
) {
    // GIVEN 300 items over 7 shards, listed in id order in pages of up to 1,000 within 1,000 bytes
    let (tenant, ids) = three_hundred();
    let source = MemoryPartitions::sharded(&tenant, &ids, 7);
    let budget = 1_000;
    let one = shared::store::scatter::approximate_bytes(&HashMap::from([
        (PK.to_string(), AttributeValue::S("x".repeat(40))),
        (SK.to_string(), AttributeValue::S("x".repeat(40))),
    ]));
    // WHEN every page is read in turn
    let pages = ordered_pages_within(&source, budget);
    // THEN each page holds its budget and at most one item more
    for (page, _) in &pages {
        let bytes = page_bytes(page);
        assert!(bytes < budget + 2 * one, "a page of {bytes} bytes");
        assert!(!page.items.is_empty());
    }
    // AND every item comes once, in order
    assert_eq!(listed(&pages), sorted_sort_keys(&tenant, &ids));
    // AND what was read is bounded by the budget, not by the page's 1,000 items: each page reads
    // its budget and each shard's share of it again at the most
    let (read, pages) = (source.items_read.load(Ordering::SeqCst), pages.len());
    assert!(
        read <= ids.len() + pages * (budget / one + 7) * 2,
        "{read} items read for {pages} pages"
    );
}

#[test]
fn an_ordered_page_asks_each_shard_only_its_share_of_the_budget_once_it_knows_the_items_size() {
    // GIVEN 300 items over 7 shards whose reads return what they are asked for, whatever their
    // bytes (as a Query does, up to 1 MB), in a container that remembers what a page saw
    let (tenant, ids) = three_hundred();
    let source = MemoryPartitions {
        whole_reads: true,
        remembers: true,
        ..MemoryPartitions::sharded(&tenant, &ids, 7)
    };
    let budget = 1_000;
    // WHEN the list is read in pages of up to 1,000 items within 1,000 bytes
    let pages = ordered_pages_within(&source, budget);
    // THEN every item comes once, in order
    assert_eq!(listed(&pages), sorted_sort_keys(&tenant, &ids));
    // AND once the first page has seen the items' size, each page reads about its budget: each
    // shard is asked its share, not its round of the page's thousand
    let (first, first_read) = &pages[0];
    let item_bytes = page_bytes(first) / first.items.len();
    let after_first = source.items_read.load(Ordering::SeqCst) - first_read;
    let per_page = 3 * budget / item_bytes + 2 * 7;
    assert!(
        after_first <= (pages.len() - 1) * per_page,
        "{after_first} items read by {} pages after the first",
        pages.len() - 1
    );
}

#[test]
fn an_ordered_page_under_a_stale_size_hint_of_large_items_goes_by_its_own_items_after_one_round() {
    // GIVEN 300 small items over 7 shards, read like a Query, in a container whose last page of
    // this listing saw items of 100 KB
    let (tenant, ids) = three_hundred();
    let source = MemoryPartitions {
        whole_reads: true,
        sizes: std::sync::Mutex::new(Some(PartitionSize {
            items: 1,
            item_bytes: 100_000,
        })),
        ..MemoryPartitions::sharded(&tenant, &ids, 7)
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let keys = keys();
    // WHEN a page of 100 is read within 10,000 bytes (its items fit: about 60 bytes each)
    let ask = PageAsk::new(&keys, 100, None).within_bytes(10_000);
    let page = rt
        .block_on(gather_from(&source, &source.listing, ask))
        .unwrap();
    // THEN it is full, and after a first round of two items a shard it asks by its own items' size:
    // a few Queries a shard, not one for every two items
    assert_eq!(page.items.len(), 100);
    let queries = source.reads.load(Ordering::SeqCst);
    assert!(queries <= 3 * 7, "{queries} Queries for a page of 100");
}
