//! The making and unmaking of tenants' keys: a tenant's first key (onboarding), a new version (a
//! rotation), and their shredding (offboarding); each leaves the cache as the key table now is.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{refused, KeyVersions, TenantKeys, ROTATION_MARGIN_MS};
use crate::identity::clock::{millis_of_rfc3339, rfc3339};
use crate::identity::ids::TenantId;
use crate::isolation::vault::TenantKey;
use crate::store::client::error::StoreError;
use crate::store::keys::table::{KeyRow, Shredded};

/// How long an onboarding may still be under way after it made a key: the longest a function runs,
/// and a margin for two containers' clocks.
const ONBOARDING_IN_FLIGHT_MS: u64 =
    (crate::store::tenancy::tenants::LONGEST_FUNCTION_TIMEOUT_SECONDS + 2) * 1000;

/// Whether `row` may be another onboarding's, still under way at `now`: made for a record dated
/// within [`ONBOARDING_IN_FLIGHT_MS`].
fn made_within_an_onboarding(row: &KeyRow, now: u64) -> bool {
    millis_of_rfc3339(&row.created_at)
        .is_some_and(|made| now < made.saturating_add(ONBOARDING_IN_FLIGHT_MS))
}

/// Retryable, never a final refusal: the other onboarding may have died (a control-plane
/// delivery taking over from it meets its key row), and asked again after its run the row is
/// shredded as an earlier tenant's.
fn another_onboarding(tenant: &TenantId) -> StoreError {
    StoreError::Unavailable(format!(
        "another onboarding of {tenant} is under way; retry in a minute"
    ))
}

impl TenantKeys {
    /// Makes `tenant`'s key (version 1) under `kms_key` (a BYOK tenant's own key) or the platform's,
    /// unless it has one already: then that one. Onboarding calls it, with the `createdAt` of the
    /// record it writes (`incarnation`); a retry changes nothing.
    pub async fn create(
        &self,
        tenant: &TenantId,
        kms_key: Option<&str>,
        incarnation: &str,
    ) -> Result<Arc<TenantKey>, StoreError> {
        // Rows of an earlier tenant of this id (a rotation that landed after its offboarding's
        // shredding) are never this tenant's key: they are shredded first. Rows of another
        // incarnation made within an onboarding's longest run are another onboarding of the id
        // under way, whose record may be written next: never shredded, and this one is to be
        // asked again (503) once that one has written its record or died.
        let rows = self.table.rows(tenant).await?;
        let stale: Vec<&KeyRow> = rows
            .iter()
            .filter(|r| r.created_at != incarnation)
            .collect();
        let now = self.clock.now_millis();
        if stale.iter().any(|r| made_within_an_onboarding(r, now)) {
            return Err(another_onboarding(tenant));
        }
        for row in &stale {
            self.table.delete(tenant, row.version).await?;
        }
        if !stale.is_empty() {
            self.forget(tenant);
        }
        // This incarnation's key when a retry made it; an entry cached for an earlier one is not
        // (another container may have shredded that one, leaving this cache as it was).
        if let Some(key) = self.current(tenant, Some(incarnation)).await? {
            return Ok(key);
        }
        let version = 1;
        let kms_key = kms_key.unwrap_or(&self.kms_key_id);
        // Its row is dated with the record's `createdAt`: the incarnation it belongs to.
        let (row, plaintext) = self.generate(tenant, kms_key, version, incarnation).await?;
        if !self.table.insert(tenant, &row).await? {
            // Another container made it first: that one is the key, when it made it for the same
            // record (a retry); for another, that onboarding is under way.
            self.forget(tenant);
            let rows = self.table.rows(tenant).await?;
            if rows.iter().any(|r| r.created_at != incarnation) {
                return Err(another_onboarding(tenant));
            }
            return self
                .current(tenant, Some(incarnation))
                .await?
                .ok_or_else(|| {
                    StoreError::Internal(format!("the key of {tenant} was made and is gone"))
                });
        }
        let key = Arc::new(
            TenantKey::new(tenant.clone(), version, plaintext, row.kms_key).map_err(refused)?,
        );
        self.remember(tenant, Some(key.clone()), Some(incarnation), now);
        Ok(key)
    }

    /// Whether KMS makes a data key for `tenant` under `kms_key` (a BYOK tenant's own key): one
    /// GenerateDataKey, its key dropped. An onboarding into an own table asks before it makes the
    /// table, so a key KMS refuses is answered before anything is made.
    pub async fn check_kms_key(&self, tenant: &TenantId, kms_key: &str) -> Result<(), StoreError> {
        self.vault_calls.fetch_add(1, Ordering::Relaxed);
        self.vault
            .generate(kms_key, tenant, 1)
            .await
            .map_err(refused)?;
        Ok(())
    }

    /// A new data key of `tenant` at `version` under `kms_key`: its row (for `incarnation`, sealing
    /// at once until its caller dates it) and its plaintext.
    async fn generate(
        &self,
        tenant: &TenantId,
        kms_key: &str,
        version: u32,
        incarnation: &str,
    ) -> Result<(KeyRow, Vec<u8>), StoreError> {
        self.vault_calls.fetch_add(1, Ordering::Relaxed);
        let made = self
            .vault
            .generate(kms_key, tenant, version)
            .await
            .map_err(refused)?;
        let row = KeyRow {
            version,
            wrapped: made.wrapped,
            kms_key: made.kms_key,
            created_at: incarnation.to_owned(),
            seals_from_ms: 0,
        };
        Ok((row, made.plaintext))
    }

    /// Makes the next version of `tenant`'s key, under the KMS key that wraps its newest: every
    /// container meets it within a period (it opens what the new version seals), and it seals from
    /// `sealsFrom`, a period and [`ROTATION_MARGIN_MS`] after the key was made. Nothing sealed is rewritten: each
    /// version opens what it sealed until the tenant is offboarded. A rotation asked while the
    /// previous one has not started sealing answers that one (a retry makes no second version).
    /// `None` when the tenant has no key.
    pub async fn rotate(&self, tenant: &TenantId) -> Result<Option<KeyVersions>, StoreError> {
        let rows = self.table.rows(tenant).await?;
        let Some(newest) = rows.last() else {
            return Ok(None);
        };
        // The key must still serve: a revoked tenant's key is not rotated, and a retried rotation
        // is refused alike.
        self.unwrap(tenant, newest).await?;
        let now = self.clock.now_millis();
        if newest.seals_from_ms > now {
            return Ok(Some(KeyVersions::of(&rows)));
        }
        let (mut row, _) = self
            .generate(
                tenant,
                &newest.kms_key,
                newest.version + 1,
                &newest.created_at,
            )
            .await?;
        // Dated from the key's making, not the call's start: a GenerateDataKey KMS throttled
        // through the SDK's retries would eat the margin every container needs to meet the row.
        row.seals_from_ms = self.clock.now_millis() + self.cache_ms + ROTATION_MARGIN_MS;
        // Another container's rotation raced this one's: theirs is the version (either is).
        self.table.insert(tenant, &row).await?;
        self.forget(tenant);
        let rows = self.table.rows(tenant).await?;
        Ok(Some(KeyVersions::of(&rows)))
    }

    /// `tenant`'s key versions as the key table holds them; `None` when it has none.
    pub async fn versions(&self, tenant: &TenantId) -> Result<Option<KeyVersions>, StoreError> {
        let rows = self.table.rows(tenant).await?;
        Ok((!rows.is_empty()).then(|| KeyVersions::of(&rows)))
    }

    /// What [`shred`](Self::shred) would destroy of `tenant`'s keys of `incarnation` (its record's
    /// `createdAt`), dated now: the offboarding report names it before the keys go, so a run cut
    /// off after shredding still has it on record. `None` when it has none (never keyed, or
    /// shredded already).
    pub async fn to_shred(
        &self,
        tenant: &TenantId,
        incarnation: &str,
    ) -> Result<Option<Shredded>, StoreError> {
        let rows = self.rows_up_to(tenant, incarnation).await?;
        Ok(rows.first().map(|first| Shredded {
            kms_key_id: first.kms_key.clone(),
            versions: rows.iter().map(|r| r.version).collect(),
            destroyed_at: rfc3339(self.clock.now_millis()),
        }))
    }

    /// Deletes every wrapped key of `tenant` of `incarnation` (and of earlier ones: a rotation that
    /// landed after their shredding): what they sealed, in the live table or in any copy of it,
    /// opens with no key the platform holds. A later incarnation's rows (the id onboarded again
    /// while a stale call of this offboarding ran) are never touched. Repeatable: none left is
    /// done.
    pub async fn shred(&self, tenant: &TenantId, incarnation: &str) -> Result<(), StoreError> {
        for row in self.rows_up_to(tenant, incarnation).await? {
            self.table.delete(tenant, row.version).await?;
        }
        self.forget(tenant);
        Ok(())
    }

    /// `tenant`'s key rows made for `incarnation` or an earlier record of the id.
    async fn rows_up_to(
        &self,
        tenant: &TenantId,
        incarnation: &str,
    ) -> Result<Vec<KeyRow>, StoreError> {
        let until = millis_of_rfc3339(incarnation).unwrap_or(u64::MAX);
        let rows = self.table.rows(tenant).await?;
        Ok(rows
            .into_iter()
            .filter(|r| {
                r.created_at == incarnation
                    || millis_of_rfc3339(&r.created_at).is_some_and(|made| made <= until)
            })
            .collect())
    }
}
