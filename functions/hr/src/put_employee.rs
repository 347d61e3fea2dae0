//! putEmployee: `PUT /employees/{employeeId}` `{name, departmentId, email?}` → 201 or 200.
//!
//! Reads the current record (one consistent GetItem) to learn the old department, then one
//! TransactWriteItems:
//! the department must exist (ConditionCheck), the employee is written on condition that its
//! department is still the one read (optimistic concurrency), and the membership moves (delete the
//! old, put the new) in the same transaction. A concurrent change cancels it; it is retried on a
//! fresh read, then 409. While the tenant is re-sharded (`shared::store::layout`) the employee and
//! the department are each located first (on either shard), and a copy on the old shard is deleted
//! in the same transaction as the write of the new one.

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem};
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::identity::clock::rfc3339;
use shared::identity::ids::EntityId;
use shared::identity::keys::kind;
use shared::service::http::{json_body, json_response, path_entity_id};
use shared::store::layout::{self, Keys, Layout};
use shared::store::query::string_attr;
use shared::store::transact::transact;
use shared::{ApiError, App};

use crate::{hr_key, item_with_keys, membership_key, Employee, Text};

const ATTEMPTS: usize = 4;

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
    let layout = app.directory.layout(&db).await?;
    let migrating = matches!(layout, Layout::Migrating { .. });
    let employee_keys = Keys::of(layout, |n| hr_key(t, kind::EMPLOYEE, &id, n));
    let department_keys = Keys::of(layout, |n| {
        hr_key(t, kind::DEPARTMENT, &input.department_id, n)
    });
    let employee = Employee {
        employee_id: id.to_string(),
        name: input.name.0.clone(),
        department_id: input.department_id.to_string(),
        email: input.email.map(|e| e.0),
        updated_at: rfc3339(app.clock.now_millis()),
    };
    let no_department =
        || ApiError::bad_request("departmentId", "departmentId names no existing department");

    for attempt in 0..ATTEMPTS {
        let current = layout::locate(&db, layout, &employee_keys).await?;
        let old_department = current
            .as_ref()
            .and_then(|(_, item)| string_attr(item, "departmentId"))
            .map(|d| EntityId::parse(&d))
            .transpose()
            .map_err(internal)?;
        // While the tenant is re-sharded the department is on one of two shards: check it where it is.
        let department_key = if migrating {
            layout::locate(&db, layout, &department_keys)
                .await?
                .ok_or_else(no_department)?
                .0
        } else {
            department_keys.write.clone()
        };
        let department_exists = ConditionCheck::builder()
            .table_name(&*db.table)
            .set_key(Some(department_key))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(internal)?;
        let unchanged = |write: aws_sdk_dynamodb::types::builders::PutBuilder| match &old_department
        {
            Some(old) => write
                .condition_expression("departmentId = :old")
                .expression_attribute_values(":old", AttributeValue::S(old.to_string())),
            None => write.condition_expression("attribute_not_exists(PK)"),
        };
        // During a re-sharding the employee is written where `write_target` says (never back to the
        // old layout); a copy at the other key goes in the same transaction, on the same condition,
        // and where there is none, a check keeps it so.
        let found = current.as_ref().map(|(key, _)| key);
        let (target, other) = employee_keys.write_target(layout, found);
        let at_target = found == Some(target);
        let mut put_employee =
            Put::builder()
                .table_name(&*db.table)
                .set_item(Some(item_with_keys(
                    &employee,
                    target.clone(),
                    kind::EMPLOYEE,
                    t,
                )?));
        put_employee = if at_target || current.is_none() {
            unchanged(put_employee)
        } else {
            put_employee.condition_expression("attribute_not_exists(PK)")
        };
        let mut membership = item_with_keys(
            &serde_json::json!({"employeeId": id.as_str(), "departmentId": input.department_id.as_str(), "name": employee.name}),
            membership_key(t, &input.department_id, &id),
            kind::MEMBER,
            t,
        )?;
        membership.retain(|_, v| !matches!(v, AttributeValue::Null(_)));
        let mut actions = vec![
            TransactWriteItem::builder()
                .condition_check(department_exists)
                .build(),
            TransactWriteItem::builder()
                .put(put_employee.build().map_err(internal)?)
                .build(),
            TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&*db.table)
                        .set_item(Some(membership))
                        .build()
                        .map_err(internal)?,
                )
                .build(),
        ];
        if let Some(old) = old_department
            .as_ref()
            .filter(|old| **old != input.department_id)
        {
            actions.push(delete(&db, membership_key(t, old, &id), None)?);
        }
        let other_index = actions.len();
        if let Some(other) = other {
            actions.push(if found == Some(other) {
                delete(&db, other.clone(), old_department.as_ref())?
            } else {
                layout::absent(&db, other)?
            });
        }
        let request = db
            .client
            .transact_write_items()
            .set_transact_items(Some(actions));
        match transact(request).await {
            Ok(()) => {
                app.read_cache.forget(t, &employee_keys.write);
                let status = if old_department.is_some() {
                    StatusCode::OK
                } else {
                    StatusCode::CREATED
                };
                return Ok(json_response(status, &employee));
            }
            // The department moved shards since it was located: locate it again (unless this was
            // the last attempt: then it is gone).
            Err(e) if e.failed_at(0) && migrating && attempt + 1 < ATTEMPTS => continue,
            Err(e) if e.failed_at(0) => return Err(no_department()),
            // The employee changed (or moved shards) since it was read: read it again.
            Err(e) if e.failed_at(1) || (other.is_some() && e.failed_at(other_index)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Conflict(
        "The employee changed while it was being written; retry.".into(),
    ))
}

/// A Delete of `key`, on condition that the item there is in department `department` when given.
fn delete(
    db: &shared::store::scoped::TenantDb,
    key: shared::identity::keys::Key,
    department: Option<&EntityId>,
) -> Result<TransactWriteItem, ApiError> {
    let mut delete = Delete::builder().table_name(&*db.table).set_key(Some(key));
    if let Some(d) = department {
        delete = delete
            .condition_expression("departmentId = :old")
            .expression_attribute_values(":old", AttributeValue::S(d.to_string()));
    }
    Ok(TransactWriteItem::builder()
        .delete(delete.build().map_err(internal)?)
        .build())
}
