//! Property: scatter-gather pagination returns every item exactly once, in id order, for random ids,
//! shard counts 1–100 and page sizes 1–100. Shards live in memory here; the same code runs against
//! DynamoDB Local in the integration tests.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_dynamodb::types::AttributeValue;
use proptest::prelude::*;
use shared::identity::cursor::Key;
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{entity_sk, kind, shard_pk, PK, SK};
use shared::identity::shard::shard_for;
use shared::store::error::StoreError;
use shared::store::scatter::{
    first_round_want, gather_from, Fanout, ShardRead, ShardSource, ShardedList,
};

const LIST: ShardedList<'static> = ShardedList {
    partition: kind::PRODUCT,
    kind: kind::PRODUCT,
    route: "query-tenant-products",
};

/// Shards in memory. (Following DynamoDB's own page boundaries is covered against DynamoDB Local.)
struct MemoryShards {
    tenant: TenantId,
    shards: BTreeMap<u32, Vec<(String, String)>>,
    /// Items returned by every read so far: what DynamoDB would bill.
    items_read: AtomicUsize,
}

impl MemoryShards {
    fn new(tenant: &TenantId, ids: &BTreeSet<String>, shard_count: u32) -> Self {
        let mut shards: BTreeMap<u32, Vec<(String, String)>> = BTreeMap::new();
        for id in ids {
            let s = shard_for(id, shard_count);
            let e = EntityId::parse(id).unwrap();
            shards.entry(s).or_default().push((
                shard_pk(tenant, LIST.partition, s),
                entity_sk(tenant, LIST.kind, &e),
            ));
        }
        for items in shards.values_mut() {
            items.sort_by(|a, b| a.1.cmp(&b.1));
        }
        Self {
            tenant: tenant.clone(),
            shards,
            items_read: AtomicUsize::new(0),
        }
    }
}

impl ShardSource for MemoryShards {
    fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    async fn read(
        &self,
        shard: u32,
        want: u32,
        start: Option<Key>,
    ) -> Result<ShardRead, StoreError> {
        let all = self.shards.get(&shard).cloned().unwrap_or_default();
        let after = start.and_then(|k| k.get(SK).and_then(|v| v.as_s().ok()).cloned());
        let rest: Vec<_> = all
            .into_iter()
            .filter(|(_, sk)| after.as_ref().is_none_or(|a| sk > a))
            .collect();
        let take = rest.len().min(want as usize);
        self.items_read.fetch_add(take, Ordering::SeqCst);
        let items = rest[..take]
            .iter()
            .map(|(pk, sk)| {
                HashMap::from([
                    (PK.to_string(), AttributeValue::S(pk.clone())),
                    (SK.to_string(), AttributeValue::S(sk.clone())),
                ])
            })
            .collect();
        Ok(ShardRead {
            shard,
            items,
            exhausted: take == rest.len(),
        })
    }
}

fn walk(source: &MemoryShards, shard_count: u32, limit: u32) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10_000 {
            let page = gather_from(
                source,
                LIST,
                shard_count,
                limit,
                cursor.as_deref(),
                Fanout::Parallel,
            )
            .await
            .unwrap();
            assert!(page.items.len() as u32 <= limit);
            // only the last page may be short
            assert!(page.next_cursor.is_none() || page.items.len() as u32 == limit);
            out.extend(page.items.iter().map(|i| i[SK].as_s().unwrap().clone()));
            match page.next_cursor {
                // one position for every shard: the cursor does not grow with the shard count
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_item_exactly_once_in_order(
        ids in proptest::collection::btree_set("[A-Za-z0-9_-]{1,12}", 0..400),
        shard_count in 1u32..=100,
        limit in 1u32..=100,
    ) {
        let tenant = TenantId::parse("acme").unwrap();
        let source = MemoryShards::new(&tenant, &ids, shard_count);
        let walked = walk(&source, shard_count, limit);
        let mut expected: Vec<String> = ids.iter().map(|i| entity_sk(&tenant, LIST.kind, &EntityId::parse(i).unwrap())).collect();
        expected.sort();
        prop_assert_eq!(walked, expected);
    }
}

#[test]
fn a_16_shard_walk_reads_a_small_multiple_of_its_items_not_16_pages_per_page() {
    // GIVEN 2,000 products hashed over 16 shards
    let tenant = TenantId::parse("acme").unwrap();
    let ids: BTreeSet<String> = (0..2000).map(|i| format!("product-{i}")).collect();
    let source = MemoryShards::new(&tenant, &ids, 16);
    // WHEN every page of 100 is walked
    let walked = walk(&source, 16, 100);
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
    let source = MemoryShards::new(&tenant, &ids, 16);
    // WHEN pages of 100 are walked
    let walked = walk(&source, 16, 100);
    // THEN the skew costs more reads, never a short, repeated or missing item
    let mut expected: Vec<String> = ids
        .iter()
        .map(|i| entity_sk(&tenant, LIST.kind, &EntityId::parse(i).unwrap()))
        .collect();
    expected.sort();
    assert_eq!(walked, expected);
}

#[test]
fn a_100_shard_walk_with_the_longest_ids_keeps_a_small_cursor() {
    // GIVEN the longest tenant id (64) and entity ids (128), over 100 shards
    let tenant = TenantId::parse(&"t".repeat(64)).unwrap();
    let ids: BTreeSet<String> = (0..1500).map(|i| format!("{i:0>128}")).collect();
    let source = MemoryShards::new(&tenant, &ids, 100);
    // WHEN every page of 50 is walked (walk asserts each cursor is at most 1 KB)
    let walked = walk(&source, 100, 50);
    // THEN every item came back once
    assert_eq!(walked.len(), 1500);
}
