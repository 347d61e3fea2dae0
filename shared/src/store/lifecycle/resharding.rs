//! Online re-sharding: moving a tenant's product and HR items from `from` to `to` write shards
//! while the tenant keeps reading and writing.
//!
//! 1. [`begin`] writes the migration into the tenant record. Reads look in both layouts from the
//!    moment a container sees it ([`crate::store::tenancy::layout`]); writes keep the old layout until
//!    `writesMoveAt` ([`WRITES_MOVE_DELAY_SECONDS`] later), when every container has read the new
//!    record and no request admitted with the old one can still be writing. (A write in the new
//!    layout before then would be invisible to, or undone by, a container that still knows only
//!    the old layout.) From then on a write puts the new copy and deletes the old one in one
//!    transaction.
//! 2. From `movesStartAt` ([`MOVES_DELAY_SECONDS`]), when every write that chose the old layout has
//!    landed, the lanes walk the old layout's partitions and move each item whose shard changes
//!    ([`move_step`]): a transaction puts each copy on condition that no item is at the new key and
//!    deletes each original on condition that it still exists, with the lane's checkpoint past them,
//!    conditioned on its step number. A copy therefore never overwrites a newer write, a deleted
//!    item is never brought back, every item moved is counted once, and any call in any container
//!    resumes where the last committed step ended.
//! 3. [`finish`] sets the shard count to `to` and removes the migration, once a walk found nothing
//!    left to move.
//!
//! Each moved item costs two write units for the copy and two for the delete (transactional
//! writes), plus a consistent read when the walk reads it.

use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::ids::TenantId;
use crate::identity::keys::{home_shard_pk, shard_pk, ItemKey, PK, SK};
use crate::identity::shard::MAX_SHARDS;
use crate::store::client::error::StoreError;
use crate::store::client::query::Item;
use crate::store::client::relocate::Relocation;
use crate::store::client::scoped::TenantDb;
use crate::store::lifecycle::lanes::{self, Lane};
use crate::store::lifecycle::relocating;
use crate::store::lifecycle::tenant_items::{Page, Source};
pub use crate::store::tenancy::tenants::Migration;
use crate::store::tenancy::tenants::{
    record_update, send_record_update, value, MoveProgress, TenantRecord, TenantStatus,
    RECORD_SETTLED_SECONDS,
};

/// Seconds from the start of a migration to the first write in the new layout: every container's
/// cached record has expired, and a request admitted on it has ended ([`RECORD_SETTLED_SECONDS`]).
pub const WRITES_MOVE_DELAY_SECONDS: u64 = RECORD_SETTLED_SECONDS;
/// Seconds from the start of a migration to the first move: a request that chose the old layout
/// just before writes moved has ended.
pub const MOVES_DELAY_SECONDS: u64 =
    WRITES_MOVE_DELAY_SECONDS + crate::store::tenancy::tenants::LONGEST_FUNCTION_TIMEOUT_SECONDS;
/// Items one step walks.
pub const ITEMS_PER_STEP: usize = 100;

/// The partitions a shard count gives the spaces of write shards, in walk order (products, then
/// HR: [`crate::identity::entities::write_shard_spaces`]).
pub fn sharded_sources(tenant: &TenantId, shards: u32) -> Vec<Source> {
    crate::identity::entities::write_shard_spaces()
        .flat_map(|space| (0..shards).map(move |s| shard_pk(tenant, space.kind, s)))
        .map(Source::Partition)
        .collect()
}

/// The progress of a move of items asked by an operator of `requested_by` at `now_ms`: writes move
/// after [`WRITES_MOVE_DELAY_SECONDS`], items after [`MOVES_DELAY_SECONDS`].
pub(crate) fn asked(requested_by: &TenantId, now_ms: u64) -> MoveProgress {
    let now = now_ms / 1000;
    MoveProgress {
        requested_at: crate::identity::clock::rfc3339(now_ms),
        requested_by: requested_by.to_string(),
        writes_move_at: now + WRITES_MOVE_DELAY_SECONDS,
        moves_start_at: now + MOVES_DELAY_SECONDS,
        steps: 0,
        moved: 0,
        lanes_moved: 0,
    }
}

/// Starts moving `db`'s tenant from `record`'s shard count to `to` shards at `now_ms`: `Raced` when
/// the record changed since it was read (another migration started, or the count or status
/// changed). The order date index keeps the count it was written with
/// ([`TenantRecord::order_shards`]).
pub async fn begin(
    db: &TenantDb,
    record: &TenantRecord,
    to: u32,
    requested_by: &TenantId,
    now_ms: u64,
    lanes_asked: Option<u32>,
) -> Result<Step, StoreError> {
    let migration = Migration {
        from: record.shard_count,
        to,
        progress: asked(requested_by, now_ms),
        position: None,
        lanes_asked,
        lanes: None,
        lanes_since_ms: None,
    };
    let update = record_update(db)
        .update_expression("SET #m = :m, #orders = if_not_exists(#orders, :from)")
        .condition_expression(
            "attribute_exists(PK) AND attribute_not_exists(#m) AND #shards = :from \
             AND (attribute_not_exists(#state) OR #state <> :offboarding) \
             AND attribute_not_exists(#restore) AND attribute_not_exists(#move) \
             AND (:to <= :pool_max OR attribute_exists(#own))",
        )
        .expression_attribute_names("#own", "ownTable")
        .expression_attribute_values(":to", AttributeValue::N(to.to_string()))
        .expression_attribute_values(":pool_max", AttributeValue::N(MAX_SHARDS.to_string()))
        .expression_attribute_names("#restore", "restore")
        .expression_attribute_names("#move", "move")
        .expression_attribute_names("#m", "migration")
        .expression_attribute_names("#orders", "orderShardCount")
        .expression_attribute_names("#shards", "shardCount")
        .expression_attribute_names("#state", "status")
        .expression_attribute_values(":m", migration.to_attribute()?)
        .expression_attribute_values(":from", AttributeValue::N(record.shard_count.to_string()))
        .expression_attribute_values(":offboarding", value(TenantStatus::Offboarding)?);
    Ok(Step::from(send_record_update(update).await?))
}

/// The key `item` has in a layout of `to` shards; `None` when it stays where it is (or is not a
/// sharded item of this tenant).
pub fn new_partition(tenant: &TenantId, item: &Item, to: u32) -> Option<String> {
    let pk = item.get(PK)?.as_s().ok()?;
    let sk = item.get(SK)?.as_s().ok()?;
    home_shard_pk(tenant, pk, sk, to).filter(|home| home != pk)
}

/// Moves every item of `page` (read from `lane`'s walk) whose shard changes in a layout of `to`
/// shards, a few to a transaction with the lane's checkpoint past them ([`relocating::relocate_page`]),
/// each as every move is (`store::client::relocate`): the lane after the page, or `None` when
/// another caller stepped it first.
pub async fn move_step(
    db: &TenantDb,
    lane: &Lane,
    page: &Page,
    to: u32,
    now_ms: u64,
) -> Result<Option<Lane>, StoreError> {
    let how = relocating::Relocating {
        from: &db.table,
        to: &db.table,
        unchanged: false,
        confirming: false,
        count_as: MOVED,
    };
    let relocation = |item: &Item| {
        new_partition(&db.tenant, item, to).map(|pk| Relocation {
            item: item.clone(),
            new_pk: Some(pk),
        })
    };
    relocating::relocate_page(db, how, lane, page, relocation, now_ms).await
}

/// The lanes' operation name (`TENANT#t#LANE#resharding#…`).
pub const OPERATION: &str = "resharding";

/// Splits `state`'s walk into `lanes` lanes (lane 0 resuming a walk begun before there were lanes)
/// and notes their number in the record, in one transaction conditioned on `state`'s step: `false`
/// when another call planned, stepped or finished first.
pub async fn plan_lanes(
    db: &TenantDb,
    state: &Migration,
    lanes: u32,
    now_ms: u64,
) -> Result<bool, StoreError> {
    let mut next = state.clone();
    next.lanes = Some(lanes);
    next.lanes_since_ms = Some(now_ms);
    let mut actions = lanes::plan(db, OPERATION, lanes, state.position.clone(), now_ms)?;
    actions.push(record_action(
        db,
        state,
        "SET #m = :next",
        Some(next.to_attribute()?),
    )?);
    committed(db, actions).await
}

/// A lane's count of the items it moved.
pub const MOVED: &str = "moved";

/// Ends the migration whose lanes (`done`, every one of them) found nothing more to move: the
/// lanes are deleted, the shard count becomes `to` and the layout's generation moves on, in one
/// transaction conditioned on `state`'s step and each lane as read. `false` when another call
/// finished first.
pub async fn finish_lanes(
    db: &TenantDb,
    state: &Migration,
    done: &[Lane],
) -> Result<bool, StoreError> {
    // The lanes' count onto the migration before it goes: the stream's last image of it is what
    // its finished event reports (the lanes are deleted beside it).
    let moved = lanes::totals(done).0.get(MOVED).copied().unwrap_or(0);
    let moved = AttributeValue::N(moved.to_string());
    let noted = record_action(db, state, "SET #m.lanesMoved = :next", Some(moved))?;
    if !committed(db, vec![noted]).await? {
        return Ok(false);
    }
    let mut actions = lanes::fold(db, done)?;
    actions.push(record_action(db, state, FINISH, None)?);
    committed(db, actions).await
}

/// The record update that ends a migration.
const FINISH: &str = "SET #shards = :to, #gen = if_not_exists(#gen, :zero) + :one REMOVE #m";

/// Sends `actions`, whose conditions are all on step numbers: `false` when one failed.
pub(crate) async fn committed(
    db: &TenantDb,
    actions: Vec<aws_sdk_dynamodb::types::TransactWriteItem>,
) -> Result<bool, StoreError> {
    use crate::store::client::transact::TransactError;
    match db.transact_items(actions).await {
        Ok(()) => Ok(true),
        Err(TransactError::ConditionFailed { .. }) => Ok(false),
        Err(TransactError::Store(e)) => Err(e),
    }
}

/// The record update `expression` (with `next` as `:next`) as a transaction's action, conditioned
/// as [`update_conditioned`]'s.
fn record_action(
    db: &TenantDb,
    state: &Migration,
    expression: &str,
    next: Option<AttributeValue>,
) -> Result<aws_sdk_dynamodb::types::TransactWriteItem, StoreError> {
    let mut names = std::collections::HashMap::from([
        ("#m".to_owned(), "migration".to_owned()),
        ("#steps".to_owned(), "steps".to_owned()),
        ("#to".to_owned(), "to".to_owned()),
    ]);
    let mut values = std::collections::HashMap::from([
        (
            ":steps".to_owned(),
            AttributeValue::N(state.progress.steps.to_string()),
        ),
        (":to".to_owned(), AttributeValue::N(state.to.to_string())),
    ]);
    if expression.contains("#shards") {
        names.insert("#shards".into(), "shardCount".into());
        names.insert("#gen".into(), "reshardings".into());
        values.insert(":zero".into(), AttributeValue::N("0".into()));
        values.insert(":one".into(), AttributeValue::N("1".into()));
    }
    if let Some(next) = next {
        values.insert(":next".into(), next);
    }
    let update = aws_sdk_dynamodb::types::Update::builder()
        .table_name(&*db.record_table)
        .set_key(Some(crate::store::tenancy::tenants::record_key(&db.tenant)))
        .update_expression(expression)
        .condition_expression("#m.#steps = :steps AND #m.#to = :to")
        .set_expression_attribute_names(Some(names))
        .set_expression_attribute_values(Some(values))
        .build()?;
    Ok(aws_sdk_dynamodb::types::TransactWriteItem::builder()
        .update(update)
        .build())
}

/// What a conditioned record update (a start, a checkpoint, the finish) did.
#[derive(Debug)]
pub enum Step {
    /// Committed: the record as it now is.
    Committed(Box<TenantRecord>),
    /// Another call started, committed a step or finished first. Read the record again.
    Raced,
}

impl From<Option<TenantRecord>> for Step {
    fn from(updated: Option<TenantRecord>) -> Self {
        updated.map_or(Step::Raced, |r| Step::Committed(Box::new(r)))
    }
}

/// Moves the record's checkpoint past `position` (the last item of a walked page), adding `moved`,
/// on condition that no other step was committed since `state` was read.
pub async fn checkpoint(
    db: &TenantDb,
    state: &Migration,
    position: ItemKey,
    moved: u64,
) -> Result<Step, StoreError> {
    let mut next = state.clone();
    next.progress.steps += 1;
    next.progress.moved += moved;
    next.position = Some(position);
    update_conditioned(db, state, "SET #m = :next", Some(next.to_attribute()?)).await
}

/// Ends the migration whose walk found nothing left to move: the shard count becomes `to`, and the
/// layout's generation (`reshardings`) moves on.
pub async fn finish(db: &TenantDb, state: &Migration) -> Result<Step, StoreError> {
    update_conditioned(
        db,
        state,
        "SET #shards = :to, #gen = if_not_exists(#gen, :zero) + :one REMOVE #m",
        None,
    )
    .await
}

async fn update_conditioned(
    db: &TenantDb,
    state: &Migration,
    expression: &str,
    next: Option<AttributeValue>,
) -> Result<Step, StoreError> {
    let mut update = record_update(db)
        .update_expression(expression)
        .condition_expression("#m.#steps = :steps AND #m.#to = :to")
        .expression_attribute_names("#m", "migration")
        .expression_attribute_names("#steps", "steps")
        .expression_attribute_names("#to", "to")
        .expression_attribute_values(
            ":steps",
            AttributeValue::N(state.progress.steps.to_string()),
        )
        .expression_attribute_values(":to", AttributeValue::N(state.to.to_string()));
    if expression.contains("#shards") {
        update = update
            .expression_attribute_names("#shards", "shardCount")
            .expression_attribute_names("#gen", "reshardings")
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()));
    }
    if let Some(next) = next {
        update = update.expression_attribute_values(":next", next);
    }
    Ok(Step::from(send_record_update(update).await?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::entities::{EMPLOYEE, HR, PRODUCT, PRODUCTS};
    use crate::identity::fixtures::{acme, tenant};
    use crate::identity::keys::{primary_key, KeySpace};

    #[test]
    fn an_item_moves_to_its_shard_in_the_new_count_unless_it_is_there() {
        let t = acme();
        // product-000042: shard 1 of 4, 5 of 16, 5 of 8 (computed independently).
        let p = primary_key(PRODUCTS.key(&t, 1), PRODUCT.key(&t, "product-000042"));
        assert_eq!(new_partition(&t, &p, 16), Some(PRODUCTS.key(&t, 5)));
        assert_eq!(new_partition(&t, &p, 4), None);
        let e = primary_key(HR.key(&t, 0), EMPLOYEE.key(&t, "emp-7"));
        // emp-7 is on shard 13 of 16 (golden).
        assert_eq!(new_partition(&t, &e, 16), Some(HR.key(&t, 13)));
        // Another tenant's item, or no entity in the sort key: not moved.
        let other = tenant("other");
        assert_eq!(
            new_partition(
                &t,
                &primary_key(PRODUCTS.key(&other, 1), PRODUCT.key(&other, "x")),
                16
            ),
            None
        );
    }

    #[test]
    fn the_walk_covers_products_then_hr_shards_of_the_old_count() {
        let t = acme();
        let sources = sharded_sources(&t, 2);
        assert_eq!(
            sources,
            vec![
                Source::Partition(PRODUCTS.key(&t, 0)),
                Source::Partition(PRODUCTS.key(&t, 1)),
                Source::Partition(HR.key(&t, 0)),
                Source::Partition(HR.key(&t, 1)),
            ]
        );
    }
}
