//! The condition a step of an offboarding or a restore writes under: the tenant's status still the
//! operation's, and the operation still at the step the writer read, so of two calls taking the
//! same step only one commits. (A re-sharding's and a move's steps also check where they go, in
//! conditions of their own: `lifecycle::resharding`, `lifecycle::moving`.)

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::{value, TenantStatus};
use crate::identity::ids::TenantId;
use crate::identity::keys::{tenant_record_key, ItemKey, Key};
use crate::store::client::error::StoreError;

/// The table key of `tenant`'s record (`PK` = `SK`), for a transaction's action on it.
pub(crate) fn record_key(tenant: &TenantId) -> Key {
    let key = tenant_record_key(tenant);
    ItemKey {
        pk: key.clone(),
        sk: key,
    }
    .to_key()
}

/// A step's condition, to put on any of a transaction's actions on the record (names first, then
/// the action's own values added after). The action's expression names the operation `#op`.
pub(crate) struct StepGuard {
    pub condition: String,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

/// The condition that the tenant is `status` and the operation kept at attribute `operation` is at
/// step `steps`.
pub(crate) fn step_guard(
    status: TenantStatus,
    operation: &str,
    steps: u64,
) -> Result<StepGuard, StoreError> {
    let names = [
        ("#state", "status"),
        ("#op", operation),
        ("#steps", "steps"),
    ];
    let values = [
        (":status", value(status)?),
        (":steps", AttributeValue::N(steps.to_string())),
    ];
    Ok(StepGuard {
        condition: "#state = :status AND #op.#steps = :steps".to_owned(),
        names: names.map(|(k, v)| (k.to_owned(), v.to_owned())).into(),
        values: values.map(|(k, v)| (k.to_owned(), v)).into(),
    })
}

impl StepGuard {
    /// The guard, also on the operation's `attribute` (what tells one run of it from the next)
    /// still being `value`: every run begins at step 0, so a step read of a run that ended (an
    /// aborted restore) must not commit into the next, begun since.
    pub(crate) fn of_run(mut self, attribute: &str, value: AttributeValue) -> Self {
        self.condition.push_str(" AND #op.#run = :run");
        self.names.insert("#run".to_owned(), attribute.to_owned());
        self.values.insert(":run".to_owned(), value);
        self
    }
}
