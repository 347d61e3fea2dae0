//! The tenant keys of an `App` ([`crate::store::keys`]): built once in `main` when
//! `TENANT_KEYS_TABLE` and `TENANT_KEY_ID` are set, and read by every tenant request's client.

use std::sync::Arc;

use aws_config::SdkConfig;

use super::{App, Settings};
use crate::identity::clock::Clock;
use crate::identity::ids::TenantId;
use crate::isolation::vault::{KmsVault, TenantKey};
use crate::service::error::ApiError;
use crate::store::keys::TenantKeys;

/// The tenant keys `settings` ask for, on KMS and the function's own DynamoDB client.
pub(super) fn from_settings(
    settings: &Settings,
    sdk: &SdkConfig,
    clock: Arc<dyn Clock>,
) -> Option<TenantKeys> {
    let keys = settings.tenant_keys.as_ref()?;
    let vault = KmsVault::new(aws_sdk_kms::Client::new(sdk));
    let client = aws_sdk_dynamodb::Client::new(sdk);
    Some(TenantKeys::new(keys, client, Arc::new(vault), clock))
}

impl App {
    /// This `App` with tenants keyed by `keys` (or none, with `None`).
    pub fn with_tenant_keys(self, keys: Option<TenantKeys>) -> Self {
        Self {
            keys: keys.map(Arc::new),
            ..self
        }
    }

    /// Fetches `tenant`'s key into the cache, when tenants are keyed ([`TenantKeys::warm`]).
    pub async fn warm_key(&self, tenant: &TenantId) {
        if let Some(keys) = &self.keys {
            keys.warm(tenant).await;
        }
    }

    /// Lets go of this container's view of the keys of `tenants`, whose sealed items a request
    /// could not open with it ([`TenantKeys::forget_unless_fresh`]): their next request meets the
    /// key (keyed online, or rotated, by another container).
    pub fn meet_keys_again(&self, tenants: &[TenantId]) {
        if let Some(keys) = &self.keys {
            for tenant in tenants {
                keys.forget_unless_fresh(tenant);
            }
        }
    }

    /// 403 when `tenant`'s key refuses (revoked): what an export, a restore, a move or a re-sharding
    /// of it checks first. Its items are carried sealed, but a revoked tenant's data is not moved.
    pub async fn refuse_revoked(&self, tenant: &TenantId) -> Result<(), ApiError> {
        self.tenant_key(tenant, None).await.map(|_| ())
    }

    /// `tenant`'s current key: `None` when tenants are not keyed or it has none. 403 when its key
    /// refuses (revoked), 503 when KMS cannot be reached and no recent key is cached. With
    /// `incarnation` (its record's `createdAt`), never a key of an earlier tenant of the same id.
    pub async fn tenant_key(
        &self,
        tenant: &TenantId,
        incarnation: Option<&str>,
    ) -> Result<Option<Arc<TenantKey>>, ApiError> {
        match &self.keys {
            Some(keys) => Ok(keys.current(tenant, incarnation).await?),
            None => Ok(None),
        }
    }
}
