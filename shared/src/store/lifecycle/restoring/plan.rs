//! What one page of a restore's walk changes: the comparison of each item with its counterpart in
//! the other table. The same plan is what a dry run counts and what a step commits, so the dry
//! run's counts are the restore's.

use std::future::Future;

use futures::StreamExt;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::ids::TenantId;
use crate::identity::keys::{home_shard_pk, partition_kind, table_key, PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::items::get_item_consistent;
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
use crate::store::erasures::without_erased;
use crate::store::lifecycle::offboarding::kind_of;

/// Point reads one page sends at once.
const READS_IN_FLIGHT: usize = 8;

/// One change a restore makes to a live item.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The source holds it and the live table does not: put it back.
    PutBack(Item),
    /// Both hold it, and they differ: the source's replaces the live one.
    Overwrite(Item),
    /// The live table holds it and the source does not: delete it (its key).
    Delete(Item),
}

/// A change and the kind it is counted under ([`kind_of`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub kind: String,
    pub change: Change,
}

/// Whether a restore makes `item` equal to the source: it is one of the routes' entities
/// ([`crate::identity::entities::restored`]): not the machinery's own, nor what grants access.
pub fn restored(tenant: &TenantId, item: &Item) -> bool {
    match item.get(PK) {
        Some(AttributeValue::S(pk)) => {
            partition_kind(tenant, pk).is_some_and(crate::identity::entities::restored)
        }
        _ => false,
    }
}

/// `item`'s key in a layout of `shards` write shards: a sharded item's home shard, any other
/// item's own key.
pub fn key_in(tenant: &TenantId, item: &Item, shards: u32) -> Item {
    let text = |name: &str| match item.get(name) {
        Some(AttributeValue::S(s)) => s.clone(),
        _ => String::new(),
    };
    let (pk, sk) = (text(PK), text(SK));
    let pk = home_shard_pk(tenant, &pk, &sk, shards).unwrap_or(pk);
    Item::from([
        (PK.to_owned(), AttributeValue::S(pk)),
        (SK.to_owned(), AttributeValue::S(sk)),
    ])
}

/// The changes that make the live items of a page of the **source**'s walk equal to it: each item
/// read at its key in the live layout (`live_shards`), put back or overwritten when it differs.
/// An item an erasure recorded in the live table reaches is never put back
/// ([`crate::store::erasures::without_erased`]): a restore re-applies every erasure.
pub async fn puts(
    live: &TenantDb,
    source: &TenantDb,
    source_items: &[Item],
    live_shards: u32,
) -> Result<Vec<Planned>, StoreError> {
    let source_items = without_erased(live, source, source_items.to_vec()).await?;
    plan_each(live, &source_items, |item| put(live, item, live_shards)).await
}

async fn put(live: &TenantDb, item: Item, live_shards: u32) -> Result<Option<Planned>, StoreError> {
    let key = key_in(&live.tenant, &item, live_shards);
    let mut wanted = item;
    wanted.extend(key.clone());
    let found = get_item_consistent(live, key).await?;
    let kind = kind_of(&live.tenant, &wanted);
    Ok(match found {
        None => Some(Planned {
            kind,
            change: Change::PutBack(wanted),
        }),
        Some(found) if found != wanted => Some(Planned {
            kind,
            change: Change::Overwrite(wanted),
        }),
        Some(_) => None,
    })
}

/// The changes that remove from the live items of a page of the **live** walk those the source
/// does not hold (each read in the source at its key in the source's layout, `source_shards`).
pub async fn deletes(
    source: &TenantDb,
    live_items: &[Item],
    source_shards: u32,
) -> Result<Vec<Planned>, StoreError> {
    plan_each(source, live_items, |item| {
        delete(source, item, source_shards)
    })
    .await
}

async fn delete(
    source: &TenantDb,
    item: Item,
    source_shards: u32,
) -> Result<Option<Planned>, StoreError> {
    let found = get_item_consistent(source, key_in(&source.tenant, &item, source_shards)).await?;
    Ok(found.is_none().then(|| Planned {
        kind: kind_of(&source.tenant, &item),
        change: Change::Delete(table_key(&item)),
    }))
}

/// `plan` run on each of `items` a restore makes equal (`db`'s tenant's), a few reads at a time.
async fn plan_each<Plan, Planning>(
    db: &TenantDb,
    items: &[Item],
    plan: Plan,
) -> Result<Vec<Planned>, StoreError>
where
    Plan: FnMut(Item) -> Planning,
    Planning: Future<Output = Result<Option<Planned>, StoreError>>,
{
    // Collected first: a stream borrowing `items` through a filter is not `Send` for the runtime.
    let restored: Vec<Item> = items
        .iter()
        .filter(|item| restored(&db.tenant, item))
        .cloned()
        .collect();
    let plans = futures::stream::iter(restored.into_iter().map(plan)).buffered(READS_IN_FLIGHT);
    let mut planned = Vec::new();
    for result in plans.collect::<Vec<_>>().await {
        planned.extend(result?);
    }
    Ok(planned)
}
