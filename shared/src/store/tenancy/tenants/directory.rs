//! The per-container directory of tenant records: cached, with absences rechecked.

use super::*;
use crate::identity::clock::Clock;
use crate::identity::ids::TenantId;
use crate::store::client::error::StoreError;
use crate::store::client::scoped::TenantDb;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How long a container trusts a cached absence of a record before [`TenantDirectory::onboarded_record`]
/// reads it again.
pub const ABSENCE_RECHECK_MS: u64 = 1000;

/// A cached record (`None`: not onboarded) and when it was read, in epoch milliseconds.
pub(super) type CachedRecord = (Option<Arc<TenantRecord>>, u64);

/// Tenant records, cached per container for [`RECORD_TTL_SECONDS`] by the injected clock (also the
/// absence of a record, so a tenant that was never onboarded costs one read per period).
///
/// Records are read with the function's own credentials through a client that can read nothing else
/// ([`crate::store::client::scoped::TenantClients::record_reader`]), so learning that a tenant is suspended
/// never vends that tenant's credentials.
pub struct TenantDirectory {
    cache: Mutex<HashMap<TenantId, CachedRecord>>,
    clock: Arc<dyn Clock>,
    reader: aws_sdk_dynamodb::Client,
    table: Arc<str>,
}

impl TenantDirectory {
    pub fn new(clock: Arc<dyn Clock>, reader: aws_sdk_dynamodb::Client, table: &str) -> Self {
        Self {
            cache: Mutex::new(HashMap::new()),
            clock,
            reader,
            table: table.into(),
        }
    }

    /// The tenant's record, `None` when it is not onboarded; read again once the cached one is
    /// [`RECORD_TTL_SECONDS`] old.
    pub async fn record(&self, tenant: &TenantId) -> Result<Option<Arc<TenantRecord>>, StoreError> {
        let now = self.clock.now_millis();
        if let Some((record, at)) = self.lock().get(tenant).cloned() {
            if now.saturating_sub(at) < RECORD_TTL_SECONDS * 1000 {
                return Ok(record);
            }
        }
        // Cached as of the moment before the read was sent: the record may have changed while the
        // read was under way, so its age starts then, not when it answered.
        let record = read_record_with(&self.reader, &self.table, tenant, false)
            .await?
            .map(Arc::new);
        self.lock().insert(tenant.clone(), (record.clone(), now));
        Ok(record)
    }

    /// The tenant's record read now, strongly consistent, past the cache (and cached as of before
    /// the read): for a decision that a stale view would make wrongly and for good, such as dropping
    /// an import message for a tenant of the same id onboarded again a moment ago.
    pub async fn record_now(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<Arc<TenantRecord>>, StoreError> {
        let sent_at = self.clock.now_millis();
        let record = read_record_with(&self.reader, &self.table, tenant, true)
            .await?
            .map(Arc::new);
        self.lock()
            .insert(tenant.clone(), (record.clone(), sent_at));
        Ok(record)
    }

    /// Whether the tenant has a record now (strongly consistent, past the cache, and not cached):
    /// what onboarding asks before it makes a key, so that the absence it reads is never what its
    /// tenant's first request meets once the record is written.
    pub async fn exists_now(&self, tenant: &TenantId) -> Result<bool, StoreError> {
        Ok(read_record_with(&self.reader, &self.table, tenant, true)
            .await?
            .is_some())
    }

    /// Caches a record this container has just written, so its own next request sees it at once.
    pub fn remember(&self, tenant: &TenantId, record: Option<Arc<TenantRecord>>) {
        let now = self.clock.now_millis();
        self.lock().insert(tenant.clone(), (record, now));
    }

    /// The tenant's record, where a cached absence is trusted for [`ABSENCE_RECHECK_MS`] only: a
    /// tenant onboarded a moment ago (by another container) is served within a second rather than
    /// after [`RECORD_TTL_SECONDS`], and a caller naming a tenant without a record costs at most one
    /// GetItem a second per container, however fast it calls (it is refused before the quota).
    pub async fn onboarded_record(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<Arc<TenantRecord>>, StoreError> {
        if let Some(record) = self.record(tenant).await? {
            return Ok(Some(record));
        }
        let checked_at = self.lock().get(tenant).map_or(0, |(_, at)| *at);
        if self.clock.now_millis().saturating_sub(checked_at) < ABSENCE_RECHECK_MS {
            return Ok(None);
        }
        let sent_at = self.clock.now_millis();
        let fresh = read_record_with(&self.reader, &self.table, tenant, false)
            .await?
            .map(Arc::new);
        self.lock().insert(tenant.clone(), (fresh.clone(), sent_at));
        Ok(fresh)
    }

    /// Where the tenant's product and HR items are now; 403 when it has not been onboarded.
    pub async fn layout(&self, db: &TenantDb) -> Result<Layout, StoreError> {
        let record = self.required(db).await?;
        Ok(record.layout(self.clock.now_seconds()))
    }

    /// Where the tenant's sharded items are now, and the layout's generation (re-shardings
    /// finished); 403 when it has not been onboarded.
    pub async fn layout_generation(&self, db: &TenantDb) -> Result<(Layout, u32), StoreError> {
        let record = self.required(db).await?;
        Ok((record.layout(self.clock.now_seconds()), record.reshardings))
    }

    /// The shard count of the tenant's order date index; 403 when it has not been onboarded.
    pub async fn order_shards(&self, db: &TenantDb) -> Result<u32, StoreError> {
        Ok(self.required(db).await?.order_shards())
    }

    async fn required(&self, db: &TenantDb) -> Result<Arc<TenantRecord>, StoreError> {
        self.onboarded_record(&db.tenant)
            .await?
            .ok_or(StoreError::NotOnboarded)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TenantId, CachedRecord>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}
