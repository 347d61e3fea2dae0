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

use serde::Serialize;
use shared::store::client::query::{string_attr, Item};
use shared::ApiError;

pub mod store;
pub use store::{product_key, store_product, ProductWrite};

/// The largest product document accepted, as JSON.
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;

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
