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
//!   was under way survives it). The runtime's metering writes (usage counters, quota windows),
//!   which no list reads, do not.
//! - **Isolation:** a page is keyed by its tenant and filled only by that tenant's own scoped read
//!   (its credentials and key guard); nothing is shared across tenants, and a page outlives neither
//!   the bound nor a refusal of its tenant (the bound is far below an offboarding's deletion delay,
//!   so an id re-onboarded later never sees them).
//! - **Bounded:** at most [`MAX_PAGES`] pages and about [`MAX_BYTES`] of them a container (their
//!   stored size, which undercounts their size in memory by a small factor), the older half dropped
//!   when full; keys are SHA-256 digests, and a failed read keeps nothing.
//! - Ordered, eventually consistent pages only: a re-sharding's consistent reads and
//!   whole-collection walks (`?order=unordered`) never go through it. (A walk continued in id order
//!   after a re-sharding is served as ordered pages, and goes through it like any.) A cursor is
//!   checked against this container's signing keys before a cached page answers it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::operation::{
    batch_write_item::BatchWriteItemInput, delete_item::DeleteItemInput, put_item::PutItemInput,
    transact_write_items::TransactWriteItemsInput, update_item::UpdateItemInput,
};
use aws_smithy_runtime_api::client::interceptors::context::Input;

use sha2::Digest;

use crate::identity::clock::Clock;
use crate::identity::ids::TenantId;
use crate::identity::keys::{is_metering_pk, PK};
use crate::store::client::error::StoreError;
use crate::store::client::hooks::{Bag, FinalizerRef, HookResult, InputRef, Intercept, Parts};
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

/// A page's key: the SHA-256 of everything that makes the page, so a long listing or cursor costs
/// no more to hold than a short one ([`page_key`]).
pub type PageKey = [u8; 32];

/// The key of the page `parts` describe, hashed as it is formatted (an orders listing names up to
/// 2,400 partitions: its text is never built).
pub fn page_key(parts: std::fmt::Arguments<'_>) -> PageKey {
    struct Hashing(sha2::Sha256);
    impl std::fmt::Write for Hashing {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.update(s.as_bytes());
            Ok(())
        }
    }
    let mut hashing = Hashing(sha2::Sha256::new());
    let _ = std::fmt::Write::write_fmt(&mut hashing, parts);
    hashing.0.finalize().into()
}

/// Per tenant, its pages by key.
type Pages = HashMap<TenantId, HashMap<PageKey, Arc<Slot>>>;

/// The most pages (read, or being read) one container holds.
pub const MAX_PAGES: usize = 4096;

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
        key: PageKey,
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
                    let held = pages.values().map(HashMap::len).sum::<usize>();
                    if held >= MAX_PAGES || self.held.load(Ordering::Relaxed) > MAX_BYTES {
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
                    + next_cursor.as_ref().map_or(0, String::len)
                    + std::mem::size_of::<Slot>();
                self.held.fetch_add(bytes, Ordering::Relaxed);
                Ok::<_, StoreError>(Arc::new(CachedPage {
                    items,
                    next_cursor,
                    bytes,
                    held: self.held.clone(),
                }))
            })
            .await;
        let page = match page {
            Ok(page) => page,
            Err(e) => {
                // Nothing is kept of a failed read (a bad cursor, a throttle): its slot goes, unless
                // another request has filled it meanwhile.
                let mut pages = self.lock();
                if let Some(tenant_pages) = pages.get_mut(tenant) {
                    let failed = tenant_pages
                        .get(&key)
                        .is_some_and(|s| Arc::ptr_eq(s, &slot) && s.page.get().is_none());
                    if failed {
                        tenant_pages.remove(&key);
                    }
                }
                return Err(e);
            }
        };
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

    /// Drops `tenant`'s pages and counters (it is refused: a later tenant of its id starts afresh).
    pub fn forget_tenant(&self, tenant: &TenantId) {
        self.forget(tenant);
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        stats.remove(tenant);
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

    fn read_before_serialization(&self, ctx: InputRef, _: &Parts, cfg: &mut Bag) -> HookResult {
        if changes_listed_items(&self.tenant, ctx.input()) {
            self.pages.forget(&self.tenant);
            cfg.interceptor_state().store_put(IsWrite);
        }
        Ok(())
    }

    fn read_after_execution(&self, _: FinalizerRef, _: &Parts, cfg: &mut Bag) -> HookResult {
        if cfg.load::<IsWrite>().is_some() {
            self.pages.forget(&self.tenant);
        }
        Ok(())
    }
}

/// Whether `input` writes anything a list could show: any write but one that only touches the
/// tenant's metering partitions (usage counters and quota windows, written by the runtime around
/// nearly every request, which no list reads).
fn changes_listed_items(tenant: &TenantId, input: &Input) -> bool {
    let pk = |item: &Item| {
        item.get(PK)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    let partitions: Vec<String> = if let Some(i) = input.downcast_ref::<PutItemInput>() {
        i.item.iter().map(pk).collect()
    } else if let Some(i) = input.downcast_ref::<UpdateItemInput>() {
        i.key.iter().map(pk).collect()
    } else if let Some(i) = input.downcast_ref::<DeleteItemInput>() {
        i.key.iter().map(pk).collect()
    } else if let Some(i) = input.downcast_ref::<TransactWriteItemsInput>() {
        i.transact_items
            .iter()
            .flatten()
            .filter_map(|a| {
                (a.put.as_ref().map(|p| pk(&p.item)))
                    .or(a.update.as_ref().map(|u| pk(&u.key)))
                    .or(a.delete.as_ref().map(|d| pk(&d.key)))
            })
            .collect()
    } else if let Some(i) = input.downcast_ref::<BatchWriteItemInput>() {
        i.request_items
            .iter()
            .flat_map(|m| m.values().flatten())
            .filter_map(|r| {
                (r.put_request.as_ref().map(|p| pk(&p.item)))
                    .or(r.delete_request.as_ref().map(|d| pk(&d.key)))
            })
            .collect()
    } else {
        return false;
    };
    partitions.is_empty() || !partitions.iter().all(|p| is_metering_pk(tenant, p))
}

#[cfg(test)]
mod tests;
