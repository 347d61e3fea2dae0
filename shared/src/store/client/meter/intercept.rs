//! The SDK interceptor that meters every call: asks for ConsumedCapacity, records throttles and the cost of refused conditional writes.

use super::*;
use crate::identity::keys::{key_shape, PK};
use crate::isolation::guard::single_item;
use crate::store::client::hooks::{
    Bag, FinalizerRef, HookResult, InputMut, Intercept, OutputRef, Parts, RequestRef,
};
use aws_sdk_dynamodb::operation::{
    batch_get_item::BatchGetItemInput, batch_write_item::BatchWriteItemInput,
    delete_item::DeleteItemInput, get_item::GetItemInput, put_item::PutItemInput,
    query::QueryInput, transact_get_items::TransactGetItemsInput,
    transact_write_items::TransactWriteItemsInput, update_item::UpdateItemInput,
};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};
use aws_smithy_runtime_api::client::interceptors::context::Input;
use std::sync::atomic::Ordering;

/// What a throttled request addressed: the table or index, and the shape of the partition key
/// ([`key_shape`]: kind and shard, never an id). Taken from the input before it is serialized.
#[derive(Debug, Clone)]
pub(super) struct ThrottleTarget {
    target: String,
    key_shape: String,
}

impl aws_smithy_types::config_bag::Storable for ThrottleTarget {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

pub(super) fn s_value(v: Option<&AttributeValue>) -> Option<&str> {
    v.and_then(|v| v.as_s().ok()).map(String::as_str)
}

/// The partition key value a Query's key condition binds: `<attr> = :name` before any `AND`.
pub(super) fn query_partition_value(q: &QueryInput) -> Option<&str> {
    let condition = q.key_condition_expression.as_deref()?;
    let first = condition.split(" AND ").next()?;
    let (_, name) = first.split_once('=')?;
    s_value(q.expression_attribute_values.as_ref()?.get(name.trim()))
}

pub(super) fn throttle_target(input: &Input) -> Option<ThrottleTarget> {
    let table = |t: Option<&str>| t.unwrap_or("?").to_owned();
    let of = |target: String, pk: Option<&str>| ThrottleTarget {
        target,
        key_shape: key_shape(pk.unwrap_or("")),
    };
    if let Some((_, table_name, key)) = single_item(input) {
        return Some(of(table(table_name), s_value(key?.get(PK))));
    }
    if let Some(i) = input.downcast_ref::<QueryInput>() {
        let mut target = table(i.table_name.as_deref());
        if let Some(index) = &i.index_name {
            target = format!("{target}/index/{index}");
        }
        return Some(of(target, query_partition_value(i)));
    }
    if let Some(i) = input.downcast_ref::<TransactWriteItemsInput>() {
        let first = i.transact_items.as_ref()?.first()?;
        let (target, key) = if let Some(p) = &first.put {
            (p.table_name.clone(), p.item.get(PK))
        } else if let Some(u) = &first.update {
            (u.table_name.clone(), u.key.get(PK))
        } else if let Some(d) = &first.delete {
            (d.table_name.clone(), d.key.get(PK))
        } else {
            let c = first.condition_check.as_ref()?;
            (c.table_name.clone(), c.key.get(PK))
        };
        return Some(of(target, s_value(key)));
    }
    None
}

/// Whether DynamoDB answered this attempt with a throttling error (HTTP 400 whose `__type` names
/// one).
pub(super) fn is_throttling(response: &aws_smithy_runtime_api::http::Response) -> bool {
    response.status().as_u16() == 400
        && response.body().bytes().is_some_and(|b| {
            let body = String::from_utf8_lossy(b);
            [
                "ProvisionedThroughputExceededException",
                "ThrottlingException",
                "RequestLimitExceeded",
            ]
            .iter()
            .any(|code| body.contains(code))
        })
}

/// What a write that fails its condition is charged, in write units: DynamoDB consumes them (at
/// least one per item written or checked, twice that in a transaction) but reports nothing on the
/// error. A Put is charged its item's size, an Update, Delete or ConditionCheck one unit (the item's
/// size is not known before the request).
#[derive(Debug, Clone, Copy)]
pub(super) struct FailedWriteCost(f64);

impl aws_smithy_types::config_bag::Storable for FailedWriteCost {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

impl FailedWriteCost {
    fn units(self) -> CapacityUnits {
        CapacityUnits {
            read: 0.0,
            write: self.0,
        }
    }
}

/// One unit per started kilobyte of `item`.
pub(super) fn write_units_of(item: &std::collections::HashMap<String, AttributeValue>) -> f64 {
    crate::store::client::size::approximate_bytes(item)
        .div_ceil(1024)
        .max(1) as f64
}

pub(super) fn failed_write_cost(input: &Input) -> Option<FailedWriteCost> {
    if let Some(i) = input.downcast_ref::<PutItemInput>() {
        return Some(FailedWriteCost(i.item.as_ref().map_or(1.0, write_units_of)));
    }
    if input.downcast_ref::<UpdateItemInput>().is_some()
        || input.downcast_ref::<DeleteItemInput>().is_some()
    {
        return Some(FailedWriteCost(1.0));
    }
    let actions = input
        .downcast_ref::<TransactWriteItemsInput>()?
        .transact_items
        .as_ref()?;
    let units: f64 = actions
        .iter()
        .map(|a| a.put.as_ref().map_or(1.0, |p| write_units_of(&p.item)))
        .sum();
    Some(FailedWriteCost(2.0 * units))
}

/// Whether DynamoDB refused this attempt on a condition: a single write's failed condition, or a
/// transaction cancelled because one of its conditions failed (HTTP 400 whose body names it; a
/// transaction cancelled by a conflict or by throttling is not charged).
pub(super) fn is_refused_by_condition(response: &aws_smithy_runtime_api::http::Response) -> bool {
    response.status().as_u16() == 400
        && response.body().bytes().is_some_and(|b| {
            let body = String::from_utf8_lossy(b);
            body.contains("ConditionalCheckFailed")
        })
}

/// Sets `ReturnConsumedCapacity=INDEXES` on every operation the tenant clients send.
pub(super) fn ask_for_consumed_capacity(input: &mut Input) {
    macro_rules! ask {
        ($($t:ty),+) => {$(
            if let Some(i) = input.downcast_mut::<$t>() {
                i.return_consumed_capacity = Some(ReturnConsumedCapacity::Indexes);
                return;
            }
        )+};
    }
    ask!(
        GetItemInput,
        PutItemInput,
        UpdateItemInput,
        DeleteItemInput,
        QueryInput,
        BatchGetItemInput,
        BatchWriteItemInput,
        TransactGetItemsInput,
        TransactWriteItemsInput
    );
}

/// Notes what a hook saw on the current request's meta; outside a request (a background task's
/// client) nothing is metered. Metering never fails the call it watches.
fn meter(note: impl FnOnce(&RequestMeta)) -> HookResult {
    let _ = REQUEST.try_with(|m| note(m));
    Ok(())
}

/// Counts DynamoDB requests sent on behalf of the current request (retries included), and sums the
/// capacity units DynamoDB reports for them, so the log line and the usage meter show what each
/// request cost. Installed on every tenant client.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestMetering;

impl Intercept for RequestMetering {
    fn name(&self) -> &'static str {
        "RequestMetering"
    }

    fn modify_before_serialization(&self, ctx: InputMut, _: &Parts, cfg: &mut Bag) -> HookResult {
        ask_for_consumed_capacity(ctx.input_mut());
        if let Some(target) = throttle_target(ctx.input()) {
            cfg.interceptor_state().store_put(target);
        }
        if let Some(cost) = failed_write_cost(ctx.input()) {
            cfg.interceptor_state().store_put(cost);
        }
        Ok(())
    }

    fn read_before_attempt(&self, _: RequestRef, _: &Parts, _: &mut Bag) -> HookResult {
        meter(RequestMeta::attempt_started)
    }

    fn read_before_transmit(&self, _: RequestRef, _: &Parts, _: &mut Bag) -> HookResult {
        meter(RequestMeta::attempt_sent)
    }

    fn read_after_attempt(&self, _: FinalizerRef, _: &Parts, _: &mut Bag) -> HookResult {
        meter(RequestMeta::attempt_ended)
    }

    fn read_after_deserialization(&self, ctx: OutputRef, _: &Parts, cfg: &mut Bag) -> HookResult {
        match ctx.output_or_error() {
            Ok(output) => {
                let units = consumed_units(output);
                meter(|m| m.add_units(units))
            }
            // A write refused by its condition (or a transaction cancelled) consumed write units,
            // which DynamoDB reports on no error: it is charged its estimate.
            Err(_) if is_refused_by_condition(ctx.response()) => {
                match cfg.load::<FailedWriteCost>() {
                    Some(cost) => meter(|m| m.add_units(cost.units())),
                    None => Ok(()),
                }
            }
            Err(_) if is_throttling(ctx.response()) => {
                // A hot partition forming: where, for whom, in which shape; never an id.
                let target = cfg.load::<ThrottleTarget>();
                meter(|m| {
                    m.throttles.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        tenant = m.tenant().unwrap_or("-"),
                        route = m.route.get().map(String::as_str).unwrap_or("-"),
                        target = target.map(|t| t.target.as_str()).unwrap_or("?"),
                        key_shape = target.map(|t| t.key_shape.as_str()).unwrap_or("?"),
                        "DynamoDB throttled a request"
                    );
                })
            }
            Err(_) => Ok(()),
        }
    }
}
