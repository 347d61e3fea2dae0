//! Moving a tenant between the pool and its own table while it is served: the re-sharding's shape
//! (`resharding`), with tables for layouts.
//!
//! 1. [`begin`] writes the move into the tenant record (`move`). Its credentials name both tables
//!    from the moment a container reads it (`store::tenancy::placement::tables_of`); writes keep
//!    the source until `writesMoveAt`, when every container has read the record and no request
//!    admitted before it is still writing: the target stays empty until then, so no copy there can
//!    be older than the source's.
//! 2. From `writesMoveAt` every request uses the target, and first pulls what it touches out of the
//!    source (`store::client::pull`): a read finds each item where it now is, a write's conditions
//!    see it, a delete leaves nothing behind to come back, and a list's page holds every item of its
//!    window.
//! 3. From `movesStartAt`, when no request can still write the source, the backfill ([`move_page`])
//!    walks the source with the tenant walk and relocates what it finds, a step at a time under the
//!    record's checkpoint ([`checkpoint`]), so any call in any container resumes where the last
//!    committed step ended.
//! 4. When a walk from the start finds nothing, [`finish`] sets the placement (`ownTable`) and
//!    removes the move; the source, if it was an own table, is deleted first.
//!
//! The backfill relocates 25 items to a transaction (two writes each); a request's pull costs a
//! consistent read of the source per item or window it touches, and a relocation per item there.

/// The route a move is asked on (`PATCH /tenants/{tenantId}`): the platform's account holds its
/// cost under it, the backfill's and the requests' pulls alike.
pub const ROUTE: &str = "update-tenant";

use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use futures::StreamExt;

use crate::identity::ids::TenantId;
use crate::identity::keys::ItemKey;
use crate::store::client::error::StoreError;
use crate::store::client::pull::Passed;
use crate::store::client::query::Item;
use crate::store::client::relocate::{relocate, relocate_together, Place};
use crate::store::client::scoped::TenantDb;
use crate::store::lifecycle::resharding::{asked, Step};
use crate::store::lifecycle::tenant_items::{self, RecordInWalk, Source};
use crate::store::tenancy::tenants::{
    record_update, send_record_update, value, TenantRecord, TenantStatus,
};
pub use crate::store::tenancy::tenants::{Placement, PlacementMove};

/// Items one backfill step walks (relocated [`BACKFILL_GROUP`] to a transaction; one by one,
/// [`IN_FLIGHT`] at once, when a group cannot commit).
pub const ITEMS_PER_STEP: usize = 100;
const IN_FLIGHT: usize = 2;
/// Items one backfill transaction relocates. Small on purpose: the tenant's own requests wait
/// behind a transaction holding their item, and one of 25 (50 actions) doubled their p99 during a
/// move (figure 15: 4.0× at 25, 1.5–2.0× at 5, for a fifth less throughput).
const BACKFILL_GROUP: usize = 5;

/// The walk of what a move carries: every item of the tenant but its record, which stays in the
/// pool.
pub fn sources(tenant: &TenantId, record: &TenantRecord) -> Vec<Source> {
    let now = crate::store::quota::limiter::walked_window_shards(&record.limits());
    let at_start = record.moving.as_ref().map_or(0, |m| m.window_shards);
    tenant_items::sources(
        tenant,
        record.shard_count,
        now.max(at_start),
        RecordInWalk::Excluded,
    )
}

/// What the backfill of `record`'s move has walked past, by its checkpoint: an item of a source
/// before the checkpoint's, or of its source and at or before it (a source is read in key order).
/// `None` when nothing is known (no checkpoint yet, or the walk begun again from the start).
pub fn passed(tenant: &TenantId, record: &TenantRecord) -> Option<Passed> {
    let position = record.moving.as_ref()?.position.clone()?;
    let sources = sources(tenant, record);
    let at = tenant_items::source_of(tenant, &sources, &position).ok()?;
    let tenant = tenant.clone();
    Some(Arc::new(move |key: &ItemKey| {
        tenant_items::source_of(&tenant, &sources, key).is_ok_and(|of| {
            of < at || (of == at && (&key.pk, &key.sk) <= (&position.pk, &position.sk))
        })
    }))
}

/// Starts moving `db`'s tenant (`record`, as read) to `to_table` (`to` names which) at `now_ms`, from
/// its own table or the pool:
/// `Raced` when the record changed since it was read (another operation started, the placement or
/// the status changed).
pub async fn begin(
    db: &TenantDb,
    record: &TenantRecord,
    to: Placement,
    to_table: &str,
    requested_by: &TenantId,
    now_ms: u64,
) -> Result<Step, StoreError> {
    let from_table = match (to, &record.own_table) {
        (Placement::Pool, Some(own)) => own.as_str(),
        _ => &*db.record_table,
    };
    let state = PlacementMove {
        to,
        from_table: from_table.to_owned(),
        to_table: to_table.to_owned(),
        progress: asked(requested_by, now_ms),
        window_shards: crate::store::quota::limiter::walked_window_shards(&record.limits()),
        position: None,
    };
    // Back to the pool only within the pool's shard count (a tenant re-sharded past it in its own
    // table re-shards back first).
    let placed = match to {
        Placement::Own => "attribute_not_exists(#own)",
        Placement::Pool => "#own = :from AND #shards <= :pool_max",
    };
    let mut update = record_update(db)
        .update_expression("SET #move = :move")
        .condition_expression(format!(
            "attribute_exists(PK) AND attribute_not_exists(#move) AND attribute_not_exists(#m) \
             AND attribute_not_exists(#r) AND (attribute_not_exists(#state) OR #state <> :offboarding) \
             AND {placed}"
        ))
        .expression_attribute_names("#move", "move")
        .expression_attribute_names("#m", "migration")
        .expression_attribute_names("#r", "restore")
        .expression_attribute_names("#state", "status")
        .expression_attribute_names("#own", "ownTable")
        .expression_attribute_values(":move", state.to_attribute()?)
        .expression_attribute_values(":offboarding", value(TenantStatus::Offboarding)?);
    if to == Placement::Pool {
        update = update
            .expression_attribute_values(":from", AttributeValue::S(from_table.into()))
            .expression_attribute_names("#shards", "shardCount")
            .expression_attribute_values(
                ":pool_max",
                AttributeValue::N(crate::identity::shard::MAX_SHARDS.to_string()),
            );
    }
    Ok(Step::from(send_record_update(update).await?))
}

/// Relocates every item of `page` (read from the source) to `state`'s target, [`BACKFILL_GROUP`] to
/// a transaction: `Ok(n)` items this step moved. A group that cannot commit as read (an item a request
/// pulled, or changed, since the walk read it) is relocated one by one, and such an item is not
/// counted.
pub async fn move_page(
    db: &TenantDb,
    state: &PlacementMove,
    page: &[Item],
) -> Result<u64, StoreError> {
    let to = Place {
        table: &state.to_table,
        pk: None,
    };
    let mut count = 0;
    for group in page.chunks(BACKFILL_GROUP) {
        if relocate_together(&db.client, &state.from_table, &state.to_table, group).await? {
            count += group.len() as u64;
            continue;
        }
        let moves: Vec<_> = group
            .iter()
            .map(|item| relocate(&db.client, &state.from_table, item, to))
            .collect();
        let moved = futures::stream::iter(moves)
            .buffer_unordered(IN_FLIGHT)
            .collect::<Vec<_>>()
            .await;
        for result in moved {
            count += u64::from(result?);
        }
    }
    Ok(count)
}

/// Moves the record's checkpoint past `position` (`None`: back to the start, for the walk that
/// confirms the source is empty), adding `moved`, on condition that no other step was committed
/// since `state` was read.
pub async fn checkpoint(
    db: &TenantDb,
    state: &PlacementMove,
    position: Option<ItemKey>,
    moved: u64,
) -> Result<Step, StoreError> {
    let mut next = state.clone();
    next.progress.steps += 1;
    next.progress.moved += moved;
    next.position = position;
    let update = conditioned(db, state)
        .update_expression("SET #move = :next")
        .expression_attribute_values(":next", next.to_attribute()?);
    Ok(Step::from(send_record_update(update).await?))
}

/// Ends the move whose walk from the start found nothing left in the source: the placement becomes
/// the target.
pub async fn finish(db: &TenantDb, state: &PlacementMove) -> Result<Step, StoreError> {
    let update = match state.to {
        Placement::Own => conditioned(db, state)
            .update_expression("SET #own = :own REMOVE #move")
            .expression_attribute_names("#own", "ownTable")
            .expression_attribute_values(":own", AttributeValue::S(state.to_table.clone())),
        Placement::Pool => conditioned(db, state)
            .update_expression("REMOVE #own, #move")
            .expression_attribute_names("#own", "ownTable"),
    };
    Ok(Step::from(send_record_update(update).await?))
}

fn conditioned(
    db: &TenantDb,
    state: &PlacementMove,
) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
    record_update(db)
        .condition_expression("#move.#steps = :steps AND #move.#to = :to AND #move.#start = :start")
        .expression_attribute_names("#move", "move")
        .expression_attribute_names("#steps", "steps")
        .expression_attribute_names("#to", "toTable")
        .expression_attribute_names("#start", "movesStartAt")
        .expression_attribute_values(
            ":start",
            AttributeValue::N(state.progress.moves_start_at.to_string()),
        )
        .expression_attribute_values(
            ":steps",
            AttributeValue::N(state.progress.steps.to_string()),
        )
        .expression_attribute_values(":to", AttributeValue::S(state.to_table.clone()))
}
