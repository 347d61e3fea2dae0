//! A move between placements (`store::lifecycle::moving`), kept in the tenant record (`move`)
//! while it runs.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use crate::identity::keys::ItemKey;

/// Where a tenant's items are: the pool, or its own table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    Pool,
    Own,
}

/// A move of a tenant's items from `from_table` to `to_table` (one of them the pool).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementMove {
    /// Where the items go.
    pub to: Placement,
    pub from_table: String,
    pub to_table: String,
    /// RFC 3339.
    pub requested_at: String,
    /// The tenant of the operator who asked.
    pub requested_by: String,
    /// Epoch seconds: from then on every container writes `to_table`, pulling each item out of
    /// `from_table` before it touches it.
    pub writes_move_at: u64,
    /// Epoch seconds: no request still writes `from_table`; the backfill runs from then on.
    pub moves_start_at: u64,
    /// Backfill steps committed; each checkpoint is conditioned on it.
    pub steps: u64,
    /// Items the backfill moved (pulls by requests are not counted).
    pub moved: u64,
    /// The quota-window partitions the walk reads, at least: the tenant's when the move began (its
    /// limits may be lowered while it runs; its windows stay on their shards until their TTL).
    #[serde(default)]
    pub window_shards: u32,
    /// The last item of `from_table` a committed step walked past: where the backfill resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<ItemKey>,
}

impl PlacementMove {
    /// The state as stored.
    pub fn to_attribute(&self) -> AttributeValue {
        // Plain strings and numbers: serializing cannot fail.
        serde_dynamo::to_attribute_value(self).unwrap_or(AttributeValue::Null(true))
    }

    /// Where writes go at `now` (epoch seconds): the source until `writes_move_at`, then the target.
    pub fn writes_moved(&self, now: u64) -> bool {
        now >= self.writes_move_at
    }
}
