//! Offboarding: deleting every item of a tenant, resumably, with an exact report.
//!
//! 1. [`begin`] sets the record's status to `offboarding` (every container refuses the tenant once
//!    its cached record expires) and the time deletion may start: [`DELETION_DELAY_SECONDS`] later,
//!    when no request of the tenant admitted before can still be writing.
//! 2. [`plan_lanes`] splits the walk ([`crate::store::lifecycle::tenant_items`], record excluded)
//!    into lanes ([`crate::store::lifecycle::lanes`]), noted in the record in the same transaction.
//! 3. [`delete_step`] deletes one page of a lane's walk in one transaction with the lane's
//!    checkpoint: the position, the counts per kind, and a step number the transaction is
//!    conditioned on. A step is all or nothing, so the counts are exact and a resumed offboarding
//!    (any container, any time) continues where each lane's last step ended; two callers stepping
//!    one lane at once never both commit the same step.
//! 4. [`fold`], once every lane is done, adds the lanes' counts and steps to the record and deletes
//!    the lanes, in one transaction.
//! 5. [`write_report`] writes the report in the platform's partition (named by the tenant and its
//!    record's `createdAt`, so a reused tenant id gets a report of its own), then [`delete_record`]
//!    deletes the record, both on condition that no later step was committed meanwhile (so a call that raced a step
//!    never leaves a report that undercounts).
//!
//! Every item deleted in a transaction costs two write units (DynamoDB's price for transactional
//! writes), and the walk reads each item once with a consistent read.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};

use crate::identity::ids::TenantId;
use crate::identity::keys::{
    kind, offboarding_report_sk, offboarding_reports_pk, partition_kind, PK, SK,
};
use crate::store::client::error::StoreError;
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
use crate::store::client::transact::TransactError;
use crate::store::lifecycle::lanes::{self, Lane};
use crate::store::lifecycle::tenant_items::Page;
pub use crate::store::tenancy::tenants::Offboarding;
use crate::store::tenancy::tenants::{
    read_record_consistent, record_key, record_update, send_record_update, step_guard, value,
    TenantRecord, TenantStatus, RECORD_SETTLED_SECONDS,
};

/// Seconds from the start of an offboarding to its first deletion: every container's cached record
/// has expired, and a request admitted on it has ended ([`RECORD_SETTLED_SECONDS`]).
pub const DELETION_DELAY_SECONDS: u64 = RECORD_SETTLED_SECONDS;

/// Items one deletion step removes: a transaction holds at most 100 actions, one is the checkpoint.
pub const ITEMS_PER_STEP: usize = 99;

/// The lanes' operation name (`TENANT#t#LANE#offboarding#…`).
pub const OPERATION: &str = "offboarding";

/// A finished offboarding's report, as stored in the platform's partition
/// (`TENANT#_platform#OFFBOARDED#<tenant>`, sorted by the record's `createdAt`): the API's answer,
/// kept as its JSON text (as an idempotency record keeps its answer), so a later call returns it
/// unchanged. Its presence is also the proof that the tenant id was offboarded
/// ([`ever_offboarded`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The deletion steps its counts cover: a report is replaced only by one covering more.
    pub steps: u64,
    /// The JSON body the API answers with.
    pub body: String,
}

/// The kind an item is counted under: its `kind` attribute, else its partition's kind
/// (`USAGE`, `RATE`, `TENANT`, …).
pub fn kind_of(tenant: &TenantId, item: &Item) -> String {
    if let Some(AttributeValue::S(k)) = item.get("kind") {
        return k.clone();
    }
    match item.get(PK) {
        Some(AttributeValue::S(pk)) => partition_kind(tenant, pk).unwrap_or("?").to_owned(),
        _ => "?".to_owned(),
    }
}

/// Starts offboarding `db`'s tenant (status `offboarding`, deletion from `deletion_starts_at`)
/// unless it already is, in `lanes_asked` lanes (else `LIFECYCLE_LANES`); answers the record as it
/// now is, `None` when the tenant has none.
pub async fn begin(
    db: &TenantDb,
    requested_by: &TenantId,
    requested_at: String,
    deletion_starts_at: u64,
    lanes_asked: Option<u32>,
) -> Result<Option<TenantRecord>, StoreError> {
    let state = Offboarding {
        requested_at,
        requested_by: requested_by.to_string(),
        deletion_starts_at,
        started_at: None,
        steps: 0,
        deleted: BTreeMap::new(),
        position: None,
        lanes_asked,
        lanes: None,
        lanes_since_ms: None,
        walked: false,
    };
    let update = record_update(db)
        .update_expression("SET #state = :offboarding, #o = :o")
        .condition_expression(
            "attribute_exists(PK) AND attribute_not_exists(#m) AND attribute_not_exists(#r) \
             AND attribute_not_exists(#move) AND (attribute_not_exists(#state) OR #state <> :offboarding)",
        )
        .expression_attribute_names("#move", "move")
        .expression_attribute_names("#r", "restore")
        .expression_attribute_names("#state", "status")
        .expression_attribute_names("#o", "offboarding")
        .expression_attribute_names("#m", "migration")
        .expression_attribute_values(":offboarding", value(TenantStatus::Offboarding)?)
        .expression_attribute_values(":o", state.to_attribute()?);
    match send_record_update(update).await? {
        Some(record) => Ok(Some(record)),
        // Not onboarded, already offboarding (another request started it first), or being
        // re-sharded, restored or moved (the caller refuses that).
        None => read_record_consistent(db).await,
    }
}

/// What a write conditioned on a step number did.
#[derive(Debug)]
pub enum Step<T> {
    /// Committed: the new state.
    Committed(T),
    /// Another caller committed a step first; nothing was written. Read again.
    Raced,
}

/// Splits `state`'s walk into `lanes` lanes (lane 0 resuming a walk begun before there were lanes)
/// and notes their number in the record, in one transaction conditioned on `state.steps`.
pub async fn plan_lanes(
    db: &TenantDb,
    state: &Offboarding,
    lanes: u32,
    now_ms: u64,
) -> Result<Step<Offboarding>, StoreError> {
    let mut next = state.clone();
    next.lanes = Some(lanes);
    next.lanes_since_ms = Some(now_ms);
    next.started_at
        .get_or_insert_with(|| crate::identity::clock::rfc3339(now_ms));
    let mut actions = lanes::plan(db, OPERATION, lanes, state.position.clone(), now_ms)?;
    actions.push(record_checkpoint(db, state, &next)?);
    committed_unless_raced(db, actions, next).await
}

/// Deletes `page`'s items (at most [`ITEMS_PER_STEP`], read from `lane`'s walk) and moves the
/// lane's checkpoint past them (done when the page ends the walk), in one transaction conditioned
/// on `lane.steps`.
pub async fn delete_step(
    db: &TenantDb,
    lane: &Lane,
    page: &Page,
    now_ms: u64,
) -> Result<Step<Lane>, StoreError> {
    let mut counts = BTreeMap::new();
    let mut actions = Vec::with_capacity(page.items.len() + 1);
    for item in &page.items {
        *counts.entry(kind_of(&db.tenant, item)).or_default() += 1;
        let delete = Delete::builder()
            .table_name(&*db.table)
            .key(PK, AttributeValue::S(string(item, PK)?))
            .key(SK, AttributeValue::S(string(item, SK)?))
            .build()?;
        actions.push(TransactWriteItem::builder().delete(delete).build());
    }
    let next = lane.after_step(page.next.clone(), &counts, now_ms);
    actions.push(lanes::checkpoint(db, lane, &next)?);
    committed_unless_raced(db, actions, next).await
}

/// Adds the counts and steps of `done` (every lane of `state`, each done) to the record and deletes
/// the lanes, in one transaction conditioned on `state.steps` and on each lane as read: from then
/// on the record alone says what was deleted.
pub async fn fold(
    db: &TenantDb,
    state: &Offboarding,
    done: &[Lane],
) -> Result<Step<Offboarding>, StoreError> {
    let (counts, steps) = lanes::totals(done);
    let mut next = state.clone();
    next.walked = true;
    next.steps += steps;
    next.position = None;
    for (kind, n) in counts {
        *next.deleted.entry(kind).or_default() += n;
    }
    let mut actions = lanes::fold(db, done)?;
    actions.push(record_checkpoint(db, state, &next)?);
    committed_unless_raced(db, actions, next).await
}

/// The record's offboarding state set to `next`, on condition it is still at `state.steps`.
fn record_checkpoint(
    db: &TenantDb,
    state: &Offboarding,
    next: &Offboarding,
) -> Result<TransactWriteItem, StoreError> {
    let guard = step_guard(TenantStatus::Offboarding, "offboarding", state.steps)?;
    let update = Update::builder()
        .table_name(&*db.record_table)
        .set_key(Some(record_key(&db.tenant)))
        .update_expression("SET #op = :next")
        .condition_expression(guard.condition)
        .set_expression_attribute_names(Some(guard.names))
        .set_expression_attribute_values(Some(guard.values))
        .expression_attribute_values(":next", next.to_attribute()?)
        .build()?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// Sends `actions`, whose conditions are all on step numbers (a lane's, the record's, a lane still
/// there): a failed one means another caller got there first.
async fn committed_unless_raced<T>(
    db: &TenantDb,
    actions: Vec<TransactWriteItem>,
    next: T,
) -> Result<Step<T>, StoreError> {
    match db.transact_items(actions).await {
        Ok(()) => Ok(Step::Committed(next)),
        Err(TransactError::ConditionFailed { .. }) => Ok(Step::Raced),
        Err(TransactError::Store(e)) => Err(e),
    }
}

/// What [`delete_record`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// The record is deleted.
    Done,
    /// Another call committed a step after this one's walk, or finished first: read the record
    /// (or the report) again.
    Raced,
}

/// The first half of ending an offboarding whose walk found nothing left after `report.steps`
/// steps: writes `report` in the platform's partition (`platform_db`), under the offboarded
/// record's `created_at`, unless a report of this same offboarding covering as many steps or more
/// is there. Then the report is the one there when it covers the same steps (another finisher, or
/// an earlier run of this one, wrote it first, and may have answered with it: it is kept as it
/// was answered), else `None` (raced: read the record again). [`delete_record`] is the second
/// half. Both can be repeated: a finish interrupted between them is finished by the next call,
/// and what the caller does between them (the key's shredding) is on record before it is done.
pub async fn write_report(
    db: &TenantDb,
    platform_db: &TenantDb,
    record: &TenantRecord,
    requested_by: &str,
    report: &Report,
) -> Result<Option<Report>, StoreError> {
    let pk = offboarding_reports_pk(&db.tenant);
    let sk = offboarding_report_sk(&db.tenant, &record.created_at);
    let item = Item::from([
        (PK.to_owned(), AttributeValue::S(pk)),
        (SK.to_owned(), AttributeValue::S(sk.clone())),
        (
            "kind".to_owned(),
            AttributeValue::S("OFFBOARDING_REPORT".into()),
        ),
        (
            "tenantId".to_owned(),
            AttributeValue::S(platform_db.tenant.to_string()),
        ),
        (
            "offboardedTenantId".to_owned(),
            AttributeValue::S(db.tenant.to_string()),
        ),
        (
            "requestedBy".to_owned(),
            AttributeValue::S(requested_by.to_owned()),
        ),
        (
            "steps".to_owned(),
            AttributeValue::N(report.steps.to_string()),
        ),
        ("body".to_owned(), AttributeValue::S(report.body.clone())),
    ]);
    let steps = AttributeValue::N(report.steps.to_string());
    // Both writes go as one-action transactions: offboard-tenant then links no PutItem or
    // DeleteItem of its own (its bootstrap stays under 4 MB), at 2 WCU each, once per offboarding.
    let put = Put::builder()
        .table_name(&*platform_db.table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(PK) OR #steps < :steps")
        .expression_attribute_names("#steps", "steps")
        .expression_attribute_values(":steps", steps)
        .build()?;
    let put = vec![TransactWriteItem::builder().put(put).build()];
    if finished_or_raced(platform_db.transact_items(put).await)?.is_none() {
        return Ok(Some(report.clone()));
    }
    // (The newest report of the id is this record's when there is one: the id's records are
    // made one after another, and the reports' keys sort by their `created_at`.)
    let there = latest_report(platform_db, &db.tenant, false).await?;
    let this_records = there.filter(|item| item.get(SK) == Some(&AttributeValue::S(sk)));
    let there = this_records.map(report_of).transpose()?;
    Ok(there.filter(|there| there.steps == report.steps))
}

/// The report `item` holds.
fn report_of(item: Item) -> Result<Report, StoreError> {
    let steps = crate::store::client::query::u64_attr(&item, "steps");
    match (
        steps,
        crate::store::client::query::string_attr(&item, "body"),
    ) {
        (Some(steps), Some(body)) => Ok(Report { steps, body }),
        _ => Err(StoreError::Internal(
            "an offboarding report without its body".into(),
        )),
    }
}

/// The second half of ending an offboarding: deletes the tenant record on condition it is still
/// offboarding at `steps` (no later step was committed).
pub async fn delete_record(db: &TenantDb, steps: u64) -> Result<Finished, StoreError> {
    let guard = step_guard(TenantStatus::Offboarding, "offboarding", steps)?;
    let delete = Delete::builder()
        .table_name(&*db.record_table)
        .set_key(Some(record_key(&db.tenant)))
        .condition_expression(guard.condition)
        .set_expression_attribute_names(Some(guard.names))
        .set_expression_attribute_values(Some(guard.values))
        .build()?;
    let delete = vec![TransactWriteItem::builder().delete(delete).build()];
    Ok(finished_or_raced(db.transact_items(delete).await)?.unwrap_or(Finished::Done))
}

/// A finishing write's outcome: `Some(Raced)` when its condition failed, `None` when it was made.
fn finished_or_raced(result: Result<(), TransactError>) -> Result<Option<Finished>, StoreError> {
    match result {
        Ok(()) => Ok(None),
        Err(TransactError::ConditionFailed { .. }) => Ok(Some(Finished::Raced)),
        Err(TransactError::Store(e)) => Err(e),
    }
}

/// The report of `offboarded`'s latest finished offboarding, read from the platform's partition
/// (`platform_db`); `None` when the id was never offboarded.
pub async fn read_report(
    platform_db: &TenantDb,
    offboarded: &TenantId,
) -> Result<Option<Report>, StoreError> {
    latest_report(platform_db, offboarded, false)
        .await?
        .map(report_of)
        .transpose()
}

/// Whether a tenant of id `tenant` was ever offboarded (a report of it exists). Operators of such a
/// tenant lose their power once its record is gone ([`crate::service`]'s refusal), where the
/// operators of a tenant never onboarded keep theirs, to onboard it. One keys-only Query of the
/// tenant id's report partition, which is all `reports` needs to be able to send: the service reads
/// it with the functions' own report reader ([`crate::isolation::guard::report_reader`]), not with
/// the platform's credentials.
pub async fn ever_offboarded(reports: &TenantDb, tenant: &TenantId) -> Result<bool, StoreError> {
    Ok(latest_report(reports, tenant, true).await?.is_some())
}

async fn latest_report(
    platform_db: &TenantDb,
    offboarded: &TenantId,
    keys_only: bool,
) -> Result<Option<Item>, StoreError> {
    let mut query = platform_db
        .client
        .query()
        .table_name(&*platform_db.table)
        .key_condition_expression("#pk = :pk")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_values(":pk", AttributeValue::S(offboarding_reports_pk(offboarded)))
        .scan_index_forward(false)
        .limit(1)
        .consistent_read(true);
    if keys_only {
        query = query
            .projection_expression("#pk")
            .expression_attribute_names("#pk", PK);
    }
    let out = query.send().await.map_err(StoreError::from_sdk)?;
    Ok(out.items.unwrap_or_default().into_iter().next())
}

/// The record's own deletion, counted in the report like every other item.
pub fn with_record(mut deleted: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    *deleted.entry(kind::TENANT.to_owned()).or_default() += 1;
    deleted
}

fn string(item: &Item, name: &str) -> Result<String, StoreError> {
    match item.get(name) {
        Some(AttributeValue::S(s)) => Ok(s.clone()),
        _ => Err(StoreError::Internal(format!("an item without {name}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::entities::PRODUCTS;
    use crate::identity::fixtures::{acme, tenant};
    use crate::identity::keys::{usage_counter_pk, KeySpace};

    #[test]
    fn items_are_counted_by_kind_attribute_else_by_partition() {
        let t = acme();
        let item = |pairs: &[(&str, &str)]| -> Item {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), AttributeValue::S(v.to_string())))
                .collect()
        };
        assert_eq!(
            kind_of(
                &t,
                &item(&[("PK", &PRODUCTS.key(&t, 1)), ("kind", "PRODUCT")])
            ),
            "PRODUCT"
        );
        assert_eq!(
            kind_of(&t, &item(&[("PK", &usage_counter_pk(&t, 3))])),
            "USAGE"
        );
        assert_eq!(
            kind_of(&t, &item(&[("PK", &usage_counter_pk(&tenant("other"), 3))])),
            "?"
        );
        assert_eq!(with_record(BTreeMap::new())["TENANT"], 1);
    }
}
