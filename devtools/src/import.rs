//! `pooltable import`: loads an export (`GET /tenants/{tenantId}/export` pages, NDJSON, one
//! `{"Item": …}` per line in DynamoDB JSON) into a table, with the caller's (admin) credentials.
//!
//! Every line is parsed and checked before anything is written: a bad line is named and nothing is
//! loaded. Items are written with BatchWriteItem, 25 at a time, unprocessed items sent again with
//! backoff (`shared::store::operator::put_all`). An item that already exists is replaced, so an
//! import can be run again after a failure. An item an erasure reaches is left out ([`import`]).

use std::collections::BTreeMap;

use shared::identity::ids::TenantId;
use shared::identity::keys::{tenant_of_key, PK, SK};
use shared::store::client::query::{string_attr, Item};
use shared::store::client::scoped::TenantDb;
use shared::store::erasures::{without_erased, ERASURE};
use shared::store::lifecycle::tenant_items::item_from_json;
use shared::store::operator::put_all;

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

/// What an import did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    /// Items written.
    pub written: usize,
    /// Items left out: an erasure the table (or the import) records reaches them.
    pub erased: usize,
}

/// Writes `items` into `table` (one per key: [`last_per_key`]), but those an erasure reaches.
///
/// An export taken before a user was erased holds the user's items; put back beside the erasure's
/// record, they would undo it, as a restore never does (`shared::store::erasures`). So the
/// import's own erasure records are written first, then each tenant's other items are written
/// without those its records in `table` reach (one consistent GetItem per user or order named).
pub async fn import(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    items: Vec<Item>,
) -> Result<Imported, String> {
    let failed = |e: shared::store::client::error::StoreError| e.to_string();
    let (records, others): (Vec<Item>, Vec<Item>) =
        last_per_key(items).into_iter().partition(is_erasure_record);
    put_all(client, table, &records).await.map_err(failed)?;
    let mut by_tenant: BTreeMap<Option<TenantId>, Vec<Item>> = BTreeMap::new();
    for item in others {
        let tenant = string_attr(&item, PK).and_then(|pk| tenant_of_key(&pk));
        by_tenant.entry(tenant).or_default().push(item);
    }
    let mut imported = Imported {
        written: records.len(),
        erased: 0,
    };
    for (tenant, items) in by_tenant {
        let given = items.len();
        let kept = match tenant {
            Some(tenant) => {
                let live = TenantDb::on_client(client.clone(), tenant, table);
                without_erased(&live, &live, items).await.map_err(failed)?
            }
            None => items,
        };
        put_all(client, table, &kept).await.map_err(failed)?;
        imported.written += kept.len();
        imported.erased += given - kept.len();
    }
    Ok(imported)
}

/// Whether `item` is an erasure's record (`shared::store::erasures`).
fn is_erasure_record(item: &Item) -> bool {
    string_attr(item, "kind").as_deref() == Some(ERASURE)
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
