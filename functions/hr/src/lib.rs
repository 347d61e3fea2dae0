//! Employees and departments of an HR SaaS, in one write-sharded partition space told apart by the
//! kind in the sort key, plus an adjacency partition per department listing its members.
//!
//! Their keys are built in `shared::identity::keys`; the key table (generated from it) is in
//! `docs/key-scheme.md`.
//!
//! An employee's record and its membership item change together, in one transaction, so no state
//! ever has an employee in two departments or in none.

pub mod store;
// @generated begin: `pooltable gen` writes the route modules from routes.yaml
pub mod delete_employee;
pub mod get_department;
pub mod get_employee;
pub mod list_department_employees;
pub mod list_departments;
pub mod list_employees;
pub mod put_department;
pub mod put_employee;
// @generated end

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use shared::identity::entities::{DEPARTMENT, EMPLOYEE};
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{
    department_members_pk, entity_sk, kind, sharded_entity_key, Key, PK, SK,
};
use shared::store::scatter::ShardedList;

pub const EMPLOYEES: ShardedList = ShardedList::new(EMPLOYEE, "list-employees");

pub const DEPARTMENTS: ShardedList = ShardedList::new(DEPARTMENT, "list-departments");

/// The key of an employee or department (`kind`) with id `id` in the HR shards.
pub fn hr_key(t: &TenantId, entity_kind: &str, id: &EntityId, shards: u32) -> Key {
    sharded_entity_key(t, kind::HR, entity_kind, id, shards)
}

/// The membership item's key: employee `e` in department `d`.
pub fn membership_key(t: &TenantId, d: &EntityId, e: &EntityId) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (
            PK.to_owned(),
            AttributeValue::S(department_members_pk(t, d)),
        ),
        (
            SK.to_owned(),
            AttributeValue::S(entity_sk(t, kind::EMPLOYEE, e)),
        ),
    ])
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Employee {
    pub employee_id: String,
    pub name: String,
    pub department_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    pub updated_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Department {
    pub department_id: String,
    pub name: String,
    pub updated_at: String,
}

pub use shared::store::client::items::{item_with_keys, view_from_item};

pub use shared::service::http::{PageBody, Text};
