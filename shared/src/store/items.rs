//! Items and the views stored in them: an entity's API view is stored as its item's attributes, next
//! to the keys and bookkeeping attributes; and the single-item reads and deletes every kind shares.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use crate::identity::cursor::Key;
use crate::identity::ids::TenantId;
use crate::store::error::StoreError;
use crate::store::query::Item;
use crate::store::scoped::TenantDb;

/// Reads the API view (`T`) out of a stored item; the stored item holds the view's fields plus keys.
pub fn view_from_item<T: for<'de> Deserialize<'de>>(item: Item) -> Result<T, StoreError> {
    serde_dynamo::from_item(item)
        .map_err(|e| StoreError::Internal(format!("stored item does not parse: {e}")))
}

/// A view plus its keys and bookkeeping attributes (`kind`, `tenantId`), ready to put.
pub fn item_with_keys<T: Serialize>(
    view: &T,
    key: HashMap<String, AttributeValue>,
    entity_kind: &str,
    tenant: &TenantId,
) -> Result<Item, StoreError> {
    let mut item: Item =
        serde_dynamo::to_item(view).map_err(|e| StoreError::Internal(format!("serialize: {e}")))?;
    item.extend(key);
    item.insert("kind".into(), AttributeValue::S(entity_kind.to_owned()));
    item.insert("tenantId".into(), AttributeValue::S(tenant.to_string()));
    Ok(item)
}

/// The item at `key`, if there is one: one eventually consistent GetItem.
pub async fn get_item(db: &TenantDb, key: Key) -> Result<Option<Item>, StoreError> {
    let out = db
        .client
        .get_item()
        .table_name(&*db.table)
        .set_key(Some(key))
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(out.item)
}

/// Puts `item`, replacing any item with its key: `Ok(true)` when one was replaced (the route answers
/// 200), `Ok(false)` when it is new (201).
pub async fn put_replacing(db: &TenantDb, item: Item) -> Result<bool, StoreError> {
    let out = db
        .client
        .put_item()
        .table_name(&*db.table)
        .set_item(Some(item))
        .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(out.attributes.is_some())
}
