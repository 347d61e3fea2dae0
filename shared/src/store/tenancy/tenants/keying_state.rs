//! The sealing of an existing tenant's items under its new key (`store::lifecycle::keying`), kept
//! in the tenant record (`keying`) while it runs.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use super::move_state::stored;
use crate::identity::keys::ItemKey;
use crate::store::client::error::StoreError;

/// An online encryption in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Keying {
    /// RFC 3339.
    pub requested_at: String,
    pub requested_by: String,
    /// Epoch seconds from which the walk seals: by then every container has met the tenant's new
    /// key (its cached absence has expired), so every write of a sealed kind is sealed.
    pub seals_from: u64,
    /// Whether `seals_from` is counted from the key's making: the start records the walk before it
    /// makes the key, and a call that finds this false makes it (or takes the one there) and moves
    /// `seals_from` a key period past that, whatever an earlier call managed. A walk recorded
    /// before this field is taken as not counted (false): its next call takes the key there and
    /// waits a key period once.
    #[serde(default)]
    pub key_made: bool,
    /// The layout the position is of ([`crate::store::lifecycle::keying::layout_of`]): when another
    /// operation changed it (a re-sharding, a restore), the walk starts again from the first item.
    pub walked_layout: String,
    /// The last item a committed step walked past.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<ItemKey>,
    pub steps: u64,
    /// Items sealed so far.
    pub sealed: u64,
}

impl Keying {
    /// The state as stored.
    pub fn to_attribute(&self) -> Result<AttributeValue, StoreError> {
        stored(self)
    }
}
