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

/// The most maps and lists a document may nest, itself counted: DynamoDB stores at most 32 levels,
/// a value inside at most 31 maps or lists, and the document is the item's `document` attribute,
/// its first level. The same for a sealed document (one answer for every tenant).
pub const MAX_DOCUMENT_NESTING: usize = 31;

/// DynamoDB's limits on what a map can hold: nesting ([`MAX_DOCUMENT_NESTING`]), non-empty
/// attribute names, and numbers between 1e-130 and 9.99e125 in magnitude. A document breaking one
/// is the caller's error (400 naming the path), not a 500 from DynamoDB. `depth` is the maps and
/// lists around `value`.
pub fn check_document(value: &serde_json::Value, path: &str, depth: usize) -> Result<(), ApiError> {
    use serde_json::Value;
    if (value.is_object() || value.is_array()) && depth >= MAX_DOCUMENT_NESTING {
        return Err(ApiError::bad_request(
            path,
            format!("documents may nest at most {MAX_DOCUMENT_NESTING} objects or arrays, the document itself counted"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// `maps` objects nested in one another around `inner`, the outermost the document.
    fn nested(maps: usize, inner: Value) -> Value {
        (0..maps).fold(inner, |v, _| json!({ "a": v }))
    }

    #[test]
    fn a_document_nests_at_most_as_deep_as_dynamodb_stores_its_attribute() {
        // GIVEN DynamoDB's limit: a value inside at most 31 maps or lists, the attribute's own
        // map the first (measured against the service: 31 accepted, 32 refused)
        // WHEN documents of 31 objects around a value, and of 31 around an empty list, are checked
        // THEN they pass
        assert!(check_product(&nested(31, json!(1)), "document").is_ok());
        assert!(check_product(&nested(30, json!([1])), "document").is_ok());
        // AND one more level, by an object, an array or an empty object, is a 400 naming its path
        for deeper in [
            nested(32, json!(1)),
            nested(31, json!([1])),
            nested(31, json!({})),
        ] {
            let err = check_product(&deeper, "document").unwrap_err();
            let response = err.into_response();
            assert_eq!(response.status(), 400);
            let body = String::from_utf8_lossy(response.body().as_ref()).into_owned();
            assert!(
                body.contains(&format!("document{}", ".a".repeat(31))),
                "{body}"
            );
        }
    }
}
