//! Every write of a product, and its key: the one way a product is written (`PUT /products/{id}`
//! and the import consumer both call [`store_product`]). Reads go through the layout
//! (`shared::store::tenancy::layout`) and the scatter-gather, with the key from [`product_key`].

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use shared::identity::clock::rfc3339;
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{kind, sharded_entity_key, Key};
use shared::store::client::query::Item;
use shared::store::client::scoped::TenantDb;
use shared::store::tenancy::layout::{self, Keys, Layout, Put, WrittenAt};
use shared::ApiError;

/// The table key of product `id` for a tenant with `shard_count` shards.
pub fn product_key(t: &TenantId, id: &EntityId, shard_count: u32) -> Key {
    sharded_entity_key(t, kind::PRODUCT, kind::PRODUCT, id, shard_count)
}

/// One product write: the product, when it is written, and what commits with it.
pub struct ProductWrite<'a> {
    pub id: &'a EntityId,
    pub document: &'a serde_json::Value,
    /// Stored as `updatedAt` and `updatedAtMs`; a late write (an import's, delivered after the
    /// fact) does not replace a product written after it ([`Put::Superseded`]).
    pub written_at: WrittenAt,
    /// Actions committed in the same transaction (an import's marker and not-deleted check).
    pub along: Vec<TransactWriteItem>,
}

impl<'a> ProductWrite<'a> {
    /// A write of now, alone (a PUT).
    pub fn now(id: &'a EntityId, document: &'a serde_json::Value, now_ms: u64) -> Self {
        Self {
            id,
            document,
            written_at: WrittenAt::now(now_ms),
            along: Vec::new(),
        }
    }
}

/// Writes the product under `layout` (see `shared::store::tenancy::layout`), in one transaction
/// with what comes along (1 PutItem alone, else 1 TransactWriteItems).
pub async fn store_product(
    db: &TenantDb,
    layout: Layout,
    write: ProductWrite<'_>,
) -> Result<(Keys, Put), ApiError> {
    let tenant = &db.tenant;
    let ProductWrite {
        id,
        document,
        written_at,
        along,
    } = write;
    let doc_av = serde_dynamo::to_attribute_value(document)
        .map_err(|e| ApiError::Internal(format!("convert document: {e}")))?;
    let keys = Keys::of(layout, |n| product_key(tenant, id, n));
    let fields = Item::from([
        ("kind".to_owned(), AttributeValue::S(kind::PRODUCT.into())),
        ("tenantId".to_owned(), AttributeValue::S(tenant.to_string())),
        ("productId".to_owned(), AttributeValue::S(id.to_string())),
        ("document".to_owned(), doc_av),
        (
            "updatedAt".to_owned(),
            AttributeValue::S(rfc3339(written_at.ms)),
        ),
        (
            layout::UPDATED_AT_MS.to_owned(),
            AttributeValue::N(written_at.ms.to_string()),
        ),
    ]);
    let put = layout::put_along(db, layout, &keys, fields, along, written_at.guard()).await?;
    Ok((keys, put))
}
