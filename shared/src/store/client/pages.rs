//! The list-page cache: for the tenants whose tier turns it on, one container reads each list page
//! from DynamoDB at most once per staleness bound, however many requests ask for it, so a hot
//! tenant's list pages stop multiplying into every shard partition (README, "Hot lists").
//!
//! - **Off unless `LIST_CACHE_MS`** (the staleness bound, 1 to 10,000 ms) is set, and then only for
//!   the tiers `LIST_CACHE_TIERS` names (`premium,custom` unless set): a cached page may miss the
//!   writes of other containers for up to the bound.
//! - **Coalesced:** requests for a page being read wait for that read instead of sending their own.
//! - **The tenant's own writes in this container drop its pages** ([`PageCacheInvalidation`], on
//!   every tenant client: before a write is sent and again when it ends, so no page read while it
//!   was under way survives it).
//! - **Isolation:** a page is keyed by its tenant and filled only by that tenant's own scoped read
//!   (its credentials and key guard); nothing is shared across tenants, and a page outlives neither
//!   the bound nor a refusal of its tenant (the bound is far below an offboarding's deletion delay,
//!   so an id re-onboarded later never sees them).
//! - **Bounded:** at most [`MAX_BYTES`] of pages a container (about their stored size), the oldest
//!   dropped first.
//! - Ordered pages only, eventually consistent ones only: a re-sharding's consistent reads and a walk
//!   never go through it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::operation::{
    batch_write_item::BatchWriteItemInput, delete_item::DeleteItemInput, put_item::PutItemInput,
    transact_write_items::TransactWriteItemsInput, update_item::UpdateItemInput,
};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef,
};

use crate::identity::clock::Clock;
use crate::identity::ids::TenantId;
use crate::store::client::error::StoreError;
use crate::store::client::size::approximate_bytes;

/// An item as a page holds it: `query::Item` (named here, not imported: `query` builds on the scoped
/// client, which builds on this module).
pub type Item = HashMap<String, aws_sdk_dynamodb::types::AttributeValue>;

/// The longest staleness bound `LIST_CACHE_MS` may set.
pub const MAX_STALENESS_MS: u64 = 10_000;
/// What one container's pages may hold, about.
pub const MAX_BYTES: usize = 16 * 1024 * 1024;

/// A cached page: its items and the cursor to the next one.
#[derive(Debug)]
pub struct CachedPage {
    pub items: Vec<Item>,
    pub next_cursor: Option<String>,
    bytes: usize,
    held: Arc<AtomicUsize>,
}

impl Drop for CachedPage {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// One page, read or being read.
struct Slot {
    started_ms: u64,
    page: tokio::sync::OnceCell<Arc<CachedPage>>,
}

/// Per tenant, its pages by key.
type Pages = HashMap<TenantId, HashMap<String, Arc<Slot>>>;

/// What one tenant's list requests got from this container's cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageStats {
    /// Answered by a page read earlier (or being read) in this container.
    pub hits: u64,
    /// Read from DynamoDB.
    pub reads: u64,
}

pub struct PageCache {
    staleness_ms: u64,
    clock: Arc<dyn Clock>,
    pages: Mutex<Pages>,
    /// The bytes of the pages alive (counted by the pages themselves).
    held: Arc<AtomicUsize>,
    stats: Mutex<HashMap<TenantId, PageStats>>,
}

impl std::fmt::Debug for PageCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageCache")
            .field("staleness_ms", &self.staleness_ms)
            .finish_non_exhaustive()
    }
}

impl PageCache {
    /// A cache trusting pages for `staleness_ms` (at most [`MAX_STALENESS_MS`]).
    pub fn new(staleness_ms: u64, clock: Arc<dyn Clock>) -> Self {
        Self {
            staleness_ms: staleness_ms.clamp(1, MAX_STALENESS_MS),
            clock,
            pages: Mutex::new(HashMap::new()),
            held: Arc::new(AtomicUsize::new(0)),
            stats: Mutex::new(HashMap::new()),
        }
    }

    /// What `tenant`'s list requests got from this cache so far.
    pub fn stats(&self, tenant: &TenantId) -> PageStats {
        let stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        stats.get(tenant).copied().unwrap_or_default()
    }

    pub fn staleness_ms(&self) -> u64 {
        self.staleness_ms
    }

    /// The page `key` of `tenant`: cached when read less than the bound ago (or being read), else
    /// from `read`, once for every request that asks meanwhile.
    pub async fn page<F, Fut>(
        &self,
        tenant: &TenantId,
        key: String,
        read: F,
    ) -> Result<Arc<CachedPage>, StoreError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(Vec<Item>, Option<String>), StoreError>>,
    {
        let now = self.clock.now_millis();
        let slot = {
            let mut pages = self.lock();
            let fresh = |slot: &Slot| now.saturating_sub(slot.started_ms) < self.staleness_ms;
            match pages.get(tenant).and_then(|p| p.get(&key)) {
                Some(slot) if fresh(slot) => slot.clone(),
                _ => {
                    if self.held.load(Ordering::Relaxed) > MAX_BYTES {
                        Self::drop_oldest(&mut pages, now, self.staleness_ms);
                    }
                    let tenant_pages = pages.entry(tenant.clone()).or_default();
                    tenant_pages.retain(|_, slot| fresh(slot));
                    let slot = Arc::new(Slot {
                        started_ms: now,
                        page: tokio::sync::OnceCell::new(),
                    });
                    tenant_pages.insert(key, slot.clone());
                    slot
                }
            }
        };
        let mut read_here = false;
        let page = slot
            .page
            .get_or_try_init(|| async {
                read_here = true;
                let (items, next_cursor) = read().await?;
                let bytes = items.iter().map(approximate_bytes).sum::<usize>()
                    + next_cursor.as_ref().map_or(0, String::len);
                self.held.fetch_add(bytes, Ordering::Relaxed);
                Ok::<_, StoreError>(Arc::new(CachedPage {
                    items,
                    next_cursor,
                    bytes,
                    held: self.held.clone(),
                }))
            })
            .await?;
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        let tenant_stats = stats.entry(tenant.clone()).or_default();
        if read_here {
            tenant_stats.reads += 1;
        } else {
            tenant_stats.hits += 1;
        }
        Ok(page.clone())
    }

    /// Drops every page of `tenant` (it wrote, or it is refused).
    pub fn forget(&self, tenant: &TenantId) {
        self.lock().remove(tenant);
    }

    /// The bytes the pages alive hold.
    pub fn held_bytes(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Over [`MAX_BYTES`]: drops the stale pages, then the older half of the rest.
    fn drop_oldest(pages: &mut Pages, now: u64, staleness_ms: u64) {
        for tenant_pages in pages.values_mut() {
            tenant_pages.retain(|_, slot| now.saturating_sub(slot.started_ms) < staleness_ms);
        }
        let mut started: Vec<u64> = pages
            .values()
            .flat_map(|p| p.values().map(|s| s.started_ms))
            .collect();
        started.sort_unstable();
        if let Some(&median) = started.get(started.len() / 2) {
            for tenant_pages in pages.values_mut() {
                tenant_pages.retain(|_, slot| slot.started_ms > median);
            }
        }
        pages.retain(|_, p| !p.is_empty());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pages> {
        self.pages.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Drops its tenant's cached pages when a write of that tenant is sent, and again when it ends.
/// Installed on every tenant client while the cache is on.
#[derive(Debug, Clone)]
pub struct PageCacheInvalidation {
    pages: Arc<PageCache>,
    tenant: TenantId,
}

impl PageCacheInvalidation {
    pub fn new(pages: Arc<PageCache>, tenant: TenantId) -> Self {
        Self { pages, tenant }
    }
}

/// Set on a write's request, for the drop when it ends.
#[derive(Debug, Clone, Copy)]
struct IsWrite;

impl aws_smithy_types::config_bag::Storable for IsWrite {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

impl Intercept for PageCacheInvalidation {
    fn name(&self) -> &'static str {
        "PageCacheInvalidation"
    }

    fn read_before_serialization(
        &self,
        ctx: &BeforeSerializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let input = ctx.input();
        let write = input.downcast_ref::<PutItemInput>().is_some()
            || input.downcast_ref::<UpdateItemInput>().is_some()
            || input.downcast_ref::<DeleteItemInput>().is_some()
            || input.downcast_ref::<TransactWriteItemsInput>().is_some()
            || input.downcast_ref::<BatchWriteItemInput>().is_some();
        if write {
            self.pages.forget(&self.tenant);
            cfg.interceptor_state().store_put(IsWrite);
        }
        Ok(())
    }

    fn read_after_execution(
        &self,
        _ctx: &FinalizerInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<IsWrite>().is_some() {
            self.pages.forget(&self.tenant);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;
    use std::sync::atomic::{AtomicU32, AtomicU64};

    /// A clock the test moves.
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
        let first = cache.page(&a, "p".into(), read("a1")).await.unwrap();
        // WHEN it is asked again within the bound, by a and by b
        let again = cache.page(&a, "p".into(), read("a2")).await.unwrap();
        let other = cache.page(&b, "p".into(), read("b1")).await.unwrap();
        // THEN a gets the cached page and b its own read
        assert_eq!(again.items, first.items);
        assert_eq!(other.items, vec![item("b1")]);
        assert_eq!(reads.load(Ordering::SeqCst), 2);
        // AND at the bound the page is read again
        clock.advance_millis(1000);
        let later = cache.page(&a, "p".into(), read("a3")).await.unwrap();
        assert_eq!(later.items, vec![item("a3")]);
        cache.page(&b, "p".into(), read("b2")).await.unwrap();
        // AND a's write drops a's pages only
        cache.forget(&a);
        assert_eq!(
            cache.page(&a, "p".into(), read("a4")).await.unwrap().items,
            vec![item("a4")]
        );
        assert_eq!(
            cache.page(&b, "p".into(), read("b3")).await.unwrap().items,
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
            .page(&a, "p".into(), || async {
                Err(StoreError::Unavailable("down".into()))
            })
            .await;
        assert!(failed.is_err());
        // WHEN 20 requests ask for the page at once
        let pages = futures::future::join_all((0..20).map(|_| {
            cache.page(&a, "p".into(), || async {
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
                .page(&tenant, "p".into(), || async move {
                    Ok((vec![item(&big)], None))
                })
                .await
                .unwrap();
        }
        assert!(cache.held_bytes() <= MAX_BYTES + 512 * 1024 + 64);
    }
}
