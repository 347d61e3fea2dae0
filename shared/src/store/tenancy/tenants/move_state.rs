//! A move between placements (`store::lifecycle::moving`), kept in the tenant record (`move`)
//! while it runs.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use crate::identity::keys::ItemKey;
use crate::store::client::error::StoreError;

/// A state kept in the tenant record, as stored: the names and shapes its `Deserialize` reads.
pub(super) fn stored(state: &impl Serialize) -> Result<AttributeValue, StoreError> {
    serde_dynamo::to_attribute_value(state)
        .map_err(|e| StoreError::Internal(format!("a tenant record state does not serialize: {e}")))
}

/// Where a tenant's items are: the pool, or its own table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    Pool,
    Own,
}

/// When and by whom a move of items was asked, and how far it went: what a re-sharding
/// ([`super::Migration`]) and a move between placements ([`PlacementMove`]) share, stored flat in
/// each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MoveProgress {
    /// RFC 3339.
    pub requested_at: String,
    /// The tenant of the operator who asked.
    pub requested_by: String,
    /// Epoch seconds: from then on every container writes where the items go.
    pub writes_move_at: u64,
    /// Epoch seconds: no request still writes where they were; the mover runs from then on.
    pub moves_start_at: u64,
    /// Steps committed; each checkpoint is conditioned on it.
    pub steps: u64,
    /// Items the committed steps moved (for a move between placements, pulls by requests are not
    /// counted).
    #[serde(default)]
    pub moved: u64,
    /// Items its lanes moved, noted on it as they end (their own counts are deleted with them): its
    /// finished event reports `moved` and these.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lanes_moved: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl MoveProgress {
    /// Every item the move's steps and lanes moved.
    pub fn moved_in_all(&self) -> u64 {
        self.moved + self.lanes_moved
    }
}

/// A move of a tenant's items from `from_table` to `to_table` (one of them the pool).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementMove {
    /// Where the items go.
    pub to: Placement,
    pub from_table: String,
    pub to_table: String,
    /// From `writes_move_at` every container writes `to_table`, pulling each item out of
    /// `from_table` before it touches it; from `moves_start_at` the backfill runs.
    #[serde(flatten)]
    pub progress: MoveProgress,
    /// The quota-window partitions the walk reads, at least: the tenant's when the move began (its
    /// limits may be lowered while it runs; its windows stay on their shards until their TTL).
    #[serde(default)]
    pub window_shards: u32,
    /// The last item of `from_table` a committed step walked past, by a backfill that ran before
    /// moves ran in lanes: where its lane 0 resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<ItemKey>,
    /// The lanes the operator asked it to run in (else `LIFECYCLE_LANES`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes_asked: Option<u32>,
    /// The lanes the backfill runs in, once planned (`store::lifecycle::lanes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<u32>,
    /// Epoch milliseconds when the lanes were planned: what their rate is measured from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes_since_ms: Option<u64>,
}

impl PlacementMove {
    /// The state as stored.
    pub fn to_attribute(&self) -> Result<AttributeValue, StoreError> {
        stored(self)
    }

    /// Where writes go at `now` (epoch seconds): the source until `writes_move_at`, then the target.
    pub fn writes_moved(&self, now: u64) -> bool {
        now >= self.progress.writes_move_at
    }
}
