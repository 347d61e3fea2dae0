//! `pooltable backfill-catalog`: gives every item of an id-named partition its catalog entry
//! (`shared::identity::keys::catalog_key`), for items written before the catalog index existed.
//! Run once after deploying functions that write the entry, before offboarding or exporting a
//! tenant: the tenant walk finds id-named partitions only through the catalog.
//!
//! An admin tool (a Scan with the deployer's credentials, never tenant-scoped code). Each update is
//! conditioned on the item still existing and having no entry, so it never creates an item and can
//! run while the functions serve, and again.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::identity::ids::TenantId;
use shared::identity::keys::{catalog_key, CATALOG, PK, SK};

/// What a backfill did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Backfilled {
    pub scanned: usize,
    /// Items given their catalog entry.
    pub enlisted: usize,
}

/// The catalog entry `item` lacks, if any: items of a tenant's id-named partitions only.
fn missing_entry(item: &shared::store::client::query::Item) -> Option<String> {
    if item.contains_key(CATALOG) {
        return None;
    }
    let pk = item.get(PK)?.as_s().ok()?;
    let tenant = shared::identity::keys::tenant_segment(pk)?;
    catalog_key(&TenantId::parse(tenant).ok()?, pk)
}

/// Scans `table` and adds the missing catalog entries.
pub async fn backfill(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<Backfilled, String> {
    let mut done = Backfilled::default();
    let mut items = client
        .scan()
        .table_name(table)
        .projection_expression("#pk, #sk, #catalog")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_names("#sk", SK)
        .expression_attribute_names("#catalog", CATALOG)
        .into_paginator()
        .items()
        .send();
    while let Some(item) = items.next().await {
        let item =
            item.map_err(|e| format!("Scan: {}", aws_sdk_dynamodb::error::DisplayErrorContext(e)))?;
        done.scanned += 1;
        let Some(entry) = missing_entry(&item) else {
            continue;
        };
        let updated = client
            .update_item()
            .table_name(table)
            .key(PK, item[PK].clone())
            .key(SK, item[SK].clone())
            .update_expression("SET #catalog = :entry")
            .condition_expression("attribute_exists(PK) AND attribute_not_exists(#catalog)")
            .expression_attribute_names("#catalog", CATALOG)
            .expression_attribute_values(":entry", AttributeValue::S(entry))
            .send()
            .await;
        match updated {
            Ok(_) => done.enlisted += 1,
            // Deleted meanwhile, or written with its entry by a function: nothing to do.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) => {}
            Err(e) => {
                return Err(format!(
                    "UpdateItem: {}",
                    aws_sdk_dynamodb::error::DisplayErrorContext(e)
                ))
            }
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::identity::entities::{PRODUCTS, SESSION};
    use shared::identity::keys::KeySpace;

    #[test]
    fn only_items_of_id_named_partitions_without_an_entry_need_one() {
        let item = |pk: &str, catalog: Option<&str>| {
            let mut i = shared::store::client::query::Item::from([(
                PK.to_owned(),
                AttributeValue::S(pk.to_owned()),
            )]);
            if let Some(c) = catalog {
                i.insert(CATALOG.into(), AttributeValue::S(c.into()));
            }
            i
        };
        let acme = TenantId::parse("acme").unwrap();
        let session = SESSION.key(&acme, "x");
        assert!(missing_entry(&item(&session, None)).is_some());
        assert_eq!(missing_entry(&item(&session, Some("c"))), None);
        assert_eq!(missing_entry(&item(&PRODUCTS.key(&acme, 1), None)), None);
        assert_eq!(missing_entry(&item("OTHER#x", None)), None);
    }
}
