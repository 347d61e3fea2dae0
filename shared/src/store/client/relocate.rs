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

/// A relocation's two actions: `copy` put at `to` on condition that nothing is there, and `item`
/// (read from `from`) deleted on condition that it is still there (with `unchanged`: still as
/// read), returning it as it is when not.
fn copy_and_delete(
    from: &str,
    to: &str,
    item: &Item,
    copy: Item,
    unchanged: bool,
) -> Result<(TransactWriteItem, TransactWriteItem), aws_sdk_dynamodb::error::BuildError> {
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
        .set_key(Some(table_key(item)))
        .condition_expression(condition)
        .set_expression_attribute_names(names)
        .set_expression_attribute_values(values)
        .return_values_on_condition_check_failure(
            aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
        )
        .build()?;
    Ok((
        TransactWriteItem::builder().put(put).build(),
        TransactWriteItem::builder().delete(delete).build(),
    ))
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
    let (put, delete) = copy_and_delete(from, to, item, copy, unchanged)?;
    let request = client
        .transact_write_items()
        .transact_items(put)
        .transact_items(delete);
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

/// One item a [`relocate_with`] carries: as read, and its new partition (`None`: the same key in
/// the other table).
#[derive(Debug, Clone)]
pub struct Relocation {
    pub item: Item,
    pub new_pk: Option<String>,
}

/// What became of one relocation while its transaction is being made to commit.
#[derive(Debug, Clone)]
enum Fate {
    /// Put this copy of it (as read, or as it now is) and delete the original as it is.
    Move(Item),
    /// A newer item is at its new place: only the original goes.
    DropOriginal,
    /// It is gone from where it was read (moved or deleted since): nothing to do.
    Gone,
}

/// Relocates `relocations` (read from `from`) to `to` in one transaction together with a step's
/// `checkpoint` (made for the number the transaction moves; its first action), each as
/// [`relocate_checked`] would: the copy on condition that nothing is at its new place (else only
/// the original goes), the original on condition that it is still there (with `unchanged`, still as
/// read; else it is carried as it now is). A failed condition of an item changes what is done with
/// it and the transaction is sent again, so the step commits all of its items' changes and its
/// count together, or none. `Ok(Some(moved))` once committed; `Ok(None)` when the checkpoint's
/// condition failed (another caller stepped first: nothing was written).
pub async fn relocate_with(
    client: &aws_sdk_dynamodb::Client,
    from: &str,
    to: &str,
    relocations: &[Relocation],
    unchanged: bool,
    checkpoint: impl Fn(u64) -> Result<TransactWriteItem, StoreError>,
) -> Result<Option<u64>, StoreError> {
    let mut fates: Vec<Fate> = relocations
        .iter()
        .map(|r| Fate::Move(r.item.clone()))
        .collect();
    // Each failed condition settles one item for good, or carries a changed one as it now is.
    for _ in 0..=2 * relocations.len() + 1 {
        let moved = fates.iter().filter(|f| matches!(f, Fate::Move(_))).count() as u64;
        let mut request = client
            .transact_write_items()
            .transact_items(checkpoint(moved)?);
        // Which relocation each action after the checkpoint is, and whether it is the copy.
        let mut actions = vec![None];
        for (n, (relocation, fate)) in relocations.iter().zip(&fates).enumerate() {
            match fate {
                Fate::Move(now) => {
                    let mut copy = now.clone();
                    if let Some(pk) = &relocation.new_pk {
                        copy.insert(PK.to_owned(), AttributeValue::S(pk.clone()));
                    }
                    let (put, delete) = copy_and_delete(from, to, now, copy, unchanged)?;
                    request = request.transact_items(put).transact_items(delete);
                    actions.extend([Some((n, true)), Some((n, false))]);
                }
                Fate::DropOriginal => {
                    let delete = Delete::builder()
                        .table_name(from)
                        .set_key(Some(table_key(&relocation.item)))
                        .build()?;
                    request =
                        request.transact_items(TransactWriteItem::builder().delete(delete).build());
                    actions.push(Some((n, false)));
                }
                Fate::Gone => {}
            }
        }
        match transact(request).await {
            Ok(()) => return Ok(Some(moved)),
            Err(TransactError::ConditionFailed { index: 0, .. }) => return Ok(None),
            Err(TransactError::ConditionFailed { index, item }) => {
                let Some(&Some((n, copy))) = actions.get(index) else {
                    return Err(StoreError::Internal(format!(
                        "a relocation's transaction failed at action {index}, which it did not send"
                    )));
                };
                fates[n] = match (copy, item) {
                    (true, _) => Fate::DropOriginal,
                    // Changed since read: carried as it now is.
                    (false, Some(now)) if unchanged => Fate::Move(now),
                    (false, _) => Fate::Gone,
                };
            }
            Err(TransactError::Store(e)) => return Err(e),
        }
    }
    Err(StoreError::Contended(
        "the items of a lane's step kept changing while it relocated them; retry".into(),
    ))
}
