//! Claiming an import (its record, idempotent on the request's fingerprint), and the writes that enqueue it and mark its items.

use super::*;
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{import_item_sk, import_key, primary_key, EXPIRES_AT};
use crate::store::client::error::StoreError;
use crate::store::client::items::{enlist, get_item_consistent};
use crate::store::client::query::{put_unless_live, string_attr, u64_attr};
use crate::store::client::scoped::TenantDb;
use crate::store::client::transact::TransactError;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};

/// The fingerprint of the request that made the import: a retry with its key must match it.
const FINGERPRINT: &str = "fingerprint";

/// When an import accepted at `created_at_ms` must be final ([`FINAL_WITHIN_SECONDS`]).
pub fn due_at_ms(created_at_ms: u64) -> u64 {
    created_at_ms + FINAL_WITHIN_SECONDS * 1000
}

/// Writes the record of import `import` (state `enqueuing`) unless it exists; when it does, tells
/// whether the same request made it. The record is written before any message is sent, so two
/// requests can never send items under one import id.
pub async fn claim(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    new: &NewImport<'_>,
) -> Result<Claim, StoreError> {
    let pk = import_key(tenant, import);
    let now_seconds = new.created_at_ms / 1000;
    let mut item = primary_key(&pk, &pk);
    item.extend([
        ("kind".to_owned(), AttributeValue::S("IMPORT".into())),
        ("tenantId".to_owned(), AttributeValue::S(tenant.to_string())),
        ("importId".to_owned(), AttributeValue::S(import.to_string())),
        (
            "itemKind".to_owned(),
            AttributeValue::S(new.kind.to_owned()),
        ),
        (
            "accepted".to_owned(),
            AttributeValue::N(new.accepted.to_string()),
        ),
        (
            FINGERPRINT.to_owned(),
            AttributeValue::S(new.fingerprint.to_owned()),
        ),
        (STATE.to_owned(), Sending::Enqueuing.stored()),
        (
            "createdAt".to_owned(),
            AttributeValue::S(crate::identity::clock::rfc3339(new.created_at_ms)),
        ),
        (
            CREATED_AT_MS.to_owned(),
            AttributeValue::N(new.created_at_ms.to_string()),
        ),
        (
            DUE_AT_MS.to_owned(),
            AttributeValue::N(due_at_ms(new.created_at_ms).to_string()),
        ),
        (
            EXPIRES_AT.to_owned(),
            AttributeValue::N((now_seconds + RETENTION_SECONDS).to_string()),
        ),
    ]);
    enlist(tenant, &mut item);
    // A record that has expired (its messages with it) no longer holds its id.
    if put_unless_live(db, item, now_seconds).await? {
        return Ok(Claim::New);
    }
    let Some(existing) = get_item_consistent(db, primary_key(&pk, &pk))
        .await?
        .filter(|e| crate::store::client::query::is_live(e, now_seconds))
    else {
        // Expired between the two reads: a retry of the request claims it anew.
        return Err(StoreError::Contended("the import changed; retry".into()));
    };
    let closed = existing.contains_key(CLOSED_AT_MS);
    if string_attr(&existing, FINGERPRINT).as_deref() != Some(new.fingerprint) {
        return Ok(Claim::Other { closed });
    }
    Ok(Claim::Same {
        created_at_ms: u64_attr(&existing, CREATED_AT_MS).unwrap_or(new.created_at_ms),
        enqueuing: Sending::Enqueuing.is_of(&existing),
        closed,
    })
}

/// The transaction action that marks the import's items as all enqueued, on condition that the
/// record is still this request's.
/// Marks it so (1 TransactWriteItems), with `recorded` (an idempotency record) along when given:
/// a failed condition is action 0's.
pub async fn mark_enqueued(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    fingerprint: &str,
    recorded: Option<TransactWriteItem>,
) -> Result<(), TransactError> {
    let pk = import_key(tenant, import);
    let update = Update::builder()
        .table_name(&*db.table)
        .set_key(Some(primary_key(&pk, &pk)))
        .update_expression("SET #state = :queued")
        .condition_expression("#fingerprint = :fingerprint AND attribute_not_exists(#closed)")
        .expression_attribute_names("#state", STATE)
        .expression_attribute_names("#closed", CLOSED_AT_MS)
        .expression_attribute_names("#fingerprint", FINGERPRINT)
        .expression_attribute_values(":queued", Sending::Queued.stored())
        .expression_attribute_values(":fingerprint", AttributeValue::S(fingerprint.into()))
        .build()?;
    let mut actions = vec![TransactWriteItem::builder().update(update).build()];
    actions.extend(recorded);
    db.transact_items(actions).await
}

/// What became of one item of an import: its marker's content.
#[derive(Debug, Clone, Copy)]
pub struct ItemOutcome<'a> {
    pub import: &'a EntityId,
    pub index: u32,
    pub outcome: Outcome,
    /// When the import was accepted: its marker expires with it.
    pub created_at_ms: u64,
}

/// The transaction action that records the item's outcome, on condition that the item has no
/// outcome yet (a marker of an expired import of the same id counts as none). It expires with the
/// import.
pub fn marker(
    db: &TenantDb,
    of: &ItemOutcome<'_>,
    now_seconds: u64,
) -> Result<TransactWriteItem, StoreError> {
    let ItemOutcome {
        import,
        index,
        outcome,
        created_at_ms,
    } = *of;
    let tenant = &db.tenant;
    let mut item = primary_key(
        import_key(tenant, import),
        import_item_sk(tenant, import, index),
    );
    item.insert(
        OUTCOME.to_owned(),
        AttributeValue::S(outcome.as_str().into()),
    );
    if let Outcome::Failed(reason) = outcome {
        item.insert(REASON.to_owned(), AttributeValue::S(reason.as_str().into()));
    }
    let put = retained_put(db, item, created_at_ms)
        .condition_expression("attribute_not_exists(PK) OR #exp <= :now")
        .expression_attribute_names("#exp", EXPIRES_AT)
        .expression_attribute_values(":now", AttributeValue::N(now_seconds.to_string()))
        .build()?;
    Ok(TransactWriteItem::builder().put(put).build())
}
