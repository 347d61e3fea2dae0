//! Per-item outcomes: recorded, counted over a range, and deferrals noted.

use super::*;
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{
    import_item_sk, import_item_sk_prefix, import_key, EXPIRES_AT, PK, SK,
};
use crate::store::client::error::StoreError;
use crate::store::client::query::string_attr;
use crate::store::client::scoped::TenantDb;
use crate::store::client::transact::TransactError;
use aws_sdk_dynamodb::types::AttributeValue;

/// Records `outcome` for item `index` on its own (not with a write); recording it when the item
/// has an outcome already changes nothing.
pub async fn record_outcome(
    db: &TenantDb,
    of: &ItemOutcome<'_>,
    now_seconds: u64,
) -> Result<(), StoreError> {
    let action = marker(db, of, now_seconds)?;
    match db.transact_items(vec![action]).await {
        Ok(()) | Err(TransactError::ConditionFailed { .. }) => Ok(()),
        Err(TransactError::Store(e)) => Err(e),
    }
}

/// Records each item of `indexes` of the import accepted at `created_at_ms` failed by `reason`, but
/// those with an outcome already (8 at a time; each recording is idempotent).
pub async fn fail_items(
    db: &TenantDb,
    import: &EntityId,
    created_at_ms: u64,
    indexes: &[u32],
    reason: FailReason,
    now_seconds: u64,
) -> Result<(), StoreError> {
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(indexes.iter().map(|index| {
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
    .await
}

/// The indexes in `first..=last` of `import`'s items that have an outcome already (their live
/// markers at `now_seconds`, by one consistent Query of that range): what a delivery of a message,
/// again or deferred, skips rather than send a write its marker would refuse (a refused write
/// costs its units too). An expired marker (of an earlier import of the same id) counts for
/// nothing, as in the write's own condition.
pub async fn outcomes_between(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    (first, last): (u32, u32),
    now_seconds: u64,
) -> Result<std::collections::HashSet<u32>, StoreError> {
    let prefix = import_item_sk_prefix(tenant, import);
    let query = db
        .sdk_query()
        .key_condition_expression("#pk = :pk AND #sk BETWEEN :first AND :last")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_names("#sk", SK)
        .expression_attribute_values(":pk", AttributeValue::S(import_key(tenant, import)))
        .expression_attribute_values(
            ":first",
            AttributeValue::S(import_item_sk(tenant, import, first)),
        )
        .expression_attribute_values(
            ":last",
            AttributeValue::S(import_item_sk(tenant, import, last)),
        )
        .projection_expression("#sk, #exp")
        .expression_attribute_names("#exp", EXPIRES_AT)
        .consistent_read(true);
    let markers = crate::store::client::query::Query::sdk_built(query)
        .all()
        .await?;
    let live = markers
        .iter()
        .filter(|item| crate::store::client::query::is_live(item, now_seconds));
    Ok(live
        .filter_map(|item| {
            string_attr(item, SK)?
                .strip_prefix(&prefix)?
                .parse::<u32>()
                .ok()
        })
        .collect())
}

/// Records on the import's record (the one accepted at `created_at_ms`) that the consumer held a
/// message of it back because the tenant was over its capacity quota, at `now_ms`; nothing when the
/// record is another import's or gone.
pub async fn note_deferred(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
    created_at_ms: u64,
    now_ms: u64,
) -> Result<(), StoreError> {
    let out = record_update(db, tenant, import, created_at_ms)
        .update_expression("SET #deferred = :now")
        .expression_attribute_names("#deferred", DEFERRED_AT_MS)
        .expression_attribute_values(":now", AttributeValue::N(now_ms.to_string()))
        .send()
        .await;
    crate::store::client::error::written_unless_condition_failed(out).map(|_| ())
}
