//! The tenant's import sealing key: created once, read by the consumer.

use super::*;
use crate::identity::ids::TenantId;
use crate::identity::keys::import_sealing_key;
use crate::identity::sealing;
use crate::store::client::error::StoreError;
use crate::store::client::items::{enlist, get_item_consistent};
use crate::store::client::query::{put_if_absent, Item};
use crate::store::client::scoped::TenantDb;
use aws_sdk_dynamodb::types::AttributeValue;

/// The tenant's import sealing key (a consistent read): `None` when it has none, because it never
/// imported or because offboarding destroyed it.
pub async fn sealing_key(db: &TenantDb, tenant: &TenantId) -> Result<Option<Vec<u8>>, StoreError> {
    let pk = import_sealing_key(tenant);
    let item = get_item_consistent(db, key(&pk, &pk)).await?;
    Ok(item
        .and_then(|i| i.get(SEALING_KEY).and_then(|k| k.as_b().ok()).cloned())
        .map(|b| b.into_inner())
        .filter(|k| k.len() == sealing::KEY_BYTES))
}

/// The tenant's import sealing key, made (random, 256 bits) when it has none. Two producers racing
/// both read back the one that was stored.
pub async fn ensure_sealing_key(db: &TenantDb, tenant: &TenantId) -> Result<Vec<u8>, StoreError> {
    if let Some(existing) = sealing_key(db, tenant).await? {
        return Ok(existing);
    }
    let fresh = sealing::new_key().map_err(|e| StoreError::Internal(e.to_string()))?;
    let pk = import_sealing_key(tenant);
    let mut item: Item = key(&pk, &pk);
    item.insert(
        SEALING_KEY.to_owned(),
        AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(fresh.to_vec())),
    );
    enlist(tenant, &mut item);
    if put_if_absent(db, item).await? {
        return Ok(fresh.to_vec());
    }
    sealing_key(db, tenant)
        .await?
        .ok_or_else(|| StoreError::Internal("the import sealing key vanished".into()))
}

pub(super) const SEALING_KEY: &str = "key";
