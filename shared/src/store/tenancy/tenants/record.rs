//! The tenant record's types: tier and limits, status, layout, and the re-sharding and offboarding it may carry.

use super::move_state::{stored, MoveProgress};
use crate::identity::keys::ItemKey;
use crate::store::client::error::StoreError;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
/// deleted ([`crate::store::lifecycle::offboarding`]); when they are gone, so is its record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TenantStatus {
    #[default]
    Active,
    Suspended,
    Offboarding,
    /// Its items are being made equal to a source table's ([`crate::store::lifecycle::restoring`]):
    /// its requests get 503 with Retry-After, never a half-restored view.
    Restoring,
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
    /// A restore's state and checkpoint, while it runs. Written only by
    /// `store::lifecycle::restoring` ([`Restore::to_attribute`]).
    #[serde(default, skip_serializing)]
    pub restore: Option<Restore>,
    /// The last finished restore: its report.
    #[serde(default, skip_serializing)]
    pub last_restore: Option<Restore>,
    /// The tenant's own table, when it is placed in one (`store::tenancy::placement`); absent: the
    /// pool. The record itself stays in the pool either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_table: Option<String>,
    /// A move between the pool and an own table, while it runs. Written only by
    /// `store::lifecycle::moving` ([`PlacementMove::to_attribute`]).
    #[serde(default, rename = "move", skip_serializing)]
    pub moving: Option<super::PlacementMove>,
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
    /// ([`crate::store::lifecycle::events`]). Absent on records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_by: Option<String>,
    /// While its items are sealed under its new key (`store::lifecycle::keying`).
    #[serde(default, skip_serializing)]
    pub keying: Option<super::Keying>,
}

pub(super) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A re-sharding of the product and HR shards from `from` to `to` shards
/// (`crate::store::lifecycle::resharding`), kept in the tenant record while it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    pub from: u32,
    pub to: u32,
    /// From `writes_move_at` every container writes the new layout; from `moves_start_at` the
    /// migrator moves items.
    #[serde(flatten)]
    pub progress: MoveProgress,
    /// The last old-layout item a committed step walked past, by a migrator that ran before
    /// re-shardings ran in lanes: where its lane 0 resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<ItemKey>,
    /// The lanes the operator asked it to run in (else `LIFECYCLE_LANES`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes_asked: Option<u32>,
    /// The lanes the migrator runs in, once planned (`store::lifecycle::lanes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<u32>,
    /// Epoch milliseconds when the lanes were planned: what their rate is measured from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes_since_ms: Option<u64>,
}

impl Migration {
    /// The state as stored.
    pub fn to_attribute(&self) -> Result<AttributeValue, StoreError> {
        stored(self)
    }
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

/// An offboarding's state (`crate::store::lifecycle::offboarding`), kept in the tenant record until the record
/// itself goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Items deleted so far, by kind. Never stored empty: DynamoDB Local's stream renders an
    /// empty map without its type, which no SDK reads (an absent `deleted` reads as empty).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deleted: BTreeMap<String, u64>,
    /// The last item deleted by a walk begun before offboardings ran in lanes: where its lane 0
    /// resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<ItemKey>,
    /// The lanes the operator asked it to run in (else `LIFECYCLE_LANES`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes_asked: Option<u32>,
    /// The lanes the walk runs in, once planned (`store::lifecycle::lanes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<u32>,
    /// Epoch milliseconds when the lanes were planned: what their rate is measured from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes_since_ms: Option<u64>,
    /// Set when every lane was done and their counts were folded into `deleted` and `steps` (the
    /// lanes deleted with it): nothing is left to walk.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub walked: bool,
}

impl Offboarding {
    /// The state as stored.
    pub fn to_attribute(&self) -> Result<AttributeValue, StoreError> {
        stored(self)
    }
}

/// Where a restore reads the tenant's items as they were.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RestorePhase {
    /// The scratch table of a point-in-time restore is being made by DynamoDB.
    Preparing,
    /// Walking the source: putting back what is missing or different.
    Putting,
    /// Walking the live items: deleting what the source does not hold.
    Deleting,
    /// Done (a report).
    Finished,
    /// Given up, with the reason (a report): nothing more is written.
    Abandoned(String),
}

/// A restore of one tenant's items from a source table (`crate::store::lifecycle::restoring`),
/// kept in the tenant record while it runs, and as its report (`lastRestore`) once it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Restore {
    /// The table read: an operator's, or the scratch table of a point-in-time restore.
    pub source_table: String,
    /// The source table's identity (`point_in_time::SourceTable::identity`: its id and creation
    /// time), from when it is known (the start, or a point in time's scratch table once made): a
    /// table deleted or made again under the name since ends the restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// RFC 3339: the point in time asked for, when pooltable made the source table (and deletes it
    /// at the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point_in_time: Option<String>,
    pub requested_at: String,
    /// The tenant of the operator who asked.
    pub requested_by: String,
    /// Epoch seconds: nothing is written before (no request admitted earlier is still writing).
    pub starts_at: u64,
    pub phase: RestorePhase,
    /// The shard count of the tenant in the source (read once the source is there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_shards: Option<u32>,
    /// Steps committed; each step is conditioned on it.
    pub steps: u64,
    /// Where the phase's walk resumes, for a walk begun before restores ran in lanes: where its
    /// lane 0 resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<ItemKey>,
    /// The lanes the operator asked each phase to run in (else `LIFECYCLE_LANES`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes_asked: Option<u32>,
    /// The lanes the phase's walk runs in, once planned (`store::lifecycle::lanes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<u32>,
    /// Epoch milliseconds when the phase's lanes were planned: what their rate is measured from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes_since_ms: Option<u64>,
    /// Items put back (missing), overwritten (different) and deleted (not in the source), by kind;
    /// never stored empty (as [`Offboarding::deleted`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub put_back: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overwritten: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deleted: BTreeMap<String, u64>,
    /// RFC 3339, once ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

impl Restore {
    /// A restore not yet stepped, asked by an operator of `requested_by` at `requested_ms`, writing
    /// from `starts_at` (epoch seconds). With a `point_in_time`, `source_table` is the scratch table
    /// DynamoDB restores it into (first `Preparing`); without, an existing table read from the start.
    pub fn new(
        source_table: String,
        point_in_time: Option<String>,
        requested_ms: u64,
        requested_by: String,
        starts_at: u64,
        source_shards: Option<u32>,
    ) -> Self {
        Self {
            phase: match point_in_time {
                Some(_) => RestorePhase::Preparing,
                None => RestorePhase::Putting,
            },
            source_table,
            source_id: None,
            point_in_time,
            requested_at: crate::identity::clock::rfc3339(requested_ms),
            requested_by,
            starts_at,
            source_shards,
            steps: 0,
            position: None,
            lanes_asked: None,
            lanes: None,
            lanes_since_ms: None,
            put_back: BTreeMap::new(),
            overwritten: BTreeMap::new(),
            deleted: BTreeMap::new(),
            finished_at: None,
        }
    }

    /// The state as stored.
    pub fn to_attribute(&self) -> Result<AttributeValue, StoreError> {
        stored(self)
    }
}

impl TenantRecord {
    /// A new tenant's record: active, in the pool, nothing running, changed by no operator yet.
    pub fn new(
        tenant: &crate::identity::ids::TenantId,
        tier: Tier,
        limits: Option<Limits>,
        shard_count: u32,
        created_at: String,
    ) -> Self {
        let key = crate::identity::keys::tenant_record_key(tenant);
        Self {
            pk: key.clone(),
            sk: key,
            tenant_id: tenant.to_string(),
            tier,
            limits,
            shard_count,
            created_at,
            status: TenantStatus::Active,
            offboarding: None,
            migration: None,
            restore: None,
            last_restore: None,
            own_table: None,
            moving: None,
            order_shard_count: None,
            reshardings: 0,
            changed_by: None,
            keying: None,
        }
    }

    /// Where the tenant's sharded items are at `now` (epoch seconds).
    pub fn layout(&self, now: u64) -> Layout {
        match &self.migration {
            None => Layout::Stable(self.shard_count),
            Some(m) => Layout::Migrating {
                from: m.from,
                to: m.to,
                writes_moved: now >= m.progress.writes_move_at,
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
