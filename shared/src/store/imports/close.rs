//! Closing an import: its final state, once.

use super::*;
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::import_item_sk;
use crate::store::client::error::{unless_expected, StoreError};
use crate::store::client::query::{string_attr, u64_attr, Item};
use crate::store::client::scoped::TenantDb;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use std::collections::BTreeMap;

/// The closed record's attribute of its items by outcome.
const FINAL_COUNTS: &str = "finalCounts";

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
            item_kind: string_attr(item, "itemKind").unwrap_or_default(),
            accepted: u64_attr(item, "accepted").unwrap_or(0),
            final_counts,
        }
    }
}

/// Makes the import accepted at `created_at_ms` final once its deadline has passed: every item
/// still without an outcome is recorded failed (`not_enqueued` while its request never finished
/// sending, else `undelivered`), then the record is marked closed (`closedAtMs`). Each step is idempotent, so a
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
    let reason = if Sending::Enqueuing.is_of(&record) {
        FailReason::NotEnqueued
    } else if record.contains_key(DEFERRED_AT_MS) {
        FailReason::OverQuota
    } else {
        FailReason::Undelivered
    };
    let accepted = u64_attr(&record, "accepted").map_or(0, |n| n as u32);
    let open: Vec<u32> = (0..accepted)
        .filter(|i| !outcomes.contains_key(&import_item_sk(tenant, import, *i)))
        .collect();
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(open.iter().map(|index| {
        let of = ItemOutcome {
            import,
            index: *index,
            outcome: Outcome::Failed(reason),
            created_at_ms,
        };
        async move { record_outcome(db, &of, now_seconds).await }
    }))
    .buffer_unordered(8)
    .try_collect::<()>()
    .await?;
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
