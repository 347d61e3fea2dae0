//! Tenant records, their tiers and limits, and the per-container record cache.
//!
//! A tenant's record (`PK` = `SK` = `TENANT#t#TENANT`) holds its tier, its limits when an operator set
//! custom ones, its status, and its shard count. Changing the shard count moves items between
//! shards: it is a migration ([`crate::store::lifecycle::resharding`]), whose state the record holds while it
//! runs, and which [`TenantRecord::layout`] turns into the keys readers and writers use.

/// How long a container trusts a cached tenant record before reading it again, counted from before
/// the read was sent: a changed tier or limit reaches every container within this time (plus
/// DynamoDB's replication lag for an eventually consistent read, typically well under a second).
pub const RECORD_TTL_SECONDS: u64 = 30;

/// The longest timeout of any function in template.yaml (create-import and import-consumer; the
/// rest have 10 s). A request admitted on a cached record may still be running this long after.
/// `tests/tests/all/lifecycle.rs` checks the template against it.
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

mod directory;
mod keying_state;
mod move_state;
mod read;
mod record;
mod step_guard;
#[cfg(test)]
mod tests;
mod update;
pub use directory::{TenantDirectory, ABSENCE_RECHECK_MS};
pub use keying_state::Keying;
pub use move_state::{MoveProgress, Placement, PlacementMove};
use read::read_record_with;
pub(crate) use read::{parse_record, record_update, send_record_update};
pub use read::{read_record, read_record_consistent};
pub use record::{
    Layout, Limits, Migration, Offboarding, Restore, RestorePhase, TenantRecord, TenantStatus,
    Tier, MAX_CAPACITY_UNITS_PER_SECOND, MAX_REQUESTS_PER_SECOND,
};
pub(crate) use step_guard::{record_key, step_guard};
pub(crate) use update::value;
pub use update::{change_expression, update_record, RecordChange, Updated};
