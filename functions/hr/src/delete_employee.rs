//! deleteEmployee: `DELETE /employees/{employeeId}` → 204 or 404.
//!
//! One consistent GetItem for the employee's department (two during a re-sharding: it is on one of
//! two shards), then one TransactWriteItems removing the employee (on condition its department is
//! unchanged) and its membership together, and writing its tombstone, so an import accepted before
//! the delete never brings it back. A 404 writes the tombstone too (with a check that no copy
//! exists), so the delete wins over an import accepted before it that has not landed yet.

use lambda_http::{Body, Request, Response};
use shared::identity::ids::EntityId;
use shared::identity::keys::kind;
use shared::service::http::no_content;
use shared::service::sharded::ItemRequest;
use shared::store::client::query::string_attr;
use shared::store::imports::Tombstone;
use shared::store::tenancy::layout::{self, Layout};
use shared::{ApiError, App};

use crate::{hr_key, store};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let key = |t: &_, id: &_, shards| hr_key(t, kind::EMPLOYEE, id, shards);
    let ItemRequest {
        id,
        db,
        layout,
        keys,
        ..
    } = ItemRequest::read(app, &req, "employeeId", |_| Ok(()), key).await?;
    let t = &db.tenant;
    // During a re-sharding the migrator may move the employee between the read and the delete:
    // that is no conflict of the caller's, so the delete reads it again.
    let attempts = match layout {
        Layout::Stable(_) => layout::ABSENT_ROUNDS,
        Layout::Migrating { .. } => 4,
    };
    for _ in 0..attempts {
        let gone = Tombstone::of(&db, kind::EMPLOYEE, &id).put(app.clock.now_millis())?;
        let Some((key, current)) = layout::locate(&db, layout, &keys).await? else {
            // Nothing to delete, yet the deletion is recorded: an import accepted before it and not
            // delivered yet never brings the employee back. A copy that appeared meanwhile is
            // deleted on the next round.
            if layout::record_absent(&db, layout, &keys, &[gone]).await? {
                return Err(ApiError::NotFound("No such employee.".into()));
            }
            continue;
        };
        let department = string_attr(&current, "departmentId")
            .and_then(|d| EntityId::parse(&d).ok())
            .ok_or_else(|| ApiError::Internal("employee without a department".into()))?;
        if store::delete_employee(&db, key, &department, &id, gone).await? {
            app.read_cache.forget(t, &keys.write);
            return Ok(no_content());
        }
    }
    Err(ApiError::Conflict(
        "The employee changed while it was being deleted; retry.".into(),
    ))
}
