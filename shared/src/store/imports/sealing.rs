//! The tenant's import sealing: what its import messages are sealed with. A keyed tenant's are
//! sealed under a key derived from its data key's sealing version ([`derived_key`]), named in the
//! message (`keyVersion`), so the key hierarchy covers them: rotation applies, and shredding the
//! data key shreds them. A tenant without a key (or a message sealed before its tenant was keyed)
//! has a random key stored in its sealing item, which offboarding deletes. The sealing item also
//! holds the tenant's open imports.

use super::open::OPEN_IMPORTS;
use crate::identity::ids::TenantId;
use crate::identity::keys::{import_sealing_key, primary_key};
use crate::identity::sealing::{self, derived_key};
use crate::isolation::vault::TenantKey;
use crate::store::client::error::StoreError;
use crate::store::client::items::{enlist, get_item_consistent};
use crate::store::client::query::{put_if_absent, Item};
use crate::store::client::scoped::TenantDb;
use aws_sdk_dynamodb::types::AttributeValue;

/// What the key derived from a tenant's data key seals: its import messages.
const IMPORTS_PURPOSE: &str = "pooltable/imports/v1";

/// The tenant's sealing item as read: its stored key, when it has one (a tenant without a key of
/// its own), and the ids of its open imports ([`super::count_open`]).
#[derive(Debug, Clone, Default)]
pub struct SealingItem {
    pub key: Option<Vec<u8>>,
    pub open_imports: std::collections::HashSet<String>,
}

/// What a message is sealed with: the key, and the version of the tenant's data key it derives
/// from (`None`: the stored import key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageKey {
    pub key: Vec<u8>,
    pub version: Option<u32>,
}

/// The tenant's sealing item (a consistent read): `None` when it has none, because it never
/// imported or because offboarding deleted it.
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
    Ok(Some(SealingItem { key, open_imports }))
}

/// The tenant's stored import key (a consistent read): `None` when it has none, because it is
/// keyed, never imported, or offboarding destroyed it.
pub async fn sealing_key(db: &TenantDb, tenant: &TenantId) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(read_sealing_item(db, tenant)
        .await?
        .and_then(|item| item.key))
}

/// The tenant's sealing item, made when it has none, with its open imports, in one consistent read
/// when it exists. A tenant without a key of its own (`db.key`) gets a stored random key (256
/// bits); a keyed tenant's item holds none. Two producers racing both read back the one stored.
pub async fn ensure_sealing_item(
    db: &TenantDb,
    tenant: &TenantId,
) -> Result<SealingItem, StoreError> {
    if let Some(existing) = read_sealing_item(db, tenant).await? {
        if existing.key.is_some() || db.key.is_some() {
            return Ok(existing);
        }
    }
    let pk = import_sealing_key(tenant);
    let mut item: Item = primary_key(&pk, &pk);
    let fresh = match db.key {
        Some(_) => None,
        None => {
            let fresh = sealing::new_key().map_err(|e| StoreError::Internal(e.to_string()))?;
            item.insert(
                SEALING_KEY.to_owned(),
                AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(fresh.to_vec())),
            );
            Some(fresh.to_vec())
        }
    };
    enlist(tenant, &mut item);
    if put_if_absent(db, item).await? {
        return Ok(SealingItem {
            key: fresh,
            open_imports: Default::default(),
        });
    }
    let stored = read_sealing_item(db, tenant)
        .await?
        .ok_or_else(|| StoreError::Internal("the import sealing item vanished".into()))?;
    if stored.key.is_none() && db.key.is_none() {
        // A keyed tenant's item, and this container does not know the key yet (it will within a
        // key period): its messages cannot be sealed now.
        return Err(StoreError::Unavailable(
            "The tenant's key is not known here yet; retry later.".into(),
        ));
    }
    Ok(stored)
}

/// What `db`'s tenant's import messages are sealed with now: a key derived from its data key's
/// sealing version, or else its stored import key (`item`, from [`ensure_sealing_item`]).
pub fn message_key(db: &TenantDb, item: &SealingItem) -> Result<MessageKey, StoreError> {
    match (&db.key, &item.key) {
        (Some(key), _) => Ok(MessageKey {
            key: derived_key(key.bytes(), IMPORTS_PURPOSE).to_vec(),
            version: Some(key.version),
        }),
        (None, Some(stored)) => Ok(MessageKey {
            key: stored.clone(),
            version: None,
        }),
        (None, None) => Err(StoreError::Internal("the tenant has no import key".into())),
    }
}

/// What opens a message sealed under `version` of the tenant's key (`None`: its stored key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opening {
    Key(Vec<u8>),
    /// The key is gone (offboarding destroyed it): the message never opens.
    Destroyed,
    /// Sealed under a version newer than this container has met: it will within a key period.
    NotYet,
}

/// What opens a message sealed under `version`, given the tenant's key as this container knows it
/// and its stored import key.
pub fn opening(key: Option<&TenantKey>, stored: Option<&[u8]>, version: Option<u32>) -> Opening {
    match (version, key) {
        (None, _) => stored.map_or(Opening::Destroyed, |k| Opening::Key(k.to_vec())),
        (Some(v), Some(key)) => match key.bytes_of(v) {
            Some(bytes) => Opening::Key(derived_key(bytes, IMPORTS_PURPOSE).to_vec()),
            None if v > key.newest() => Opening::NotYet,
            None => Opening::Destroyed,
        },
        (Some(_), None) => Opening::Destroyed,
    }
}

pub(super) const SEALING_KEY: &str = "key";

#[cfg(test)]
mod tests {
    use super::*;

    fn key(version: u32) -> TenantKey {
        TenantKey::new(
            TenantId::parse("acme").unwrap(),
            version,
            sealing::new_key().unwrap().to_vec(),
            "arn:aws:kms:us-east-1:123456789012:key/k".into(),
        )
        .unwrap()
    }

    #[test]
    fn a_message_opens_under_the_version_it_names_or_the_stored_key_and_never_under_the_data_key() {
        // GIVEN a tenant's key at version 2 (knowing 1), and a stored import key
        let v1 = key(1);
        let v2 = key(2).knowing([TenantKey::new(
            v1.tenant.clone(),
            1,
            v1.bytes().to_vec(),
            v1.kms_key.clone(),
        )
        .unwrap()]);
        let stored = vec![7u8; sealing::KEY_BYTES];
        // THEN a message names the version it derives from, under a key that is not the data key
        let derived = |k: &TenantKey| derived_key(k.bytes(), IMPORTS_PURPOSE).to_vec();
        assert_ne!(derived(&v1), v1.bytes());
        assert_eq!(
            opening(Some(&v2), Some(&stored), Some(1)),
            Opening::Key(derived(&v1))
        );
        assert_eq!(
            opening(Some(&v2), None, Some(2)),
            Opening::Key(derived(&v2))
        );
        // AND one without a version opens under the stored key, or is gone with it
        assert_eq!(
            opening(Some(&v2), Some(&stored), None),
            Opening::Key(stored.clone())
        );
        assert_eq!(opening(Some(&v2), None, None), Opening::Destroyed);
        // AND a version newer than known waits; a tenant with no key any more drops it
        assert_eq!(opening(Some(&v1), None, Some(2)), Opening::NotYet);
        assert_eq!(opening(None, Some(&stored), Some(1)), Opening::Destroyed);
    }
}
