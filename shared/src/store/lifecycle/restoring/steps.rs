//! The restore's writes: its start, its steps (changes and checkpoint in one transaction), its end.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};

use super::plan::{Change, Planned};
use super::Counts;
use crate::store::client::error::StoreError;
use crate::store::client::scoped::TenantDb;
use crate::store::client::transact::TransactError;
use crate::store::tenancy::tenants::{record_key, step_guard, value, Restore, TenantStatus};

/// What a conditioned step did.
#[derive(Debug)]
pub enum Step {
    /// Committed: the record's restore state as it now is.
    Committed(Box<Restore>),
    /// Another call committed a step first, or the restore ended: read the record again.
    Raced,
}

/// Starts restoring `db`'s tenant as `restore` says (its `steps` 0), with `also` (an idempotency
/// record) in the same transaction: `Raced` when the tenant is not active, or another operation runs.
pub async fn begin(
    db: &TenantDb,
    restore: &Restore,
    also: Option<TransactWriteItem>,
) -> Result<Step, StoreError> {
    let update = record_action(db)
        .update_expression("SET #state = :restoring, #r = :r")
        .condition_expression(
            "attribute_exists(PK) AND (attribute_not_exists(#state) OR #state = :active) \
             AND attribute_not_exists(#m) AND attribute_not_exists(#o) AND attribute_not_exists(#r) \
             AND attribute_not_exists(#move)",
        )
        .expression_attribute_names("#move", "move")
        .expression_attribute_names("#state", "status")
        .expression_attribute_names("#r", "restore")
        .expression_attribute_names("#m", "migration")
        .expression_attribute_names("#o", "offboarding")
        .expression_attribute_values(":restoring", value(TenantStatus::Restoring)?)
        .expression_attribute_values(":active", value(TenantStatus::Active)?)
        .expression_attribute_values(":r", restore.to_attribute()?)
        .build()?;
    let mut actions = vec![TransactWriteItem::builder().update(update).build()];
    actions.extend(also);
    match db.transact_items(actions).await {
        Ok(()) => Ok(Step::Committed(Box::new(restore.clone()))),
        Err(e) if e.failed_at(0) => Ok(Step::Raced),
        Err(e) => Err(unexpected(e)),
    }
}

/// Commits one step: `planned`'s changes, and the record's checkpoint moved to `next` (from
/// `state`, on condition that no other step was committed since), in one transaction.
pub async fn commit(
    db: &TenantDb,
    state: &Restore,
    planned: &[Planned],
    next: Restore,
) -> Result<Step, StoreError> {
    commit_with(db, state, planned, next, Vec::new()).await
}

/// [`commit`], with `also` (conditioned on step numbers: a lane plan or fold) in the same
/// transaction: `Raced` when any of their conditions or the checkpoint's failed.
pub async fn commit_with(
    db: &TenantDb,
    state: &Restore,
    planned: &[Planned],
    mut next: Restore,
    also: Vec<TransactWriteItem>,
) -> Result<Step, StoreError> {
    next.steps = state.steps + 1;
    let mut counts = Counts::of(&next);
    counts.add(planned);
    next.put_back = counts.put_back;
    next.overwritten = counts.overwritten;
    next.deleted = counts.deleted;
    let mut actions = change_actions(db, planned)?;
    let conditioned_from = actions.len();
    actions.extend(also);
    actions.push(
        TransactWriteItem::builder()
            .update(checkpoint(db, state, "SET #op = :next", &next)?)
            .build(),
    );
    committed_unless_raced(db, actions, conditioned_from, next).await
}

/// The writes of `planned`'s changes to `db`'s table, unconditioned (a step's checkpoint is what
/// the transaction is conditioned on).
pub(super) fn change_actions(
    db: &TenantDb,
    planned: &[Planned],
) -> Result<Vec<TransactWriteItem>, StoreError> {
    planned
        .iter()
        .map(|p| {
            let action = TransactWriteItem::builder();
            Ok(match &p.change {
                Change::PutBack(item) | Change::Overwrite(item) => {
                    let put = Put::builder().table_name(&*db.table);
                    action.put(put.set_item(Some(item.clone())).build()?)
                }
                Change::Delete(key) => {
                    let delete = Delete::builder().table_name(&*db.table);
                    action.delete(delete.set_key(Some(key.clone())).build()?)
                }
            }
            .build())
        })
        .collect()
}

/// Ends the restore: the tenant active again, `report` (phase `Finished` or `Abandoned`) kept as
/// `lastRestore`, on condition that no other step was committed since `state`; with `also` (the
/// lanes' fold) in the same transaction.
pub async fn finish(
    db: &TenantDb,
    state: &Restore,
    report: &Restore,
    also: Vec<TransactWriteItem>,
) -> Result<Step, StoreError> {
    let update = checkpoint(
        db,
        state,
        "SET #state = :active, #last = :next REMOVE #op",
        report,
    )?;
    let mut actions = also;
    actions.push(TransactWriteItem::builder().update(update).build());
    committed_unless_raced(db, actions, 0, report.clone()).await
}

/// Sends `actions`, of which those from `conditioned_from` on are conditioned on step numbers:
/// `Raced` when one of those failed.
async fn committed_unless_raced(
    db: &TenantDb,
    actions: Vec<TransactWriteItem>,
    conditioned_from: usize,
    next: Restore,
) -> Result<Step, StoreError> {
    match db.transact_items(actions).await {
        Ok(()) => Ok(Step::Committed(Box::new(next))),
        Err(TransactError::ConditionFailed { index, .. }) if index >= conditioned_from => {
            Ok(Step::Raced)
        }
        Err(e) => Err(unexpected(e)),
    }
}

/// The record's update `expression` with `:next` = `next`, conditioned on `state`'s step.
fn checkpoint(
    db: &TenantDb,
    state: &Restore,
    expression: &str,
    next: &Restore,
) -> Result<Update, StoreError> {
    let guard = step_guard(TenantStatus::Restoring, "restore", state.steps)?
        .of_run("requestedAt", AttributeValue::S(state.requested_at.clone()));
    let mut update = record_action(db)
        .update_expression(expression)
        .condition_expression(guard.condition)
        .set_expression_attribute_names(Some(guard.names))
        .set_expression_attribute_values(Some(guard.values))
        .expression_attribute_values(":next", next.to_attribute()?);
    if expression.contains("#last") {
        update = update
            .expression_attribute_names("#last", "lastRestore")
            .expression_attribute_values(":active", value(TenantStatus::Active)?);
    }
    Ok(update.build()?)
}

/// A transaction's update of `db`'s tenant record.
fn record_action(db: &TenantDb) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
    let update = Update::builder().table_name(&*db.record_table);
    update.set_key(Some(record_key(&db.tenant)))
}

/// A transaction's failure other than its checked condition's.
fn unexpected(e: TransactError) -> StoreError {
    match e {
        TransactError::Store(e) => e,
        TransactError::ConditionFailed { index, .. } => StoreError::Internal(format!(
            "an unconditional restore write (action {index}) failed its condition"
        )),
    }
}
