//! The tenant's import sealing: what its import messages are sealed with. A keyed tenant's are
//! sealed under a key derived from its data key's sealing version ([`derived_key`]), named in the
//! message (`keyVersion`), so the key hierarchy covers them: rotation applies, and shredding the
//! data key shreds them. A tenant without a key (or a message sealed before its tenant was keyed)
//! has a random key stored in its sealing item, which offboarding deletes. When online keying ends,
//! that stored key is retired ([`retire_plain_key`]): it stays, for the messages sealed with it
//! before (and their delayed copies), but sealed under the tenant's data key, so revoking or
//! shredding that key covers them too. The sealing item also holds the tenant's open imports.

use super::open::OPEN_IMPORTS;
use crate::identity::ids::TenantId;
use crate::identity::keys::{import_sealing_key, primary_key};
use crate::identity::sealing::{self, derived_key};
use crate::isolation::vault::TenantKey;
use crate::store::client::error::StoreError;
use crate::store::client::expr::{attr, num, Update};
use crate::store::client::items::{enlist, get_item_consistent};
use crate::store::client::query::{put_if_absent, Item};
use crate::store::client::scoped::TenantDb;
use crate::store::client::transact::TransactError;
use aws_sdk_dynamodb::types::AttributeValue;

/// What the key derived from a tenant's data key seals: its import messages.
const IMPORTS_PURPOSE: &str = "pooltable/imports/v1";
/// What another key derived from it seals: the stored import key online keying retired.
const RETIRED_PURPOSE: &str = "pooltable/imports/retired/v1";

/// The tenant's stored import key, as its sealing item holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredKey {
    /// A tenant without a key of its own seals its messages with it.
    Plain(Vec<u8>),
    /// Retired by online keying: it opens only the messages sealed before, and only through
    /// `version` of the tenant's data key, which sealed it ([`retire_plain_key`]).
    Retired { version: u32, sealed: Vec<u8> },
}

/// The tenant's sealing item as read: its stored key, when it has one (a tenant without a key of
/// its own, or one keyed online), and the ids of its open imports ([`super::count_open`]).
#[derive(Debug, Clone, Default)]
pub struct SealingItem {
    pub key: Option<StoredKey>,
    pub open_imports: std::collections::HashSet<String>,
}

impl SealingItem {
    /// The stored key that seals new messages: only a plain one does.
    fn plain_key(&self) -> Option<&[u8]> {
        match &self.key {
            Some(StoredKey::Plain(key)) => Some(key),
            _ => None,
        }
    }
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
    let bytes = |name: &str| {
        item.get(name)
            .and_then(|k| k.as_b().ok())
            .map(|b| b.as_ref().to_vec())
    };
    let plain = bytes(SEALING_KEY)
        .filter(|k| k.len() == sealing::KEY_BYTES)
        .map(StoredKey::Plain);
    let retired = || {
        let version = item.get(RETIRED_VERSION)?.as_n().ok()?.parse().ok()?;
        Some(StoredKey::Retired {
            version,
            sealed: bytes(RETIRED_KEY)?,
        })
    };
    let key = plain.or_else(retired);
    let open_imports = match item.get(OPEN_IMPORTS) {
        Some(AttributeValue::Ss(ids)) => ids.iter().cloned().collect(),
        _ => Default::default(),
    };
    Ok(Some(SealingItem { key, open_imports }))
}

/// The tenant's stored import key (a consistent read): `None` when it has none, because it was
/// keyed from the start, never imported, or offboarding destroyed it.
pub async fn sealing_key(
    db: &TenantDb,
    tenant: &TenantId,
) -> Result<Option<StoredKey>, StoreError> {
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
        if existing.plain_key().is_some() || db.key.is_some() {
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
            key: fresh.map(StoredKey::Plain),
            open_imports: Default::default(),
        });
    }
    let stored = read_sealing_item(db, tenant)
        .await?
        .ok_or_else(|| StoreError::Internal("the import sealing item vanished".into()))?;
    if stored.plain_key().is_none() && db.key.is_none() {
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
    match (&db.key, item.plain_key()) {
        (Some(key), _) => Ok(MessageKey {
            key: derived_key(key.bytes(), IMPORTS_PURPOSE).to_vec(),
            version: Some(key.version),
        }),
        (None, Some(stored)) => Ok(MessageKey {
            key: stored.to_vec(),
            version: None,
        }),
        (None, None) => Err(StoreError::Internal("the tenant has no import key".into())),
    }
}

/// What binds a retired key to its tenant: sealed for one, it opens for no other.
fn retired_context(tenant: &TenantId) -> String {
    format!("{tenant}/imports/retired")
}

/// Online keying's end: the tenant's plain import key, when it has one, put back sealed under a
/// key derived from `key`'s sealing version, on condition that it is still the one read. New
/// messages are sealed under the data key already; the retired key still opens the ones sealed
/// before, but only through the data key, so revoking or shredding it covers them as well, and
/// no copy of the table holds an import key in the clear from then on. Run twice, the second finds
/// nothing plain; a container that still sealed with the plain key cannot (it meets the data key
/// before the walk starts, `Keying::seals_from`), and one that did would answer 503 and retry.
pub async fn retire_plain_key(
    db: &TenantDb,
    tenant: &TenantId,
    key: &TenantKey,
) -> Result<(), StoreError> {
    let Some(item) = read_sealing_item(db, tenant).await? else {
        return Ok(());
    };
    let Some(plain) = item.plain_key() else {
        return Ok(());
    };
    let sealed = sealing::seal_bytes(
        &derived_key(key.bytes(), RETIRED_PURPOSE),
        retired_context(tenant).as_bytes(),
        plain,
    )
    .map_err(|e| StoreError::Internal(e.to_string()))?;
    let update = Update::from(attr(RETIRED_KEY).set(sealed))
        .and(attr(RETIRED_VERSION).set(num(key.version.into())))
        .and(attr(SEALING_KEY).remove());
    let pk = import_sealing_key(tenant);
    let retired = db
        .update_item(primary_key(&pk, &pk), update)
        .when(attr(SEALING_KEY).equal(plain.to_vec()))
        .send(db)
        .await;
    match retired {
        // A failed condition: another call retired it first, or offboarding deleted the item.
        Ok(_) | Err(TransactError::ConditionFailed { .. }) => Ok(()),
        Err(TransactError::Store(e)) => Err(e),
    }
}

/// What opens a message sealed under `version` of the tenant's key (`None`: its stored key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opening {
    Key(Vec<u8>),
    /// The key is gone (offboarding destroyed it): the message never opens.
    Destroyed,
    /// The retired key is stored, but its version of the data key does not open it: changed.
    Unopenable,
    /// Sealed under a version newer than this container has met, or under a retired key while it
    /// knows no key of the tenant: it will within a key period.
    NotYet,
}

/// What opens a message sealed under `version`, given the tenant's key as this container knows it
/// and its stored import key.
pub fn opening(
    key: Option<&TenantKey>,
    stored: Option<&StoredKey>,
    version: Option<u32>,
) -> Opening {
    match (version, stored) {
        (None, None) => Opening::Destroyed,
        (None, Some(StoredKey::Plain(k))) => Opening::Key(k.clone()),
        (None, Some(StoredKey::Retired { version, sealed })) => match key {
            // No key known here while a retired one is stored: this container's view is behind
            // the keying (offboarding deletes the sealing item with the key), so the message
            // waits rather than being dropped for good.
            None => Opening::NotYet,
            Some(known) => match derived_from(key, *version, RETIRED_PURPOSE) {
                Ok(unwrapping) => {
                    let context = retired_context(&known.tenant);
                    sealing::open_bytes(&unwrapping, context.as_bytes(), sealed)
                        .map_or(Opening::Unopenable, Opening::Key)
                }
                Err(gone_or_not_yet) => gone_or_not_yet,
            },
        },
        (Some(v), _) => derived_from(key, v, IMPORTS_PURPOSE).map_or_else(|o| o, Opening::Key),
    }
}

/// The key derived for `purpose` from `version` of the tenant's key; else whether that version is
/// gone (or the tenant has no key any more) or not met here yet.
fn derived_from(key: Option<&TenantKey>, version: u32, purpose: &str) -> Result<Vec<u8>, Opening> {
    let key = key.ok_or(Opening::Destroyed)?;
    match key.bytes_of(version) {
        Some(bytes) => Ok(derived_key(bytes, purpose).to_vec()),
        None if version > key.newest() => Err(Opening::NotYet),
        None => Err(Opening::Destroyed),
    }
}

pub(super) const SEALING_KEY: &str = "key";
/// The retired import key, sealed ([`retire_plain_key`]), and the version of the data key whose
/// derived key sealed it.
const RETIRED_KEY: &str = "retiredKey";
const RETIRED_VERSION: &str = "retiredKeyVersion";

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
        let stored = StoredKey::Plain(vec![7u8; sealing::KEY_BYTES]);
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
            Opening::Key(vec![7u8; sealing::KEY_BYTES])
        );
        assert_eq!(opening(Some(&v2), None, None), Opening::Destroyed);
        // AND a version newer than known waits; a tenant with no key any more drops it
        assert_eq!(opening(Some(&v1), None, Some(2)), Opening::NotYet);
        assert_eq!(opening(None, Some(&stored), Some(1)), Opening::Destroyed);
    }

    #[test]
    fn a_retired_key_opens_only_through_the_version_of_the_data_key_that_sealed_it() {
        // GIVEN a tenant's plain import key, retired under version 1 of its data key
        let v1 = key(1);
        let plain = vec![9u8; sealing::KEY_BYTES];
        let sealed = sealing::seal_bytes(
            &derived_key(v1.bytes(), RETIRED_PURPOSE),
            retired_context(&v1.tenant).as_bytes(),
            &plain,
        )
        .unwrap();
        let retired = StoredKey::Retired {
            version: 1,
            sealed: sealed.clone(),
        };
        assert!(!sealed.windows(plain.len()).any(|w| w == plain));
        // THEN a message sealed before the keying (no version) opens through version 1, also once
        // the key is rotated to version 2
        let v2 = key(2).knowing([TenantKey::new(
            v1.tenant.clone(),
            1,
            v1.bytes().to_vec(),
            v1.kms_key.clone(),
        )
        .unwrap()]);
        for known in [&v1, &v2] {
            assert_eq!(
                opening(Some(known), Some(&retired), None),
                Opening::Key(plain.clone())
            );
        }
        // AND with no key known here (a view behind the keying) it waits; with the version that
        // sealed it gone, it never opens
        assert_eq!(opening(None, Some(&retired), None), Opening::NotYet);
        assert_eq!(
            opening(Some(&key(3)), Some(&retired), None),
            Opening::Destroyed
        );
        // AND another tenant's key of the same bytes, or a changed byte, does not open it
        let other = TenantKey::new(
            TenantId::parse("globex").unwrap(),
            1,
            v1.bytes().to_vec(),
            v1.kms_key.clone(),
        )
        .unwrap();
        assert_eq!(
            opening(Some(&other), Some(&retired), None),
            Opening::Unopenable
        );
        let mut changed = sealed;
        *changed.last_mut().unwrap() ^= 1;
        let changed = StoredKey::Retired {
            version: 1,
            sealed: changed,
        };
        assert_eq!(
            opening(Some(&v1), Some(&changed), None),
            Opening::Unopenable
        );
        // AND a version not met here yet waits
        let retired_later = StoredKey::Retired {
            version: 5,
            sealed: vec![0; 40],
        };
        assert_eq!(
            opening(Some(&v2), Some(&retired_later), None),
            Opening::NotYet
        );
    }
}
