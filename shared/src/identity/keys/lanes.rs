//! A lifecycle operation's lanes: the parts of its walk that run side by side, each with its
//! checkpoint (`store::lifecycle::lanes`).

use super::*;
use crate::identity::entities::spaces;
use crate::identity::ids::TenantId;

/// `TENANT#t#LANE#<operation>`: the partition of `operation`'s lanes (`offboarding`), each an item
/// with its checkpoint ([`lane_sk`]). Not in the tenant walk (no fixed partition, no catalog entry):
/// the operation that walks deletes its lanes itself when it ends.
pub fn lanes_pk(tenant: &TenantId, operation: &str) -> String {
    format!("{}{operation}", entity_prefix(tenant, spaces::LANE.0))
}

/// `TENANT#t#LANE#<operation>#<lane>`: one lane of [`lanes_pk`], its number zero-padded to three
/// digits so that the partition lists the lanes in order.
pub fn lane_sk(tenant: &TenantId, operation: &str, lane: u32) -> String {
    format!("{}#{lane:03}", lanes_pk(tenant, operation))
}
