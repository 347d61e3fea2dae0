//! The key table: each tenant's wrapped data keys, one row a version (`tenantId`, `version`). It is
//! a table of its own, not the pool: a copy of the pool (a point-in-time restore, a restore's scratch
//! table, an export) never holds a key, so deleting a tenant's rows here is what shreds its data.
//! The functions reach it on their own role, never on a tenant's session.

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;

use crate::identity::ids::TenantId;
use crate::store::client::error::{written_unless_condition_failed, StoreError};

const TENANT: &str = "tenantId";
const VERSION: &str = "version";
const WRAPPED: &str = "wrapped";
const KMS_KEY: &str = "kmsKeyId";
const CREATED_AT: &str = "createdAt";
const SEALS_FROM: &str = "sealsFromMs";

/// One wrapped key of a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    pub version: u32,
    pub wrapped: Vec<u8>,
    /// The KMS key that wrapped it.
    pub kms_key: String,
    /// The `createdAt` of the tenant record it was made for: the incarnation of the id it serves.
    pub created_at: String,
    /// From when (epoch ms) it seals: a rotated key's new version is first met by every container
    /// (for opening) and only then seals. 0 for a tenant's first version.
    pub seals_from_ms: u64,
}

/// What a shredding destroyed, for the offboarding report (read back from it by a retry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shredded {
    /// The KMS key that wrapped the destroyed keys.
    pub kms_key_id: String,
    /// The versions destroyed.
    pub versions: Vec<u32>,
    pub destroyed_at: String,
}

/// The key table, on the function's own client.
#[derive(Debug, Clone)]
pub(super) struct KeyTable {
    pub client: aws_sdk_dynamodb::Client,
    pub name: String,
}

impl KeyTable {
    /// Every wrapped key of `tenant`, oldest version first (a consistent read: a key just made is seen).
    pub async fn rows(&self, tenant: &TenantId) -> Result<Vec<KeyRow>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.name)
            .key_condition_expression("#t = :t")
            .expression_attribute_names("#t", TENANT)
            .expression_attribute_values(":t", AttributeValue::S(tenant.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        out.items
            .unwrap_or_default()
            .into_iter()
            .map(|row| {
                let s = |name: &str| match row.get(name) {
                    Some(AttributeValue::S(s)) => Some(s.clone()),
                    _ => None,
                };
                let version = match row.get(VERSION) {
                    Some(AttributeValue::N(n)) => n.parse().ok(),
                    _ => None,
                };
                match (version, row.get(WRAPPED), s(KMS_KEY)) {
                    (Some(version), Some(AttributeValue::B(wrapped)), Some(kms_key)) => {
                        Ok(KeyRow {
                            version,
                            wrapped: wrapped.as_ref().to_vec(),
                            kms_key,
                            created_at: s(CREATED_AT).unwrap_or_default(),
                            seals_from_ms: match row.get(SEALS_FROM) {
                                Some(AttributeValue::N(n)) => n.parse().unwrap_or(0),
                                _ => 0,
                            },
                        })
                    }
                    _ => Err(StoreError::Internal(format!(
                        "a key row of {tenant} does not parse"
                    ))),
                }
            })
            .collect()
    }

    /// Stores `row` unless the version is there already: `false` when it was (another container made
    /// it first; the caller reads that one).
    pub async fn insert(&self, tenant: &TenantId, row: &KeyRow) -> Result<bool, StoreError> {
        let out = self
            .client
            .put_item()
            .table_name(&self.name)
            .item(TENANT, AttributeValue::S(tenant.to_string()))
            .item(VERSION, AttributeValue::N(row.version.to_string()))
            .item(WRAPPED, AttributeValue::B(Blob::new(row.wrapped.clone())))
            .item(KMS_KEY, AttributeValue::S(row.kms_key.clone()))
            .item(CREATED_AT, AttributeValue::S(row.created_at.clone()))
            .item(SEALS_FROM, AttributeValue::N(row.seals_from_ms.to_string()))
            .condition_expression("attribute_not_exists(#t)")
            .expression_attribute_names("#t", TENANT)
            .send()
            .await;
        written_unless_condition_failed(out)
    }

    /// Deletes `version` of `tenant`'s keys (gone already is done).
    pub async fn delete(&self, tenant: &TenantId, version: u32) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.name)
            .key(TENANT, AttributeValue::S(tenant.to_string()))
            .key(VERSION, AttributeValue::N(version.to_string()))
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        Ok(())
    }
}
