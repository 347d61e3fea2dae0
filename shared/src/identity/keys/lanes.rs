//! A lifecycle operation's lanes: the parts of its walk that run side by side, each with its
//! checkpoint (`store::lifecycle::lanes`).

use super::*;
use crate::identity::entities::spaces;
use crate::identity::ids::TenantId;

/// `TENANT#t#LANE#<operation>#<lane>`: one lane of `operation` (`offboarding`), an item with its
/// checkpoint, alone in its partition (its partition and sort key both), its number zero-padded
/// to three digits. Each lane writes its checkpoint with every group of its step, so the lanes of
/// one operation under one partition key would add up there past a partition's 1,000 write units
/// a second; under their own keys they spread as their walks do. Not in the tenant walk (no fixed
/// partition, no catalog entry): the operation that walks deletes its lanes itself when it ends.
pub fn lane_key(tenant: &TenantId, operation: &str, lane: u32) -> String {
    format!("{}#{lane:03}", lanes_prefix(tenant, operation))
}

/// `TENANT#t#LANE#<operation>`: what every key of `operation`'s lanes begins with ([`lane_key`]),
/// and the one partition they were all kept in before each lane had its own (an operation planned
/// then goes on there: `store::lifecycle::lanes::read`).
pub fn lanes_prefix(tenant: &TenantId, operation: &str) -> String {
    format!("{}{operation}", entity_prefix(tenant, spaces::LANE.0))
}
