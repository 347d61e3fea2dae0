//! Per-request metering: what the request log line and the usage meter learn while a request runs.
//! A task-local [`RequestMeta`] is set by the service layer around each handler; the
//! [`RequestMetering`] interceptor on every tenant client counts the DynamoDB requests sent, asks
//! each for its consumed capacity (`ReturnConsumedCapacity=INDEXES`: the table's and GSI1's) and sums
//! the read and write units it reports, and [`note_tenant`] records the tenant once the caller is
//! verified.

mod capacity;
mod intercept;
mod meta;
pub use capacity::{consumed_units, CapacityUnits};
pub use intercept::RequestMetering;
use meta::REQUEST;
pub use meta::{
    charge_own, metered_apart, note_key_not_met, note_tenant, page_limit, page_returned, scope,
    set_budget, with_request_meta, PageBudget, RequestMeta,
};

/// What a PutItem of `item` costs: one write unit per started kilobyte in the table, and one in
/// each index it is in (the inverted GSI1 holds every item; the catalog, GSI2, those with a
/// `catalog` entry; both project keys only, under a kilobyte).
pub fn put_units(
    item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> CapacityUnits {
    let in_catalog = item.contains_key(crate::identity::keys::CATALOG);
    CapacityUnits {
        read: 0.0,
        write: intercept::write_units_of(item) + 1.0 + f64::from(u8::from(in_catalog)),
    }
}
