//! deleteEmployee: `DELETE /employees/{employeeId}` → 204 or 404.
//!
//! One consistent GetItem for the employee's department (two during a re-sharding: it is on one of
//! two shards), then one TransactWriteItems removing the employee (on condition its department is
//! unchanged) and its membership together.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem};
use lambda_http::{Body, Request, Response};
use shared::identity::ids::EntityId;
use shared::identity::keys::kind;
use shared::service::http::{no_content, path_entity_id};
use shared::store::layout::{self, Keys, Layout};
use shared::store::query::string_attr;
use shared::store::transact::{transact, TransactError};
use shared::{ApiError, App};

use crate::{hr_key, membership_key};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let id = path_entity_id(&req, "employeeId")?;
    let db = app.db(t).await?;
    let layout = app.directory.layout(&db).await?;
    let keys = Keys::of(layout, |n| hr_key(t, kind::EMPLOYEE, &id, n));
    // During a re-sharding the migrator may move the employee between the read and the delete:
    // that is no conflict of the caller's, so the delete reads it again.
    let attempts = match layout {
        Layout::Stable(_) => 1,
        Layout::Migrating { .. } => 4,
    };
    for _ in 0..attempts {
        let (key, current) = layout::locate(&db, layout, &keys)
            .await?
            .ok_or_else(|| ApiError::NotFound("No such employee.".into()))?;
        let department = string_attr(&current, "departmentId")
            .and_then(|d| EntityId::parse(&d).ok())
            .ok_or_else(|| ApiError::Internal("employee without a department".into()))?;
        let internal = |e: aws_sdk_dynamodb::error::BuildError| ApiError::Internal(e.to_string());
        let request = db
            .client
            .transact_write_items()
            .transact_items(
                TransactWriteItem::builder()
                    .delete(
                        Delete::builder()
                            .table_name(&*db.table)
                            .set_key(Some(key))
                            .condition_expression("departmentId = :d")
                            .expression_attribute_values(
                                ":d",
                                AttributeValue::S(department.to_string()),
                            )
                            .build()
                            .map_err(internal)?,
                    )
                    .build(),
            )
            .transact_items(
                TransactWriteItem::builder()
                    .delete(
                        Delete::builder()
                            .table_name(&*db.table)
                            .set_key(Some(membership_key(t, &department, &id)))
                            .build()
                            .map_err(internal)?,
                    )
                    .build(),
            );
        match transact(request).await {
            Ok(()) => {
                app.read_cache.forget(t, &keys.write);
                return Ok(no_content());
            }
            Err(TransactError::ConditionFailed { .. }) => continue,
            Err(other) => return Err(other.into()),
        }
    }
    Err(ApiError::Conflict(
        "The employee changed while it was being deleted; retry.".into(),
    ))
}
