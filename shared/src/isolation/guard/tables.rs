//! The guard's table rule, the session policy's resources: a tenant's request names its items'
//! table, or, for a tenant in its own table, the pool only at its record's key (GetItem, PutItem,
//! UpdateItem, DeleteItem, a transaction's item); never a Query of the pool, never another table.

use aws_sdk_dynamodb::operation::{
    delete_item::DeleteItemInput, get_item::GetItemInput, put_item::PutItemInput,
    query::QueryInput, transact_write_items::TransactWriteItemsInput, update_item::UpdateItemInput,
};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_runtime_api::client::interceptors::context::Input;

use aws_sdk_dynamodb::config::{ConfigBag, Intercept};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef;

use super::{GuardViolation, Item};
use crate::identity::ids::TenantId;
use crate::identity::keys::{tenant_record_key, PK, SK};
use crate::isolation::policy::TenantTables;

/// One table a request names, with the key it names there (`None`: a Query).
type Named<'a> = (Option<&'a str>, Option<&'a Item>);

fn named_by(input: &Input) -> Vec<Named<'_>> {
    if let Some(i) = input.downcast_ref::<GetItemInput>() {
        return vec![(i.table_name(), i.key())];
    }
    if let Some(i) = input.downcast_ref::<PutItemInput>() {
        return vec![(i.table_name(), i.item())];
    }
    if let Some(i) = input.downcast_ref::<UpdateItemInput>() {
        return vec![(i.table_name(), i.key())];
    }
    if let Some(i) = input.downcast_ref::<DeleteItemInput>() {
        return vec![(i.table_name(), i.key())];
    }
    if let Some(i) = input.downcast_ref::<QueryInput>() {
        return vec![(i.table_name(), None)];
    }
    if let Some(i) = input.downcast_ref::<TransactWriteItemsInput>() {
        let mut named = Vec::new();
        for t in i.transact_items() {
            if let Some(x) = t.put() {
                named.push((Some(x.table_name()), Some(x.item())));
            }
            if let Some(x) = t.update() {
                named.push((Some(x.table_name()), Some(x.key())));
            }
            if let Some(x) = t.delete() {
                named.push((Some(x.table_name()), Some(x.key())));
            }
            if let Some(x) = t.condition_check() {
                named.push((Some(x.table_name()), Some(x.key())));
            }
        }
        return named;
    }
    Vec::new()
}

/// Checks the tables `input` names against `tenant`'s placement `tables`. The key rule
/// ([`super::check_input`]) is checked besides, on every table.
pub fn check_tables(
    tenant: &TenantId,
    tables: &TenantTables,
    input: &Input,
) -> Result<(), GuardViolation> {
    let refuse = |reason: String| GuardViolation {
        tenant: tenant.to_string(),
        operation: "table",
        reason,
    };
    let record = tenant_record_key(tenant);
    let is_record = |key: &Item| {
        key.get(PK) == Some(&AttributeValue::S(record.clone()))
            && key.get(SK) == Some(&AttributeValue::S(record.clone()))
    };
    for (table, key) in named_by(input) {
        match table {
            Some(t) if tables.item_tables().any(|items| **items == *t) => {}
            Some(t) if *t == *tables.record => match key {
                Some(key) if is_record(key) => {}
                Some(_) => {
                    return Err(refuse(format!(
                        "of the pool {t}, a tenant in its own table reaches only its record"
                    )))
                }
                None => {
                    return Err(refuse(format!(
                        "a Query of the pool {t} from its own table"
                    )))
                }
            },
            Some(t) => return Err(refuse(format!("{t} is not the tenant's table"))),
            None => return Err(refuse("no table named".into())),
        }
    }
    Ok(())
}

/// The guard of an operator session's table manager (`TenantDb::own_table_manager`): only
/// [`crate::isolation::policy::OWN_TABLE_ACTIONS`], and only on the tenant's own table.
#[derive(Debug, Clone)]
pub struct OwnTableGuard {
    tenant: TenantId,
    table: String,
}

impl OwnTableGuard {
    pub fn new(tenant: TenantId, table: String) -> Self {
        Self { tenant, table }
    }
}

/// The rule of [`OwnTableGuard`] for one SDK operation input: the table a table-management
/// operation names must be `own`.
pub fn check_own_table(tenant: &TenantId, own: &str, input: &Input) -> Result<(), GuardViolation> {
    use aws_sdk_dynamodb::operation::{
        delete_table::DeleteTableInput, update_continuous_backups::UpdateContinuousBackupsInput,
        update_table::UpdateTableInput, update_time_to_live::UpdateTimeToLiveInput,
    };
    let named = if let Some(i) = input.downcast_ref::<UpdateTableInput>() {
        i.table_name()
    } else if let Some(i) = input.downcast_ref::<DeleteTableInput>() {
        i.table_name()
    } else if let Some(i) = input.downcast_ref::<UpdateTimeToLiveInput>() {
        i.table_name()
    } else if let Some(i) = input.downcast_ref::<UpdateContinuousBackupsInput>() {
        i.table_name()
    } else {
        return Err(GuardViolation {
            tenant: tenant.to_string(),
            operation: "own table management",
            reason: "only UpdateTable, DeleteTable, UpdateTimeToLive and UpdateContinuousBackups"
                .into(),
        });
    };
    match named == Some(own) {
        true => Ok(()),
        false => Err(GuardViolation {
            tenant: tenant.to_string(),
            operation: "own table management",
            reason: format!("only the tenant's own table {own}, not {named:?}"),
        }),
    }
}

guard_interceptor!(OwnTableGuard, |guard, input| check_own_table(
    &guard.tenant,
    &guard.table,
    input
));
