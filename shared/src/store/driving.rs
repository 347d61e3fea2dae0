//! The lifecycle driver's list: the tenants whose re-sharding or offboarding runs to its end with no
//! client calling (`functions/tenants`, `drive-lifecycle`, on a schedule). Kept in the platform's
//! partition (`TENANT#_platform#DRIVE`, one item per tenant), read with the platform's scoped client.
//!
//! A tenant is listed *before* its operation starts ([`list`], then the record's conditional update),
//! so no started operation is ever missing from the list; an entry whose tenant has nothing running
//! (the start was refused, or the operation has ended) is removed by the driver ([`unlist`]). Both
//! writes are idempotent.

use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::ids::TenantId;
use crate::identity::keys::{lifecycle_drive_pk, lifecycle_drive_sk, PK, SK};
use crate::store::error::StoreError;
use crate::store::scoped::TenantDb;

/// Lists `tenant` for the driver (`platform_db`: the platform partition's client), at `now_ms`.
pub async fn list(
    platform_db: &TenantDb,
    tenant: &TenantId,
    now_ms: u64,
) -> Result<(), StoreError> {
    platform_db
        .client
        .put_item()
        .table_name(&*platform_db.table)
        .item(PK, AttributeValue::S(lifecycle_drive_pk()))
        .item(SK, AttributeValue::S(lifecycle_drive_sk(tenant)))
        .item("kind", AttributeValue::S("LIFECYCLE_DRIVE".into()))
        .item(
            "tenantId",
            AttributeValue::S(platform_db.tenant.to_string()),
        )
        .item("drivenTenantId", AttributeValue::S(tenant.to_string()))
        .item("listedAtMs", AttributeValue::N(now_ms.to_string()))
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(())
}

/// Removes `tenant` from the driver's list.
pub async fn unlist(platform_db: &TenantDb, tenant: &TenantId) -> Result<(), StoreError> {
    platform_db
        .client
        .delete_item()
        .table_name(&*platform_db.table)
        .key(PK, AttributeValue::S(lifecycle_drive_pk()))
        .key(SK, AttributeValue::S(lifecycle_drive_sk(tenant)))
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(())
}

/// Every listed tenant and when it was listed (epoch ms), by a consistent read (one Query per 1 MB
/// of entries).
pub async fn listed(platform_db: &TenantDb) -> Result<Vec<(TenantId, u64)>, StoreError> {
    let mut tenants = Vec::new();
    let mut start = None;
    loop {
        let out = platform_db
            .query()
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":pk", AttributeValue::S(lifecycle_drive_pk()))
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        for item in out.items.unwrap_or_default() {
            if let Some(AttributeValue::S(raw)) = item.get("drivenTenantId") {
                let at = crate::store::query::u64_attr(&item, "listedAtMs").unwrap_or(0);
                match TenantId::parse(raw) {
                    Ok(t) => tenants.push((t, at)),
                    Err(e) => tracing::warn!(error = %e, "a lifecycle entry names no valid tenant"),
                }
            }
        }
        start = out.last_evaluated_key.filter(|k| !k.is_empty());
        if start.is_none() {
            return Ok(tenants);
        }
    }
}
