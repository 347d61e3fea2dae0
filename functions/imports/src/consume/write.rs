//! Writing one item of a message: the same write as its kind's PUT, as of the import's acceptance,
//! in one transaction with its marker.

use shared::identity::ids::TenantId;
use shared::store::client::meter::with_request_meta;
use shared::store::imports::{marker, record_outcome, ItemOutcome, Outcome, Tombstone};
use shared::store::tenancy::layout::Put;
use shared::{ApiError, App};

use hr::store::{store_department, store_employee, EmployeeFields, WrittenAt};

use super::BIN;
use crate::{ImportItem, ImportMessage, MessageItem};

/// [`write`], with what it cost added to the tenant's usage and charged to its quota.
pub(super) async fn write_metered(
    app: &App,
    tenant: &TenantId,
    body: &ImportMessage,
    item: &MessageItem,
) -> Result<(), ApiError> {
    let (result, meta) = with_request_meta(write(app, tenant, body, item)).await;
    if let Err(e) = &result {
        tracing::warn!(tenant = %tenant, import_id = %body.import_id, index = item.index, error = %e, "an import item was not written");
    }
    app.bill(tenant, BIN, &meta);
    result
}

/// Writes the item and its marker, as of the import's acceptance, unless its marker says an earlier
/// delivery did; when the entity was written or deleted after the import was accepted, records the
/// item as superseded instead. Each kind is written by the same code as its PUT.
async fn write(
    app: &App,
    tenant: &TenantId,
    body: &ImportMessage,
    item: &MessageItem,
) -> Result<(), ApiError> {
    if item.item.kind() != body.kind {
        return Err(ApiError::Internal(format!(
            "an item of {} in an import of {}",
            item.item.kind().as_str(),
            body.kind.as_str()
        )));
    }
    item.item.check("item")?;
    let db = app.db(tenant).await?;
    let layout = app.directory.layout(&db).await?;
    let now = app.clock.now_seconds();
    let along = vec![
        marker(
            &db,
            &ItemOutcome {
                import: &body.import_id,
                index: item.index,
                outcome: Outcome::Written,
                created_at_ms: body.issued_at,
            },
            now,
        )?,
        Tombstone::of(&db, body.kind.entity(), item.item.id()).absent_since(body.issued_at)?,
    ];
    let (written, put) = match &item.item {
        ImportItem::Product(p) => {
            let write = products::ProductWrite {
                id: &p.product_id,
                document: &p.document,
                written_at: WrittenAt::as_of(body.issued_at),
                along,
            };
            let (keys, put) = products::store_product(&db, layout, write).await?;
            (keys.write, put)
        }
        ImportItem::Department(d) => {
            let at = WrittenAt::as_of(body.issued_at);
            let id = (&d.department_id, d.name.0.as_str());
            let stored = store_department(&db, layout, tenant, id, at, along).await?;
            (stored.cached_as, stored.put)
        }
        ImportItem::Employee(e) => {
            let fields = EmployeeFields {
                name: &e.name.0,
                department: &e.department_id,
                email: e.email.as_ref().map(|m| m.0.as_str()),
            };
            let at = WrittenAt::as_of(body.issued_at);
            let stored =
                store_employee(&db, layout, tenant, (&e.employee_id, fields), at, along).await?;
            (stored.cached_as, stored.put)
        }
    };
    match put {
        Put::Written { .. } => app.read_cache.forget(tenant, &written),
        // The item has an outcome already (an earlier delivery wrote it or found it superseded,
        // or the import passed its deadline): nothing is written again.
        Put::Refused { along: 0 } => {}
        // The entity was written (`Superseded`) or deleted (its tombstone, along 1) after the
        // import was accepted: the tenant's later word stands.
        Put::Refused { .. } | Put::Superseded => {
            let of = ItemOutcome {
                import: &body.import_id,
                index: item.index,
                outcome: Outcome::Superseded,
                created_at_ms: body.issued_at,
            };
            record_outcome(&db, &of, now).await?
        }
    }
    Ok(())
}
