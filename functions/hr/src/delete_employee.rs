//! deleteEmployee: `DELETE /employees/{employeeId}` → 204 or 404.
//!
//! One GetItem for the employee's department, then one TransactWriteItems removing the employee
//! (on condition its department is unchanged) and its membership together.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem};
use lambda_http::{Body, Request, Response};
use shared::identity::ids::EntityId;
use shared::identity::keys::kind;
use shared::service::http::{no_content, path_entity_id};
use shared::store::query::string_attr;
use shared::store::transact::{transact, TransactError};
use shared::{ApiError, App};

use crate::{hr_key, membership_key};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let id = path_entity_id(&req, "employeeId")?;
    let db = app.db(t).await?;
    let shards = app.directory.shard_count(&db).await?;
    let key = hr_key(t, kind::EMPLOYEE, &id, shards);
    let current = db
        .client
        .get_item()
        .table_name(&*db.table)
        .set_key(Some(key.clone()))
        .consistent_read(true)
        .send()
        .await
        .map_err(ApiError::from_dynamodb)?
        .item
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
    transact(request).await.map_err(|e| match e {
        TransactError::ConditionFailed { .. } => {
            ApiError::Conflict("The employee changed while it was being deleted; retry.".into())
        }
        other => other.into(),
    })?;
    Ok(no_content())
}
