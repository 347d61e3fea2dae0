//! Closing an import: its final state, once.

use super::*;
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{import_item_sk, import_key, primary_key};
use crate::store::client::error::{unless_expected, StoreError};
use crate::store::client::items::get_item_consistent;
use crate::store::client::query::{string_attr, u64_attr, Item};
use crate::store::client::scoped::TenantDb;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use std::collections::BTreeMap;

use crate::store::client::expr::{attr, num, Condition, Update};
use dynamodb_expression::value::Map;

/// The closed record's attributes (and a note's, [`Finished::note`]): its items by outcome, and
/// what it imports.
const FINAL_COUNTS: &str = "finalCounts";
const IMPORT_ID: &str = "importId";
const ITEM_KIND: &str = "itemKind";
const ACCEPTED: &str = "accepted";
/// The record's mark that the lifecycle driver noted its close on its entry in the deadline list
/// (`store::lifecycle::driving::note_import_finished`): a closed import whose record carries it is
/// never noted again, not even on an entry listed anew for it.
const NOTED_AT_MS: &str = "notedAtMs";

/// What [`close`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closing {
    /// Not due yet: its deadline is ahead.
    NotDue,
    /// Final now (or already): this many items were given a failed marker by this call, and the
    /// record holds `finished`.
    Closed { failed_now: u32, finished: Finished },
    /// No live record accepted at that time: expired, offboarded, or a later import of the same id.
    Gone,
}

/// A closed import as its record holds it: what its `importFinished` event carries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Finished {
    /// The kind of item it imports (`product`, …).
    pub item_kind: String,
    pub accepted: u64,
    /// Its items by outcome, as first recorded at its close.
    pub final_counts: BTreeMap<String, u64>,
    /// Noted already on its entry in the deadline list ([`mark_noted`]): not to be noted again.
    pub noted: bool,
}

impl Finished {
    /// What the closed record `item` (its new image) holds.
    fn of(item: &Item) -> Self {
        let final_counts = match item.get(FINAL_COUNTS) {
            Some(AttributeValue::M(counts)) => counts
                .iter()
                .filter_map(|(name, n)| Some((name.clone(), n.as_n().ok()?.parse().ok()?)))
                .collect(),
            _ => BTreeMap::new(),
        };
        Self {
            item_kind: string_attr(item, ITEM_KIND).unwrap_or_default(),
            accepted: u64_attr(item, ACCEPTED).unwrap_or(0),
            final_counts,
            noted: item.contains_key(NOTED_AT_MS),
        }
    }

    /// The update that notes import `import` final on another item (its entry in the lifecycle
    /// driver's list) at `now_ms`, in its record's own attribute names, and the condition that it
    /// is not noted yet.
    pub fn note(&self, import: &EntityId, now_ms: u64) -> (Update, Condition) {
        let counts: Map = self
            .final_counts
            .iter()
            .map(|(outcome, n)| (outcome.as_str(), num(*n)))
            .collect();
        let update = Update::from(attr(CLOSED_AT_MS).set(num(now_ms)))
            .and(attr(IMPORT_ID).set(import.as_str()))
            .and(attr(ITEM_KIND).set(self.item_kind.as_str()))
            .and(attr(ACCEPTED).set(num(self.accepted)))
            .and(attr(FINAL_COUNTS).set(counts));
        (update, attr(CLOSED_AT_MS).attribute_not_exists())
    }
}

/// Marks import `import` accepted at `created_at_ms` noted on its entry ([`Finished::noted`]), once
/// the note is written: an entry listed for it again (by a bug or a hostile producer, whose session
/// may list any import) is then unlisted without a second note, a second `importFinished`. A record
/// gone, or another import's, is left as it is.
pub async fn mark_noted(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    created_at_ms: u64,
    now_ms: u64,
) -> Result<(), StoreError> {
    let marked = record_update(db, tenant, import, created_at_ms)
        .update_expression("SET #noted = if_not_exists(#noted, :now)")
        .expression_attribute_names("#noted", NOTED_AT_MS)
        .expression_attribute_values(":now", AttributeValue::N(now_ms.to_string()))
        .send()
        .await;
    unless_expected(marked, |e| e.is_conditional_check_failed_exception())?;
    Ok(())
}

/// What import `import` accepted at `created_at_ms` holds once closed (one consistent GetItem of
/// its record); `None` while it is open, or when it is gone or another import's. Read-only: for a
/// tenant being offboarded, into whose items nothing may be written.
pub async fn closed(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    created_at_ms: u64,
    now_seconds: u64,
) -> Result<Option<Finished>, StoreError> {
    let pk = import_key(tenant, import);
    let record = get_item_consistent(db, primary_key(&pk, &pk))
        .await?
        .filter(|r| crate::store::client::query::is_live(r, now_seconds))
        .filter(|r| u64_attr(r, CREATED_AT_MS) == Some(created_at_ms))
        .filter(|r| r.contains_key(CLOSED_AT_MS));
    Ok(record.as_ref().map(Finished::of))
}

/// Makes the import accepted at `created_at_ms` final once its deadline has passed: every item
/// still without an outcome is recorded failed (`not_enqueued` while its request never finished
/// sending, else `undelivered`; one the consumer gave up on over the quota has its `overQuota`
/// already), then the record is marked closed (`closedAtMs`). Each step is idempotent, so a
/// run killed part-way is finished by the next. Items are numbered `0..accepted`
/// (`create-import` numbers them so).
pub async fn close(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    created_at_ms: u64,
    now_ms: u64,
) -> Result<Closing, StoreError> {
    let now_seconds = now_ms / 1000;
    let Some((record, outcomes)) = read_import(db, tenant, import, now_seconds).await? else {
        // No live import of this id (its request failed before the claim, or it expired): its
        // count, if it got one, is released. A later import of the same id keeps its own.
        uncount_open(db, tenant, import).await?;
        return Ok(Closing::Gone);
    };
    if u64_attr(&record, CREATED_AT_MS) != Some(created_at_ms) {
        return Ok(Closing::Gone);
    }
    if now_ms < u64_attr(&record, DUE_AT_MS).unwrap_or_else(|| due_at_ms(created_at_ms)) {
        return Ok(Closing::NotDue);
    }
    // An item the consumer gave up on over the quota has its own failed marker already; the rest
    // were never sent, or never delivered, whatever another message's deferrals.
    let reason = if Sending::Enqueuing.is_of(&record) {
        FailReason::NotEnqueued
    } else {
        FailReason::Undelivered
    };
    let accepted = u64_attr(&record, ACCEPTED).map_or(0, |n| n as u32);
    let open: Vec<u32> = (0..accepted)
        .filter(|i| !outcomes.contains_key(&import_item_sk(tenant, import, *i)))
        .collect();
    fail_items(db, import, created_at_ms, &open, reason, now_seconds).await?;
    // The final counts go with the close, so the `importFinished` event (read from the table's
    // stream, `crate::store::lifecycle::events`) carries them. Every item has its outcome now; they
    // are read again, since a late delivery may have written an item between the first read and
    // its failed marker (which then was not written).
    let Some((_, outcomes)) = read_import(db, tenant, import, now_seconds).await? else {
        return Ok(Closing::Gone);
    };
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    for outcome in outcomes.values().copied() {
        let name = match outcome {
            Outcome::Failed(r) => r.as_str(),
            other => other.as_str(),
        };
        *counts.entry(name).or_default() += 1;
    }
    let counts = AttributeValue::M(
        counts
            .into_iter()
            .map(|(name, n)| (name.to_owned(), AttributeValue::N(n.to_string())))
            .collect(),
    );
    let closed = record_update(db, tenant, import, created_at_ms)
        .update_expression(
            "SET #closed = if_not_exists(#closed, :now), #counts = if_not_exists(#counts, :counts)",
        )
        .expression_attribute_names("#closed", CLOSED_AT_MS)
        .expression_attribute_names("#counts", FINAL_COUNTS)
        .expression_attribute_values(":now", AttributeValue::N(now_ms.to_string()))
        .expression_attribute_values(":counts", counts)
        .return_values(ReturnValue::AllNew)
        .send()
        .await;
    // Offboarded (or expired and claimed anew) meanwhile: not this import any more.
    let Some(closed) = unless_expected(closed, |e| e.is_conditional_check_failed_exception())?
    else {
        return Ok(Closing::Gone);
    };
    let finished = Finished::of(&closed.attributes.unwrap_or_default());
    // Final: it no longer counts among the tenant's open imports.
    uncount_open(db, tenant, import).await?;
    Ok(Closing::Closed {
        failed_now: open.len() as u32,
        finished,
    })
}
