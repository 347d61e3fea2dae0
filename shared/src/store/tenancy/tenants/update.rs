//! Conditional changes to a tenant's record.

use super::*;
use crate::identity::ids::TenantId;
use crate::store::client::error::StoreError;
use crate::store::client::scoped::TenantDb;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;

/// What an operator changes on a tenant record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordChange {
    /// A new tier, with its custom limits (`None` removes them).
    pub tier: Option<(Tier, Option<Limits>)>,
    pub status: Option<TenantStatus>,
}

/// The UpdateItem expression of a change: `SET` and `REMOVE` clauses over `#tier`, `#limits` and
/// `#status`, and `#changedBy`, the operator's tenant.
pub fn change_expression(change: &RecordChange) -> String {
    let mut set = Vec::new();
    let mut remove = Vec::new();
    if let Some((_, limits)) = change.tier {
        set.push("#tier = :tier");
        match limits {
            Some(_) => set.push("#limits = :limits"),
            None => remove.push("#limits"),
        }
    }
    if change.status.is_some() {
        set.push("#status = :status");
    }
    set.push("#changedBy = :changedBy");
    let mut expression = format!("SET {}", set.join(", "));
    if !remove.is_empty() {
        expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
    }
    expression
}

/// What [`update_record`] did.
#[derive(Debug)]
pub enum Updated {
    Record(Box<TenantRecord>),
    NotOnboarded,
    /// The tenant is being offboarded: its record no longer changes but by the offboarding.
    Offboarding,
    /// The tenant is being restored: its status changes only when the restore ends.
    Restoring,
    /// The tenant is moving: its tier and limits change only when the move ends (they decide the
    /// quota windows the move's walk deals to its lanes).
    Moving,
}

/// Applies `change`, asked by an operator of tenant `by`, to the existing record, unless the tenant
/// is being offboarded. One conditional UpdateItem, answered with the whole new record.
pub async fn update_record(
    db: &TenantDb,
    change: RecordChange,
    by: &TenantId,
) -> Result<Updated, StoreError> {
    let mut condition =
        "attribute_exists(PK) AND (attribute_not_exists(#state) OR #state <> :offboarding)"
            .to_owned();
    let (tier_changes, status_changes) = (change.tier.is_some(), change.status.is_some());
    if tier_changes {
        condition.push_str(" AND attribute_not_exists(#move)");
    }
    if status_changes {
        condition.push_str(" AND attribute_not_exists(#restore)");
    }
    let mut update = record_update(db)
        .condition_expression(condition)
        .expression_attribute_names("#state", "status")
        .expression_attribute_values(":offboarding", value(TenantStatus::Offboarding)?)
        .update_expression(change_expression(&change))
        .expression_attribute_names("#changedBy", "changedBy")
        .expression_attribute_values(":changedBy", AttributeValue::S(by.to_string()))
        .return_values_on_condition_check_failure(
            aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
        );
    if let Some((tier, limits)) = change.tier {
        update = update
            .expression_attribute_names("#move", "move")
            .expression_attribute_names("#tier", "tier")
            .expression_attribute_names("#limits", "limits")
            .expression_attribute_values(":tier", value(tier)?);
        if let Some(limits) = limits {
            update = update.expression_attribute_values(":limits", value(limits)?);
        }
    }
    if let Some(status) = change.status {
        update = update
            .expression_attribute_names("#restore", "restore")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":status", value(status)?);
    }
    match update.send().await {
        Ok(out) => match out.attributes {
            Some(item) => Ok(Updated::Record(Box::new(parse_record(item)?))),
            None => Err(StoreError::Internal("UpdateItem returned no record".into())),
        },
        Err(e) => match e.as_service_error() {
            Some(UpdateItemError::ConditionalCheckFailedException(c)) => Ok(match c.item() {
                None => Updated::NotOnboarded,
                Some(old) if status_changes && old.contains_key("restore") => Updated::Restoring,
                Some(old) if tier_changes && old.contains_key("move") => Updated::Moving,
                Some(_) => Updated::Offboarding,
            }),
            _ => Err(StoreError::from_sdk(e)),
        },
    }
}

pub(crate) fn value(v: impl Serialize) -> Result<AttributeValue, StoreError> {
    serde_dynamo::to_attribute_value(v)
        .map_err(|e| StoreError::Internal(format!("tenant record does not serialize: {e}")))
}
