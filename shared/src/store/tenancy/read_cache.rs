//! An opt-in read cache per container for single-item reads of the write-sharded kinds (a product,
//! an employee, a department by id): what figure 8 of the benchmark measured as the winner over a
//! shared Redis and over no cache (README, "Read caching").
//!
//! Off unless `READ_CACHE_MS` (the staleness bound, 1 to 10,000 ms) is set: a cached read gives up
//! read-after-write consistency for up to that long. Every route is its own function, so a write is
//! made in another container than the reads: it shows within the bound, not at once. (Where one
//! container serves both, as in the tests, its writes drop their entries.) The bound stays well
//! under the 30 s between an offboarding's refusal and its first deletion
//! (`store::lifecycle::offboarding::DELETION_DELAY_SECONDS` minus the record cache), so an entry read just
//! before a tenant was refused has expired before anything of it is deleted, and cannot outlive it
//! into a re-onboarded tenant of the same id. Entries are keyed by
//! tenant and sort key (a sort key is the same in every shard layout, so a re-sharding does not
//! disturb them), and hold only what the tenant's own scoped read returned: a hit can only give a
//! tenant an item it read itself. Absent items are not cached.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::identity::cursor::Key;
use crate::identity::ids::TenantId;
use crate::identity::keys::SK;
use crate::store::client::query::Item;
use crate::store::client::size::approximate_bytes;

/// Entries one container keeps, least recently used first out.
pub const CAPACITY: usize = 1024;
/// What the entries may hold, about ([`approximate_bytes`] of each item, which undercounts the
/// in-memory form by a small factor): a tenant of large documents cannot fill a shared 128 MB
/// container.
pub const MAX_BYTES: usize = 8 * 1024 * 1024;
/// Items larger than this are not cached.
pub const MAX_ITEM_BYTES: usize = 64 * 1024;
/// The longest staleness bound `READ_CACHE_MS` may set.
pub const MAX_STALENESS_MS: u64 = 10_000;

/// The entries (read at, item, its size), and their total size.
struct Entries {
    lru: lru::LruCache<(TenantId, String), (u64, Item, usize)>,
    bytes: usize,
}

pub struct ReadCache {
    /// 0: off.
    staleness_ms: AtomicU64,
    /// Made by the first `put`: a function that never caches (most of them) links no LRU code.
    entries: Mutex<Option<Entries>>,
}

impl ReadCache {
    /// A cache trusting entries for `staleness_ms` (0: off).
    pub fn new(staleness_ms: u64) -> Self {
        Self {
            staleness_ms: AtomicU64::new(staleness_ms.min(MAX_STALENESS_MS)),
            entries: Mutex::new(None),
        }
    }

    /// Turns the cache on (or off, with 0) with a new bound; drops every entry.
    pub fn set_staleness_ms(&self, staleness_ms: u64) {
        self.staleness_ms
            .store(staleness_ms.min(MAX_STALENESS_MS), Ordering::Relaxed);
        *self.lock() = None;
    }

    fn staleness_ms(&self) -> u64 {
        self.staleness_ms.load(Ordering::Relaxed)
    }

    /// The item at `key` of `tenant`, read at most the staleness bound before `now_ms`.
    pub fn get(&self, tenant: &TenantId, key: &Key, now_ms: u64) -> Option<Item> {
        let bound = self.staleness_ms();
        if bound == 0 {
            return None;
        }
        let sk = sort_key(key)?;
        let mut guard = self.lock();
        let entries = guard.as_mut()?;
        let id = (tenant.clone(), sk);
        match entries.lru.get(&id) {
            Some((at, item, _)) if now_ms.saturating_sub(*at) < bound => Some(item.clone()),
            Some(_) => {
                entries.remove(&id);
                None
            }
            None => None,
        }
    }

    /// Remembers `item`, read for `tenant` at `key` at `now_ms`.
    pub fn put(&self, tenant: &TenantId, key: &Key, item: &Item, now_ms: u64) {
        if self.staleness_ms() == 0 {
            return;
        }
        let size = approximate_bytes(item);
        let Some(sk) = sort_key(key).filter(|_| size <= MAX_ITEM_BYTES) else {
            return;
        };
        let mut guard = self.lock();
        let entries = guard.get_or_insert_with(|| Entries {
            lru: lru::LruCache::new(NonZeroUsize::new(CAPACITY).unwrap_or(NonZeroUsize::MIN)),
            bytes: 0,
        });
        if let Some((_, (_, _, old))) = entries
            .lru
            .push((tenant.clone(), sk), (now_ms, item.clone(), size))
        {
            entries.bytes -= old;
        }
        entries.bytes += size;
        while entries.bytes > MAX_BYTES {
            match entries.lru.pop_lru() {
                Some((_, (_, _, evicted))) => entries.bytes -= evicted,
                None => break,
            }
        }
    }

    /// Drops the entry of the item at `key` (this container wrote or deleted it).
    pub fn forget(&self, tenant: &TenantId, key: &Key) {
        if self.staleness_ms() == 0 {
            return;
        }
        if let Some(sk) = sort_key(key) {
            if let Some(entries) = self.lock().as_mut() {
                entries.remove(&(tenant.clone(), sk));
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Entries>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Entries {
    fn remove(&mut self, id: &(TenantId, String)) {
        if let Some((_, _, size)) = self.lru.pop(id) {
            self.bytes -= size;
        }
    }
}

fn sort_key(key: &Key) -> Option<String> {
    key.get(SK).and_then(|v| v.as_s().ok()).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::entities::PRODUCTS;
    use crate::identity::fixtures::tenant;
    use crate::identity::keys::KeySpace;
    use aws_sdk_dynamodb::types::AttributeValue;

    /// A key of partition `PRODUCT#1` of tenant `a`, with sort key `sk`.
    fn key(sk: &str) -> Key {
        let a = tenant("a");
        Key::from([
            ("PK".to_owned(), AttributeValue::S(PRODUCTS.key(&a, 1))),
            (SK.to_owned(), AttributeValue::S(sk.to_owned())),
        ])
    }

    #[test]
    fn entries_live_for_the_bound_per_tenant_and_go_when_written() {
        let (a, b) = (tenant("a"), tenant("b"));
        let item = Item::from([("v".to_owned(), AttributeValue::N("1".into()))]);
        // GIVEN a cache that is off: nothing is kept
        let cache = ReadCache::new(0);
        cache.put(&a, &key("x"), &item, 0);
        assert_eq!(cache.get(&a, &key("x"), 0), None);
        // WHEN it is on with a 1 s bound
        cache.set_staleness_ms(1000);
        cache.put(&a, &key("x"), &item, 10_000);
        // THEN the entry serves its tenant within the bound only
        assert_eq!(cache.get(&a, &key("x"), 10_999), Some(item.clone()));
        assert_eq!(cache.get(&b, &key("x"), 10_500), None);
        assert_eq!(cache.get(&a, &key("x"), 11_000), None);
        // AND a write of this container drops it at once
        cache.put(&a, &key("y"), &item, 20_000);
        cache.forget(&a, &key("y"));
        assert_eq!(cache.get(&a, &key("y"), 20_001), None);
    }

    #[test]
    fn large_items_are_not_cached_and_the_total_stays_bounded() {
        let a = tenant("a");
        let cache = ReadCache::new(1000);
        let big = Item::from([(
            "doc".to_owned(),
            AttributeValue::S("x".repeat(MAX_ITEM_BYTES + 1)),
        )]);
        cache.put(&a, &key("big"), &big, 0);
        assert_eq!(cache.get(&a, &key("big"), 1), None);
        let item = Item::from([(
            "doc".to_owned(),
            AttributeValue::S("x".repeat(MAX_ITEM_BYTES - 64)),
        )]);
        for i in 0..1000 {
            cache.put(&a, &key(&format!("k{i}")), &item, 0);
        }
        let guard = cache.lock();
        let entries = guard.as_ref().unwrap();
        assert!(entries.bytes <= MAX_BYTES, "{}", entries.bytes);
        assert!(entries.lru.len() < 1000);
    }
}
