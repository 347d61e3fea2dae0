//! Reading and writing one write-sharded item (a product, an employee, a department) under a
//! [`Layout`]: on its one shard when the layout is stable, and on either of its two shards while a
//! re-sharding runs ([`crate::store::lifecycle::resharding`]).
//!
//! While a migration runs, an item is on its old shard or its new one. Its two keys differ only in
//! `PK` (the sort key is the same), and an item moves one way only, old to new, in one transaction
//! (the migrator's, or a writer's). So:
//! - a read asks both keys at once and prefers the new copy; when it finds neither, it reads the new
//!   key again, consistently (the item may have moved between the two reads);
//! - a write reads both keys and writes one transaction, conditioned on what it read: the item at
//!   the new key once writes have moved (or when it is already there), else at the old key, with a
//!   delete of the copy at the other key, or a check that there is none. So it never races the
//!   migrator, or a writer of the other phase, into two copies, and never moves an item back;
//! - a delete removes the old copy, then the new one: whichever way a concurrent move falls, the
//!   item is gone afterwards (the migrator moves only an old copy that still exists).
//!
//! A container that has not yet read the migration writes as in a stable layout: only in the first
//! 60 s, when nothing can be on a new shard yet.

use aws_sdk_dynamodb::types::{Delete, TransactWriteItem};

use crate::identity::cursor::Key;
use crate::store::client::error::StoreError;
use crate::store::client::expr::{self, attr, either, num, Condition};
use crate::store::client::items::{delete_existing, get_item, get_item_consistent, put_replacing};
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
use crate::store::client::transact::TransactError;
use crate::store::keys::{open_item, stored_form};
pub use crate::store::tenancy::tenants::Layout;

/// Sends of a moving write whose reads went stale before its transaction (a concurrent writer or
/// the migrator moved the item): each attempt reads both keys again.
const ATTEMPTS: usize = 4;

/// Where an item may be under `layout`: its keys, the one writes use first.
#[derive(Debug, Clone, PartialEq)]
pub struct Keys {
    /// The key new writes use.
    pub write: Key,
    /// The other key the item may still be at (the old shard, once writes have moved), if it
    /// differs.
    pub other: Option<Key>,
}

impl Keys {
    /// The keys of one item: `key(shards)` is its key among `shards` shards.
    pub fn of(layout: Layout, key: impl Fn(u32) -> Key) -> Self {
        match layout {
            Layout::Stable(n) => Self {
                write: key(n),
                other: None,
            },
            Layout::Migrating {
                from,
                to,
                writes_moved,
            } => {
                let (write, other) = if writes_moved {
                    (key(to), key(from))
                } else {
                    (key(from), key(to))
                };
                let other = (other != write).then_some(other);
                Self { write, other }
            }
        }
    }

    /// Where a write of the item goes, given where it was `found` (a consistent read), and the other
    /// key it may be at: the new key once writes have moved, or when the item is already there (a
    /// write never moves an item back to the old layout); else the old key.
    pub fn write_target(&self, layout: Layout, found: Option<&Key>) -> (&Key, Option<&Key>) {
        let (new, old) = self.new_and_old(layout);
        match old {
            None => (new, None),
            Some(old) if moved(layout) || found == Some(new) => (new, Some(old)),
            Some(old) => (old, Some(new)),
        }
    }

    /// The new-layout key and the old one (when they differ), whichever writes use now.
    pub fn new_and_old(&self, layout: Layout) -> (&Key, Option<&Key>) {
        match (layout, &self.other) {
            (
                Layout::Migrating {
                    writes_moved: false,
                    ..
                },
                Some(new),
            ) => (new, Some(&self.write)),
            _ => (&self.write, self.other.as_ref()),
        }
    }
}

/// The item, wherever it is: one GetItem when the layout is stable; during a migration two at once
/// (new copy preferred), and a consistent read of the new key when neither answered.
pub async fn get(db: &TenantDb, layout: Layout, keys: &Keys) -> Result<Option<Item>, StoreError> {
    let (new, old) = keys.new_and_old(layout);
    let opened = |item: Option<Item>| item.map(|i| open_item(db.key.as_deref(), i)).transpose();
    let Some(old) = old else {
        return opened(get_item(db, new.clone()).await?);
    };
    let (at_new, at_old) = tokio::join!(get_item(db, new.clone()), get_item(db, old.clone()));
    match (at_new?, at_old?) {
        (Some(item), _) | (None, Some(item)) => opened(Some(item)),
        (None, None) => opened(get_item_consistent(db, new.clone()).await?),
    }
}

/// Where an item is now, read consistently (a read that decides a write): its key and the item.
pub async fn locate(
    db: &TenantDb,
    layout: Layout,
    keys: &Keys,
) -> Result<Option<(Key, Item)>, StoreError> {
    let (new, old) = keys.new_and_old(layout);
    let key = db.key.as_deref();
    let at_new = get_item_consistent(db, new.clone()).await?;
    if let Some(item) = at_new {
        return Ok(Some((new.clone(), open_item(key, item)?)));
    }
    let Some(old) = old else { return Ok(None) };
    if let Some(item) = get_item_consistent(db, old.clone()).await? {
        return Ok(Some((old.clone(), open_item(key, item)?)));
    }
    // Moved between the two reads (moves go old to new only).
    get_item_consistent(db, new.clone())
        .await?
        .map(|item| Ok((new.clone(), open_item(key, item)?)))
        .transpose()
}

/// Puts the item (`fields` without keys): `Ok(true)` when it replaced an item (in either place).
///
/// During a migration it reads both keys (consistently) and writes one transaction: the item at
/// [`Keys::write_target`], conditioned on what was read there, and at the other key a Delete of the
/// copy read there, or a ConditionCheck that there is none. A copy moved, written where there was
/// none, or deleted in between cancels it, and it reads again (an overwrite of a copy does not: the
/// put is the later write; a late write of [`put_along`] is cancelled by that too). So a write that
/// chose the old layout just before writes moved can never leave a second copy beside a newer one
/// in the new layout.
pub async fn put(
    db: &TenantDb,
    layout: Layout,
    keys: &Keys,
    fields: Item,
) -> Result<bool, StoreError> {
    match put_along(db, layout, keys, fields, Vec::new(), None).await? {
        Put::Written { replaced } => Ok(replaced.unwrap_or(false)),
        // Nothing came along and no write time was given, so nothing can refuse.
        Put::Refused { .. } | Put::Superseded => {
            Err(StoreError::Internal("a bare put was refused".into()))
        }
    }
}

/// The attribute a guarded write compares ([`put_along`]'s `written_at`): when the item was last
/// written, in epoch milliseconds.
pub const UPDATED_AT_MS: &str = "updatedAtMs";

/// The condition that a stored item was not written after `:written_at` (`#updated_ms` naming
/// [`UPDATED_AT_MS`]): an item without it was written before writes carried it, so earlier. A write
/// in the same millisecond counts as earlier. [`not_later`] is the same, typed.
const NOT_LATER: &str = "(attribute_not_exists(#updated_ms) OR #updated_ms <= :written_at)";

/// The condition that a stored item was not written after `written_at` (epoch ms), as [`NOT_LATER`].
pub fn not_later(written_at: u64) -> Condition {
    either(
        attr(UPDATED_AT_MS).attribute_not_exists(),
        attr(UPDATED_AT_MS).less_than_or_equal(num(written_at)),
    )
}

/// What [`put_along`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// The item and every action along with it were written. `replaced` says whether an item was
    /// there before, when the write could tell (not in a stable layout with actions along).
    Written { replaced: Option<bool> },
    /// Action `along` of those sent along failed its condition: nothing was written.
    Refused { along: usize },
    /// The stored item was written after `written_at`: nothing was written.
    Superseded,
}

/// [`put`], in one transaction with `along` (such as a marker that the write happened, conditioned
/// on its absence): all of it is written, or none. In a stable layout that is the Put and `along`;
/// during a migration the Put, the check or delete of the other copy, and `along`.
///
/// With `written_at` (epoch ms, which `fields` should carry as [`UPDATED_AT_MS`]), the put is a
/// write of that moment: it does not replace an item whose [`UPDATED_AT_MS`] is later (a newer write
/// wins over a late one), and answers [`Put::Superseded`].
pub async fn put_along(
    db: &TenantDb,
    layout: Layout,
    keys: &Keys,
    fields: Item,
    along: Vec<TransactWriteItem>,
    written_at: Option<u64>,
) -> Result<Put, StoreError> {
    // Sealed once: the sealed bytes are bound to the sort key, which every shard's copy shares.
    let mut fields = fields;
    fields.extend(keys.write.clone());
    let fields = stored_form(db.key.as_deref(), fields)?;
    let with_key = |key: &Key| {
        let mut item = fields.clone();
        item.extend(key.clone());
        item
    };
    let (new, Some(old)) = keys.new_and_old(layout) else {
        return put_in_stable_layout(db, with_key(&keys.write), along, written_at).await;
    };
    for _ in 0..ATTEMPTS {
        let (at_new, at_old) = tokio::join!(
            get_item_consistent(db, new.clone()),
            get_item_consistent(db, old.clone())
        );
        let (at_new, at_old) = (at_new?, at_old?);
        let later = |item: &Option<Item>| {
            item.as_ref()
                .and_then(|i| crate::store::client::query::u64_attr(i, UPDATED_AT_MS))
                .zip(written_at)
                .is_some_and(|(stored, at)| stored > at)
        };
        if later(&at_new) || later(&at_old) {
            return Ok(Put::Superseded);
        }
        let (at_new, at_old) = (at_new.is_some(), at_old.is_some());
        let found = match (at_new, at_old) {
            (true, _) => Some(new),
            (false, true) => Some(old),
            (false, false) => None,
        };
        let (target, other) = keys.write_target(layout, found);
        let other = other.unwrap_or(old);
        let exists_at = |key: &Key| if key == new { at_new } else { at_old };
        let put = guarded(
            aws_sdk_dynamodb::types::Put::builder()
                .table_name(&*db.table)
                .set_item(Some(with_key(target))),
            Some(exists_at(target)),
            written_at,
        )
        .build()?;
        let elsewhere = if exists_at(other) {
            delete_other_copy(db, other, written_at)?
        } else {
            absent(db, other)?
        };
        let own = [TransactWriteItem::builder().put(put).build(), elsewhere];
        match db.transact_items(along_with(&own, &along)).await {
            Ok(()) => {
                return Ok(Put::Written {
                    replaced: Some(at_new || at_old),
                })
            }
            Err(TransactError::ConditionFailed { index, .. }) if index >= own.len() => {
                return Ok(Put::Refused {
                    along: index - own.len(),
                })
            }
            // Moved, written or deleted since the reads: read again (and a newer write is then
            // seen, and supersedes this one).
            Err(TransactError::ConditionFailed { .. }) => continue,
            Err(TransactError::Store(e)) => return Err(e),
        }
    }
    Err(StoreError::Contended(
        "the item kept changing while it was being written; retry".into(),
    ))
}

/// [`put_along`] where the tenant's layout is stable: one copy of the item, put alone (answering
/// whether it replaced one) or in one transaction with `along` and the newer-write guard.
async fn put_in_stable_layout(
    db: &TenantDb,
    item: Item,
    along: Vec<TransactWriteItem>,
    written_at: Option<u64>,
) -> Result<Put, StoreError> {
    if along.is_empty() && written_at.is_none() {
        let replaced = put_replacing(db, item).await?;
        return Ok(Put::Written {
            replaced: Some(replaced),
        });
    }
    let put = guarded(
        aws_sdk_dynamodb::types::Put::builder()
            .table_name(&*db.table)
            .set_item(Some(item)),
        None,
        written_at,
    )
    .build()?;
    let own = [TransactWriteItem::builder().put(put).build()];
    match db.transact_items(along_with(&own, &along)).await {
        Ok(()) => Ok(Put::Written { replaced: None }),
        Err(TransactError::ConditionFailed { index: 0, .. }) => Ok(Put::Superseded),
        Err(TransactError::ConditionFailed { index, .. }) => Ok(Put::Refused {
            along: index - own.len(),
        }),
        Err(TransactError::Store(e)) => Err(e),
    }
}

/// The delete of the item's copy in the other layout, as read: it must still be there and, with
/// `written_at`, not written later. A late write never removes a copy written after it either: a
/// writer that chose the old layout just before writes moved may have written that copy since it
/// was read.
fn delete_other_copy(
    db: &TenantDb,
    other: &Key,
    written_at: Option<u64>,
) -> Result<TransactWriteItem, StoreError> {
    let delete = db.delete_item(other.clone()).when(expr::exists());
    match written_at {
        None => delete,
        Some(at) => delete.when(not_later(at)),
    }
    .action()
}

/// The put's condition: that an item is (`Some(true)`) or is not there, as read; and with
/// `written_at`, that a stored item was not written later.
fn guarded(
    put: aws_sdk_dynamodb::types::builders::PutBuilder,
    present: Option<bool>,
    written_at: Option<u64>,
) -> aws_sdk_dynamodb::types::builders::PutBuilder {
    let condition = match (present, written_at) {
        (None, None) => return put,
        (Some(present), None) => exists(present).to_owned(),
        (None, Some(_)) => format!("attribute_not_exists(PK) OR {NOT_LATER}"),
        (Some(false), Some(_)) => exists(false).to_owned(),
        (Some(true), Some(_)) => format!("{} AND {NOT_LATER}", exists(true)),
    };
    let put = put.condition_expression(condition);
    match (present, written_at) {
        (Some(false), _) | (_, None) => put,
        (_, Some(at)) => put
            .expression_attribute_names("#updated_ms", UPDATED_AT_MS)
            .expression_attribute_values(
                ":written_at",
                aws_sdk_dynamodb::types::AttributeValue::N(at.to_string()),
            ),
    }
}

fn along_with(own: &[TransactWriteItem], along: &[TransactWriteItem]) -> Vec<TransactWriteItem> {
    own.iter().chain(along).cloned().collect()
}

/// Deletes the item wherever it is: `Ok(true)` when there was one. The old copy goes first, so a
/// move racing the delete either finds nothing to move or has already moved what the second delete
/// removes.
pub async fn delete(db: &TenantDb, layout: Layout, keys: &Keys) -> Result<bool, StoreError> {
    let (new, old) = keys.new_and_old(layout);
    let deleted_old = match old {
        Some(old) => delete_existing(db, old.clone()).await?,
        None => false,
    };
    let deleted_new = delete_existing(db, new.clone()).await?;
    Ok(deleted_old || deleted_new)
}

/// [`delete`], with `along` (a tombstone) written in the same transaction as each copy's delete.
/// When there is nothing to delete, `along` is written all the same, in a transaction with the
/// checks that no copy exists ([`record_absent`]): a delete that arrives before the write it cancels
/// (an import accepted earlier and not delivered yet) still wins. A copy that appears meanwhile is
/// deleted on the next round.
pub async fn delete_along(
    db: &TenantDb,
    layout: Layout,
    keys: &Keys,
    along: Vec<TransactWriteItem>,
) -> Result<bool, StoreError> {
    for _ in 0..ABSENT_ROUNDS {
        let (new, old) = keys.new_and_old(layout);
        let deleted_old = match old {
            Some(old) => delete_with(db, old.clone(), &along).await?,
            None => false,
        };
        let deleted_new = delete_with(db, new.clone(), &along).await?;
        if deleted_old || deleted_new {
            return Ok(true);
        }
        if record_absent(db, layout, keys, &along).await? {
            return Ok(false);
        }
    }
    Err(reappearing())
}

/// Rounds of delete-then-record-absence before a delete whose item keeps reappearing gives up.
pub const ABSENT_ROUNDS: usize = 3;

/// The error of a delete whose item kept being written again between its rounds.
pub fn reappearing() -> StoreError {
    StoreError::Unavailable("The item was written again while it was being deleted; retry.".into())
}

/// Writes `along` (a tombstone) in one transaction with checks that no copy of the item exists at
/// any of its keys: `true` when written, `false` when a copy exists (delete it first).
pub async fn record_absent(
    db: &TenantDb,
    layout: Layout,
    keys: &Keys,
    along: &[TransactWriteItem],
) -> Result<bool, StoreError> {
    let (new, old) = keys.new_and_old(layout);
    let mut checks = vec![absent(db, new)?];
    if let Some(old) = old {
        checks.push(absent(db, old)?);
    }
    match db.transact_items(along_with(&checks, along)).await {
        Ok(()) => Ok(true),
        Err(TransactError::ConditionFailed { index, .. }) if index < checks.len() => Ok(false),
        Err(TransactError::ConditionFailed { index, .. }) => Err(StoreError::Internal(format!(
            "action {index} sent along with an absence check failed its condition"
        ))),
        Err(TransactError::Store(e)) => Err(e),
    }
}

async fn delete_with(
    db: &TenantDb,
    key: Key,
    along: &[TransactWriteItem],
) -> Result<bool, StoreError> {
    let delete = Delete::builder()
        .table_name(&*db.table)
        .set_key(Some(key))
        .condition_expression(exists(true))
        .build()?;
    let own = [TransactWriteItem::builder().delete(delete).build()];
    match db.transact_items(along_with(&own, along)).await {
        Ok(()) => Ok(true),
        Err(TransactError::ConditionFailed { index: 0, .. }) => Ok(false),
        Err(TransactError::ConditionFailed { index, .. }) => Err(StoreError::Internal(format!(
            "action {index} sent along with a delete failed its condition"
        ))),
        Err(TransactError::Store(e)) => Err(e),
    }
}

fn moved(layout: Layout) -> bool {
    matches!(
        layout,
        Layout::Migrating {
            writes_moved: true,
            ..
        }
    )
}

/// A ConditionCheck that no item is at `key`.
pub fn absent(db: &TenantDb, key: &Key) -> Result<TransactWriteItem, StoreError> {
    db.check_item(key.clone(), expr::absent()).action()
}

/// The condition that an item is (`true`) or is not there.
pub fn exists(present: bool) -> &'static str {
    if present {
        "attribute_exists(PK)"
    } else {
        "attribute_not_exists(PK)"
    }
}

/// When a write happens, and whether it is late: an import's item is a write of the import's
/// acceptance, which never replaces what was written after it.
#[derive(Debug, Clone, Copy)]
pub struct WrittenAt {
    pub ms: u64,
    pub late: bool,
}

impl WrittenAt {
    /// A write of now (a PUT): it replaces whatever is there.
    pub fn now(ms: u64) -> Self {
        Self { ms, late: false }
    }

    /// A write of `ms`, not replacing a later one (an import's item).
    pub fn as_of(ms: u64) -> Self {
        Self { ms, late: true }
    }

    /// The time a write must not replace a later one of: `Some` for a late write.
    pub fn guard(self) -> Option<u64> {
        self.late.then_some(self.ms)
    }
}

#[cfg(test)]
mod tests;
