//! The one way an item changes place: a re-sharding's move to a new partition in the same table,
//! and a move between placements' move to the same key in another table.
//!
//! One transaction puts the copy on condition that nothing is at its new place, and deletes the
//! original on condition that it still exists (and, for a pull or a group, that it is still as it
//! was read).
//! So a copy never overwrites a newer write there, and a deleted item is never brought back. When a
//! newer item is already at the new place, the original is only deleted: the newer item wins.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};

use crate::identity::keys::{table_key, PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::query::Item;
use crate::store::client::transact::{transact, TransactError};

/// Where an item goes: its table, and its new partition (`None`: the same key).
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub table: &'a str,
    pub pk: Option<&'a str>,
}

/// What became of one relocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relocated {
    /// This call moved it.
    Moved,
    /// Gone from where it was read (moved or deleted since), or a newer item was at the new place
    /// (the original was dropped).
    NotMoved,
    /// Changed where it was read since it was read (only when asked to check): read it again.
    Changed,
}

/// Moves `item` (read from `from`) to `to`: `Ok(true)` when this call moved it, `Ok(false)` when it
/// was gone from `from` already (moved or deleted since it was read) or a newer item was at `to`.
pub async fn relocate(
    client: &aws_sdk_dynamodb::Client,
    from: &str,
    item: &Item,
    to: Place<'_>,
) -> Result<bool, StoreError> {
    let moved = relocate_checked(client, from, item, to, false).await?;
    Ok(moved == Relocated::Moved)
}

/// [`relocate`], and with `unchanged` the original is deleted only if it is still exactly `item`
/// (a write that reached it since it was read is never lost: [`Relocated::Changed`]).
pub async fn relocate_checked(
    client: &aws_sdk_dynamodb::Client,
    from: &str,
    item: &Item,
    to: Place<'_>,
    unchanged: bool,
) -> Result<Relocated, StoreError> {
    let mut copy = item.clone();
    if let Some(pk) = to.pk {
        copy.insert(PK.to_owned(), AttributeValue::S(pk.to_owned()));
    }
    relocate_as(client, from, item, copy, to.table, unchanged).await
}

/// Moves an item while a write replaces it: `new` is put at the same key in `to` in place of
/// `item` (read from `from`), which is deleted on condition that it is still as read. One
/// transaction where a pull and the write would take two; [`Relocated::Moved`] means `item` was
/// the item `new` replaced.
pub async fn replace_moving(
    client: &aws_sdk_dynamodb::Client,
    from: &str,
    item: &Item,
    new: &Item,
    to: &str,
) -> Result<Relocated, StoreError> {
    relocate_as(client, from, item, new.clone(), to, true).await
}

async fn relocate_as(
    client: &aws_sdk_dynamodb::Client,
    from: &str,
    item: &Item,
    copy: Item,
    to: &str,
    unchanged: bool,
) -> Result<Relocated, StoreError> {
    let old_key = table_key(item);
    let put = Put::builder()
        .table_name(to)
        .set_item(Some(copy))
        .condition_expression("attribute_not_exists(PK)")
        .build()?;
    let (condition, names, values) = match unchanged {
        true => as_read(item),
        false => ("attribute_exists(PK)".to_owned(), None, None),
    };
    let delete = Delete::builder()
        .table_name(from)
        .set_key(Some(old_key.clone()))
        .condition_expression(condition)
        .set_expression_attribute_names(names)
        .set_expression_attribute_values(values)
        .build()?;
    let request = client
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().put(put).build())
        .transact_items(TransactWriteItem::builder().delete(delete).build());
    match transact(request).await {
        Ok(()) => Ok(Relocated::Moved),
        // A write at the new place since the item was read is newer than this copy, which goes (a
        // one-action transaction: the functions that move items link no DeleteItem of their own).
        Err(e) if e.failed_at(0) => {
            let delete = Delete::builder()
                .table_name(from)
                .set_key(Some(old_key))
                .build()?;
            let request = client
                .transact_write_items()
                .transact_items(TransactWriteItem::builder().delete(delete).build());
            match transact(request).await {
                Ok(()) | Err(TransactError::ConditionFailed { .. }) => Ok(Relocated::NotMoved),
                Err(TransactError::Store(e)) => Err(e),
            }
        }
        Err(TransactError::ConditionFailed { .. }) if unchanged => Ok(Relocated::Changed),
        // Deleted (or moved by another call) since it was read.
        Err(TransactError::ConditionFailed { .. }) => Ok(Relocated::NotMoved),
        Err(TransactError::Store(e)) => Err(e),
    }
}

/// Items one [`relocate_together`] moves at most (two actions each, of DynamoDB's 100).
pub const TOGETHER: usize = 25;

/// Moves `items` (read from `from`) to the same keys in `to` in one transaction: each copy on
/// condition that nothing is at its key in `to`, each original on condition that it is still as
/// read. `Ok(true)` when all moved; `Ok(false)` when nothing moved because a condition failed or the
/// transaction kept conflicting: relocate them one by one ([`relocate_checked`]).
pub async fn relocate_together(
    client: &aws_sdk_dynamodb::Client,
    from: &str,
    to: &str,
    items: &[Item],
) -> Result<bool, StoreError> {
    let mut request = client.transact_write_items();
    for item in items.iter().take(TOGETHER) {
        let key = table_key(item);
        let put = Put::builder()
            .table_name(to)
            .set_item(Some(item.clone()))
            .condition_expression("attribute_not_exists(PK)")
            .build()?;
        let (condition, names, values) = as_read(item);
        let delete = Delete::builder()
            .table_name(from)
            .set_key(Some(key))
            .condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .build()?;
        request = request
            .transact_items(TransactWriteItem::builder().put(put).build())
            .transact_items(TransactWriteItem::builder().delete(delete).build());
    }
    match transact(request).await {
        Ok(()) => Ok(true),
        Err(TransactError::ConditionFailed { .. })
        | Err(TransactError::Store(StoreError::Contended(_))) => Ok(false),
        Err(TransactError::Store(e)) => Err(e),
    }
}

type Names = Option<HashMap<String, String>>;
type Values = Option<HashMap<String, AttributeValue>>;

/// The condition that the item is still as `item` was read: each of its attributes equal. (A write
/// that only added an attribute the read item did not have is not seen: DynamoDB has no condition
/// on an item's set of attributes.)
fn as_read(item: &Item) -> (String, Names, Values) {
    let mut names = HashMap::new();
    let mut values = HashMap::new();
    let mut clauses = vec!["attribute_exists(PK)".to_owned()];
    let mut attributes: Vec<_> = item.iter().filter(|(k, _)| *k != PK && *k != SK).collect();
    attributes.sort_by(|a, b| a.0.cmp(b.0));
    for (n, (name, value)) in attributes.into_iter().enumerate() {
        names.insert(format!("#r{n}"), name.clone());
        values.insert(format!(":r{n}"), value.clone());
        clauses.push(format!("#r{n} = :r{n}"));
    }
    let names = (!names.is_empty()).then_some(names);
    let values = (!values.is_empty()).then_some(values);
    (clauses.join(" AND "), names, values)
}
