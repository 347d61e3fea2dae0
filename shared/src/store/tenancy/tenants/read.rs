//! Reading a tenant's record (eventually or strongly consistent).

use super::*;
use crate::identity::ids::TenantId;
use crate::identity::keys::{tenant_record_key, PK, SK};
use crate::store::client::error::{unless_expected, StoreError};
use crate::store::client::scoped::TenantDb;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

/// Reads a tenant's record with its own scoped client; `None` when the tenant is not onboarded.
pub async fn read_record(db: &TenantDb) -> Result<Option<TenantRecord>, StoreError> {
    read_record_with(&db.client, &db.record_table, &db.tenant, false).await
}

/// [`read_record`], strongly consistent: for a read that decides a write.
pub async fn read_record_consistent(db: &TenantDb) -> Result<Option<TenantRecord>, StoreError> {
    read_record_with(&db.client, &db.record_table, &db.tenant, true).await
}

/// Reads `tenant`'s record with `client` (a scoped client, or the directory's record reader).
pub(super) async fn read_record_with(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    tenant: &TenantId,
    consistent: bool,
) -> Result<Option<TenantRecord>, StoreError> {
    let key = tenant_record_key(tenant);
    let out = client
        .get_item()
        .table_name(table)
        .key(PK, AttributeValue::S(key.clone()))
        .key(SK, AttributeValue::S(key))
        .set_consistent_read(consistent.then_some(true))
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    out.item.map(parse_record).transpose()
}

pub(crate) fn parse_record(
    item: crate::store::client::query::Item,
) -> Result<TenantRecord, StoreError> {
    serde_dynamo::from_item(item)
        .map_err(|e| StoreError::Internal(format!("tenant record does not parse: {e}")))
}

/// An UpdateItem of `db`'s tenant record, answering with the whole new record: for the callers
/// that condition a change of the record and then [`send_record_update`].
pub(crate) fn record_update(
    db: &TenantDb,
) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
    let key = tenant_record_key(&db.tenant);
    db.client
        .update_item()
        .table_name(&*db.record_table)
        .key(PK, AttributeValue::S(key.clone()))
        .key(SK, AttributeValue::S(key))
        .return_values(ReturnValue::AllNew)
}

/// Sends a conditional [`record_update`]: `Some(record)` as it now is, `None` when its condition
/// failed.
pub(crate) async fn send_record_update(
    update: aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder,
) -> Result<Option<TenantRecord>, StoreError> {
    let out = update.send().await;
    let Some(out) = unless_expected(out, |e| e.is_conditional_check_failed_exception())? else {
        return Ok(None);
    };
    match out.attributes {
        Some(item) => Ok(Some(parse_record(item)?)),
        None => Err(StoreError::Internal("UpdateItem returned no record".into())),
    }
}
