//! openapi.yaml (OpenAPI 3.1) as an OpenAPI 3.0.3 document for progenitor, which reads 3.0 only
//! (progenitor#1268). Two passes over a `serde_yaml::Value`, so no OpenAPI model is needed:
//!
//! 1. `downgrade`: the 3.1 constructs the file uses (and a few it may) rewritten to their 3.0
//!    spelling. Where 3.0 has no equivalent a keyword is dropped only if that loosens the schema
//!    (a client then accepts more, never refuses a valid answer); otherwise it is an error.
//! 2. `adapt_for_progenitor`: valid 3.0 that progenitor 0.15 still refuses or panics on,
//!    reshaped for the client. Each rule says which behaviour of progenitor it works around.
//!    (Two such rules are about schemas and run in pass 1's schema walk; their docs begin
//!    "For progenitor".)
//!
//! The rules are in this module's files under `openapi30/`: pass 1's walk in `downgrade.rs` and its
//! schema rules in `schema_keywords.rs`; pass 2 in `progenitor.rs`.

use serde_yaml::{Mapping, Value};
use thiserror::Error;

mod downgrade;
mod progenitor;
mod schema_keywords;

use downgrade::downgrade;
use progenitor::adapt_for_progenitor;

#[derive(Debug, Error)]
pub enum Openapi30Error {
    #[error("the OpenAPI document is not a mapping")]
    NotAMapping,
    #[error("expected an OpenAPI 3.1 document, found openapi: {0:?}")]
    NotOpenapi31(String),
    #[error("{path}: `{keyword}` has no OpenAPI 3.0 equivalent")]
    Unsupported { path: String, keyword: &'static str },
}

/// The 3.0.3 equivalent of a 3.1 document, adapted for progenitor.
pub fn to_openapi_30(mut doc: Value) -> Result<Value, Openapi30Error> {
    downgrade(&mut doc)?;
    adapt_for_progenitor(&mut doc);
    Ok(doc)
}

// Helpers of both passes.

fn ref_of(node: &Value) -> Option<&str> {
    node.get("$ref").and_then(Value::as_str)
}

fn mapping<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Mapping(
        entries
            .into_iter()
            .map(|(k, v)| (Value::from(k), v))
            .collect(),
    )
}

fn empty() -> Value {
    Value::Mapping(Mapping::new())
}

#[cfg(test)]
mod tests;
