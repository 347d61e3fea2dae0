//! `pooltable import`: loads an export (`GET /tenants/{tenantId}/export` pages, NDJSON, one
//! `{"Item": …}` per line in DynamoDB JSON) into a table, with the caller's (admin) credentials.
//!
//! Every line is parsed and checked before anything is written: a bad line is named and nothing is
//! loaded. Items are written with BatchWriteItem, 25 at a time, unprocessed items sent again with
//! backoff (`shared::store::operator::put_all`). An item that already exists is replaced, so an import can be run again after a failure.

use shared::identity::keys::{PK, SK};
use shared::store::client::query::Item;
use shared::store::lifecycle::tenant_items::item_from_json;

/// Parses an export: every non-blank line must be `{"Item": {…}}` with string keys `PK` and `SK`.
pub fn parse_export(text: &str) -> Result<Vec<Item>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let at = |e: String| format!("line {}: {e}", i + 1);
            let value: serde_json::Value =
                serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
            let item = item_from_json(&value["Item"]).map_err(|e| at(e.to_string()))?;
            for key in [PK, SK] {
                if item.get(key).is_none_or(|v| v.as_s().is_err()) {
                    return Err(at(format!("the item has no string {key}")));
                }
            }
            Ok(item)
        })
        .collect()
}

/// `items` with one item per key, the last one given (overlapping pages name an item twice, and
/// BatchWriteItem refuses a batch that holds a key twice).
pub fn last_per_key(items: Vec<Item>) -> Vec<Item> {
    let key = |item: &Item| {
        [PK, SK].map(|k| {
            item.get(k)
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default()
        })
    };
    let mut at: std::collections::HashMap<[String; 2], usize> = std::collections::HashMap::new();
    let mut out: Vec<Item> = Vec::with_capacity(items.len());
    for item in items {
        match at.entry(key(&item)) {
            std::collections::hash_map::Entry::Occupied(e) => out[*e.get()] = item,
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(out.len());
                out.push(item);
            }
        }
    }
    out
}

/// Writes `items` into `table` (one per key: [`last_per_key`]); answers how many were written.
pub async fn import(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    items: Vec<Item>,
) -> Result<usize, String> {
    let items = last_per_key(items);
    shared::store::operator::put_all(client, table, &items)
        .await
        .map_err(|e| e.to_string())?;
    Ok(items.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::identity::ids::TenantId;
    use shared::identity::keys::{KeySpace, Space};

    /// The key (`PK` = `SK`) of the item the export lines name: `X#1` of tenant `a`.
    fn key() -> String {
        Space("X").key(&TenantId::parse("a").unwrap(), 1)
    }

    #[test]
    fn a_bad_line_is_named_and_nothing_is_parsed() {
        let k = key();
        let good = format!(
            r#"{{"Item": {{"PK": {{"S": "{k}"}}, "SK": {{"S": "{k}"}}, "n": {{"N": "1"}}}}}}"#
        );
        assert_eq!(
            parse_export(&format!("{good}\n\n{good}\n")).unwrap().len(),
            2
        );
        let no_sk = format!(r#"{{"Item": {{"PK": {{"S": "{k}"}}}}}}"#);
        assert_eq!(
            parse_export(&format!("{good}\n{no_sk}\n")),
            Err("line 2: the item has no string SK".into())
        );
        assert!(parse_export("{not json}\n")
            .unwrap_err()
            .starts_with("line 1:"));
    }

    #[test]
    fn an_item_named_twice_is_written_once_as_last_given() {
        let k = key();
        let line = |n: u32| {
            format!(
                r#"{{"Item": {{"PK": {{"S": "{k}"}}, "SK": {{"S": "{k}"}}, "n": {{"N": "{n}"}}}}}}"#
            )
        };
        let items = parse_export(&format!("{}\n{}\n", line(1), line(2))).unwrap();
        let once = last_per_key(items);
        assert_eq!(once.len(), 1);
        assert_eq!(once[0]["n"].as_n().unwrap(), "2");
    }
}
