//! A read-only route's session ([`Scope::Reader`]): its client reads, and writes only the tenant's
//! metering counters (the session policy's `MeteringCounters`).

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput;
use aws_smithy_runtime_api::client::interceptors::context::Input;

use super::{single_item, GuardViolation};
use crate::identity::ids::TenantId;
use crate::identity::keys::{is_metering_pk, PK};

/// Refuses a write of `input` by a reader's client unless it is an UpdateItem of one of `tenant`'s
/// metering counters. A transaction is refused whole: no read-only route sends one, and the pull of
/// a moving tenant (the one writer under a read) goes out on the puller's client, not this one.
pub(super) fn check_reader(tenant: &TenantId, input: &Input) -> Result<(), GuardViolation> {
    let refused = |operation: &'static str| GuardViolation {
        tenant: tenant.to_string(),
        operation,
        reason: "a read-only route's session reads, and writes only its metering counters".into(),
    };
    if input.downcast_ref::<TransactWriteItemsInput>().is_some() {
        return Err(refused("TransactWriteItems"));
    }
    match single_item(input) {
        Some(("GetItem", ..)) | None => Ok(()),
        Some(("UpdateItem", _, key))
            if key
                .and_then(|k| k.get(PK))
                .and_then(|pk| pk.as_s().ok())
                .is_some_and(|pk| is_metering_pk(tenant, pk)) =>
        {
            Ok(())
        }
        Some((operation, ..)) => Err(refused(operation)),
    }
}
