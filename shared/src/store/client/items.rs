//! Items and the views stored in them: an entity's API view is stored as its item's attributes, next
//! to the keys and bookkeeping attributes; and the single-item reads and deletes every kind shares.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use crate::identity::cursor::Key;
use crate::identity::ids::TenantId;
use crate::identity::keys::{catalog_key, ItemKey, CATALOG, PK};
use crate::store::client::error::{unless_expected, StoreError};
use crate::store::client::expr::Expression;
use crate::store::client::hooks::{Bag, HookResult, Intercept, Parts, RequestRef};
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
use crate::store::client::sealed::{open_item, with_sealing};

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
    enlist(tenant, &mut item);
    Ok(item)
}

/// Adds the item's catalog entry ([`catalog_key`]) when its partition is named by an id, so export
/// and offboarding find it; items of fixed partitions are left as they are. Every writer of a new
/// item calls this (through [`item_with_keys`] or directly) before the item is sent.
pub fn enlist(tenant: &TenantId, item: &mut Item) {
    let catalog = match item.get(PK) {
        Some(AttributeValue::S(pk)) => catalog_key(tenant, pk),
        _ => None,
    };
    if let Some(catalog) = catalog {
        item.insert(CATALOG.into(), AttributeValue::S(catalog));
    }
}

/// The item at `key`, if there is one: one eventually consistent GetItem. While the tenant moves
/// between placements, the item wherever it is, read without moving it
/// ([`crate::store::client::pull::Puller::read_either`]).
pub async fn get_item(db: &TenantDb, key: Key) -> Result<Option<Item>, StoreError> {
    let moving = db.puller.as_ref().zip(ItemKey::from_key(&key));
    if let Some((puller, item_key)) = moving {
        if let Some(found) = puller.read_either(&item_key).await {
            return found;
        }
    }
    read(db, key, None).await
}

/// A GetItem of one item of a tenant's table, started from the scoped client ([`TenantDb::get`]).
pub struct Get<'a> {
    db: &'a TenantDb,
    key: Key,
    consistent: bool,
    projection: Vec<String>,
}

impl TenantDb {
    /// A read of the item at `key` (eventually consistent, whole, unless told otherwise).
    pub fn get(&self, key: Key) -> Get<'_> {
        Get {
            db: self,
            key,
            consistent: false,
            projection: Vec::new(),
        }
    }
}

impl Get<'_> {
    /// Strongly consistent: a read that decides a write.
    pub fn consistent(mut self) -> Self {
        self.consistent = true;
        self
    }

    /// Only these attributes.
    pub fn project(mut self, names: &[&str]) -> Self {
        self.projection = names.iter().map(|n| (*n).to_owned()).collect();
        self
    }

    /// The item, if there is one, opened when it is sealed ([`crate::store::client::sealed`]).
    pub async fn item(self) -> Result<Option<Item>, StoreError> {
        let key = self.db.key.clone();
        let stored = self.stored().await?;
        stored.map(|i| open_item(key.as_deref(), i)).transpose()
    }

    /// The item as stored (sealed, when it is), if there is one (1 GetItem; a whole, eventually
    /// consistent read of a moving tenant reads either table, as [`get_item`] does): what a write
    /// conditioned on it compares.
    pub async fn stored(self) -> Result<Option<Item>, StoreError> {
        let projection = with_sealing(self.projection);
        match (self.consistent, projection.is_empty()) {
            (false, true) => get_item(self.db, self.key).await,
            (true, true) => read(self.db, self.key, Some(true)).await,
            (consistent, false) => {
                let out = Expression::builder()
                    .with_projection(projection)
                    .build()
                    .to_get_item_fluent_builder(self.db.client.get_item())
                    .table_name(&*self.db.table)
                    .set_key(Some(self.key))
                    .consistent_read(consistent)
                    .send()
                    .await
                    .map_err(StoreError::from_sdk)?;
                Ok(out.item)
            }
        }
    }

    /// The item read as `T` ([`view_from_item`]), if there is one.
    pub async fn view<T: for<'de> Deserialize<'de>>(self) -> Result<Option<T>, StoreError> {
        self.item().await?.map(view_from_item).transpose()
    }
}

/// The item at `key`, if there is one: one strongly consistent GetItem (a read that decides a write).
pub async fn get_item_consistent(db: &TenantDb, key: Key) -> Result<Option<Item>, StoreError> {
    read(db, key, Some(true)).await
}

/// One GetItem of `key` on the tenant's table, its `ConsistentRead` as given (unset: eventually
/// consistent).
async fn read(
    db: &TenantDb,
    key: Key,
    consistent: Option<bool>,
) -> Result<Option<Item>, StoreError> {
    let out = db
        .client
        .get_item()
        .table_name(&*db.table)
        .set_key(Some(key))
        .set_consistent_read(consistent)
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(out.item)
}

/// Puts `item`, replacing any item with its key: `Ok(true)` when another item was replaced (the route
/// answers 200), `Ok(false)` when it is new (201). When the SDK retried an attempt that had in fact
/// succeeded (its answer lost), the "replaced" item is exactly `item`, our own write: that counts as
/// new, so the client gets the answer a clean success gives.
pub async fn put_replacing(db: &TenantDb, item: Item) -> Result<bool, StoreError> {
    if let Some(puller) = &db.puller {
        if let Some(replaced) = puller.put_either(&item).await {
            return Ok(replaced?.is_some_and(|old| old != item));
        }
    }
    let old = put_returning_old(&db.client, &db.table, &item).await?;
    Ok(old.is_some_and(|old| old != item))
}

/// Puts `item`, replacing any item with its key, when what it replaced does not matter.
pub async fn put(db: &TenantDb, item: Item) -> Result<(), StoreError> {
    let put = db.sdk_put().set_item(Some(item)).send().await;
    put.map_err(StoreError::from_sdk)?;
    Ok(())
}

/// Puts `item` in `table`: the item it replaced, if any.
pub(crate) async fn put_returning_old(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    item: &Item,
) -> Result<Option<Item>, StoreError> {
    let out = client
        .put_item()
        .table_name(table)
        .set_item(Some(item.clone()))
        .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(out.attributes)
}

/// Deletes the item at `key` if it exists: `Ok(true)` when it was deleted, `Ok(false)` when there was
/// none. One conditional DeleteItem (`attribute_exists(PK)`). When the SDK had to retry (an attempt's
/// answer lost) and the retry finds nothing, the earlier attempt is what deleted it: that counts as
/// deleted, so a lost success still answers as a success. (If the earlier attempt never reached
/// DynamoDB and the item never existed, the item is absent either way.)
pub async fn delete_existing(db: &TenantDb, key: Key) -> Result<bool, StoreError> {
    let attempts = AttemptCounter::default();
    let result = db
        .client
        .delete_item()
        .table_name(&*db.table)
        .set_key(Some(key))
        .condition_expression("attribute_exists(PK)")
        .customize()
        .interceptor(attempts.clone())
        .send()
        .await;
    let deleted = unless_expected(result, |e| e.is_conditional_check_failed_exception())?;
    Ok(deleted.is_some() || attempts.count() > 1)
}

/// Counts the attempts of the one operation it is installed on (retries included).
#[derive(Debug, Clone, Default)]
pub struct AttemptCounter(Arc<AtomicU32>);

impl AttemptCounter {
    pub fn count(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

impl Intercept for AttemptCounter {
    fn name(&self) -> &'static str {
        "AttemptCounter"
    }

    fn read_before_attempt(&self, _: RequestRef, _: &Parts, _: &mut Bag) -> HookResult {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}
