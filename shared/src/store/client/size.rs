//! How big an item is, about: what pages, steps and caches are cut by, and what a failed write is
//! charged. Imports nothing of the store, so every store module may use it.

use aws_sdk_dynamodb::types::AttributeValue;

/// About the bytes of `item` as JSON: names and values, without the JSON punctuation of nesting.
pub fn approximate_bytes(item: &std::collections::HashMap<String, AttributeValue>) -> usize {
    fn value(v: &AttributeValue) -> usize {
        match v {
            AttributeValue::S(s) | AttributeValue::N(s) => s.len() + 2,
            AttributeValue::B(b) => b.as_ref().len() * 4 / 3 + 2,
            AttributeValue::Bool(_) | AttributeValue::Null(_) => 5,
            AttributeValue::M(m) => {
                m.iter().map(|(k, v)| k.len() + 3 + value(v)).sum::<usize>() + 2
            }
            AttributeValue::L(l) => l.iter().map(|v| value(v) + 1).sum::<usize>() + 2,
            AttributeValue::Ss(l) | AttributeValue::Ns(l) => l.iter().map(|s| s.len() + 3).sum(),
            AttributeValue::Bs(l) => l.iter().map(|b| b.as_ref().len() * 4 / 3 + 3).sum(),
            _ => 8,
        }
    }
    item.iter().map(|(k, v)| k.len() + 3 + value(v)).sum()
}
