//! The bound on a tenant's open imports: their ids, kept on the tenant's sealing item.

use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::import_sealing_key;
use crate::store::client::error::StoreError;
use crate::store::client::scoped::TenantDb;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;

/// The most imports a tenant may have open at once: accepted, and not yet final at their deadline
/// ([`FINAL_WITHIN_SECONDS`]). It bounds what one tenant puts on the lifecycle driver's list.
pub const MAX_OPEN_IMPORTS: usize = 200;
/// The attribute of the tenant's import sealing item that holds its open imports' ids (a string
/// set: adding or removing an id is idempotent, so a retried or repeated step never miscounts).
pub(super) const OPEN_IMPORTS: &str = "openImports";

/// An UpdateItem of the tenant's sealing item; what it changes is the caller's.
fn sealing_update(db: &TenantDb, tenant: &TenantId) -> UpdateItemFluentBuilder {
    let sealing = import_sealing_key(tenant);
    db.sdk_update_at(sealing.clone(), sealing)
}

/// Counts `import` among the tenant's open imports, on its sealing item (which
/// [`ensure_sealing_item`] made): `false` when the tenant has [`MAX_OPEN_IMPORTS`] others open.
/// Idempotent: an id already counted is admitted again.
pub async fn count_open(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
) -> Result<bool, StoreError> {
    let out = sealing_update(db, tenant)
        .update_expression("ADD #open :id")
        .condition_expression(
            "attribute_exists(PK) AND (attribute_not_exists(#open) OR size(#open) < :max \
             OR contains(#open, :one))",
        )
        .expression_attribute_names("#open", OPEN_IMPORTS)
        .expression_attribute_values(":id", AttributeValue::Ss(vec![import.to_string()]))
        .expression_attribute_values(":one", AttributeValue::S(import.to_string()))
        .expression_attribute_values(":max", AttributeValue::N(MAX_OPEN_IMPORTS.to_string()))
        .send()
        .await;
    crate::store::client::error::written_unless_condition_failed(out)
}

/// Takes `import` off the tenant's open imports (idempotent; nothing when the sealing item is gone).
pub async fn uncount_open(
    db: &TenantDb,
    tenant: &TenantId,
    import: &EntityId,
) -> Result<(), StoreError> {
    let out = sealing_update(db, tenant)
        .update_expression("DELETE #open :id")
        .condition_expression("attribute_exists(PK)")
        .expression_attribute_names("#open", OPEN_IMPORTS)
        .expression_attribute_values(":id", AttributeValue::Ss(vec![import.to_string()]))
        .send()
        .await;
    crate::store::client::error::written_unless_condition_failed(out).map(|_| ())
}
