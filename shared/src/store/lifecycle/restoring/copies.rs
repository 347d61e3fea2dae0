//! The point-in-time copies an operator's abort leaves for the lifecycle driver to delete, listed in
//! the platform's partition (`TENANT#_platform#COPIES`, one item per copy).
//!
//! A call that read a point-in-time restore as preparing just before an abort ended it can start
//! the restore's copy of the whole pool just after, when the abort found none to delete; and
//! DynamoDB refuses to delete a copy while it makes it (20 minutes or more). So an abort lists the
//! copy *before* it ends the restore, and the driver deletes each listed copy once no such call can
//! still be running ([`DUE_AFTER_MS`] after the abort) and DynamoDB lets it, then unlists it. The
//! list holds the copy's name, not the tenant's record: an offboarding or another restore of the
//! tenant meanwhile leaves it as it is.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::ids::TenantId;
use crate::identity::keys::{copies_to_delete_pk, copy_to_delete_sk, PK, SK};
use crate::store::client::error::{written_unless_condition_failed, StoreError};
use crate::store::client::scoped::TenantDb;
use crate::store::tenancy::tenants::LONGEST_FUNCTION_TIMEOUT_SECONDS;

/// How long after an abort its copy is due for deletion: a function's timeout (and a margin), after
/// which no call that read the restore before the abort can still start the copy.
pub const DUE_AFTER_MS: u64 = (LONGEST_FUNCTION_TIMEOUT_SECONDS + 2) * 1000;

const COPY_OF: &str = "copyOf";
const DUE_AT_MS: &str = "dueAtMs";

/// A copy on the list: the table, the tenant whose restore it was made for, and when it is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedCopy {
    pub table: String,
    pub tenant: TenantId,
    pub due_at_ms: u64,
}

/// Lists `table`, the copy of `tenant`'s restore aborted at `now_ms` (`platform_db`: the platform
/// partition's client). Idempotent: an abort asked again lists it again, due later.
pub async fn list(
    platform_db: &TenantDb,
    tenant: &TenantId,
    table: &str,
    now_ms: u64,
) -> Result<(), StoreError> {
    let s = |v: String| AttributeValue::S(v);
    let entry = HashMap::from([
        (PK.to_owned(), s(copies_to_delete_pk())),
        (SK.to_owned(), s(copy_to_delete_sk(table))),
        ("kind".to_owned(), s("COPY_TO_DELETE".into())),
        ("tenantId".to_owned(), s(platform_db.tenant.to_string())),
        (COPY_OF.to_owned(), s(tenant.to_string())),
        (
            DUE_AT_MS.to_owned(),
            AttributeValue::N((now_ms + DUE_AFTER_MS).to_string()),
        ),
    ]);
    crate::store::client::items::put(platform_db, entry).await
}

/// Every listed copy, by a consistent read.
pub async fn listed(platform_db: &TenantDb) -> Result<Vec<ListedCopy>, StoreError> {
    let prefix = copy_to_delete_sk("");
    let query = platform_db
        .query_partition(&copies_to_delete_pk())
        .consistent();
    let mut copies = Vec::new();
    for item in query.all().await? {
        let text = |name| match item.get(name) {
            Some(AttributeValue::S(v)) => Some(v.as_str()),
            _ => None,
        };
        let table = text(SK).and_then(|sk| sk.strip_prefix(&prefix));
        let tenant = text(COPY_OF).and_then(|t| TenantId::parse(t).ok());
        match (table, tenant) {
            (Some(table), Some(tenant)) => copies.push(ListedCopy {
                table: table.to_owned(),
                tenant,
                due_at_ms: crate::store::client::query::u64_attr(&item, DUE_AT_MS).unwrap_or(0),
            }),
            _ => tracing::warn!(entry = ?text(SK), "a listed copy names no table or tenant"),
        }
    }
    Ok(copies)
}

/// Removes `copy`'s entry, as [`listed`] read it: its copy is gone. An entry listed again since
/// (an abort asked again, due later) stays: its copy may still be started after this one's delete.
/// `false` when it stayed.
pub async fn unlist(platform_db: &TenantDb, copy: &ListedCopy) -> Result<bool, StoreError> {
    let out = platform_db
        .sdk_delete_at(copies_to_delete_pk(), copy_to_delete_sk(&copy.table))
        .condition_expression("#due = :read")
        .expression_attribute_names("#due", DUE_AT_MS)
        .expression_attribute_values(":read", AttributeValue::N(copy.due_at_ms.to_string()))
        .send()
        .await;
    written_unless_condition_failed(out)
}
