//! Entities, declared once: a serde struct is an entity when it names its declaration
//! (`identity::entities`: its kind, where it lives, how GSI1 holds it) and how its key is built from
//! what names one. Its item is its serde form beside that key and the bookkeeping every item
//! carries (`kind` as declared, `tenantId`, the catalog entry); its reads, puts, deletes and
//! transaction actions are derived from the declaration, so no caller lists a kind or a key twice.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::identity::cursor::Key;
use crate::identity::entities::EntityKind;
use crate::identity::ids::TenantId;
use crate::store::client::error::StoreError;
use crate::store::client::items::{get_item, item_with_keys, view_from_item};
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
use crate::store::client::sealed::{open_item, stored_form};
use crate::store::client::write::Write;

/// A kind's stored form: its attributes (serde), its declaration and its key.
pub trait Entity: Serialize + DeserializeOwned {
    /// Its declaration: the `kind` it is stored as, its home, its GSI1 shape.
    const DECLARATION: EntityKind;
    /// What names one: an id, an email, a code.
    type Id: ?Sized;
    /// Its table key in `tenant`'s keys (from the declaration's key space).
    fn key(tenant: &TenantId, id: &Self::Id) -> Key;
}

impl TenantDb {
    /// The item of `entity`, named `id`, in this tenant's keys, as stored (sealed under the tenant's
    /// key when its kind is sealed).
    pub fn entity_item<E: Entity>(&self, id: &E::Id, entity: &E) -> Result<Item, StoreError> {
        let key = E::key(&self.tenant, id);
        let item = item_with_keys(entity, key, E::DECLARATION.stored_as, &self.tenant)?;
        stored_form(self.key.as_deref(), item)
    }

    /// A put of `entity`, named `id` (a [`Write`]: a condition, alone or in a transaction).
    pub fn put_entity<E: Entity>(&self, id: &E::Id, entity: &E) -> Result<Write, StoreError> {
        Ok(self.put_item(self.entity_item(id, entity)?))
    }

    /// A delete of the `E` named `id`.
    pub fn delete_entity<E: Entity>(&self, id: &E::Id) -> Write {
        self.delete_item(E::key(&self.tenant, id))
    }

    /// The `E` named `id`, if there is one (1 GetItem, eventually consistent; a moving tenant's
    /// from either table).
    pub async fn read_entity<E: Entity>(&self, id: &E::Id) -> Result<Option<E>, StoreError> {
        get_item(self, E::key(&self.tenant, id))
            .await?
            .map(|item| view_from_item(open_item(self.key.as_deref(), item)?))
            .transpose()
    }

    /// The `E` named `id` as a strongly consistent read finds it (a read that decides a write).
    pub async fn read_entity_consistent<E: Entity>(
        &self,
        id: &E::Id,
    ) -> Result<Option<E>, StoreError> {
        self.get(E::key(&self.tenant, id)).consistent().view().await
    }
}
