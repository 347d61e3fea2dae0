//! An import's progress, read from its record and its item markers.

use super::*;
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{import_item_sk_prefix, import_key, primary_key, EXPIRES_AT, SK};
use crate::store::client::error::StoreError;
use crate::store::client::items::get_item_consistent;
use crate::store::client::query::{string_attr, u64_attr, Item};
use crate::store::client::scoped::TenantDb;
use aws_sdk_dynamodb::types::AttributeValue;

/// The import's record, and the outcome of each of its items that has one (consistent reads).
pub(super) async fn read_import(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    now_seconds: u64,
) -> Result<Option<(Item, std::collections::HashMap<String, Outcome>)>, StoreError> {
    let pk = import_key(tenant, import);
    let Some(record) = get_item_consistent(db, primary_key(&pk, &pk))
        .await?
        .filter(|r| crate::store::client::query::is_live(r, now_seconds))
    else {
        return Ok(None);
    };
    let mut outcomes = std::collections::HashMap::new();
    let query = db
        .sdk_query()
        .key_condition_expression("PK = :pk AND begins_with(SK, :items)")
        .expression_attribute_values(":pk", AttributeValue::S(pk.clone()))
        .expression_attribute_values(
            ":items",
            AttributeValue::S(import_item_sk_prefix(tenant, import)),
        )
        .projection_expression("SK, #outcome, #reason, #exp")
        .expression_attribute_names("#outcome", OUTCOME)
        .expression_attribute_names("#reason", REASON)
        .expression_attribute_names("#exp", EXPIRES_AT)
        .consistent_read(true);
    for marker in &crate::store::client::query::Query::sdk_built(query)
        .all()
        .await?
    {
        // A marker of an expired import of this id, not yet removed by TTL, is not this one's.
        if !crate::store::client::query::is_live(marker, now_seconds) {
            continue;
        }
        let sk = string_attr(marker, SK).unwrap_or_default();
        // Markers written before outcomes were recorded say it by their key's suffix.
        let (item, legacy) = match (sk.strip_suffix("#SUPERSEDED"), sk.strip_suffix("#FAILED")) {
            (Some(item), _) => (item.to_owned(), Some(Outcome::Superseded)),
            (_, Some(item)) => (item.to_owned(), Some(Outcome::Failed(FailReason::Rejected))),
            _ => (sk.clone(), None),
        };
        let outcome = match string_attr(marker, OUTCOME).as_deref() {
            Some("written") => Outcome::Written,
            Some("superseded") => Outcome::Superseded,
            Some(_) => Outcome::Failed(FailReason::parse(
                &string_attr(marker, REASON).unwrap_or_default(),
            )),
            None => legacy.unwrap_or(Outcome::Written),
        };
        // One outcome per item: written beats superseded beats failed (a legacy item could
        // have had more than one marker).
        let rank = |o: &Outcome| match o {
            Outcome::Written => 2,
            Outcome::Superseded => 1,
            Outcome::Failed(_) => 0,
        };
        let best = outcomes
            .get(&item)
            .is_none_or(|held| rank(&outcome) > rank(held));
        if best {
            outcomes.insert(item, outcome);
        }
    }
    Ok(Some((record, outcomes)))
}

/// The import's record and its markers counted (consistent reads); `None` when there is no record.
pub async fn progress(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    now_seconds: u64,
) -> Result<Option<Progress>, StoreError> {
    let Some((record, outcomes)) = read_import(db, tenant, import, now_seconds).await? else {
        return Ok(None);
    };
    let accepted = u64_attr(&record, "accepted").map_or(0, |n| n as u32);
    let count = |wanted: Outcome| outcomes.values().filter(|o| **o == wanted).count() as u32;
    let failed = FailReason::ALL.map(|r| count(Outcome::Failed(r)));
    let (written, superseded) = (count(Outcome::Written), count(Outcome::Superseded));
    let settled = outcomes.len() as u32 >= accepted;
    let failed_any = failed.iter().any(|n| *n > 0);
    let status = if settled || record.contains_key(CLOSED_AT_MS) {
        if failed_any {
            Status::Failed
        } else {
            Status::Complete
        }
    } else if Sending::Enqueuing.is_of(&record) {
        Status::Enqueuing
    } else {
        Status::Running
    };
    let created_at_ms = u64_attr(&record, CREATED_AT_MS).unwrap_or(0);
    Ok(Some(Progress {
        kind: string_attr(&record, "itemKind").unwrap_or_default(),
        status,
        accepted,
        written,
        superseded,
        failed,
        created_at: string_attr(&record, "createdAt").unwrap_or_default(),
        final_by: crate::identity::clock::rfc3339(
            u64_attr(&record, DUE_AT_MS).unwrap_or_else(|| due_at_ms(created_at_ms)),
        ),
    }))
}
