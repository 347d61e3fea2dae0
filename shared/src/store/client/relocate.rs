//! The one way an item changes place: a re-sharding's move to a new partition in the same table,
//! and a move between placements' move to the same key in another table.
//!
//! One transaction puts the copy on condition that nothing is at its new place, and deletes the
//! original on condition that it still exists. So a copy never overwrites a newer write there, and a
//! deleted item is never brought back. When a newer item is already at the new place, the original is
//! only deleted: the newer item wins.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};

use crate::identity::keys::{PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::query::Item;
use crate::store::client::transact::{transact, TransactError};

/// Where an item goes: its table, and its new partition (`None`: the same key).
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub table: &'a str,
    pub pk: Option<&'a str>,
}

/// Moves `item` (read from `from`) to `to`: `Ok(true)` when this call moved it, `Ok(false)` when it
/// was gone from `from` already (moved or deleted since it was read) or a newer item was at `to`.
pub async fn relocate(
    client: &aws_sdk_dynamodb::Client,
    from: &str,
    item: &Item,
    to: Place<'_>,
) -> Result<bool, StoreError> {
    let old_key: Item = [PK, SK]
        .into_iter()
        .filter_map(|k| item.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect();
    let mut copy = item.clone();
    if let Some(pk) = to.pk {
        copy.insert(PK.to_owned(), AttributeValue::S(pk.to_owned()));
    }
    let internal = |e: aws_sdk_dynamodb::error::BuildError| StoreError::Internal(e.to_string());
    let put = Put::builder()
        .table_name(to.table)
        .set_item(Some(copy))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .map_err(internal)?;
    let delete = Delete::builder()
        .table_name(from)
        .set_key(Some(old_key.clone()))
        .condition_expression("attribute_exists(PK)")
        .build()
        .map_err(internal)?;
    let request = client
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().put(put).build())
        .transact_items(TransactWriteItem::builder().delete(delete).build());
    match transact(request).await {
        Ok(()) => Ok(true),
        // A write at the new place since the item was read is newer than this copy, which goes (a
        // one-action transaction: the functions that move items link no DeleteItem of their own).
        Err(e) if e.failed_at(0) => {
            let delete = Delete::builder()
                .table_name(from)
                .set_key(Some(old_key))
                .build()
                .map_err(internal)?;
            let request = client
                .transact_write_items()
                .transact_items(TransactWriteItem::builder().delete(delete).build());
            match transact(request).await {
                Ok(()) | Err(TransactError::ConditionFailed { .. }) => Ok(false),
                Err(TransactError::Store(e)) => Err(e),
            }
        }
        // Deleted (or moved by another call) since it was read.
        Err(TransactError::ConditionFailed { .. }) => Ok(false),
        Err(TransactError::Store(e)) => Err(e),
    }
}
