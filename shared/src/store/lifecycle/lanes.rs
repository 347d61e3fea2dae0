//! Lanes: one tenant operation's walk split into parts that run side by side.
//!
//! The tenant walk's sources (`tenant_items::sources`: the product and HR shards, the usage and
//! quota window shards, the catalog partitions) are dealt out to `n` lanes in turn: lane `j` walks
//! the sources `j`, `j + n`, `j + 2n`, …, in walk order ([`lane_sources`]). No two lanes read the
//! same partition, so each can be paced at a partition's rate on its own, and each keeps its own
//! checkpoint: an item `TENANT#t#LANE#<operation>#<lane>` in the tenant's table, alone in its
//! partition ([`Lane`]: its position, its step number, its counts, whether it is done). A step
//! commits its changes together with its lane's checkpoint, conditioned on the lane's step number
//! ([`checkpoint`]): a step is all or nothing, two callers stepping one lane never both commit a
//! step, and a lane resumed anywhere continues from its last committed step. The lanes are written in one transaction with the
//! record's note of how many there are ([`plan`]), and deleted in one transaction with the record's
//! fold of their counts ([`fold`]): never a lane without its operation, never counts lost.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use serde::{Deserialize, Serialize};

use crate::identity::keys::{lane_key, lanes_prefix, primary_key, ItemKey, PK};
use crate::store::client::error::{written_unless_condition_failed, StoreError};
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
use crate::store::lifecycle::tenant_items::Source;

/// The most lanes one operation is split into: a [`plan`] and a [`fold`] each write every lane
/// with the record in one transaction (at most 100 actions).
pub const MAX_LANES: u32 = 64;

/// Lanes an operation runs in unless its operator asks otherwise.
pub const DEFAULT_LANES: u32 = 16;

/// One lane as stored: its checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lane {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    /// Its number, 0-based.
    pub lane: u32,
    /// Steps committed; each step is conditioned on it.
    pub steps: u64,
    /// Whether its walk found nothing more.
    pub done: bool,
    /// The last item its walk passed: where it resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<ItemKey>,
    /// What its steps did, by kind (items deleted, for an offboarding).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
    /// Epoch milliseconds of its last committed step (or of the plan).
    pub stepped_at_ms: u64,
    /// Items the walk found since it last began (a walk that must end with a pass that finds
    /// nothing: [`Lane::after_confirming_step`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub found: u64,
    /// Its walk's pass, from 0: such a walk begins again after a pass that found items (a move's
    /// first pass always does: it moved them), and the progress shown counts the first pass done
    /// rather than going back.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pass: u64,
    /// The step number of the newest turn of it put on the lane queue, noted once the message is
    /// sent ([`mark_sent`]): a message of a lower number is a stale copy. `None` on a lane whose
    /// first turn is not yet noted sent, or last written by a version that did not note it (then
    /// no message is stale).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_steps: Option<u64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Lane {
    /// Lane `lane` of `operation` on `db`'s tenant, before its first step, starting after `start`.
    fn new(db: &TenantDb, operation: &str, lane: u32, start: Option<ItemKey>, now_ms: u64) -> Self {
        Self {
            pk: lane_key(&db.tenant, operation, lane),
            sk: lane_key(&db.tenant, operation, lane),
            lane,
            steps: 0,
            done: false,
            position: start,
            counts: BTreeMap::new(),
            stepped_at_ms: now_ms,
            found: 0,
            pass: 0,
            // Noted once its first turn is on the queue: a lane planned and never noted was never
            // sent (its planner's send failed), and is sent again soon.
            sent_steps: None,
        }
    }

    /// The lane after a step that passed `position` and counted `counts` (done when `position` is
    /// `None`: the walk found nothing more).
    pub fn after_step(
        &self,
        position: Option<ItemKey>,
        counts: &BTreeMap<String, u64>,
        now_ms: u64,
    ) -> Self {
        let mut next = self.clone();
        next.steps += 1;
        next.done = position.is_none();
        if position.is_some() {
            next.position = position;
        }
        for (kind, n) in counts {
            *next.counts.entry(kind.clone()).or_default() += n;
        }
        next.stepped_at_ms = now_ms;
        next
    }

    /// As [`Lane::after_step`], for a walk that ends only with a pass that finds nothing (a move's:
    /// the source must be seen empty), the step having found `found` items: a pass that ends having
    /// found some begins again from the start.
    pub fn after_confirming_step(
        &self,
        position: Option<ItemKey>,
        counts: &BTreeMap<String, u64>,
        found: u64,
        now_ms: u64,
    ) -> Self {
        let mut next = self.after_step(position, counts, now_ms);
        next.found += found;
        if next.done && next.found > 0 {
            next.done = false;
            next.position = None;
            next.found = 0;
            next.pass += 1;
        }
        next
    }
}

/// The sources lane `lane` of `lanes` walks, in walk order.
pub fn lane_sources(sources: &[Source], lane: u32, lanes: u32) -> Vec<Source> {
    sources
        .iter()
        .skip(lane as usize)
        .step_by(lanes.max(1) as usize)
        .cloned()
        .collect()
}

/// How many lanes a walk of `sources` runs in when `asked` are asked for: at least one, at most
/// [`MAX_LANES`], and never more than it has sources (a lane without a source does nothing).
pub fn lane_count(asked: u32, sources: usize) -> u32 {
    asked
        .clamp(1, MAX_LANES)
        .min(u32::try_from(sources.max(1)).unwrap_or(MAX_LANES))
}

/// The transaction actions that create `lanes` lanes of `operation` (lane 0 starting after
/// `start`, a walk begun before it had lanes; the others at their start), each on condition it is
/// not there. The caller adds the record's note of the plan, conditioned on its step.
pub fn plan(
    db: &TenantDb,
    operation: &str,
    lanes: u32,
    start: Option<ItemKey>,
    now_ms: u64,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    (0..lanes)
        .map(|lane| {
            let start = if lane == 0 { start.clone() } else { None };
            let put = Put::builder()
                .table_name(&*db.table)
                .set_item(Some(stored(&Lane::new(
                    db, operation, lane, start, now_ms,
                ))?))
                .condition_expression("attribute_not_exists(PK)")
                .build()?;
            Ok(TransactWriteItem::builder().put(put).build())
        })
        .collect()
}

/// Every lane of a plan of `count` lanes of `operation` on `db`'s tenant, in lane order: a
/// consistent GetItem of each, side by side (each lane is its own partition). None found, the lanes
/// of an operation planned before each lane had its own partition, if there are any.
pub async fn read(db: &TenantDb, operation: &str, count: u32) -> Result<Vec<Lane>, StoreError> {
    let reads = (0..count.min(MAX_LANES)).map(|lane| read_one_at(db, operation, lane, false));
    let lanes: Vec<Lane> = futures::future::try_join_all(reads)
        .await?
        .into_iter()
        .flatten()
        .collect();
    match lanes.is_empty() {
        true => read_shared_partition(db, operation).await,
        false => Ok(lanes),
    }
}

/// Lane `lane` of `operation` on `db`'s tenant, if it is there (a consistent GetItem; a second
/// one at its key in an operation planned before each lane had its own partition, when it is not).
pub async fn read_one(
    db: &TenantDb,
    operation: &str,
    lane: u32,
) -> Result<Option<Lane>, StoreError> {
    match read_one_at(db, operation, lane, false).await? {
        Some(found) => Ok(Some(found)),
        None => read_one_at(db, operation, lane, true).await,
    }
}

/// Lane `lane` of `operation` at its key (`in_shared_partition`: in the one partition of before).
async fn read_one_at(
    db: &TenantDb,
    operation: &str,
    lane: u32,
    in_shared_partition: bool,
) -> Result<Option<Lane>, StoreError> {
    let sk = lane_key(&db.tenant, operation, lane);
    let pk = match in_shared_partition {
        true => lanes_prefix(&db.tenant, operation),
        false => sk.clone(),
    };
    db.get(primary_key(pk, sk))
        .consistent()
        .stored()
        .await?
        .map(parsed)
        .transpose()
}

/// Every lane of `operation` in the one partition an operation planned before each lane had its
/// own keeps them in to its end (`TENANT#t#LANE#<operation>`), in lane order: a consistent Query.
async fn read_shared_partition(db: &TenantDb, operation: &str) -> Result<Vec<Lane>, StoreError> {
    let mut lanes = Vec::new();
    let mut start = None;
    loop {
        let out = db
            .client
            .query()
            .table_name(&*db.table)
            .consistent_read(true)
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(
                ":pk",
                AttributeValue::S(lanes_prefix(&db.tenant, operation)),
            )
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        for item in out.items.unwrap_or_default() {
            lanes.push(parsed(item)?);
        }
        match out.last_evaluated_key.filter(|k| !k.is_empty()) {
            Some(lek) => start = Some(lek),
            None => return Ok(lanes),
        }
    }
}

/// A lane as stored, read back.
fn parsed(item: Item) -> Result<Lane, StoreError> {
    serde_dynamo::from_item(item)
        .map_err(|e| StoreError::Internal(format!("a lane does not read back: {e}")))
}

/// The action that moves `lane`'s checkpoint to `next`, on condition that no other step of it was
/// committed since `lane` was read, it is not done, and no newer turn was noted sent meanwhile
/// ([`mark_sent`]): the whole lane is put again, and its `sentSteps` as read would lower it, so the
/// newest turn's copy would no longer tell an older one stale. The last action of an
/// offboarding's or a restore's step, the first of a relocation's (`relocating::relocate_page`: a
/// failure there is told from an item's by its index).
pub fn checkpoint(
    db: &TenantDb,
    lane: &Lane,
    next: &Lane,
) -> Result<TransactWriteItem, StoreError> {
    let put = Put::builder()
        .table_name(&*db.table)
        .set_item(Some(stored(next)?))
        .expression_attribute_names("#steps", "steps")
        .expression_attribute_names("#done", "done")
        .expression_attribute_names("#sent", "sentSteps")
        .expression_attribute_values(":steps", AttributeValue::N(lane.steps.to_string()))
        .expression_attribute_values(":false", AttributeValue::Bool(false));
    let put = match lane.sent_steps {
        Some(sent) => put
            .condition_expression("#steps = :steps AND #done = :false AND #sent = :sent")
            .expression_attribute_values(":sent", AttributeValue::N(sent.to_string())),
        None => put.condition_expression(
            "#steps = :steps AND #done = :false AND attribute_not_exists(#sent)",
        ),
    }
    .build()?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// The actions that delete `lanes` (every one done, unchanged since read): with the record's fold
/// of their counts, in one transaction, when the operation's walk is over.
pub fn fold(db: &TenantDb, lanes: &[Lane]) -> Result<Vec<TransactWriteItem>, StoreError> {
    lanes
        .iter()
        .map(|lane| {
            let delete = Delete::builder()
                .table_name(&*db.table)
                .key(PK, AttributeValue::S(lane.pk.clone()))
                .key("SK", AttributeValue::S(lane.sk.clone()))
                .condition_expression("#steps = :steps AND #done = :true")
                .expression_attribute_names("#steps", "steps")
                .expression_attribute_names("#done", "done")
                .expression_attribute_values(":steps", AttributeValue::N(lane.steps.to_string()))
                .expression_attribute_values(":true", AttributeValue::Bool(true))
                .build()?;
            Ok(TransactWriteItem::builder().delete(delete).build())
        })
        .collect()
}

/// Notes `lane` as sent again, or as waiting its turn (its key refuses, its table is throttled),
/// at `now_ms` (its `steppedAtMs`: a lane noted so is not lost), on condition no step of it was
/// committed and nothing noted it since it was read (its `steppedAtMs` and `sentSteps` as read),
/// and it is not done; `false` otherwise (it is not lost, or another copy of its turn has it). Its
/// step number is noted as the newest sent ([`mark_sent`]) only once the message is on the queue:
/// a send that fails leaves any older copy live.
pub async fn touch(db: &TenantDb, lane: &Lane, now_ms: u64) -> Result<bool, StoreError> {
    // Its sent step number as read too: a lane read as never sent whose planner's note landed
    // since is on the queue already.
    let (as_sent, sent_read) = match lane.sent_steps {
        Some(sent) => ("#sent = :sent", Some(AttributeValue::N(sent.to_string()))),
        None => ("attribute_not_exists(#sent)", None),
    };
    let mut touch = db
        .client
        .update_item()
        .table_name(&*db.table)
        .key(PK, AttributeValue::S(lane.pk.clone()))
        .key("SK", AttributeValue::S(lane.sk.clone()))
        .update_expression("SET #at = :now")
        .condition_expression(format!(
            "#steps = :steps AND #done = :false AND #at = :read AND {as_sent}"
        ))
        .expression_attribute_names("#sent", "sentSteps")
        .expression_attribute_names("#at", "steppedAtMs")
        .expression_attribute_names("#steps", "steps")
        .expression_attribute_names("#done", "done")
        .expression_attribute_values(":now", AttributeValue::N(now_ms.to_string()))
        .expression_attribute_values(":read", AttributeValue::N(lane.stepped_at_ms.to_string()))
        .expression_attribute_values(":steps", AttributeValue::N(lane.steps.to_string()))
        .expression_attribute_values(":false", AttributeValue::Bool(false));
    if let Some(sent) = sent_read {
        touch = touch.expression_attribute_values(":sent", sent);
    }
    let sent = touch.send().await;
    written_unless_condition_failed(sent)
}

/// Notes that a turn of lane `lane` of `operation` at step number `steps` is on the queue: its
/// `sentSteps`, only ever raised (a copy that sent an older number later leaves it), never past
/// the lane's committed steps (a late note of an earlier lane of the same key, one that ended and
/// began again, would make every turn of the new lane stale, and the lane stuck), and only while
/// the lane is there (folded, it is not made again). `false` when it was not raised. A note not
/// taken at the lane's key is tried at its key in an operation planned before each lane had its
/// own partition ([`read`]), so that one's turns are told stale as well.
pub async fn mark_sent(
    db: &TenantDb,
    operation: &str,
    lane: u32,
    steps: u64,
) -> Result<bool, StoreError> {
    let sk = lane_key(&db.tenant, operation, lane);
    Ok(mark_sent_at(db, &sk, &sk, steps).await?
        || mark_sent_at(db, &lanes_prefix(&db.tenant, operation), &sk, steps).await?)
}

/// [`mark_sent`] at the lane at `pk`, `sk`.
async fn mark_sent_at(db: &TenantDb, pk: &str, sk: &str, steps: u64) -> Result<bool, StoreError> {
    let marked = db
        .client
        .update_item()
        .table_name(&*db.table)
        .key(PK, AttributeValue::S(pk.to_owned()))
        .key("SK", AttributeValue::S(sk.to_owned()))
        .update_expression("SET #sent = :steps")
        .condition_expression(
            "attribute_exists(#pk) AND #steps >= :steps \
             AND (attribute_not_exists(#sent) OR #sent < :steps)",
        )
        .expression_attribute_names("#pk", PK)
        .expression_attribute_names("#steps", "steps")
        .expression_attribute_names("#sent", "sentSteps")
        .expression_attribute_values(":steps", AttributeValue::N(steps.to_string()))
        .send()
        .await;
    written_unless_condition_failed(marked)
}

/// The sum of `lanes`' counts, and of their steps.
pub fn totals(lanes: &[Lane]) -> (BTreeMap<String, u64>, u64) {
    let mut counts = BTreeMap::new();
    for lane in lanes {
        for (kind, n) in &lane.counts {
            *counts.entry(kind.clone()).or_default() += n;
        }
    }
    (counts, lanes.iter().map(|l| l.steps).sum())
}

/// How far `lanes` are through their walk of `sources` (what the tenant view shows): the sources
/// each has passed, a done lane all of its own, and so does one past its first pass (a move's lane
/// walks again to see its source empty: the figure never goes back), over all sources. An item
/// count would need a count of the tenant's items first, which only a walk gives.
pub fn sources_walked(
    tenant: &crate::identity::ids::TenantId,
    sources: &[Source],
    lanes: &[Lane],
) -> usize {
    let count = lanes.len() as u32;
    lanes
        .iter()
        .map(|lane| {
            let own = lane_sources(sources, lane.lane, count);
            match (lane.done || lane.pass > 0, &lane.position) {
                (true, _) => own.len(),
                (false, None) => 0,
                (false, Some(p)) => {
                    crate::store::lifecycle::tenant_items::source_of(tenant, &own, p).unwrap_or(0)
                }
            }
        })
        .sum()
}

fn stored(lane: &Lane) -> Result<Item, StoreError> {
    serde_dynamo::to_item(lane)
        .map_err(|e| StoreError::Internal(format!("a lane does not serialize: {e}")))
}

#[cfg(test)]
mod tests;
