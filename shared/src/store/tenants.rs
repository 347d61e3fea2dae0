//! Tenant records, their tiers and limits, and the per-container record cache.
//!
//! A tenant's record (`PK` = `SK` = `TENANT#t#TENANT`) holds its tier, its limits when an operator set
//! custom ones, its status, and its shard count. Changing the shard count moves items between
//! shards: it is a migration ([`crate::store::resharding`]), whose state the record holds while it
//! runs, and which [`TenantRecord::layout`] turns into the keys readers and writers use.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use serde::{Deserialize, Serialize};

use crate::identity::clock::Clock;
use crate::identity::ids::TenantId;
use crate::identity::keys::{tenant_record_key, ItemKey, PK, SK};
use crate::store::error::StoreError;
use crate::store::scoped::TenantDb;

/// How long a container trusts a cached tenant record before reading it again, counted from before
/// the read was sent: a changed tier or limit reaches every container within this time (plus
/// DynamoDB's replication lag for an eventually consistent read, typically well under a second).
pub const RECORD_TTL_SECONDS: u64 = 30;

/// The longest timeout of any function in template.yaml (create-import and import-consumer; the
/// rest have 10 s). A request admitted on a cached record may still be running this long after.
/// `tests/tests/lifecycle.rs` checks the template against it.
pub const LONGEST_FUNCTION_TIMEOUT_SECONDS: u64 = 30;

/// The SDK's operation timeout (`service::app`): a record a container wrote itself is remembered
/// when the write answers, which can be this long after it committed.
pub const RECORD_OPERATION_TIMEOUT_SECONDS: u64 = 8;

/// Seconds after a record change until no container acts on the record as it was before: the cache
/// bound ([`RECORD_TTL_SECONDS`], counted from before a read; from a write's answer, up to
/// [`RECORD_OPERATION_TIMEOUT_SECONDS`] after it committed), then the longest request admitted on it
/// ([`LONGEST_FUNCTION_TIMEOUT_SECONDS`]), and a margin of 2 s for replication lag. Offboarding's
/// deletions and a re-sharding's move of writes wait this long.
pub const RECORD_SETTLED_SECONDS: u64 =
    RECORD_TTL_SECONDS + RECORD_OPERATION_TIMEOUT_SECONDS + LONGEST_FUNCTION_TIMEOUT_SECONDS + 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Basic,
    Standard,
    Premium,
    /// Limits set by an operator, stored in the record.
    Custom,
}

/// What a tenant may consume per second, across all its routes and containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Limits {
    /// API requests per second.
    pub requests_per_second: u32,
    /// DynamoDB capacity units (read + write, table and GSI1) per second.
    pub capacity_units_per_second: u32,
}

/// The bounds an operator's custom limits must keep.
pub const MAX_REQUESTS_PER_SECOND: u32 = 100_000;
pub const MAX_CAPACITY_UNITS_PER_SECOND: u32 = 1_000_000;

impl Tier {
    /// Its name as the API and the metrics spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Basic => "basic",
            Tier::Standard => "standard",
            Tier::Premium => "premium",
            Tier::Custom => "custom",
        }
    }

    /// The tier's own limits; `None` for [`Tier::Custom`], whose limits live in the record.
    pub fn limits(self) -> Option<Limits> {
        let (requests_per_second, capacity_units_per_second) = match self {
            Tier::Basic => (25, 50),
            Tier::Standard => (100, 250),
            Tier::Premium => (1_000, 2_500),
            Tier::Custom => return None,
        };
        Some(Limits {
            requests_per_second,
            capacity_units_per_second,
        })
    }
}

impl Limits {
    /// A tenant without a record is held to the basic tier's limits.
    pub const UNONBOARDED: Limits = Limits {
        requests_per_second: 25,
        capacity_units_per_second: 50,
    };

    /// Whether an operator may set these: each rate at least 1 and at most its maximum.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_REQUESTS_PER_SECOND).contains(&self.requests_per_second) {
            return Err(format!(
                "limits.requestsPerSecond must be 1 to {MAX_REQUESTS_PER_SECOND}"
            ));
        }
        if !(1..=MAX_CAPACITY_UNITS_PER_SECOND).contains(&self.capacity_units_per_second) {
            return Err(format!(
                "limits.capacityUnitsPerSecond must be 1 to {MAX_CAPACITY_UNITS_PER_SECOND}"
            ));
        }
        Ok(())
    }
}

/// Whether a tenant is served. A suspended tenant's requests get 403 and no credentials are vended
/// for it; its data stays. An offboarding tenant is refused the same way while its items are
/// deleted ([`crate::store::offboarding`]); when they are gone, so is its record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TenantStatus {
    #[default]
    Active,
    Suspended,
    Offboarding,
}

/// The stored tenant record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantRecord {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    pub tenant_id: String,
    pub tier: Tier,
    /// Set exactly when the tier is [`Tier::Custom`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    pub shard_count: u32,
    pub created_at: String,
    /// Absent on records written before suspension existed: active.
    #[serde(default)]
    pub status: TenantStatus,
    /// The offboarding's state and checkpoint, from `DELETE /tenants/{tenantId}` on. Written only
    /// by `store::offboarding` ([`Offboarding::to_attribute`]), never with the whole record.
    #[serde(default, skip_serializing)]
    pub offboarding: Option<Offboarding>,
    /// A re-sharding's state and checkpoint, while it runs. Written only by
    /// `store::resharding` ([`Migration::to_attribute`]).
    #[serde(default, skip_serializing)]
    pub migration: Option<Migration>,
    /// The shard count of the orders' date index, frozen at the first re-sharding: orders do not
    /// move, so their index keeps the count they were written with. Absent: [`Self::shard_count`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_shard_count: Option<u32>,
    /// Re-shardings finished: the layout's generation, to which walk cursors are bound (a shard
    /// count alone can come back: 4 → 16 → 4).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reshardings: u32,
    /// The tenant of the operator who onboarded the tenant or made the last change of its tier,
    /// limits or status: the `operator` of those lifecycle events
    /// ([`crate::store::lifecycle_events`]). Absent on records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_by: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A re-sharding of the product and HR shards from `from` to `to` shards
/// (`crate::store::resharding`), kept in the tenant record while it runs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    pub from: u32,
    pub to: u32,
    /// RFC 3339.
    pub requested_at: String,
    /// The tenant of the operator who asked.
    pub requested_by: String,
    /// Epoch seconds: from then on every container writes the new layout.
    pub writes_move_at: u64,
    /// Epoch seconds: the migrator moves items from then on.
    pub moves_start_at: u64,
    /// Move steps committed; each checkpoint is conditioned on it.
    pub steps: u64,
    /// Items the committed steps moved.
    #[serde(default)]
    pub moved: u64,
    /// The last old-layout item a committed step walked past: where the migrator resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<ItemKey>,
}

impl Migration {
    /// The state as stored, built by hand like [`Offboarding::to_attribute`].
    pub fn to_attribute(&self) -> AttributeValue {
        let s = |v: &str| AttributeValue::S(v.to_owned());
        let n = |v: u64| AttributeValue::N(v.to_string());
        let mut state = HashMap::from([
            ("from".to_owned(), n(self.from.into())),
            ("to".to_owned(), n(self.to.into())),
            ("requestedAt".to_owned(), s(&self.requested_at)),
            ("requestedBy".to_owned(), s(&self.requested_by)),
            ("writesMoveAt".to_owned(), n(self.writes_move_at)),
            ("movesStartAt".to_owned(), n(self.moves_start_at)),
            ("steps".to_owned(), n(self.steps)),
            ("moved".to_owned(), n(self.moved)),
        ]);
        if let Some(p) = &self.position {
            state.insert("position".to_owned(), position_attribute(p));
        }
        AttributeValue::M(state)
    }
}

/// A walk position as stored in a checkpoint: `{pk, sk}`.
pub(crate) fn position_attribute(p: &ItemKey) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("pk".to_owned(), AttributeValue::S(p.pk.clone())),
        ("sk".to_owned(), AttributeValue::S(p.sk.clone())),
    ]))
}

/// Where a tenant's product and HR items are, as readers and writers see it at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Every item is on `fnv(id) mod n`.
    Stable(u32),
    /// A re-sharding from `from` to `to` shards runs: an item is on its `from` shard or its `to`
    /// shard (never both once `writes_moved`, except for a moment inside one transaction). Writes
    /// use `to` once `writes_moved`, `from` before.
    Migrating {
        from: u32,
        to: u32,
        writes_moved: bool,
    },
}

impl Layout {
    /// The shard count new writes use.
    pub fn write_shards(self) -> u32 {
        match self {
            Layout::Stable(n) => n,
            Layout::Migrating {
                to,
                writes_moved: true,
                ..
            } => to,
            Layout::Migrating { from, .. } => from,
        }
    }
}

/// An offboarding's state (`crate::store::offboarding`), kept in the tenant record until the record
/// itself goes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Offboarding {
    /// RFC 3339.
    pub requested_at: String,
    /// The tenant of the operator who asked.
    pub requested_by: String,
    /// Epoch seconds; nothing is deleted before.
    pub deletion_starts_at: u64,
    /// RFC 3339, set by the first deletion step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// Deletion steps committed; each step is conditioned on it.
    pub steps: u64,
    /// Items deleted so far, by kind.
    #[serde(default)]
    pub deleted: BTreeMap<String, u64>,
    /// The last item deleted: where the walk resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<ItemKey>,
}

impl Offboarding {
    /// The state as stored (the attribute names its `Deserialize` reads), built by hand: the
    /// functions then carry no serializer for it.
    pub fn to_attribute(&self) -> AttributeValue {
        let s = |v: &str| AttributeValue::S(v.to_owned());
        let n = |v: u64| AttributeValue::N(v.to_string());
        let mut state = HashMap::from([
            ("requestedAt".to_owned(), s(&self.requested_at)),
            ("requestedBy".to_owned(), s(&self.requested_by)),
            ("deletionStartsAt".to_owned(), n(self.deletion_starts_at)),
            ("steps".to_owned(), n(self.steps)),
        ]);
        // No empty map: DynamoDB Local's stream renders one without its type, which no SDK reads
        // (an absent `deleted` reads as empty).
        if !self.deleted.is_empty() {
            let deleted = self.deleted.iter();
            let deleted = deleted.map(|(kind, count)| (kind.clone(), n(*count)));
            state.insert("deleted".to_owned(), AttributeValue::M(deleted.collect()));
        }
        if let Some(started) = &self.started_at {
            state.insert("startedAt".to_owned(), s(started));
        }
        if let Some(p) = &self.position {
            state.insert("position".to_owned(), position_attribute(p));
        }
        AttributeValue::M(state)
    }
}

impl TenantRecord {
    /// Where the tenant's sharded items are at `now` (epoch seconds).
    pub fn layout(&self, now: u64) -> Layout {
        match &self.migration {
            None => Layout::Stable(self.shard_count),
            Some(m) => Layout::Migrating {
                from: m.from,
                to: m.to,
                writes_moved: now >= m.writes_move_at,
            },
        }
    }

    /// The shard count of the orders' date index.
    pub fn order_shards(&self) -> u32 {
        self.order_shard_count.unwrap_or(self.shard_count)
    }

    /// The limits in force: the tier's, or the operator's custom ones.
    pub fn limits(&self) -> Limits {
        self.limits
            .or(self.tier.limits())
            .unwrap_or(Limits::UNONBOARDED)
    }
}

/// Reads a tenant's record with its own scoped client; `None` when the tenant is not onboarded.
pub async fn read_record(db: &TenantDb) -> Result<Option<TenantRecord>, StoreError> {
    read_record_with(&db.client, &db.table, &db.tenant, false).await
}

/// [`read_record`], strongly consistent: for a read that decides a write.
pub async fn read_record_consistent(db: &TenantDb) -> Result<Option<TenantRecord>, StoreError> {
    read_record_with(&db.client, &db.table, &db.tenant, true).await
}

/// Reads `tenant`'s record with `client` (a scoped client, or the directory's record reader).
async fn read_record_with(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    tenant: &TenantId,
    consistent: bool,
) -> Result<Option<TenantRecord>, StoreError> {
    let key = tenant_record_key(tenant);
    let out = client
        .get_item()
        .table_name(table)
        .key(PK, AttributeValue::S(key.clone()))
        .key(SK, AttributeValue::S(key))
        .set_consistent_read(consistent.then_some(true))
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    out.item.map(parse_record).transpose()
}

pub(crate) fn parse_record(item: crate::store::query::Item) -> Result<TenantRecord, StoreError> {
    serde_dynamo::from_item(item)
        .map_err(|e| StoreError::Internal(format!("tenant record does not parse: {e}")))
}

/// An UpdateItem of `db`'s tenant record, answering with the whole new record: for the callers
/// that condition a change of the record and then [`send_record_update`].
pub(crate) fn record_update(
    db: &TenantDb,
) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
    let key = tenant_record_key(&db.tenant);
    db.client
        .update_item()
        .table_name(&*db.table)
        .key(PK, AttributeValue::S(key.clone()))
        .key(SK, AttributeValue::S(key))
        .return_values(ReturnValue::AllNew)
}

/// Sends a conditional [`record_update`]: `Some(record)` as it now is, `None` when its condition
/// failed.
pub(crate) async fn send_record_update(
    update: aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder,
) -> Result<Option<TenantRecord>, StoreError> {
    match update.send().await {
        Ok(out) => match out.attributes {
            Some(item) => Ok(Some(parse_record(item)?)),
            None => Err(StoreError::Internal("UpdateItem returned no record".into())),
        },
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
        {
            Ok(None)
        }
        Err(e) => Err(StoreError::from_sdk(e)),
    }
}

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
}

/// Applies `change`, asked by an operator of tenant `by`, to the existing record, unless the tenant
/// is being offboarded. One conditional UpdateItem, answered with the whole new record.
pub async fn update_record(
    db: &TenantDb,
    change: RecordChange,
    by: &TenantId,
) -> Result<Updated, StoreError> {
    let mut update = record_update(db)
        .condition_expression(
            "attribute_exists(PK) AND (attribute_not_exists(#state) OR #state <> :offboarding)",
        )
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
            .expression_attribute_names("#tier", "tier")
            .expression_attribute_names("#limits", "limits")
            .expression_attribute_values(":tier", value(tier)?);
        if let Some(limits) = limits {
            update = update.expression_attribute_values(":limits", value(limits)?);
        }
    }
    if let Some(status) = change.status {
        update = update
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
                Some(_) => Updated::Offboarding,
                None => Updated::NotOnboarded,
            }),
            _ => Err(StoreError::from_sdk(e)),
        },
    }
}

pub(crate) fn value(v: impl Serialize) -> Result<AttributeValue, StoreError> {
    serde_dynamo::to_attribute_value(v)
        .map_err(|e| StoreError::Internal(format!("tenant record does not serialize: {e}")))
}

/// How long a container trusts a cached absence of a record before [`TenantDirectory::onboarded_record`]
/// reads it again.
pub const ABSENCE_RECHECK_MS: u64 = 1000;

/// A cached record (`None`: not onboarded) and when it was read, in epoch milliseconds.
type CachedRecord = (Option<Arc<TenantRecord>>, u64);

/// Tenant records, cached per container for [`RECORD_TTL_SECONDS`] by the injected clock (also the
/// absence of a record, so a tenant that was never onboarded costs one read per period).
///
/// Records are read with the function's own credentials through a client that can read nothing else
/// ([`crate::store::scoped::TenantClients::record_reader`]), so learning that a tenant is suspended
/// never vends that tenant's credentials.
pub struct TenantDirectory {
    cache: Mutex<HashMap<TenantId, CachedRecord>>,
    clock: Arc<dyn Clock>,
    reader: aws_sdk_dynamodb::Client,
    table: Arc<str>,
}

impl TenantDirectory {
    pub fn new(clock: Arc<dyn Clock>, reader: aws_sdk_dynamodb::Client, table: &str) -> Self {
        Self {
            cache: Mutex::new(HashMap::new()),
            clock,
            reader,
            table: table.into(),
        }
    }

    /// The tenant's record, `None` when it is not onboarded; read again once the cached one is
    /// [`RECORD_TTL_SECONDS`] old.
    pub async fn record(&self, tenant: &TenantId) -> Result<Option<Arc<TenantRecord>>, StoreError> {
        let now = self.clock.now_millis();
        if let Some((record, at)) = self.lock().get(tenant).cloned() {
            if now.saturating_sub(at) < RECORD_TTL_SECONDS * 1000 {
                return Ok(record);
            }
        }
        // Cached as of the moment before the read was sent: the record may have changed while the
        // read was under way, so its age starts then, not when it answered.
        let record = read_record_with(&self.reader, &self.table, tenant, false)
            .await?
            .map(Arc::new);
        self.lock().insert(tenant.clone(), (record.clone(), now));
        Ok(record)
    }

    /// The tenant's record read now, strongly consistent, past the cache (and cached as of before
    /// the read): for a decision that a stale view would make wrongly and for good, such as dropping
    /// an import message for a tenant of the same id onboarded again a moment ago.
    pub async fn record_now(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<Arc<TenantRecord>>, StoreError> {
        let sent_at = self.clock.now_millis();
        let record = read_record_with(&self.reader, &self.table, tenant, true)
            .await?
            .map(Arc::new);
        self.lock()
            .insert(tenant.clone(), (record.clone(), sent_at));
        Ok(record)
    }

    /// Caches a record this container has just written, so its own next request sees it at once.
    pub fn remember(&self, tenant: &TenantId, record: Option<Arc<TenantRecord>>) {
        let now = self.clock.now_millis();
        self.lock().insert(tenant.clone(), (record, now));
    }

    /// The tenant's record, where a cached absence is trusted for [`ABSENCE_RECHECK_MS`] only: a
    /// tenant onboarded a moment ago (by another container) is served within a second rather than
    /// after [`RECORD_TTL_SECONDS`], and a caller naming a tenant without a record costs at most one
    /// GetItem a second per container, however fast it calls (it is refused before the quota).
    pub async fn onboarded_record(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<Arc<TenantRecord>>, StoreError> {
        if let Some(record) = self.record(tenant).await? {
            return Ok(Some(record));
        }
        let checked_at = self.lock().get(tenant).map_or(0, |(_, at)| *at);
        if self.clock.now_millis().saturating_sub(checked_at) < ABSENCE_RECHECK_MS {
            return Ok(None);
        }
        let sent_at = self.clock.now_millis();
        let fresh = read_record_with(&self.reader, &self.table, tenant, false)
            .await?
            .map(Arc::new);
        self.lock().insert(tenant.clone(), (fresh.clone(), sent_at));
        Ok(fresh)
    }

    /// Where the tenant's product and HR items are now; 403 when it has not been onboarded.
    pub async fn layout(&self, db: &TenantDb) -> Result<Layout, StoreError> {
        let record = self.required(db).await?;
        Ok(record.layout(self.clock.now_seconds()))
    }

    /// Where the tenant's sharded items are now, and the layout's generation (re-shardings
    /// finished); 403 when it has not been onboarded.
    pub async fn layout_generation(&self, db: &TenantDb) -> Result<(Layout, u32), StoreError> {
        let record = self.required(db).await?;
        Ok((record.layout(self.clock.now_seconds()), record.reshardings))
    }

    /// The shard count of the tenant's order date index; 403 when it has not been onboarded.
    pub async fn order_shards(&self, db: &TenantDb) -> Result<u32, StoreError> {
        Ok(self.required(db).await?.order_shards())
    }

    async fn required(&self, db: &TenantDb) -> Result<Arc<TenantRecord>, StoreError> {
        self.onboarded_record(&db.tenant)
            .await?
            .ok_or(StoreError::NotOnboarded)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TenantId, CachedRecord>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_tier_has_limits_and_custom_has_none() {
        assert_eq!(Tier::Basic.limits().unwrap().requests_per_second, 25);
        assert_eq!(Tier::Standard.limits().unwrap().requests_per_second, 100);
        assert_eq!(Tier::Premium.limits().unwrap().requests_per_second, 1_000);
        assert_eq!(Tier::Custom.limits(), None);
        assert_eq!(Some(Limits::UNONBOARDED), Tier::Basic.limits());
    }

    #[test]
    fn golden_record_with_custom_limits() {
        let record = TenantRecord {
            pk: "TENANT#acme#TENANT".into(),
            sk: "TENANT#acme#TENANT".into(),
            tenant_id: "acme".into(),
            tier: Tier::Custom,
            limits: Some(Limits {
                requests_per_second: 7,
                capacity_units_per_second: 9,
            }),
            shard_count: 4,
            created_at: "2026-11-22T00:00:00Z".into(),
            status: TenantStatus::Active,
            offboarding: None,
            migration: None,
            order_shard_count: None,
            reshardings: 0,
            changed_by: None,
        };
        let item: crate::store::query::Item = serde_dynamo::to_item(&record).unwrap();
        let limits = item["limits"].as_m().unwrap();
        assert_eq!(limits["requestsPerSecond"], AttributeValue::N("7".into()));
        assert_eq!(
            limits["capacityUnitsPerSecond"],
            AttributeValue::N("9".into())
        );
        assert_eq!(item["tier"], AttributeValue::S("custom".into()));
        assert_eq!(record.limits().requests_per_second, 7);
        let basic = TenantRecord {
            tier: Tier::Basic,
            limits: None,
            ..record
        };
        let item: crate::store::query::Item = serde_dynamo::to_item(&basic).unwrap();
        assert!(!item.contains_key("limits"));
        assert_eq!(basic.limits(), Tier::Basic.limits().unwrap());
    }

    #[test]
    fn the_offboarding_state_reads_back_as_written() {
        // GIVEN a state with every field set, and one with none of the optional ones
        let full = Offboarding {
            requested_at: "2026-11-23T00:00:00Z".into(),
            requested_by: "ops".into(),
            deletion_starts_at: 1_795_300_000,
            started_at: Some("2026-11-23T00:01:00Z".into()),
            steps: 3,
            deleted: BTreeMap::from([("PRODUCT".to_owned(), 250), ("USAGE".to_owned(), 8)]),
            position: Some(ItemKey {
                pk: "TENANT#a#SESSION#1".into(),
                sk: "TENANT#a#CUSTOMER#c".into(),
            }),
        };
        let empty = Offboarding {
            started_at: None,
            position: None,
            deleted: BTreeMap::new(),
            steps: 0,
            ..full.clone()
        };
        for state in [full, empty] {
            // WHEN it is written as the record stores it and read back
            let read: Offboarding =
                serde_dynamo::from_attribute_value(state.to_attribute()).unwrap();
            // THEN it is the same state
            assert_eq!(read, state);
        }
    }

    #[test]
    fn golden_change_expressions() {
        let custom = Some(Limits {
            requests_per_second: 1,
            capacity_units_per_second: 1,
        });
        let change = |tier, status| change_expression(&RecordChange { tier, status });
        assert_eq!(
            change(Some((Tier::Basic, None)), None),
            "SET #tier = :tier, #changedBy = :changedBy REMOVE #limits"
        );
        assert_eq!(
            change(Some((Tier::Custom, custom)), Some(TenantStatus::Suspended)),
            "SET #tier = :tier, #limits = :limits, #status = :status, #changedBy = :changedBy"
        );
        assert_eq!(
            change(None, Some(TenantStatus::Active)),
            "SET #status = :status, #changedBy = :changedBy"
        );
        // a record written before suspension existed reads as active
        let old: TenantRecord = serde_json::from_value(serde_json::json!({
            "PK": "TENANT#a#TENANT", "SK": "TENANT#a#TENANT", "tenantId": "a", "tier": "basic",
            "shardCount": 1, "createdAt": "2026-01-01T00:00:00Z"
        }))
        .unwrap();
        assert_eq!(old.status, TenantStatus::Active);
    }

    #[test]
    fn limits_outside_their_bounds_are_refused() {
        let ok = Limits {
            requests_per_second: 1,
            capacity_units_per_second: 1,
        };
        assert!(ok.check().is_ok());
        assert!(Limits {
            requests_per_second: 0,
            ..ok
        }
        .check()
        .is_err());
        assert!(Limits {
            capacity_units_per_second: 0,
            ..ok
        }
        .check()
        .is_err());
        assert!(Limits {
            requests_per_second: MAX_REQUESTS_PER_SECOND + 1,
            ..ok
        }
        .check()
        .is_err());
    }
}
