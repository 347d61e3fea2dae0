//! An item's document attributes sealed under its tenant's key: AES-256-GCM over the JSON of every
//! attribute that is not [`PLAIN`], stored as the binary attribute [`SEALED`] with the key's version
//! ([`KEY_VERSION`]). Keys, index attributes, TTL and the attributes conditions read stay plain.
//! The additional data binds the sealed bytes to the tenant, the item's sort key (which names its
//! kind and id, and neither its shard nor its table: a re-sharding or a move carries it as it is),
//! the partition key where it is named by an id (never re-sharded; several items of those kinds
//! share a sort key, as an order's date index entries do) and the key version, so sealed bytes moved
//! to another item or tenant do not open.

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::entities;
use crate::identity::ids::TenantId;
use crate::identity::keys::{tenant_of_key, CATALOG, GSI1, PK, SK};
use crate::identity::sealing::{open_bytes, seal_bytes};
use crate::isolation::vault::TenantKey;
use crate::store::client::error::StoreError;

/// An item (`query::Item`, named here so that the Query, which opens what it reads, can use this).
type Item = std::collections::HashMap<String, AttributeValue>;

/// A string attribute of `item`.
fn string_attr(item: &Item, name: &str) -> Option<String> {
    match item.get(name) {
        Some(AttributeValue::S(s)) => Some(s.clone()),
        _ => None,
    }
}

/// A user profile's fence while its erasure runs (`store::erasures`): every write that needs the
/// user is conditioned on its absence, so it must stay plain.
pub const ERASING_SINCE: &str = "erasingSince";
/// The attribute holding the sealed attributes.
pub const SEALED: &str = "sealed";
/// The version of the tenant's key that sealed them.
pub const KEY_VERSION: &str = "keyVersion";

/// What is never sealed: keys and index keys, the kind, the owner, the write time conditions compare,
/// the TTL, the department an employee's moves are conditioned on, the user an email item or an
/// order belongs to (an id, in keys too; an email item's writes are conditioned on it), a root
/// session's count of its children and a transfer code's redeemer (a random nonce), which
/// conditions read and updates change in place, a profile's erasure fence ([`ERASING_SINCE`]),
/// and the sealing's own attributes.
pub const PLAIN: [&str; 15] = [
    PK,
    SK,
    GSI1,
    CATALOG,
    "kind",
    "tenantId",
    "updatedAtMs",
    "expiresAt",
    "departmentId",
    "userId",
    "childCount",
    "redeemedBy",
    ERASING_SINCE,
    SEALED,
    KEY_VERSION,
];

/// The additional data of `item`'s sealing under `version` of `tenant`'s key.
fn context(tenant: &TenantId, item: &Item, version: u32) -> Result<Vec<u8>, StoreError> {
    let Some(sort_key) = string_attr(item, SK) else {
        return Err(StoreError::Internal("a sealed item has no sort key".into()));
    };
    let by_id = string_attr(item, "kind").is_some_and(|k| entities::partition_named_by_id(&k));
    Ok(match (by_id, string_attr(item, PK)) {
        (true, Some(pk)) => {
            format!("pooltable/item/v2\n{tenant}\n{pk}\n{sort_key}\n{version}").into_bytes()
        }
        (true, None) => {
            return Err(StoreError::Internal(
                "a sealed item has no partition key".into(),
            ))
        }
        (false, _) => format!("pooltable/item/v1\n{tenant}\n{sort_key}\n{version}").into_bytes(),
    })
}

/// What stands for a lowercased email in its uniqueness item's key for a tenant with `key`:
/// `h-` and its keyed digest. No email is readable in a keyed tenant's keys.
pub fn email_segment(key: &TenantKey, normalized_email: &str) -> String {
    let digest = crate::identity::sealing::keyed_digest(
        key.digest_bytes(),
        "pooltable/email/v1",
        normalized_email,
    );
    format!("h-{digest}")
}

/// Whether `item` holds sealed attributes.
pub fn is_sealed(item: &Item) -> bool {
    item.contains_key(SEALED)
}

/// `item` with every attribute not in [`PLAIN`] sealed under `key`. The item must have its sort key.
pub fn seal_item(key: &TenantKey, mut item: Item) -> Result<Item, StoreError> {
    let context = context(&key.tenant, &item, key.version)?;
    let document: Item = item
        .extract_if(|name, _| !PLAIN.contains(&name.as_str()))
        .collect();
    let json: serde_json::Value = serde_dynamo::from_item(document)
        .map_err(|e| StoreError::Internal(format!("an item's attributes as JSON: {e}")))?;
    let plaintext = serde_json::to_vec(&json)
        .map_err(|e| StoreError::Internal(format!("an item's attributes as JSON: {e}")))?;
    let sealed = seal_bytes(key.bytes(), &context, &plaintext)
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    item.insert(SEALED.into(), AttributeValue::B(Blob::new(sealed)));
    item.insert(
        KEY_VERSION.into(),
        AttributeValue::N(key.version.to_string()),
    );
    Ok(item)
}

/// `item` as it is stored: sealed under `key` when the tenant has one and the item's kind is sealed
/// (`identity::entities`, `EntityKind::sealed`), else as it is (an item sealed already too).
pub fn stored_form(key: Option<&TenantKey>, item: Item) -> Result<Item, StoreError> {
    let sealed_kind = !is_sealed(&item)
        && matches!(item.get("kind"), Some(AttributeValue::S(kind)) if entities::sealed(kind));
    match key {
        Some(key) if sealed_kind => seal_item(key, item),
        _ => Ok(item),
    }
}

/// `item` with its sealed attributes opened under `key` (an item with none is returned as it is).
/// An item sealed under another key or version, or changed, does not open: never a plaintext guess.
pub fn open_item(key: Option<&TenantKey>, mut item: Item) -> Result<Item, StoreError> {
    let Some(AttributeValue::B(sealed)) = item.remove(SEALED) else {
        return Ok(item);
    };
    let version = match item.remove(KEY_VERSION) {
        Some(AttributeValue::N(n)) => n.parse::<u32>().ok(),
        _ => None,
    };
    // No key here for a sealed item: this container cached the tenant's absence of a key before it
    // was keyed online (a revoked key is refused earlier, when the request's client is made). The
    // request answers 503, and the container meets the key with its next request of the tenant.
    let Some(key) = key else {
        // (Its tenant is in its keys; a projection may hold only the sort key.)
        let tenant = [PK, SK]
            .iter()
            .find_map(|k| string_attr(&item, k).and_then(|v| tenant_of_key(&v)));
        if let Some(tenant) = tenant {
            crate::store::client::meter::note_key_not_met(tenant);
        }
        return Err(StoreError::Unavailable(
            "This tenant's key is not known here yet; retry shortly.".into(),
        ));
    };
    let Some(version) = version else {
        return Err(StoreError::Internal(
            "a sealed item names no key version".into(),
        ));
    };
    let Some(bytes) = key.bytes_of(version) else {
        return Err(if version > key.newest() {
            // Another container met a rotation this one has not: it does with its next request.
            crate::store::client::meter::note_key_not_met(key.tenant.clone());
            StoreError::Unavailable(format!(
                "an item is sealed under key version {version}, newer than this container knows"
            ))
        } else {
            StoreError::KeyRefused(format!("key version {version} of the tenant is gone"))
        });
    };
    let context = context(&key.tenant, &item, version)?;
    let plaintext = open_bytes(bytes, &context, sealed.as_ref()).ok_or_else(|| {
        let sort_key = string_attr(&item, SK).unwrap_or_default();
        StoreError::Internal(format!("the item {sort_key} does not open"))
    })?;
    let json: serde_json::Value = serde_json::from_slice(&plaintext)
        .map_err(|e| StoreError::Internal(format!("an opened item's attributes: {e}")))?;
    let document: Item = serde_dynamo::to_item(json)
        .map_err(|e| StoreError::Internal(format!("an opened item's attributes: {e}")))?;
    item.extend(document);
    Ok(item)
}

/// `items`, each opened under `key` ([`open_item`]).
pub fn open_items(key: Option<&TenantKey>, items: Vec<Item>) -> Result<Vec<Item>, StoreError> {
    match key {
        None if !items.iter().any(is_sealed) => Ok(items),
        _ => items.into_iter().map(|item| open_item(key, item)).collect(),
    }
}

/// `projection`, with what opening a sealed item takes: its keys, its kind (the additional data
/// binds them) and the sealed attributes. Asked whether or not this container knows a key of the
/// tenant: one whose view of it is out of date (keyed online by another container) then meets the
/// sealed item, and answers 503 and lets the view go, instead of reading an item with none of the
/// projected attributes. No projection (the whole item) stays none.
pub fn with_sealing(mut projection: Vec<String>) -> Vec<String> {
    if !projection.is_empty() {
        for name in [PK, SK, "kind", SEALED, KEY_VERSION] {
            if !projection.iter().any(|p| p == name) {
                projection.push(name.to_owned());
            }
        }
    }
    projection
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_projection_takes_what_opening_needs_and_no_projection_stays_the_whole_item() {
        let email = vec!["email".to_owned()];
        assert_eq!(
            with_sealing(email),
            ["email", PK, SK, "kind", SEALED, KEY_VERSION]
        );
        assert!(with_sealing(Vec::new()).is_empty());
    }
    use crate::identity::ids::EntityId;
    use crate::identity::keys::{kind, sharded_entity_key};

    fn key(tenant: &str, version: u32) -> TenantKey {
        TenantKey::new(
            TenantId::parse(tenant).unwrap(),
            version,
            crate::identity::sealing::new_key().unwrap().to_vec(),
            "arn:aws:kms:us-east-1:123456789012:key/k".into(),
        )
        .unwrap()
    }

    fn product_key(id: &str) -> Item {
        let (tenant, id) = (
            TenantId::parse("acme").unwrap(),
            EntityId::parse(id).unwrap(),
        );
        sharded_entity_key(&tenant, kind::PRODUCT, kind::PRODUCT, &id, 4)
    }

    fn product(id: &str) -> Item {
        let mut item = product_key(id);
        item.extend([
            ("kind".to_owned(), AttributeValue::S("PRODUCT".into())),
            ("updatedAtMs".to_owned(), AttributeValue::N("7".into())),
            ("productId".to_owned(), AttributeValue::S(id.into())),
            (
                "document".to_owned(),
                serde_dynamo::to_attribute_value(serde_json::json!({"name": "Secret", "n": 3}))
                    .unwrap(),
            ),
        ]);
        item
    }

    #[test]
    fn an_item_sealed_keeps_only_its_plain_attributes_readable_and_opens_to_itself() {
        // GIVEN a product and its tenant's key
        let key = key("acme", 1);
        let item = product("p-1");
        // WHEN it is sealed
        let sealed = seal_item(&key, item.clone()).unwrap();
        // THEN only plain attributes and the sealed bytes are left, none of the document's text
        let mut names: Vec<_> = sealed.keys().map(String::as_str).collect();
        names.sort();
        assert_eq!(names, [PK, SK, KEY_VERSION, "kind", SEALED, "updatedAtMs"]);
        assert!(!format!("{sealed:?}").contains("Secret"));
        // AND it opens to the item it was
        assert_eq!(open_item(Some(&key), sealed).unwrap(), item);
    }

    #[test]
    fn sealed_bytes_open_only_under_their_key_tenant_and_sort_key() {
        let key = key("acme", 1);
        let sealed = seal_item(&key, product("p-1")).unwrap();
        // another key of the same tenant and version
        assert!(open_item(Some(&self::key("acme", 1)), sealed.clone()).is_err());
        // no key at all (a container that has not met the tenant's key yet: 503, retry)
        assert!(matches!(
            open_item(None, sealed.clone()),
            Err(StoreError::Unavailable(_))
        ));
        // the same bytes under another item's sort key
        let mut moved = sealed.clone();
        moved.insert(SK.into(), product_key("p-2")[SK].clone());
        assert!(open_item(Some(&key), moved).is_err());
        // a plain item is read as it is
        let plain = product("p-3");
        assert_eq!(open_item(None, plain.clone()).unwrap(), plain);
    }

    #[test]
    fn a_rotated_key_seals_under_its_new_version_and_opens_what_every_version_sealed() {
        // GIVEN an item sealed under version 1, and the tenant's key rotated to version 2
        let v1 = key("acme", 1);
        let old = seal_item(&v1, product("p-1")).unwrap();
        let v1_bytes = v1.bytes().to_vec();
        let v2 = key("acme", 2).knowing([key_from("acme", 1, v1_bytes.clone())]);
        // WHEN an item is sealed now
        let new = seal_item(&v2, product("p-2")).unwrap();
        // THEN it names version 2, and both open under the rotated key
        assert_eq!(new[KEY_VERSION], AttributeValue::N("2".into()));
        assert_eq!(open_item(Some(&v2), old.clone()).unwrap(), product("p-1"));
        assert_eq!(open_item(Some(&v2), new.clone()).unwrap(), product("p-2"));
        // AND a container that knows version 1 alone answers "not yet" (503) for version 2's item
        let only_v1 = key_from("acme", 1, v1_bytes.clone());
        assert!(matches!(
            open_item(Some(&only_v1), new),
            Err(StoreError::Unavailable(_))
        ));
        // AND an email's digest is the first version's, whichever version seals
        assert_eq!(
            email_segment(&v2, "ada@example.com"),
            email_segment(&only_v1, "ada@example.com")
        );
    }

    fn key_from(tenant: &str, version: u32, bytes: Vec<u8>) -> TenantKey {
        TenantKey::new(
            TenantId::parse(tenant).unwrap(),
            version,
            bytes,
            "arn:aws:kms:us-east-1:123456789012:key/k".into(),
        )
        .unwrap()
    }
}
