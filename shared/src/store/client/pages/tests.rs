//! The list-page cache's unit tests: the bound, coalescing, failures, memory, and which writes drop pages.
use super::*;
use aws_sdk_dynamodb::types::AttributeValue;
use std::sync::atomic::{AtomicU32, AtomicU64};

fn key(name: &str) -> PageKey {
    page_key(format_args!("{name}"))
}

/// A clock the test moves.
#[derive(Debug)]
struct ManualClock(AtomicU64);

impl ManualClock {
    fn new(millis: u64) -> Self {
        Self(AtomicU64::new(millis))
    }
    fn advance_millis(&self, by: u64) {
        self.0.fetch_add(by, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

fn item(v: &str) -> Item {
    Item::from([("v".to_owned(), AttributeValue::S(v.to_owned()))])
}

#[tokio::test]
async fn a_page_is_read_once_per_bound_per_tenant_and_dropped_by_its_writes() {
    let (a, b) = (TenantId::parse("a").unwrap(), TenantId::parse("b").unwrap());
    let clock = Arc::new(ManualClock::new(10_000));
    let cache = PageCache::new(1000, clock.clone());
    let reads = AtomicU32::new(0);
    let read = |v: &'static str| {
        let reads = &reads;
        move || async move {
            reads.fetch_add(1, Ordering::SeqCst);
            Ok((vec![item(v)], None))
        }
    };
    // GIVEN a page read for tenant a
    let first = cache.page(&a, key("p"), read("a1")).await.unwrap();
    // WHEN it is asked again within the bound, by a and by b
    let again = cache.page(&a, key("p"), read("a2")).await.unwrap();
    let other = cache.page(&b, key("p"), read("b1")).await.unwrap();
    // THEN a gets the cached page and b its own read
    assert_eq!(again.items, first.items);
    assert_eq!(other.items, vec![item("b1")]);
    assert_eq!(reads.load(Ordering::SeqCst), 2);
    // AND at the bound the page is read again
    clock.advance_millis(1000);
    let later = cache.page(&a, key("p"), read("a3")).await.unwrap();
    assert_eq!(later.items, vec![item("a3")]);
    cache.page(&b, key("p"), read("b2")).await.unwrap();
    // AND a's write drops a's pages only
    cache.forget(&a);
    assert_eq!(
        cache.page(&a, key("p"), read("a4")).await.unwrap().items,
        vec![item("a4")]
    );
    assert_eq!(
        cache.page(&b, key("p"), read("b3")).await.unwrap().items,
        vec![item("b2")]
    );
}

#[tokio::test]
async fn concurrent_requests_for_a_page_share_one_read_and_errors_are_not_kept() {
    let a = TenantId::parse("a").unwrap();
    let cache = PageCache::new(1000, Arc::new(ManualClock::new(0)));
    let reads = AtomicU32::new(0);
    // GIVEN a failing read: nothing is kept
    let failed = cache
        .page(&a, key("p"), || async {
            Err(StoreError::Unavailable("down".into()))
        })
        .await;
    assert!(failed.is_err());
    // WHEN 20 requests ask for the page at once
    let pages = futures::future::join_all((0..20).map(|_| {
        cache.page(&a, key("p"), || async {
            reads.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            Ok((vec![item("x")], None))
        })
    }))
    .await;
    // THEN one read answers them all
    assert!(pages
        .iter()
        .all(|p| p.as_ref().unwrap().items == vec![item("x")]));
    assert_eq!(reads.load(Ordering::SeqCst), 1);
}

#[test]
fn only_writes_a_list_could_show_drop_pages() {
    use crate::identity::keys::{kind, quota_window_pk, shard_pk, usage_counter_pk};
    let t = TenantId::parse("acme").unwrap();
    let put = |pk: String| {
        Input::erase(
            PutItemInput::builder()
                .table_name("t")
                .item(PK, AttributeValue::S(pk))
                .build()
                .unwrap(),
        )
    };
    // the runtime's metering writes: kept
    assert!(!changes_listed_items(&t, &put(usage_counter_pk(&t, 3))));
    assert!(!changes_listed_items(&t, &put(quota_window_pk(&t, 0))));
    // an item's write, and a transaction with one: dropped
    assert!(changes_listed_items(
        &t,
        &put(shard_pk(&t, kind::PRODUCT, 2))
    ));
    let usage = aws_sdk_dynamodb::types::TransactWriteItem::builder()
        .put(
            aws_sdk_dynamodb::types::Put::builder()
                .table_name("t")
                .item(PK, AttributeValue::S(usage_counter_pk(&t, 1)))
                .build()
                .unwrap(),
        )
        .build();
    let product = aws_sdk_dynamodb::types::TransactWriteItem::builder()
        .delete(
            aws_sdk_dynamodb::types::Delete::builder()
                .table_name("t")
                .key(PK, AttributeValue::S(shard_pk(&t, kind::PRODUCT, 0)))
                .build()
                .unwrap(),
        )
        .build();
    let both = TransactWriteItemsInput::builder()
        .transact_items(usage)
        .transact_items(product)
        .build()
        .unwrap();
    assert!(changes_listed_items(&t, &Input::erase(both)));
    // another tenant's metering partition is not this tenant's: dropped
    let other = TenantId::parse("other").unwrap();
    assert!(changes_listed_items(&t, &put(usage_counter_pk(&other, 3))));
    // a read is no write
    let get = aws_sdk_dynamodb::operation::get_item::GetItemInput::builder()
        .table_name("t")
        .build()
        .unwrap();
    assert!(!changes_listed_items(&t, &Input::erase(get)));
}

#[tokio::test]
async fn the_pages_held_stay_bounded() {
    let clock = Arc::new(ManualClock::new(0));
    let cache = PageCache::new(10_000, clock.clone());
    let big = "x".repeat(512 * 1024);
    for i in 0..100u32 {
        let tenant = TenantId::parse(&format!("t{i}")).unwrap();
        clock.advance_millis(1);
        let big = big.clone();
        cache
            .page(
                &tenant,
                key("p"),
                || async move { Ok((vec![item(&big)], None)) },
            )
            .await
            .unwrap();
    }
    assert!(cache.held_bytes() <= MAX_BYTES + 512 * 1024 + 64);
}

#[test]
fn a_page_key_is_the_digest_of_its_text_never_built() {
    let streamed = page_key(format_args!(
        "{:?}|{}|{:?}",
        ["PK#1", "PK#2"],
        25,
        Some("c")
    ));
    let built: PageKey =
        sha2::Sha256::digest(format!("{:?}|{}|{:?}", ["PK#1", "PK#2"], 25, Some("c"))).into();
    assert_eq!(streamed, built);
    assert_ne!(
        streamed,
        page_key(format_args!("{:?}|{}|{:?}", ["PK#1"], 25, Some("c")))
    );
}
