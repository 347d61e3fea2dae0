//! putEmployee: `PUT /employees/{employeeId}` `{name, departmentId, email?}` → 201 or 200.
//!
//! Reads the current record (one GetItem) to learn the old department, then one TransactWriteItems:
//! the department must exist (ConditionCheck), the employee is written on condition that its
//! department is still the one read (optimistic concurrency), and the membership moves (delete the
//! old, put the new) in the same transaction. A concurrent change cancels it; it is retried on a
//! fresh read, then 409.

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem};
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::identity::clock::rfc3339;
use shared::identity::ids::EntityId;
use shared::identity::keys::kind;
use shared::service::http::{json_body, json_response, path_entity_id};
use shared::store::query::string_attr;
use shared::store::transact::transact;
use shared::{ApiError, App};

use crate::{hr_key, item_with_keys, membership_key, Employee, Text};

const ATTEMPTS: usize = 3;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Input {
    name: Text,
    department_id: EntityId,
    #[serde(default)]
    email: Option<Text>,
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::Internal(e.to_string())
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let id = path_entity_id(&req, "employeeId")?;
    let input: Input = json_body(&req)?;
    let db = app.db(t).await?;
    let shards = app.directory.shard_count(&db).await?;
    let employee_key = hr_key(t, kind::EMPLOYEE, &id, shards);
    let employee = Employee {
        employee_id: id.to_string(),
        name: input.name.0.clone(),
        department_id: input.department_id.to_string(),
        email: input.email.map(|e| e.0),
        updated_at: rfc3339(app.clock.now_millis()),
    };

    for _ in 0..ATTEMPTS {
        let current = db
            .client
            .get_item()
            .table_name(&*db.table)
            .set_key(Some(employee_key.clone()))
            .consistent_read(true)
            .projection_expression("departmentId")
            .send()
            .await
            .map_err(ApiError::from_dynamodb)?
            .item;
        let old_department = current
            .as_ref()
            .and_then(|i| string_attr(i, "departmentId"))
            .map(|d| EntityId::parse(&d))
            .transpose()
            .map_err(internal)?;

        let department_exists = ConditionCheck::builder()
            .table_name(&*db.table)
            .set_key(Some(hr_key(
                t,
                kind::DEPARTMENT,
                &input.department_id,
                shards,
            )))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(internal)?;
        let mut put_employee =
            Put::builder()
                .table_name(&*db.table)
                .set_item(Some(item_with_keys(
                    &employee,
                    employee_key.clone(),
                    kind::EMPLOYEE,
                    t,
                )?));
        put_employee = match &old_department {
            None => put_employee.condition_expression("attribute_not_exists(PK)"),
            Some(old) => put_employee
                .condition_expression("departmentId = :old")
                .expression_attribute_values(":old", AttributeValue::S(old.to_string())),
        };
        let mut membership = item_with_keys(
            &serde_json::json!({"employeeId": id.as_str(), "departmentId": input.department_id.as_str(), "name": employee.name}),
            membership_key(t, &input.department_id, &id),
            kind::MEMBER,
            t,
        )?;
        membership.retain(|_, v| !matches!(v, AttributeValue::Null(_)));
        let mut request = db
            .client
            .transact_write_items()
            .transact_items(
                TransactWriteItem::builder()
                    .condition_check(department_exists)
                    .build(),
            )
            .transact_items(
                TransactWriteItem::builder()
                    .put(put_employee.build().map_err(internal)?)
                    .build(),
            )
            .transact_items(
                TransactWriteItem::builder()
                    .put(
                        Put::builder()
                            .table_name(&*db.table)
                            .set_item(Some(membership))
                            .build()
                            .map_err(internal)?,
                    )
                    .build(),
            );
        if let Some(old) = old_department
            .as_ref()
            .filter(|old| **old != input.department_id)
        {
            request = request.transact_items(
                TransactWriteItem::builder()
                    .delete(
                        Delete::builder()
                            .table_name(&*db.table)
                            .set_key(Some(membership_key(t, old, &id)))
                            .build()
                            .map_err(internal)?,
                    )
                    .build(),
            );
        }
        match transact(request).await {
            Ok(()) => {
                let status = if old_department.is_some() {
                    StatusCode::OK
                } else {
                    StatusCode::CREATED
                };
                return Ok(json_response(status, &employee));
            }
            Err(e) if e.failed_at(0) => {
                return Err(ApiError::bad_request(
                    "departmentId",
                    "departmentId names no existing department",
                ))
            }
            // The employee changed since it was read: read it again.
            Err(e) if e.failed_at(1) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Conflict(
        "The employee changed while it was being written; retry.".into(),
    ))
}
