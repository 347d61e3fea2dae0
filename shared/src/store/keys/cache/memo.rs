//! A bounded note, per tenant, of an answer KMS gave that stands for a while: a refused key, or KMS
//! (or the key table) out of reach.

use std::num::NonZeroUsize;
use std::sync::Mutex;

use lru::LruCache;

use crate::identity::ids::TenantId;

/// Tenants and, for each, until when (epoch ms) its note stands and what it says.
pub(super) struct Memo(Mutex<LruCache<TenantId, (u64, String)>>);

impl Memo {
    pub(super) fn new(bound: NonZeroUsize) -> Self {
        Self(Mutex::new(LruCache::new(bound)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<TenantId, (u64, String)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What `tenant`'s note says, while it stands at `now`.
    pub(super) fn standing(&self, tenant: &TenantId, now: u64) -> Option<String> {
        self.lock()
            .get(tenant)
            .filter(|(until, _)| now < *until)
            .map(|(_, note)| note.clone())
    }

    pub(super) fn note(&self, tenant: &TenantId, until: u64, note: &str) {
        self.lock().put(tenant.clone(), (until, note.to_owned()));
    }

    pub(super) fn clear(&self, tenant: &TenantId) {
        self.lock().pop(tenant);
    }
}
