//! Tenant records and the per-container shard-count cache.
//!
//! A tenant's record (`PK` = `SK` = `TENANT#t#TENANT`) holds its tier and shard count. The shard count
//! is fixed at onboarding: changing it would move every item's computed shard, so it is not offered
//! as an update (re-sharding is a migration).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use crate::identity::ids::TenantId;
use crate::identity::keys::{tenant_record_key, PK, SK};
use crate::store::error::StoreError;
use crate::store::scoped::TenantDb;

/// How long a container trusts a cached shard count before reading the record again.
pub const SHARD_COUNT_TTL: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Basic,
    Standard,
    Premium,
}

/// The stored tenant record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantRecord {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    pub tenant_id: String,
    pub tier: Tier,
    pub shard_count: u32,
    pub created_at: String,
}

/// Reads a tenant's record with its own scoped client; `None` when the tenant is not onboarded.
pub async fn read_record(db: &TenantDb) -> Result<Option<TenantRecord>, StoreError> {
    let key = tenant_record_key(&db.tenant);
    let out = db
        .client
        .get_item()
        .table_name(&*db.table)
        .key(PK, AttributeValue::S(key.clone()))
        .key(SK, AttributeValue::S(key))
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    out.item
        .map(|item| {
            serde_dynamo::from_item(item)
                .map_err(|e| StoreError::Internal(format!("tenant record does not parse: {e}")))
        })
        .transpose()
}

/// Shard counts per tenant, cached per container for [`SHARD_COUNT_TTL`].
#[derive(Debug, Default)]
pub struct ShardDirectory {
    cache: Mutex<HashMap<TenantId, (u32, Instant)>>,
}

impl ShardDirectory {
    /// The tenant's shard count; 403 when the tenant has not been onboarded.
    pub async fn shard_count(&self, db: &TenantDb) -> Result<u32, StoreError> {
        if let Some((count, at)) = self.lock().get(&db.tenant).copied() {
            if at.elapsed() < SHARD_COUNT_TTL {
                return Ok(count);
            }
        }
        let record = read_record(db).await?.ok_or(StoreError::NotOnboarded)?;
        self.lock()
            .insert(db.tenant.clone(), (record.shard_count, Instant::now()));
        Ok(record.shard_count)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TenantId, (u32, Instant)>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}
