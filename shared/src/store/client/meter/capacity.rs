//! Capacity units: read from ConsumedCapacity, summed per kind.

use aws_sdk_dynamodb::operation::{
    batch_get_item::BatchGetItemOutput, batch_write_item::BatchWriteItemOutput,
    delete_item::DeleteItemOutput, get_item::GetItemOutput, put_item::PutItemOutput,
    query::QueryOutput, transact_get_items::TransactGetItemsOutput,
    transact_write_items::TransactWriteItemsOutput, update_item::UpdateItemOutput,
};
use aws_sdk_dynamodb::types::ConsumedCapacity;
use aws_smithy_runtime_api::client::interceptors::context::Output;

/// Read and write capacity units of one DynamoDB call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CapacityUnits {
    pub read: f64,
    pub write: f64,
}

/// Whether an operation reads or writes: DynamoDB reports on-demand capacity as one total
/// (`CapacityUnits`), which the kind of operation assigns to reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Read,
    Write,
}

/// The units one `ConsumedCapacity` reports: its read and write split where DynamoDB gives one (the
/// table plus every index), otherwise its total as the operation's kind.
pub(super) fn units_of(c: &ConsumedCapacity, kind: Kind) -> CapacityUnits {
    match (c.read_capacity_units(), c.write_capacity_units()) {
        (None, None) => {
            let total = c.capacity_units().unwrap_or(0.0);
            match kind {
                Kind::Read => CapacityUnits {
                    read: total,
                    write: 0.0,
                },
                Kind::Write => CapacityUnits {
                    read: 0.0,
                    write: total,
                },
            }
        }
        (read, write) => CapacityUnits {
            read: read.unwrap_or(0.0),
            write: write.unwrap_or(0.0),
        },
    }
}

pub(super) fn sum_units<'a>(
    all: impl IntoIterator<Item = &'a ConsumedCapacity>,
    kind: Kind,
) -> CapacityUnits {
    all.into_iter()
        .map(|c| units_of(c, kind))
        .fold(CapacityUnits::default(), |a, b| CapacityUnits {
            read: a.read + b.read,
            write: a.write + b.write,
        })
}

/// The capacity units a successful operation's output reports (one `ConsumedCapacity`, or one per
/// table for batches and transactions).
pub fn consumed_units(output: &Output) -> CapacityUnits {
    macro_rules! units {
        ($($t:ty => $kind:expr),+) => {$(
            if let Some(o) = output.downcast_ref::<$t>() {
                return sum_units(o.consumed_capacity(), $kind);
            }
        )+};
    }
    units!(
        GetItemOutput => Kind::Read,
        QueryOutput => Kind::Read,
        BatchGetItemOutput => Kind::Read,
        TransactGetItemsOutput => Kind::Read,
        PutItemOutput => Kind::Write,
        UpdateItemOutput => Kind::Write,
        DeleteItemOutput => Kind::Write,
        BatchWriteItemOutput => Kind::Write,
        TransactWriteItemsOutput => Kind::Write
    );
    CapacityUnits::default()
}
