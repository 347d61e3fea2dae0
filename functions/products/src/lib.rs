//! The product catalog, write-sharded per tenant.
//!
//! Their keys are built in `shared::identity::keys`; the key table (generated from it) is in
//! `docs/key-scheme.md`.
//!
//! The shard is computed from the id, so reading one product is one GetItem; listing queries every
//! shard concurrently and merges (`shared::store::scatter`).

// @generated begin: `pooltable gen` writes the route modules from routes.yaml
pub mod delete_product;
pub mod get_product;
pub mod put_product;
pub mod query_tenant_products;
// @generated end

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use serde::Serialize;
use shared::identity::clock::rfc3339;
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{kind, sharded_entity_key, Key};
use shared::store::client::query::{string_attr, Item};
use shared::store::client::scoped::TenantDb;
use shared::store::tenancy::layout::{self, Keys, Layout, Put};
use shared::ApiError;

/// The largest product document accepted, as JSON.
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;

/// The table key of product `id` for a tenant with `shard_count` shards.
pub fn product_key(t: &TenantId, id: &EntityId, shard_count: u32) -> Key {
    sharded_entity_key(t, kind::PRODUCT, kind::PRODUCT, id, shard_count)
}

/// DynamoDB's limits on what a map can hold: nesting of at most 32 levels, non-empty attribute names,
/// and numbers between 1e-130 and 9.99e125 in magnitude. A document breaking one is the caller's
/// error (400 naming the path), not a 500 from DynamoDB.
pub fn check_document(value: &serde_json::Value, path: &str, depth: usize) -> Result<(), ApiError> {
    use serde_json::Value;
    if depth > 32 {
        return Err(ApiError::bad_request(
            path,
            "documents may nest at most 32 levels",
        ));
    }
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k.is_empty() {
                    return Err(ApiError::bad_request(
                        path,
                        "attribute names must not be empty",
                    ));
                }
                check_document(v, &format!("{path}.{k}"), depth + 1)?;
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                check_document(v, &format!("{path}[{i}]"), depth + 1)?;
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0).abs();
            if x != 0.0 && !(1e-130..9.99e125).contains(&x) {
                return Err(ApiError::bad_request(
                    path,
                    "numbers must be 0 or between 1e-130 and 9.99e125 in magnitude",
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Checks a product document, `path` naming it in a 400: a JSON object of at most 64 KB that
/// DynamoDB can store ([`check_document`]).
pub fn check_product(document: &serde_json::Value, path: &str) -> Result<(), ApiError> {
    if !document.is_object() {
        let got = match document {
            serde_json::Value::Array(_) => "an array",
            serde_json::Value::String(_) => "a string",
            serde_json::Value::Number(_) => "a number",
            serde_json::Value::Bool(_) => "a boolean",
            _ => "null",
        };
        return Err(ApiError::bad_request(
            path,
            format!("The product document must be a JSON object: expected an object, got {got}."),
        ));
    }
    let bytes = serde_json::to_vec(document).map_or(usize::MAX, |b| b.len());
    if bytes > MAX_DOCUMENT_BYTES {
        return Err(ApiError::bad_request(
            path,
            format!(
                "The product document is {bytes} bytes; at most {MAX_DOCUMENT_BYTES} are accepted."
            ),
        ));
    }
    check_document(document, path, 0)
}

/// Writes product `id` of `tenant` under `layout` (see `shared::store::tenancy::layout`), as of
/// `written_at` (epoch ms, stored as `updatedAt` and `updatedAtMs`), in one transaction with `along`
/// when anything comes along. A `late` write (an import's, delivered after the fact) does not replace
/// a product written after `written_at` ([`Put::Superseded`]). The one way a product is written:
/// `PUT /products/{id}` and the import consumer both call it.
#[allow(clippy::too_many_arguments)]
pub async fn store_product(
    db: &TenantDb,
    layout: Layout,
    tenant: &TenantId,
    id: &EntityId,
    document: &serde_json::Value,
    written_at: u64,
    along: Vec<TransactWriteItem>,
    late: bool,
) -> Result<(Keys, Put), ApiError> {
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
            AttributeValue::S(rfc3339(written_at)),
        ),
        (
            layout::UPDATED_AT_MS.to_owned(),
            AttributeValue::N(written_at.to_string()),
        ),
    ]);
    let put =
        layout::put_along(db, layout, &keys, fields, along, late.then_some(written_at)).await?;
    Ok((keys, put))
}

/// A product as the API returns it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProductView {
    pub product_id: String,
    pub document: serde_json::Value,
    pub updated_at: String,
}

pub fn product_from_item(item: &Item) -> Result<ProductView, ApiError> {
    let document = item
        .get("document")
        .cloned()
        .map(serde_dynamo::from_attribute_value::<_, serde_json::Value>)
        .transpose()
        .map_err(|e| ApiError::Internal(format!("stored product does not parse: {e}")))?
        .unwrap_or(serde_json::Value::Null);
    Ok(ProductView {
        product_id: string_attr(item, "productId").unwrap_or_default(),
        document,
        updated_at: string_attr(item, "updatedAt").unwrap_or_default(),
    })
}
