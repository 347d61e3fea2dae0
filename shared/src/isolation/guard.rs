//! The in-process isolation guard: the same rule as the session policy, checked before a request
//! leaves the process. DynamoDB Local evaluates no IAM, so locally this is the layer tests see; in AWS
//! it catches a bug before IAM has to.
//!
//! Rule: every key value a request carries (`PK` and `SK` of keys and items, every value bound in a
//! Query's key condition, every `ExclusiveStartKey` value) is a string starting with the tenant
//! prefix. `SK` counts too, because it is `GSI1`'s partition key; so does an item's `catalog`, the
//! catalog index's partition key. Operations outside the session
//! policy's action list (Scan, PartiQL, batch operations, table management, …) are refused outright.
//! A session of the platform's partition narrowed by `PlatformAccess` is held besides to its
//! statements: actions, keys and attributes ([`check_platform_access`]).

use std::collections::HashMap;

use aws_sdk_dynamodb::config::{ConfigBag, Intercept, SharedInterceptor};
use aws_sdk_dynamodb::operation::{
    delete_item::DeleteItemInput, get_item::GetItemInput, put_item::PutItemInput,
    query::QueryInput, transact_write_items::TransactWriteItemsInput, update_item::UpdateItemInput,
};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, Input,
};
use thiserror::Error;

use crate::identity::ids::TenantId;
use crate::identity::keys::{
    offboarding_reports_pk, tenant_prefix, tenant_record_key, CATALOG, PK, SK,
};
use crate::isolation::policy::{PlatformAccess, Scope, TenantTables};

/// A request refused by the guard. It never left the process.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("isolation guard refused {operation} for tenant {tenant}: {reason}")]
pub struct GuardViolation {
    pub tenant: String,
    pub operation: &'static str,
    pub reason: String,
}

type Item = HashMap<String, AttributeValue>;

/// What a request carries that the guard must see, independent of the SDK's input types, so the
/// rule can be unit- and property-tested without building SDK requests.
#[derive(Debug, Clone)]
pub enum Carried<'a> {
    /// A key or a whole item: its `PK` and `SK` must both be tenant-prefixed.
    KeyOrItem(&'a Item),
    /// A Query: the values its key condition binds, plus its start key, if any.
    Query {
        key_condition: Option<&'a str>,
        values: Option<&'a Item>,
        legacy_key_conditions: bool,
        exclusive_start_key: Option<&'a Item>,
    },
}

/// Checks one request's carried keys against `tenant`. `operation` is for the error only.
pub fn check(
    tenant: &TenantId,
    operation: &'static str,
    carried: &[Carried<'_>],
) -> Result<(), GuardViolation> {
    let prefix = tenant_prefix(tenant);
    let refuse = |reason: String| GuardViolation {
        tenant: tenant.to_string(),
        operation,
        reason,
    };
    let prefixed = |v: Option<&AttributeValue>| matches!(v, Some(AttributeValue::S(s)) if s.starts_with(&prefix));

    if carried.is_empty() {
        return Err(refuse("request carries no key".into()));
    }
    for c in carried {
        match c {
            Carried::KeyOrItem(item) => {
                for attr in [PK, SK] {
                    if !prefixed(item.get(attr)) {
                        return Err(refuse(format!("{attr} lacks the tenant prefix")));
                    }
                }
                // The catalog index's partition key: an item written whole (PutItem, a transaction's
                // Put) must never enlist itself in another tenant's catalog (IAM
                // checks only the table's partition key on a write). No route sets `catalog` with
                // an UpdateItem; one that did would need the same check on its expression values.
                if item.contains_key(CATALOG) && !prefixed(item.get(CATALOG)) {
                    return Err(refuse(format!("{CATALOG} lacks the tenant prefix")));
                }
            }
            Carried::Query {
                key_condition,
                values,
                legacy_key_conditions,
                exclusive_start_key,
            } => {
                if *legacy_key_conditions {
                    return Err(refuse("legacy KeyConditions are not allowed".into()));
                }
                let Some(expr) = key_condition else {
                    return Err(refuse("Query without a key condition".into()));
                };
                let placeholders = placeholders(expr);
                if placeholders.is_empty() {
                    return Err(refuse("key condition binds no value".into()));
                }
                for name in placeholders {
                    if !prefixed(values.and_then(|v| v.get(name))) {
                        return Err(refuse(format!(
                            "key condition value {name} lacks the tenant prefix"
                        )));
                    }
                }
                if let Some(start) = exclusive_start_key {
                    for attr in [PK, SK] {
                        if !prefixed(start.get(attr)) {
                            return Err(refuse(format!(
                                "ExclusiveStartKey {attr} lacks the tenant prefix"
                            )));
                        }
                    }
                    if start.len() != 2 {
                        return Err(refuse(
                            "ExclusiveStartKey has attributes other than PK and SK".into(),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The `:name` value placeholders in an expression.
fn placeholders(expr: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b':' {
            let start = i;
            i += 1;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push(&expr[start..i]);
        } else {
            i += 1;
        }
    }
    out
}

/// A single-item operation's name, table and key (a put's: its item), from its SDK input; `None`
/// for any other operation. The guard and the request meter read single-item requests through it.
pub fn single_item(input: &Input) -> Option<(&'static str, Option<&str>, Option<&Item>)> {
    if let Some(i) = input.downcast_ref::<GetItemInput>() {
        return Some(("GetItem", i.table_name(), i.key()));
    }
    if let Some(i) = input.downcast_ref::<PutItemInput>() {
        return Some(("PutItem", i.table_name(), i.item()));
    }
    if let Some(i) = input.downcast_ref::<UpdateItemInput>() {
        return Some(("UpdateItem", i.table_name(), i.key()));
    }
    let delete = input.downcast_ref::<DeleteItemInput>()?;
    Some(("DeleteItem", delete.table_name(), delete.key()))
}

/// Extracts the carried keys from an SDK operation input; `None` for an operation tenants may not use.
fn carried_by(input: &Input) -> Option<(&'static str, Vec<Carried<'_>>)> {
    // A single-item operation carries its key (a put, its item).
    if let Some((operation, _, key)) = single_item(input) {
        return Some((operation, key.map(Carried::KeyOrItem).into_iter().collect()));
    }
    if let Some(i) = input.downcast_ref::<QueryInput>() {
        return Some((
            "Query",
            vec![Carried::Query {
                key_condition: i.key_condition_expression(),
                values: i.expression_attribute_values(),
                legacy_key_conditions: i.key_conditions().is_some(),
                exclusive_start_key: i.exclusive_start_key(),
            }],
        ));
    }
    if let Some(i) = input.downcast_ref::<TransactWriteItemsInput>() {
        let mut keys = Vec::new();
        for t in i.transact_items() {
            if let Some(x) = t.put() {
                keys.push(Carried::KeyOrItem(x.item()));
            }
            if let Some(x) = t.update() {
                keys.push(Carried::KeyOrItem(x.key()));
            }
            if let Some(x) = t.delete() {
                keys.push(Carried::KeyOrItem(x.key()));
            }
            if let Some(x) = t.condition_check() {
                keys.push(Carried::KeyOrItem(x.key()));
            }
        }
        return Some(("TransactWriteItems", keys));
    }
    None
}

/// The guard's decision for one SDK operation input of a tenant route's session, exactly as the
/// interceptor makes it: the key rule, and no write of the tenant's record. Public so the isolation
/// property test can compare it with the session policy on real SDK inputs.
pub fn check_input(tenant: &TenantId, input: &Input) -> Result<(), GuardViolation> {
    check_scoped_input(tenant, Scope::Tenant, input)
}

/// [`check_input`] for a session in `scope`: an operator's may write the record.
pub fn check_scoped_input(
    tenant: &TenantId,
    scope: Scope,
    input: &Input,
) -> Result<(), GuardViolation> {
    let Some((operation, carried)) = carried_by(input) else {
        return Err(GuardViolation {
            tenant: tenant.to_string(),
            operation: "unlisted operation",
            reason: "not in the tenant session policy (no Scan, no PartiQL)".into(),
        });
    };
    check(tenant, operation, &carried)?;
    if scope == Scope::Reader {
        reader::check_reader(tenant, input)?;
    }
    if scope != Scope::Operator && writes_the_record(tenant, input) {
        return Err(GuardViolation {
            tenant: tenant.to_string(),
            operation,
            reason: "a tenant's session never writes its record (operators and the platform do)"
                .into(),
        });
    }
    Ok(())
}

/// Whether `input` puts, updates or deletes an item keyed by `tenant`'s record key (the session
/// policy's `NoRecordWrites` on `dynamodb:LeadingKeys`). `SK` counts too, as in the key rule: it is
/// GSI1's partition key, and no other item has the record's key in either place.
fn writes_the_record(tenant: &TenantId, input: &Input) -> bool {
    let record = AttributeValue::S(tenant_record_key(tenant));
    let in_record = |key: Option<&Item>| {
        key.is_some_and(|k| k.get(PK) == Some(&record) || k.get(SK) == Some(&record))
    };
    if let Some((operation, _, key)) = single_item(input) {
        return operation != "GetItem" && in_record(key);
    }
    let Some(transaction) = input.downcast_ref::<TransactWriteItemsInput>() else {
        return false;
    };
    transaction.transact_items().iter().any(|t| {
        in_record(t.put().map(|x| x.item()))
            || in_record(t.update().map(|x| x.key()))
            || in_record(t.delete().map(|x| x.key()))
    })
}

/// Makes a guard an SDK interceptor checking its rule before the request is serialized, so a refused
/// request is never signed or sent.
macro_rules! guard_interceptor {
    ($guard:ident, |$this:tt, $input:ident| $rule:expr) => {
        impl Intercept for $guard {
            fn name(&self) -> &'static str {
                stringify!($guard)
            }

            fn read_before_execution(
                &self,
                context: &BeforeSerializationInterceptorContextRef<'_>,
                _cfg: &mut ConfigBag,
            ) -> Result<(), BoxError> {
                let ($this, $input) = (self, context.input());
                $rule?;
                Ok(())
            }
        }
    };
}

/// The SDK interceptor installed on every tenant-scoped DynamoDB client. It runs before the request
/// is serialized, so a refused request is never signed or sent.
#[derive(Debug, Clone)]
pub struct TenantKeyGuard {
    tenant: TenantId,
    tables: Option<TenantTables>,
    scope: Scope,
    /// The statements a session of the platform's partition is narrowed to (the session's tag and
    /// policy: `isolation::credentials`); `None` for a tenant's, or the whole partition's.
    platform: Option<platform::PlatformNarrowing>,
}

impl TenantKeyGuard {
    /// The key rule alone (any table), of a tenant route's session.
    pub fn new(tenant: TenantId) -> Self {
        Self {
            tenant,
            tables: None,
            scope: Scope::Tenant,
            platform: None,
        }
    }

    /// The key rule, and the table rule of the tenant's placement ([`check_tables`]), of a session
    /// in `scope`.
    pub fn placed(tenant: TenantId, tables: TenantTables, scope: Scope) -> Self {
        Self {
            tenant,
            tables: Some(tables),
            scope,
            platform: None,
        }
    }

    /// This guard, holding a session of the platform's partition to `access` as its session policy
    /// does ([`check_platform_access`]); a tenant's session is not affected.
    pub fn narrowed(self, access: PlatformAccess) -> Self {
        let platform = match self.tenant.as_str() == TenantId::PLATFORM {
            true => platform::PlatformNarrowing::of(access),
            false => None,
        };
        Self { platform, ..self }
    }
}

impl TenantKeyGuard {
    /// The key rule, a narrowed platform session's statements, and the table rule when the guard
    /// has the tenant's placement.
    fn check(&self, input: &Input) -> Result<(), GuardViolation> {
        check_scoped_input(&self.tenant, self.scope, input)?;
        if let Some(narrowing) = &self.platform {
            narrowing.check(input)?;
        }
        if let Some(tables) = &self.tables {
            check_tables(&self.tenant, tables, input)?;
        }
        Ok(())
    }
}

guard_interceptor!(TenantKeyGuard, |guard, input| guard.check(input));

/// The guard of a restore's source reader (`TenantClients::source_reader`), which reads another table
/// (a point-in-time or backup restore of the pool) with the function's own credentials: the
/// tenant's rule ([`check_input`]), and reads only (GetItem, Query). The restore's writes go
/// through the tenant's scoped client.
#[derive(Debug, Clone)]
pub struct SourceReadGuard {
    tenant: TenantId,
}

impl SourceReadGuard {
    pub fn new(tenant: TenantId) -> Self {
        Self { tenant }
    }
}

/// The rule of [`SourceReadGuard`] for one SDK operation input.
pub fn check_source_read(tenant: &TenantId, input: &Input) -> Result<(), GuardViolation> {
    if input.downcast_ref::<GetItemInput>().is_none()
        && input.downcast_ref::<QueryInput>().is_none()
    {
        return Err(GuardViolation {
            tenant: tenant.to_string(),
            operation: "restore source read",
            reason: "a restore's source is only read (GetItem, Query)".into(),
        });
    }
    check_input(tenant, input)
}

guard_interceptor!(SourceReadGuard, |guard, input| check_source_read(
    &guard.tenant,
    input
));

/// The guard of the tenant-record reader (`store::tenancy::tenants::TenantDirectory`), which reads with the
/// function's own credentials, not a tenant's: it lets through exactly a GetItem whose key is a
/// tenant record (`PK` = `SK` = `TENANT#<tenant id>#TENANT`), and refuses everything else. IAM's
/// pattern for it (`TENANT#*#TENANT`) is broader, since `*` also matches `#`; this is the exact rule.
#[derive(Debug, Clone, Default)]
pub struct RecordReadGuard;

/// The rule of [`RecordReadGuard`] for one SDK operation input.
pub fn check_record_read(input: &Input) -> Result<(), GuardViolation> {
    let refuse = |reason: &str| GuardViolation {
        tenant: "-".into(),
        operation: "record read",
        reason: reason.into(),
    };
    let get = input
        .downcast_ref::<GetItemInput>()
        .ok_or_else(|| refuse("only GetItem of a tenant record"))?;
    let key = get.key().ok_or_else(|| refuse("no key"))?;
    let (Some(AttributeValue::S(pk)), Some(AttributeValue::S(sk))) = (key.get(PK), key.get(SK))
    else {
        return Err(refuse("the key is not PK and SK strings"));
    };
    let is_record = crate::identity::keys::parse_tenant_record_key(pk).is_some();
    if !is_record || key.len() != 2 || sk != pk {
        return Err(refuse("not a tenant record key"));
    }
    Ok(())
}

guard_interceptor!(RecordReadGuard, |_guard, input| check_record_read(input));

/// The guard of the offboarding-report reader ([`report_reader`]), which, like the record reader,
/// reads with the function's own credentials: any API function may have to know whether an
/// operator's tenant id was ever offboarded, but only the functions that write the platform's
/// partition may assume the tenant-access role for it. It lets through exactly a Query of the table
/// (no index, no start key) whose key condition binds one value, the report partition of a tenant
/// id (`TENANT#_platform#OFFBOARDED#<id>`), and refuses everything else. IAM's pattern for it
/// (`TENANT#_platform#OFFBOARDED#*`) is broader; this is the exact rule.
#[derive(Debug, Clone, Default)]
pub struct ReportReadGuard;

/// The rule of [`ReportReadGuard`] for one SDK operation input.
pub fn check_report_read(input: &Input) -> Result<(), GuardViolation> {
    let refuse = |reason: &str| GuardViolation {
        tenant: TenantId::PLATFORM.into(),
        operation: "offboarding report read",
        reason: reason.into(),
    };
    let query = input
        .downcast_ref::<QueryInput>()
        .ok_or_else(|| refuse("only a Query of one tenant id's offboarding reports"))?;
    if query.index_name().is_some()
        || query.exclusive_start_key().is_some()
        || query.key_conditions().is_some()
    {
        return Err(refuse("only the table's report partition, from its start"));
    }
    let expr = query
        .key_condition_expression()
        .ok_or_else(|| refuse("no key condition"))?;
    let [name] = placeholders(expr)[..] else {
        return Err(refuse("the key condition binds other than one value"));
    };
    let reports_of = |pk: &str| {
        let id = TenantId::parse(pk.rsplit_once('#')?.1).ok()?;
        (offboarding_reports_pk(&id) == pk).then_some(id)
    };
    match query
        .expression_attribute_values()
        .and_then(|v| v.get(name))
    {
        Some(AttributeValue::S(pk)) if reports_of(pk).is_some() => Ok(()),
        _ => Err(refuse("not an offboarding report partition")),
    }
}

guard_interceptor!(ReportReadGuard, |_guard, input| check_report_read(input));

/// The offboarding-report reader: the client `record_reader` (the function's own credentials, and
/// every interceptor it carries besides its guard, such as a test's fault injection) with
/// [`ReportReadGuard`] in place of [`RecordReadGuard`].
pub fn report_reader(record_reader: &aws_sdk_dynamodb::Client) -> aws_sdk_dynamodb::Client {
    let config = record_reader.config();
    let others: Vec<SharedInterceptor> = config
        .interceptors()
        .filter(|i| i.name() != RecordReadGuard.name())
        .collect();
    let mut builder = config.to_builder();
    builder
        .set_interceptors(std::iter::once(SharedInterceptor::new(ReportReadGuard)).chain(others));
    aws_sdk_dynamodb::Client::from_conf(builder.build())
}

/// Whether `err` (an SDK error, or anything wrapping one) was caused by the guard.
pub fn is_guard_violation(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if e.downcast_ref::<GuardViolation>().is_some() {
            return true;
        }
        current = e.source();
    }
    false
}

mod platform;
mod reader;
mod tables;
pub use platform::check_platform_access;
pub use tables::{check_own_table, check_tables, OwnTableGuard};

#[cfg(test)]
mod tests;
