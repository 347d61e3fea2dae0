//! Per-request metering: what the request log line and the usage meter learn while a request runs.
//! A task-local [`RequestMeta`] is set by the service layer around each handler; the
//! [`RequestMetering`] interceptor on every tenant client counts the DynamoDB requests sent, asks
//! each for its consumed capacity (`ReturnConsumedCapacity=INDEXES`: the table's and GSI1's) and sums
//! the read and write units it reports, and [`note_tenant`] records the tenant once the caller is
//! verified.

use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::operation::{
    batch_get_item::{BatchGetItemInput, BatchGetItemOutput},
    batch_write_item::{BatchWriteItemInput, BatchWriteItemOutput},
    delete_item::{DeleteItemInput, DeleteItemOutput},
    get_item::{GetItemInput, GetItemOutput},
    put_item::{PutItemInput, PutItemOutput},
    query::{QueryInput, QueryOutput},
    transact_get_items::{TransactGetItemsInput, TransactGetItemsOutput},
    transact_write_items::{TransactWriteItemsInput, TransactWriteItemsOutput},
    update_item::{UpdateItemInput, UpdateItemOutput},
};
use aws_sdk_dynamodb::types::{AttributeValue, ConsumedCapacity, ReturnConsumedCapacity};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    AfterDeserializationInterceptorContextRef, BeforeSerializationInterceptorContextMut,
    BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef, Input, Output,
};
use tokio::sync::oneshot;

use crate::identity::ids::TenantId;
use crate::identity::keys::{key_shape, PK};

/// What the request log line reports beyond status and latency, filled in while the request runs.
#[derive(Debug, Default)]
pub struct RequestMeta {
    tenant: OnceLock<String>,
    dynamodb_requests: AtomicU32,
    /// DynamoDB attempts under way now, and the most there ever were at once (the fan-out budget's
    /// witness).
    in_flight: AtomicU32,
    max_in_flight: AtomicU32,
    /// DynamoDB attempts answered with a throttling error.
    throttles: AtomicU32,
    /// The route, for the throttling log line (set by the service layer).
    route: OnceLock<String>,
    /// Consumed capacity in thousandths of a unit, so concurrent requests add up exactly.
    read_milli_units: AtomicU64,
    write_milli_units: AtomicU64,
    /// Hands the verified tenant to whoever waits for it (the usage meter) as soon as it is known.
    tenant_listener: Mutex<Option<oneshot::Sender<TenantId>>>,
    /// What the tenant's quota bucket held when the request was admitted (set by the service layer).
    budget: OnceLock<PageBudget>,
    /// The page limit the handler read with, after any shrinking: the request's size.
    page_limit: OnceLock<u32>,
}

/// An admitted request's capacity budget, for the pages it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageBudget {
    /// What the tenant's bucket held at admission, in thousandths of a unit.
    pub budget_milli: u64,
    /// What one unit of page limit cost on this route last time, when known.
    pub milli_per_item: Option<u64>,
}

impl PageBudget {
    /// `limit`, shrunk to what the budget pays at the route's last cost per item (at least 1).
    pub fn shrink(&self, limit: u32) -> u32 {
        match self.milli_per_item {
            Some(per) if per > 0 => {
                let affordable = (self.budget_milli / per).clamp(1, u64::from(u32::MAX)) as u32;
                limit.min(affordable)
            }
            _ => limit,
        }
    }
}

impl RequestMeta {
    /// A meta whose verified tenant is also sent to the returned receiver (once, when known).
    pub fn with_tenant_listener() -> (Self, oneshot::Receiver<TenantId>) {
        let (tx, rx) = oneshot::channel();
        let meta = Self {
            tenant_listener: Mutex::new(Some(tx)),
            ..Self::default()
        };
        (meta, rx)
    }

    pub fn tenant(&self) -> Option<&str> {
        self.tenant.get().map(String::as_str)
    }

    pub fn dynamodb_requests(&self) -> u32 {
        self.dynamodb_requests.load(Ordering::Relaxed)
    }

    /// How many of this request's DynamoDB attempts were throttled.
    pub fn throttles(&self) -> u32 {
        self.throttles.load(Ordering::Relaxed)
    }

    /// Names the request's route (its template, never ids), for telemetry.
    pub fn set_route(&self, route: &str) {
        let _ = self.route.set(route.to_owned());
    }

    /// The most DynamoDB requests this request ever had in flight at once.
    pub fn max_in_flight(&self) -> u32 {
        self.max_in_flight.load(Ordering::Relaxed)
    }

    /// The capacity units so far, in thousandths: (read, write).
    pub fn capacity_milli_units(&self) -> (u64, u64) {
        (
            self.read_milli_units.load(Ordering::Relaxed),
            self.write_milli_units.load(Ordering::Relaxed),
        )
    }

    /// Read capacity units DynamoDB reported for this request's calls (table and indexes).
    pub fn read_capacity_units(&self) -> f64 {
        self.read_milli_units.load(Ordering::Relaxed) as f64 / 1000.0
    }

    /// Write capacity units DynamoDB reported for this request's calls (table and indexes).
    pub fn write_capacity_units(&self) -> f64 {
        self.write_milli_units.load(Ordering::Relaxed) as f64 / 1000.0
    }

    fn add_units(&self, units: CapacityUnits) {
        let milli = |u: f64| (u * 1000.0).round().max(0.0) as u64;
        self.read_milli_units
            .fetch_add(milli(units.read), Ordering::Relaxed);
        self.write_milli_units
            .fetch_add(milli(units.write), Ordering::Relaxed);
    }

    /// Sets the request's capacity budget (once, at admission).
    pub fn set_budget(&self, budget: PageBudget) {
        let _ = self.budget.set(budget);
    }

    /// The page limit the handler read with, when it read a page.
    pub fn page_limit(&self) -> Option<u32> {
        self.page_limit.get().copied()
    }

    /// Drops the tenant listener: no tenant will be verified any more, so the listener stops waiting.
    pub fn close_tenant_listener(&self) {
        lock(&self.tenant_listener).take();
    }
}

tokio::task_local! {
    static REQUEST: Arc<RequestMeta>;
}

/// Runs `fut` with `meta` as the current request's meta.
pub async fn scope<T>(meta: Arc<RequestMeta>, fut: impl Future<Output = T>) -> T {
    REQUEST.scope(meta, fut).await
}

/// Runs `fut` with a fresh [`RequestMeta`] and returns it with the result.
pub async fn with_request_meta<T>(fut: impl Future<Output = T>) -> (T, Arc<RequestMeta>) {
    let meta = Arc::new(RequestMeta::default());
    let out = scope(meta.clone(), fut).await;
    (out, meta)
}

/// Sets the current request's capacity budget.
pub fn set_budget(budget: PageBudget) {
    let _ = REQUEST.try_with(|m| m.set_budget(budget));
}

/// The page limit of the current request: `limit` shrunk to what its capacity budget pays, and
/// recorded as the request's size (what its cost is learned per).
pub fn page_limit(limit: u32) -> u32 {
    REQUEST
        .try_with(|m| {
            let limit = m.budget.get().map_or(limit, |b| b.shrink(limit));
            let _ = m.page_limit.set(limit);
            limit
        })
        .unwrap_or(limit)
}

/// Records the verified tenant of the current request (for the log line and the usage meter).
pub fn note_tenant(tenant: &TenantId) {
    let _ = REQUEST.try_with(|m| {
        let _ = m.tenant.set(tenant.to_string());
        if let Some(tx) = lock(&m.tenant_listener).take() {
            let _ = tx.send(tenant.clone());
        }
    });
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Read and write capacity units of one DynamoDB call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CapacityUnits {
    pub read: f64,
    pub write: f64,
}

/// Whether an operation reads or writes: DynamoDB reports on-demand capacity as one total
/// (`CapacityUnits`), which the kind of operation assigns to reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
}

/// The units one `ConsumedCapacity` reports: its read and write split where DynamoDB gives one (the
/// table plus every index), otherwise its total as the operation's kind.
fn units_of(c: &ConsumedCapacity, kind: Kind) -> CapacityUnits {
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

fn sum_units<'a>(all: impl IntoIterator<Item = &'a ConsumedCapacity>, kind: Kind) -> CapacityUnits {
    all.into_iter()
        .map(|c| units_of(c, kind))
        .fold(CapacityUnits::default(), |a, b| CapacityUnits {
            read: a.read + b.read,
            write: a.write + b.write,
        })
}

/// What a throttled request addressed: the table or index, and the shape of the partition key
/// ([`key_shape`]: kind and shard, never an id). Taken from the input before it is serialized.
#[derive(Debug, Clone)]
struct ThrottleTarget {
    target: String,
    key_shape: String,
}

impl aws_smithy_types::config_bag::Storable for ThrottleTarget {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

fn s_value(v: Option<&AttributeValue>) -> Option<&str> {
    v.and_then(|v| v.as_s().ok()).map(String::as_str)
}

/// The partition key value a Query's key condition binds: `<attr> = :name` before any `AND`.
fn query_partition_value(q: &QueryInput) -> Option<&str> {
    let condition = q.key_condition_expression.as_deref()?;
    let first = condition.split(" AND ").next()?;
    let (_, name) = first.split_once('=')?;
    s_value(q.expression_attribute_values.as_ref()?.get(name.trim()))
}

fn throttle_target(input: &Input) -> Option<ThrottleTarget> {
    let table = |t: Option<&str>| t.unwrap_or("?").to_owned();
    let of = |target: String, pk: Option<&str>| ThrottleTarget {
        target,
        key_shape: key_shape(pk.unwrap_or("")),
    };
    if let Some(i) = input.downcast_ref::<GetItemInput>() {
        return Some(of(
            table(i.table_name.as_deref()),
            s_value(i.key.as_ref()?.get(PK)),
        ));
    }
    if let Some(i) = input.downcast_ref::<PutItemInput>() {
        return Some(of(
            table(i.table_name.as_deref()),
            s_value(i.item.as_ref()?.get(PK)),
        ));
    }
    if let Some(i) = input.downcast_ref::<UpdateItemInput>() {
        return Some(of(
            table(i.table_name.as_deref()),
            s_value(i.key.as_ref()?.get(PK)),
        ));
    }
    if let Some(i) = input.downcast_ref::<DeleteItemInput>() {
        return Some(of(
            table(i.table_name.as_deref()),
            s_value(i.key.as_ref()?.get(PK)),
        ));
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
fn is_throttling(response: &aws_smithy_runtime_api::http::Response) -> bool {
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
struct FailedWriteCost(f64);

impl aws_smithy_types::config_bag::Storable for FailedWriteCost {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

/// One unit per started kilobyte of `item`.
fn write_units_of(item: &std::collections::HashMap<String, AttributeValue>) -> f64 {
    crate::store::size::approximate_bytes(item)
        .div_ceil(1024)
        .max(1) as f64
}

fn failed_write_cost(input: &Input) -> Option<FailedWriteCost> {
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
fn is_refused_by_condition(response: &aws_smithy_runtime_api::http::Response) -> bool {
    response.status().as_u16() == 400
        && response.body().bytes().is_some_and(|b| {
            let body = String::from_utf8_lossy(b);
            body.contains("ConditionalCheckFailed")
        })
}

/// Sets `ReturnConsumedCapacity=INDEXES` on every operation the tenant clients send.
fn ask_for_consumed_capacity(input: &mut Input) {
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

/// Counts DynamoDB requests sent on behalf of the current request (retries included), and sums the
/// capacity units DynamoDB reports for them, so the log line and the usage meter show what each
/// request cost. Installed on every tenant client.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestMetering;

impl Intercept for RequestMetering {
    fn name(&self) -> &'static str {
        "RequestMetering"
    }

    fn modify_before_serialization(
        &self,
        ctx: &mut BeforeSerializationInterceptorContextMut<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        ask_for_consumed_capacity(ctx.input_mut());
        if let Some(target) = throttle_target(ctx.input()) {
            cfg.interceptor_state().store_put(target);
        }
        if let Some(cost) = failed_write_cost(ctx.input()) {
            cfg.interceptor_state().store_put(cost);
        }
        Ok(())
    }

    fn read_before_attempt(
        &self,
        _ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let _ = REQUEST.try_with(|m| {
            let now = m.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
            m.max_in_flight.fetch_max(now, Ordering::Relaxed);
        });
        Ok(())
    }

    fn read_before_transmit(
        &self,
        _ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let _ = REQUEST.try_with(|m| m.dynamodb_requests.fetch_add(1, Ordering::Relaxed));
        Ok(())
    }

    fn read_after_attempt(
        &self,
        _ctx: &FinalizerInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let _ = REQUEST.try_with(|m| m.in_flight.fetch_sub(1, Ordering::Relaxed));
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        ctx: &AfterDeserializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        match ctx.output_or_error() {
            Ok(output) => {
                let units = consumed_units(output);
                let _ = REQUEST.try_with(|m| m.add_units(units));
            }
            // A write refused by its condition (or a transaction cancelled) consumed write units,
            // which DynamoDB reports on no error: it is charged its estimate.
            Err(_) if is_refused_by_condition(ctx.response()) => {
                if let Some(cost) = cfg.load::<FailedWriteCost>() {
                    let units = CapacityUnits {
                        read: 0.0,
                        write: cost.0,
                    };
                    let _ = REQUEST.try_with(|m| m.add_units(units));
                }
            }
            Err(_) if is_throttling(ctx.response()) => {
                // A hot partition forming: where, for whom, in which shape; never an id.
                let target = cfg.load::<ThrottleTarget>();
                let _ = REQUEST.try_with(|m| {
                    m.throttles.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        tenant = m.tenant().unwrap_or("-"),
                        route = m.route.get().map(String::as_str).unwrap_or("-"),
                        target = target.map(|t| t.target.as_str()).unwrap_or("?"),
                        key_shape = target.map(|t| t.key_shape.as_str()).unwrap_or("?"),
                        "DynamoDB throttled a request"
                    );
                });
            }
            Err(_) => {}
        }
        Ok(())
    }
}
