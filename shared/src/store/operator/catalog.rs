//! The catalog backfill (`pooltable backfill-catalog`): gives every item of an id-named partition its catalog entry
//! (`shared::identity::keys::catalog_key`), for items written before the catalog index existed.
//! Run once after deploying functions that write the entry, before offboarding or exporting a
//! tenant: the tenant walk finds id-named partitions only through the catalog.
//!
//! An admin tool (a Scan with the deployer's credentials, never tenant-scoped code). Each update is
//! conditioned on the item still existing and having no entry, so it never creates an item and can
//! run while the functions serve, and again.

use crate::identity::ids::TenantId;
use crate::identity::keys::{catalog_key, primary_key, CATALOG, PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::expr::{attr, exists, Expression};
use crate::store::client::query::{string_attr, Item};

/// What a backfill did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Backfilled {
    pub scanned: usize,
    /// Items given their catalog entry.
    pub enlisted: usize,
}

/// The catalog entry `item` lacks, if any: items of a tenant's id-named partitions only.
fn missing_entry(item: &Item) -> Option<String> {
    if item.contains_key(CATALOG) {
        return None;
    }
    let pk = item.get(PK)?.as_s().ok()?;
    let tenant = crate::identity::keys::tenant_segment(pk)?;
    catalog_key(&TenantId::parse(tenant).ok()?, pk)
}

/// Scans `table` and adds the missing catalog entries.
pub async fn backfill_catalog(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<Backfilled, StoreError> {
    let mut done = Backfilled::default();
    let scan = Expression::builder()
        .with_projection([PK, SK, CATALOG])
        .build()
        .to_scan_fluent_builder(client.scan().table_name(table));
    let mut items = scan.into_paginator().items().send();
    while let Some(item) = items.next().await {
        let item = item.map_err(StoreError::from_sdk)?;
        done.scanned += 1;
        let (Some(entry), Some(pk), Some(sk)) = (
            missing_entry(&item),
            string_attr(&item, PK),
            string_attr(&item, SK),
        ) else {
            continue;
        };
        let update = Expression::builder()
            .with_update(attr(CATALOG).set(entry))
            .with_condition(exists().and(attr(CATALOG).attribute_not_exists()))
            .build();
        let updated = update
            .to_update_item_fluent_builder(client.update_item().table_name(table))
            .set_key(Some(primary_key(pk, sk)))
            .send()
            .await;
        match updated {
            Ok(_) => done.enlisted += 1,
            // Deleted meanwhile, or written with its entry by a function: nothing to do.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) => {}
            Err(e) => return Err(StoreError::from_sdk(e)),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::entities::{PRODUCTS, SESSION};
    use crate::identity::keys::KeySpace;
    use aws_sdk_dynamodb::types::AttributeValue;

    #[test]
    fn only_items_of_id_named_partitions_without_an_entry_need_one() {
        let item = |pk: &str, catalog: Option<&str>| {
            let mut i = Item::from([(PK.to_owned(), AttributeValue::S(pk.to_owned()))]);
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
