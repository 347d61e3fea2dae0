//! Every read and write of departments and employees. The writes are shared by their PUT routes and
//! the import consumer: an import's item is the same write as a PUT, only as of the import's
//! acceptance (`written_at`), with actions of its own along (its marker, the not-deleted check) and
//! never over a later write.

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use shared::identity::clock::rfc3339;
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{department_members_pk, kind, Key};
use shared::store::client::error::StoreError;
use shared::store::client::expr::{absent, attr, exists, Condition};
use shared::store::client::query::{string_attr, u64_attr, Item, Page};
use shared::store::client::scoped::TenantDb;
use shared::store::client::transact::TransactError;
use shared::store::keys::stored_form;
pub use shared::store::tenancy::layout::WrittenAt;
use shared::store::tenancy::layout::{self, not_later, Keys, Layout, UPDATED_AT_MS};
use shared::ApiError;

use crate::{hr_key, item_with_keys, membership_key, Department, Employee};

/// Attempts of an employee write that a concurrent change cancelled, before 409.
const ATTEMPTS: usize = 4;

/// What a write stored: the view it answers with, the key the read cache knows it by (the layout's
/// write key), and what the write did.
pub struct Stored<V> {
    pub view: V,
    pub cached_as: Key,
    pub put: layout::Put,
}

/// The keys an employee or department is at, for the tenant's layout.
pub fn keys(t: &TenantId, layout: Layout, entity_kind: &str, id: &EntityId) -> Keys {
    Keys::of(layout, |n| hr_key(t, entity_kind, id, n))
}

/// Writes department `id` named `name`, with `along` in the same transaction
/// (`shared::store::tenancy::layout::put_along`).
pub async fn store_department(
    db: &TenantDb,
    layout: Layout,
    t: &TenantId,
    (id, name): (&EntityId, &str),
    at: WrittenAt,
    along: Vec<TransactWriteItem>,
) -> Result<Stored<Department>, ApiError> {
    let department = Department {
        department_id: id.to_string(),
        name: name.to_owned(),
        updated_at: rfc3339(at.ms),
    };
    let mut fields = item_with_keys(&department, Item::new(), kind::DEPARTMENT, t)?;
    fields.insert(UPDATED_AT_MS.into(), AttributeValue::N(at.ms.to_string()));
    let keys = keys(t, layout, kind::DEPARTMENT, id);
    let put = layout::put_along(db, layout, &keys, fields, along, at.guard()).await?;
    Ok(Stored {
        view: department,
        cached_as: keys.write,
        put,
    })
}

/// An employee's fields, as a PUT or an import gives them.
pub struct EmployeeFields<'a> {
    pub name: &'a str,
    pub department: &'a EntityId,
    pub email: Option<&'a str>,
}

/// Writes employee `id`: one consistent read of its current department, then one transaction: the
/// department must exist (ConditionCheck), the employee is written on condition that its department
/// is still the one read, and its membership moves (the old one deleted, the new one put), with
/// `along` last. A concurrent change cancels it; it is tried again on a fresh read, then 409. While
/// the tenant is re-sharded the employee and the department are each located first (on either
/// shard), and a copy on the old shard is deleted in the same transaction as the write of the new.
///
/// With a late `at`, an employee written after `at.ms` is left as it is: [`layout::Put::Superseded`].
pub async fn store_employee(
    db: &TenantDb,
    layout: Layout,
    t: &TenantId,
    (id, fields): (&EntityId, EmployeeFields<'_>),
    at: WrittenAt,
    along: Vec<TransactWriteItem>,
) -> Result<Stored<Employee>, ApiError> {
    let migrating = matches!(layout, Layout::Migrating { .. });
    let employee_keys = keys(t, layout, kind::EMPLOYEE, id);
    let stored = |view, put| Stored {
        view,
        cached_as: employee_keys.write.clone(),
        put,
    };
    let department_keys = keys(t, layout, kind::DEPARTMENT, fields.department);
    let employee = Employee {
        employee_id: id.to_string(),
        name: fields.name.to_owned(),
        department_id: fields.department.to_string(),
        email: fields.email.map(str::to_owned),
        updated_at: rfc3339(at.ms),
    };
    let no_department =
        || ApiError::bad_request("departmentId", "departmentId names no existing department");

    for attempt in 0..ATTEMPTS {
        let current = layout::locate(db, layout, &employee_keys).await?;
        if written_after(current.as_ref(), at) {
            return Ok(stored(employee, layout::Put::Superseded));
        }
        let old_department = department_of(current.as_ref())?;
        // While the tenant is re-sharded the department is on one of two shards: check it where it is.
        let department_key = if migrating {
            layout::locate(db, layout, &department_keys)
                .await?
                .ok_or_else(no_department)?
                .0
        } else {
            department_keys.write.clone()
        };
        // During a re-sharding the employee is written where `write_target` says (never back to the
        // old layout); a copy at the other key goes in the same transaction, on the same condition,
        // and where there is none, a check keeps it so.
        let found = current.as_ref().map(|(key, _)| key);
        let (target, other) = employee_keys.write_target(layout, found);
        let at_target = found == Some(target);
        let unchanged_from = old_department.as_ref().filter(|_| at_target);
        let mut actions = vec![
            department_exists(db, department_key)?,
            employee_put(db, t, &employee, target.clone(), unchanged_from, at)?,
            membership_put(db, t, id, fields.department, &employee.name)?,
        ];
        if let Some(old) = old_department
            .as_ref()
            .filter(|old| *old != fields.department)
        {
            actions.push(delete(db, membership_key(t, old, id), None)?);
        }
        let other_index = actions.len();
        if let Some(other) = other {
            actions.push(if found == Some(other) {
                delete_copy(db, other.clone(), old_department.as_ref(), at)?
            } else {
                layout::absent(db, other)?
            });
        }
        let own = actions.len();
        actions.extend(along.iter().cloned());
        match db.transact_items(actions).await {
            Ok(()) => {
                let replaced = Some(old_department.is_some());
                return Ok(stored(employee, layout::Put::Written { replaced }));
            }
            Err(TransactError::ConditionFailed { index, .. }) if index >= own => {
                return Ok(stored(
                    employee,
                    layout::Put::Refused { along: index - own },
                ))
            }
            // The department moved shards since it was located: locate it again (unless this was
            // the last attempt: then it is gone).
            Err(e) if e.failed_at(0) && migrating && attempt + 1 < ATTEMPTS => continue,
            Err(e) if e.failed_at(0) => return Err(no_department()),
            // The employee changed (or moved shards, or was written later) since it was read: read
            // it again.
            Err(e) if e.failed_at(1) || (other.is_some() && e.failed_at(other_index)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Conflict(
        "The employee changed while it was being written; retry.".into(),
    ))
}

/// Whether the employee `current` holds was written after a late write's `at` (then it is left as
/// it is).
fn written_after(current: Option<&(Key, Item)>, at: WrittenAt) -> bool {
    match (current, at.guard()) {
        (Some((_, item)), Some(at_ms)) => {
            u64_attr(item, UPDATED_AT_MS).is_some_and(|stored| stored > at_ms)
        }
        _ => false,
    }
}

/// The department the employee `current` holds is in, if it is stored.
fn department_of(current: Option<&(Key, Item)>) -> Result<Option<EntityId>, ApiError> {
    current
        .and_then(|(_, item)| string_attr(item, DEPARTMENT_ID))
        .map(|d| EntityId::parse(&d))
        .transpose()
        .map_err(internal)
}

/// The check that the department at `key` exists (the transaction's first action).
fn department_exists(db: &TenantDb, key: Key) -> Result<TransactWriteItem, StoreError> {
    db.check_item(key, exists()).action()
}

/// The put of `employee` at `key`: on condition that it is still in department `unchanged_from`
/// ([`unchanged`]) when it is stored there already, else that none is there.
fn employee_put(
    db: &TenantDb,
    t: &TenantId,
    employee: &Employee,
    key: Key,
    unchanged_from: Option<&EntityId>,
    at: WrittenAt,
) -> Result<TransactWriteItem, ApiError> {
    let mut item = item_with_keys(employee, key, kind::EMPLOYEE, t)?;
    item.insert(UPDATED_AT_MS.into(), AttributeValue::N(at.ms.to_string()));
    // Sealed under the tenant's key when it has one (`departmentId`, which conditions read, stays plain).
    let item = stored_form(db.key.as_deref(), item)?;
    let condition = match unchanged_from {
        Some(old) => unchanged(old, at),
        None => absent(),
    };
    Ok(db.put_item(item).when(condition).action()?)
}

/// The put of employee `id`'s membership of `department`, under the name it is listed by.
fn membership_put(
    db: &TenantDb,
    t: &TenantId,
    id: &EntityId,
    department: &EntityId,
    name: &str,
) -> Result<TransactWriteItem, ApiError> {
    let mut membership = item_with_keys(
        &serde_json::json!({"employeeId": id.as_str(), "departmentId": department.as_str(), "name": name}),
        membership_key(t, department, id),
        kind::MEMBER,
        t,
    )?;
    membership.retain(|_, v| !matches!(v, AttributeValue::Null(_)));
    let membership = stored_form(db.key.as_deref(), membership)?;
    Ok(db.put_item(membership).action()?)
}

/// That the employee is still in department `old` and, for a late write, was not written after `at`.
fn unchanged(old: &EntityId, at: WrittenAt) -> Condition {
    let in_old = attr(DEPARTMENT_ID).equal(old.as_str());
    match at.guard() {
        None => in_old,
        Some(ms) => in_old.and(not_later(ms)),
    }
}

/// The Delete of the employee's copy on the other shard during a re-sharding: on condition that it
/// is still in department `old`, and for a late write, that it was not written after `at` (a PUT
/// that chose the old layout just before writes moved may have written it since it was read).
fn delete_copy(
    db: &TenantDb,
    key: Key,
    old: Option<&EntityId>,
    at: WrittenAt,
) -> Result<TransactWriteItem, ApiError> {
    match old {
        Some(old) => Ok(db.delete_item(key).when(unchanged(old, at)).action()?),
        None => delete(db, key, None),
    }
}

/// Deletes the employee at `key` and its membership of `department`, with `tombstone` (1
/// TransactWriteItems). `Ok(false)` when it was cancelled: the employee changed (moved to another
/// department, or was moved by a re-sharding) since it was read.
pub async fn delete_employee(
    db: &TenantDb,
    key: Key,
    department: &EntityId,
    employee: &EntityId,
    tombstone: TransactWriteItem,
) -> Result<bool, ApiError> {
    let actions = vec![
        delete(db, key, Some(department))?,
        delete(db, membership_key(&db.tenant, department, employee), None)?,
        tombstone,
    ];
    match db.transact_items(actions).await {
        Ok(()) => Ok(true),
        Err(TransactError::ConditionFailed { .. }) => Ok(false),
        Err(other) => Err(other.into()),
    }
}

/// One page of a department's members (1 Query of its membership partition).
pub async fn members_page(
    db: &TenantDb,
    department: &EntityId,
    limit: u32,
    start: Option<Key>,
) -> Result<Page, StoreError> {
    db.query_partition(&department_members_pk(&db.tenant, department))
        .page(limit, start)
        .await
}

/// A Delete of `key`, on condition that the item there is in department `department` when given.
pub fn delete(
    db: &TenantDb,
    key: Key,
    department: Option<&EntityId>,
) -> Result<TransactWriteItem, ApiError> {
    let mut delete = db.delete_item(key);
    if let Some(d) = department {
        delete = delete.when(attr(DEPARTMENT_ID).equal(d.as_str()));
    }
    Ok(delete.action()?)
}

/// The attribute an employee's department is stored in.
const DEPARTMENT_ID: &str = "departmentId";

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::Internal(e.to_string())
}
