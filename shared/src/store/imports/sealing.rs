//! The tenant's import sealing key: created once, read by the consumer.

use super::open::OPEN_IMPORTS;
use crate::identity::ids::TenantId;
use crate::identity::keys::{import_sealing_key, primary_key};
use crate::identity::sealing;
use crate::store::client::error::StoreError;
use crate::store::client::items::{enlist, get_item_consistent};
use crate::store::client::query::{put_if_absent, Item};
use crate::store::client::scoped::TenantDb;
use aws_sdk_dynamodb::types::AttributeValue;

/// The tenant's sealing item as read: its key, and the ids of its open imports
/// ([`super::count_open`]).
#[derive(Debug, Clone, Default)]
pub struct SealingItem {
    pub key: Vec<u8>,
    pub open_imports: std::collections::HashSet<String>,
}

/// The tenant's sealing item (a consistent read): `None` when it has no key, because it never
/// imported or because offboarding destroyed it.
async fn read_sealing_item(
    db: &TenantDb,
    tenant: &TenantId,
) -> Result<Option<SealingItem>, StoreError> {
    let pk = import_sealing_key(tenant);
    let Some(item) = get_item_consistent(db, primary_key(&pk, &pk)).await? else {
        return Ok(None);
    };
    let key = item
        .get(SEALING_KEY)
        .and_then(|k| k.as_b().ok())
        .map(|b| b.as_ref().to_vec())
        .filter(|k| k.len() == sealing::KEY_BYTES);
    let open_imports = match item.get(OPEN_IMPORTS) {
        Some(AttributeValue::Ss(ids)) => ids.iter().cloned().collect(),
        _ => Default::default(),
    };
    Ok(key.map(|key| SealingItem { key, open_imports }))
}

/// The tenant's import sealing key (a consistent read): `None` when it has none, because it never
/// imported or because offboarding destroyed it.
pub async fn sealing_key(db: &TenantDb, tenant: &TenantId) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(read_sealing_item(db, tenant).await?.map(|item| item.key))
}

/// The tenant's sealing key, made (random, 256 bits) when it has none, with its open imports, in
/// one consistent read when it exists. Two producers racing both read back the one that was stored.
pub async fn ensure_sealing_item(
    db: &TenantDb,
    tenant: &TenantId,
) -> Result<SealingItem, StoreError> {
    if let Some(existing) = read_sealing_item(db, tenant).await? {
        return Ok(existing);
    }
    let fresh = sealing::new_key().map_err(|e| StoreError::Internal(e.to_string()))?;
    let pk = import_sealing_key(tenant);
    let mut item: Item = primary_key(&pk, &pk);
    item.insert(
        SEALING_KEY.to_owned(),
        AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(fresh.to_vec())),
    );
    enlist(tenant, &mut item);
    if put_if_absent(db, item).await? {
        return Ok(SealingItem {
            key: fresh.to_vec(),
            open_imports: Default::default(),
        });
    }
    read_sealing_item(db, tenant)
        .await?
        .ok_or_else(|| StoreError::Internal("the import sealing key vanished".into()))
}

pub(super) const SEALING_KEY: &str = "key";
