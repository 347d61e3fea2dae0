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
//! 3. From `movesStartAt`, when no request can still write the source, the backfill walks the
//!    source in lanes (`lifecycle::lanes`, planned by [`plan_lanes`]; kept in the pool beside the
//!    record) and relocates what it finds ([`move_step`]), a few items to a transaction with their
//!    lane's checkpoint, so any call or lane worker in any container resumes where the last
//!    committed step ended, and every item relocated is counted once. A lane whose walk found
//!    items walks again from its start, until a pass finds nothing.
//! 4. When every lane is done, [`finish_lanes`] deletes the lanes, sets the placement (`ownTable`)
//!    and removes the move, in one transaction; the source, if it was an own table, is deleted
//!    first.
//!
//! The backfill relocates [`relocating::RELOCATIONS_PER_COMMIT`] items to a transaction (two writes
//! each, and the checkpoint); a request's pull costs a consistent read of the source per item or
//! window it touches, and a relocation per item there.

/// The route a move is asked on (`PATCH /tenants/{tenantId}`): the platform's account holds its
/// cost under it, the backfill's and the requests' pulls alike.
pub const ROUTE: &str = "update-tenant";

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};

use crate::identity::ids::TenantId;
use crate::identity::keys::ItemKey;
use crate::store::client::error::StoreError;
use crate::store::client::pull::Passed;
use crate::store::client::query::Item;
use crate::store::client::relocate::Relocation;
use crate::store::client::scoped::TenantDb;
use crate::store::lifecycle::lanes::{self, Lane};
use crate::store::lifecycle::relocating;
use crate::store::lifecycle::resharding::{asked, committed, Step};
use crate::store::lifecycle::tenant_items::{self, Page, RecordInWalk, Source};
use crate::store::tenancy::placement::own_table_name;
use crate::store::tenancy::tenants::{
    record_key, record_update, send_record_update, value, TenantRecord, TenantStatus,
};
pub use crate::store::tenancy::tenants::{Placement, PlacementMove};

/// Items one backfill step walks (relocated [`relocating::RELOCATIONS_PER_COMMIT`] to a
/// transaction).
pub const ITEMS_PER_STEP: usize = 100;

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
    lanes_asked: Option<u32>,
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
        lanes_asked,
        lanes: None,
        lanes_since_ms: None,
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

/// The tables a move of `db`'s tenant to `to` goes from and to, `(from, to)`: named again from the
/// pool's name and the tenant's id, never read from the record.
pub fn tables(db: &TenantDb, to: Placement) -> Result<(String, String), StoreError> {
    let pool = db.record_table.to_string();
    let own = own_table_name(&pool, &db.tenant).ok_or_else(|| {
        StoreError::Internal(format!("{} has no own table name beside {pool}", db.tenant))
    })?;
    Ok(match to {
        Placement::Own => (pool, own),
        Placement::Pool => (own, pool),
    })
}

/// Relocates every item of `page` (read from `lane`'s walk of the source) to the target, a few to
/// a transaction with the lane's checkpoint past them, kept in the pool
/// ([`relocating::relocate_page`]): an original is deleted while it is as read, else carried as it
/// now is. The lane after the page
/// (a pass that ends having found items begins again from the start), or `None` when another
/// caller stepped it first.
pub async fn move_step(
    db: &TenantDb,
    lane: &Lane,
    page: &Page,
    to: Placement,
    now_ms: u64,
) -> Result<Option<Lane>, StoreError> {
    let (from_table, to_table) = tables(db, to)?;
    let how = relocating::Relocating {
        from: &from_table,
        to: &to_table,
        unchanged: true,
        confirming: true,
        count_as: MOVED,
    };
    let relocation = |item: &Item| {
        Some(Relocation {
            item: item.clone(),
            new_pk: None,
        })
    };
    relocating::relocate_page(&db.for_record(), how, lane, page, relocation, now_ms).await
}

/// The lanes' operation name (`TENANT#t#LANE#moving#…`).
pub const OPERATION: &str = "moving";

/// A lane's count of the items it relocated.
pub const MOVED: &str = "moved";

/// Splits `state`'s backfill into `lanes` lanes (lane 0 resuming a walk begun before there were
/// lanes), kept in the pool beside the record, and notes their number in the record, in one
/// transaction conditioned on `state`'s step: `false` when another call planned or finished first.
pub async fn plan_lanes(
    db: &TenantDb,
    state: &PlacementMove,
    lanes: u32,
    now_ms: u64,
) -> Result<bool, StoreError> {
    let mut next = state.clone();
    next.lanes = Some(lanes);
    next.lanes_since_ms = Some(now_ms);
    let in_pool = db.for_record();
    let mut actions = lanes::plan(&in_pool, OPERATION, lanes, state.position.clone(), now_ms)?;
    actions.push(record_action(
        db,
        state,
        "SET #move = :next",
        [(":next", next.to_attribute()?)],
    )?);
    committed(db, actions).await
}

/// Ends the move whose lanes (`done`, every one of them) found the source empty: the lanes are
/// deleted, the placement becomes the target and the move is removed, in one transaction
/// conditioned on `state`'s step and each lane as read. `false` when another call finished first.
pub async fn finish_lanes(
    db: &TenantDb,
    state: &PlacementMove,
    done: &[Lane],
) -> Result<bool, StoreError> {
    // The lanes' count onto the move before it goes: the stream's last image of it is what its
    // finished event reports (the lanes are deleted beside it).
    let moved = lanes::totals(done).0.get(MOVED).copied().unwrap_or(0);
    let noted = record_action(
        db,
        state,
        "SET #move.lanesMoved = :moved",
        [(":moved", AttributeValue::N(moved.to_string()))],
    )?;
    if !committed(db, vec![noted]).await? {
        return Ok(false);
    }
    let mut actions = lanes::fold(&db.for_record(), done)?;
    actions.push(match state.to {
        Placement::Own => {
            let (_, own) = tables(db, Placement::Own)?;
            record_action(
                db,
                state,
                "SET #own = :own REMOVE #move",
                [(":own", AttributeValue::S(own))],
            )?
        }
        Placement::Pool => record_action(db, state, "REMOVE #own, #move", [])?,
    });
    committed(db, actions).await
}

/// The record update `expression` (naming the move `#move` and the placement `#own`, with
/// `values`) as a transaction's action, on condition that the move is the one `state` read, at its
/// step.
fn record_action<const N: usize>(
    db: &TenantDb,
    state: &PlacementMove,
    expression: &str,
    values: [(&str, AttributeValue); N],
) -> Result<TransactWriteItem, StoreError> {
    let names = [
        ("#move", "move"),
        ("#steps", "steps"),
        ("#to", "toTable"),
        ("#start", "movesStartAt"),
        ("#own", "ownTable"),
    ]
    .into_iter()
    .filter(|(name, _)| expression.contains(name) || *name != "#own")
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let mut condition_values = HashMap::from([
        (
            ":start".to_owned(),
            AttributeValue::N(state.progress.moves_start_at.to_string()),
        ),
        (
            ":steps".to_owned(),
            AttributeValue::N(state.progress.steps.to_string()),
        ),
        (":to".to_owned(), AttributeValue::S(state.to_table.clone())),
    ]);
    condition_values.extend(values.into_iter().map(|(k, v)| (k.to_owned(), v)));
    let update = Update::builder()
        .table_name(&*db.record_table)
        .set_key(Some(record_key(&db.tenant)))
        .update_expression(expression)
        .condition_expression("#move.#steps = :steps AND #move.#to = :to AND #move.#start = :start")
        .set_expression_attribute_names(Some(names.collect()))
        .set_expression_attribute_values(Some(condition_values))
        .build()?;
    Ok(TransactWriteItem::builder().update(update).build())
}
