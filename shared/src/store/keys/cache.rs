//! Each tenant's data key, unwrapped once per tenant per container per period and kept in a bounded
//! cache, like the STS credentials: a request pays no KMS call, and a revoked key stops serving
//! within one period (`KEY_CACHE_SECONDS`, 300 by default).

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lru::LruCache;

mod making;
mod memo;

use memo::Memo;

use super::table::{KeyRow, KeyTable};
use crate::identity::clock::{rfc3339, Clock};
use crate::identity::ids::TenantId;
use crate::isolation::vault::{KeyVault, TenantKey, VaultError};
use crate::store::client::error::StoreError;

/// How long an unwrapped key serves before KMS is asked again.
pub const DEFAULT_KEY_CACHE_SECONDS: u64 = 300;

/// How long a container answers a refused key's tenant without asking KMS again: a revoked
/// tenant's requests cost KMS one call per container per this, not two per request, and a key
/// enabled again serves within it. The same for KMS or the key table out of reach: a tenant's
/// requests then fall back on its recent key (or answer 503) at once, and cost one attempt per
/// container per this, not three per request (each up to the SDK's retries and timeouts).
pub const REFUSAL_MEMO_MS: u64 = 5_000;

/// How long after every container has met a rotated key's new version (one cache period) it starts
/// sealing: a request admitted on an older view (its keys fixed for the request) ends within the
/// longest a function runs, and the clocks of two containers may differ by 5 s.
pub const ROTATION_MARGIN_MS: u64 =
    (crate::store::tenancy::tenants::LONGEST_FUNCTION_TIMEOUT_SECONDS + 5) * 1000;

/// A tenant's key versions, as an operator sees them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyVersions {
    /// The KMS key that wraps the newest.
    pub kms_key_id: String,
    /// Every version, oldest first: each opens what it sealed.
    pub versions: Vec<u32>,
    /// The newest, and from when it seals.
    pub newest: u32,
    pub newest_seals_from: String,
}

impl KeyVersions {
    fn of(rows: &[KeyRow]) -> Self {
        let newest = rows.last();
        Self {
            kms_key_id: newest.map(|r| r.kms_key.clone()).unwrap_or_default(),
            versions: rows.iter().map(|r| r.version).collect(),
            newest: newest.map_or(0, |r| r.version),
            newest_seals_from: rfc3339(newest.map_or(0, |r| r.seals_from_ms)),
        }
    }
}

/// The most tenants whose keys one container keeps.
const CACHED_TENANTS: usize = 10_000;

/// Where keys are: read once in `main`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySettings {
    /// The key table (`TENANT_KEYS_TABLE`).
    pub table: String,
    /// The platform's KMS key (`TENANT_KEY_ID`), which wraps every tenant's key but a BYOK tenant's.
    pub kms_key_id: String,
    /// `KEY_CACHE_SECONDS`.
    pub cache_seconds: u64,
}

#[derive(Clone)]
struct Cached {
    key: Option<Arc<TenantKey>>,
    fetched_ms: u64,
    /// The tenant record's `createdAt` it was fetched for, when known: an id offboarded and
    /// onboarded again has another, and a new key.
    incarnation: Option<String>,
    /// A request met an item this key cannot open (a newer version): fetched again at the next
    /// request, but still the recent key while KMS is out of reach.
    stale: bool,
}

impl Cached {
    fn fresh(&self, now: u64, period_ms: u64) -> bool {
        !self.stale && now < self.fetched_ms + period_ms
    }
}

/// Every tenant's key as this container knows it.
pub struct TenantKeys {
    table: KeyTable,
    vault: Arc<dyn KeyVault>,
    kms_key_id: String,
    cache_ms: u64,
    clock: Arc<dyn Clock>,
    cache: Mutex<LruCache<TenantId, Cached>>,
    /// Tenants whose key KMS refused: until when, and KMS's code.
    refusals: Memo,
    /// Tenants whose key could not be fetched (KMS or the key table out of reach): until when,
    /// and why.
    outages: Memo,
    vault_calls: AtomicU64,
}

fn refused(error: VaultError) -> StoreError {
    match error {
        VaultError::Refused(code) => StoreError::KeyRefused(code),
        VaultError::Unavailable(detail) => StoreError::Unavailable(detail),
        VaultError::Malformed(detail) => StoreError::Internal(detail),
    }
}

impl TenantKeys {
    pub fn new(
        settings: &KeySettings,
        client: aws_sdk_dynamodb::Client,
        vault: Arc<dyn KeyVault>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let bound = NonZeroUsize::new(CACHED_TENANTS).unwrap_or(NonZeroUsize::MIN);
        Self {
            table: KeyTable {
                client,
                name: settings.table.clone(),
            },
            vault,
            kms_key_id: settings.kms_key_id.clone(),
            cache_ms: settings.cache_seconds.saturating_mul(1000),
            clock,
            cache: Mutex::new(LruCache::new(bound)),
            refusals: Memo::new(bound),
            outages: Memo::new(bound),
            vault_calls: AtomicU64::new(0),
        }
    }

    /// The KMS calls this container made (GenerateDataKey and Decrypt).
    pub fn vault_calls(&self) -> u64 {
        self.vault_calls.load(Ordering::Relaxed)
    }

    /// How long a container serves a key it fetched (`KEY_CACHE_SECONDS`): how long a cached
    /// absence of a key may outlive the key's making.
    pub fn cache_seconds(&self) -> u64 {
        self.cache_ms / 1000
    }

    /// The key table's name.
    pub fn table_name(&self) -> &str {
        &self.table.name
    }

    fn cached(&self, tenant: &TenantId) -> Option<Cached> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.get(tenant).cloned()
    }

    /// Caches `tenant`'s `key`, read from the key table by a read sent at `asked_ms`: its period
    /// counts from the asking, so a view of "no key" never outlives the key's making by more than
    /// the period (the record cache counts likewise).
    fn remember(
        &self,
        tenant: &TenantId,
        key: Option<Arc<TenantKey>>,
        incarnation: Option<&str>,
        asked_ms: u64,
    ) {
        let cached = Cached {
            key,
            fetched_ms: asked_ms,
            incarnation: incarnation.map(str::to_owned),
            stale: false,
        };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.put(tenant.clone(), cached);
        drop(cache);
        self.outages.clear(tenant);
    }

    /// Marks this container's view of `tenant`'s key stale when a request met an item sealed under
    /// a key (or a version) that view does not hold, so the next request of the tenant fetches it,
    /// rather than answering 503 until the view expires; while KMS is out of reach, the view still
    /// serves as the recent key. A view fetched within [`REFUSAL_MEMO_MS`] is kept: it is the key
    /// table's newest already, so an item it cannot open costs no KMS call per request.
    pub fn forget_unless_fresh(&self, tenant: &TenantId) {
        let now = self.clock.now_millis();
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cached) = cache
            .peek_mut(tenant)
            .filter(|c| now >= c.fetched_ms + REFUSAL_MEMO_MS)
        {
            cached.stale = true;
        }
    }

    /// Drops what this container knows of `tenant`'s key.
    pub fn forget(&self, tenant: &TenantId) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.pop(tenant);
        drop(cache);
        self.refusals.clear(tenant);
        self.outages.clear(tenant);
    }

    /// KMS's code, while `tenant`'s key refusal is remembered ([`REFUSAL_MEMO_MS`]).
    fn refused_recently(&self, tenant: &TenantId, now: u64) -> Option<String> {
        self.refusals.standing(tenant, now)
    }

    fn remember_refusal(&self, tenant: &TenantId, code: &str) {
        let until = self.clock.now_millis() + REFUSAL_MEMO_MS;
        self.refusals.note(tenant, until, code);
    }

    /// `tenant`'s key rows and its key from them (see [`Self::ring`]), and the incarnation the rows
    /// name. Out of reach (KMS or the key table unavailable, or throttled: both
    /// [`StoreError::Unavailable`]), noted for [`REFUSAL_MEMO_MS`].
    async fn fetch(
        &self,
        tenant: &TenantId,
    ) -> Result<(Option<String>, Option<TenantKey>), StoreError> {
        let fetched = async {
            let rows = self.table.rows(tenant).await?;
            let key = self.ring(tenant, &rows).await?;
            Ok((rows.last().map(|row| row.created_at.clone()), key))
        }
        .await
        .map_err(|e| match e {
            throttled @ StoreError::Throttled { .. } => {
                StoreError::Unavailable(throttled.to_string())
            }
            e => e,
        });
        if let Err(StoreError::Unavailable(detail)) = &fetched {
            let until = self.clock.now_millis() + REFUSAL_MEMO_MS;
            self.outages.note(tenant, until, detail);
        }
        fetched
    }

    async fn unwrap(&self, tenant: &TenantId, row: &KeyRow) -> Result<TenantKey, StoreError> {
        self.vault_calls.fetch_add(1, Ordering::Relaxed);
        let bytes = self
            .vault
            .unwrap(&row.kms_key, &row.wrapped, tenant, row.version)
            .await
            .map_err(refused)?;
        TenantKey::new(tenant.clone(), row.version, bytes, row.kms_key.clone()).map_err(refused)
    }

    /// `tenant`'s key from its `rows` (oldest first): every version unwrapped side by side, sealing
    /// with the newest whose `sealsFrom` has come. `None` when it has no row.
    async fn ring(
        &self,
        tenant: &TenantId,
        rows: &[KeyRow],
    ) -> Result<Option<TenantKey>, StoreError> {
        let now = self.clock.now_millis();
        let Some(sealing) = rows
            .iter()
            .rposition(|row| row.seals_from_ms <= now)
            .or_else(|| rows.len().checked_sub(1))
        else {
            return Ok(None);
        };
        // Side by side; a refusal of any version is the answer (the key is revoked), whatever
        // failed first: as the first failure, a throttle of one version beside another's refusal
        // read as an outage, and the recent key served on for two periods after its revocation.
        let unwraps = rows.iter().map(|row| self.unwrap(tenant, row));
        let mut unwrapped = Vec::with_capacity(rows.len());
        let mut failure = None;
        for result in futures::future::join_all(unwraps).await {
            match result {
                Ok(key) => unwrapped.push(key),
                Err(refusal @ StoreError::KeyRefused(_)) => return Err(refusal),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        let current = unwrapped.remove(sealing);
        Ok(Some(current.knowing(unwrapped)))
    }

    /// `tenant`'s current key, or `None` when it has none (its items are plain). From the cache
    /// while it is fresh; else the key table and KMS. A key KMS refuses (disabled, grant revoked,
    /// pending deletion) is [`StoreError::KeyRefused`] and leaves the cache; when KMS or the key
    /// table is out of reach a key fetched within two periods keeps serving, and for
    /// [`REFUSAL_MEMO_MS`] it serves (or the request answers 503) without another attempt.
    ///
    /// With `incarnation` (the tenant record's `createdAt`), a key cached for another incarnation of
    /// the id (offboarded, its key shredded, and onboarded again) is fetched again.
    pub async fn current(
        &self,
        tenant: &TenantId,
        incarnation: Option<&str>,
    ) -> Result<Option<Arc<TenantKey>>, StoreError> {
        let now = self.clock.now_millis();
        if let Some(code) = self.refused_recently(tenant, now) {
            return Err(StoreError::KeyRefused(code));
        }
        // Only an entry of the same incarnation stands for this key: another's was shredded.
        let cached = self
            .cached(tenant)
            .filter(|c| incarnation.is_none_or(|i| c.incarnation.as_deref() == Some(i)));
        if let Some(hit) = cached.as_ref().filter(|c| c.fresh(now, self.cache_ms)) {
            return Ok(hit.key.clone());
        }
        let recent = |detail: String| match &cached {
            Some(Cached {
                key: Some(key),
                fetched_ms,
                ..
            }) if now < fetched_ms + 2 * self.cache_ms => Ok(Some(key.clone())),
            _ => Err(StoreError::Unavailable(detail)),
        };
        if let Some(detail) = self.outages.standing(tenant, now) {
            return recent(detail);
        }
        match self.fetch(tenant).await {
            Ok((_, None)) => {
                self.remember(tenant, None, incarnation, now);
                Ok(None)
            }
            // Bound to the incarnation its rows name (as `warm` binds it), whatever was asked: an
            // entry of this key is then never taken for another's.
            Ok((rows_incarnation, Some(key))) => {
                let key = Arc::new(key);
                let bound = rows_incarnation.as_deref().or(incarnation);
                self.remember(tenant, Some(key.clone()), bound, now);
                Ok(Some(key))
            }
            Err(StoreError::Unavailable(detail)) => recent(detail),
            // A refused key leaves the cache (never the recent key of a revoked tenant); any other
            // failure leaves the entry, still the recent key should KMS be out next.
            Err(StoreError::KeyRefused(code)) => {
                self.forget(tenant);
                self.remember_refusal(tenant, &code);
                Err(StoreError::KeyRefused(code))
            }
            Err(e) => Err(e),
        }
    }

    /// Fetches `tenant`'s key into the cache unless a fresh entry is there, without knowing its
    /// record yet: what `App::db` runs beside the record's read, so a cold tenant's key costs no
    /// round trip of its own. The entry is bound to the incarnation its key row names (the record's
    /// `createdAt` the key was made with), so [`Self::current`] with the record's then hits it; an
    /// error is left for [`Self::current`] to meet (an outage noted, so it meets the note).
    pub async fn warm(&self, tenant: &TenantId) {
        let now = self.clock.now_millis();
        let fresh = self
            .cached(tenant)
            .is_some_and(|c| c.fresh(now, self.cache_ms));
        if fresh
            || self.refused_recently(tenant, now).is_some()
            || self.outages.standing(tenant, now).is_some()
        {
            return;
        }
        if let Ok((incarnation, key)) = self.fetch(tenant).await {
            self.remember(tenant, key.map(Arc::new), incarnation.as_deref(), now);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::future::BoxFuture;

    use super::*;
    use crate::identity::clock::SystemClock;
    use crate::isolation::vault::NewDataKey;

    /// KMS as a revocation meets it mid-throttle: version 1's Decrypt is throttled at once, version
    /// 2's refused a moment later.
    struct RevokedWhileThrottled;

    impl KeyVault for RevokedWhileThrottled {
        fn generate<'a>(
            &'a self,
            _: &'a str,
            _: &'a TenantId,
            _: u32,
        ) -> BoxFuture<'a, Result<NewDataKey, VaultError>> {
            Box::pin(async { Err(VaultError::Unavailable("not asked".into())) })
        }

        fn unwrap<'a>(
            &'a self,
            _: &'a str,
            _: &'a [u8],
            _: &'a TenantId,
            version: u32,
        ) -> BoxFuture<'a, Result<Vec<u8>, VaultError>> {
            Box::pin(async move {
                if version == 1 {
                    return Err(VaultError::Unavailable("ThrottlingException".into()));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                Err(VaultError::Refused("DisabledException".into()))
            })
        }
    }

    #[tokio::test]
    async fn a_versions_refusal_beside_anothers_throttle_is_a_refusal_not_an_outage() {
        // GIVEN a key cache over a vault that throttles version 1 and refuses version 2 after it
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .build();
        let settings = KeySettings {
            table: "never-read".into(),
            kms_key_id: "platform".into(),
            cache_seconds: 60,
        };
        let keys = TenantKeys::new(
            &settings,
            aws_sdk_dynamodb::Client::from_conf(config),
            Arc::new(RevokedWhileThrottled),
            Arc::new(SystemClock),
        );
        let row = |version| KeyRow {
            version,
            wrapped: vec![0; 8],
            kms_key: "arn:aws:kms:us-east-1:123456789012:key/own".into(),
            created_at: "2026-12-04T00:00:00Z".into(),
            seals_from_ms: 0,
        };
        // WHEN its two versions are unwrapped
        let tenant = TenantId::parse("acme").unwrap();
        let ring = keys.ring(&tenant, &[row(1), row(2)]).await;
        // THEN the answer is the refusal: the recent key is never served for an outage
        assert!(
            matches!(&ring, Err(StoreError::KeyRefused(code)) if code == "DisabledException"),
            "{:?}",
            ring.map(|_| ())
        );
    }
}
