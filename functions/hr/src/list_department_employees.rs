//! listDepartmentEmployees: `GET /departments/{departmentId}/employees?limit=&cursor=` →
//! `{items, nextCursor}`. One Query of the department's membership partition per page.

use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use shared::identity::ids::EntityId;
use shared::identity::keys::{department_members_pk, kind, parse_entity_sk};
use shared::service::http::path_entity_id;
use shared::service::paging::{partition_page, PartitionList};
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

use crate::{store, view_from_item};

pub const ROUTE: &str = "list-department-employees";

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Member {
    employee_id: String,
    name: String,
}

/// A department's members: its membership partition, which holds employees only.
const MEMBERS: PartitionList<EntityId> = PartitionList {
    route: ROUTE,
    of: |req| path_entity_id(req, "departmentId"),
    belongs: |t, department, pk, sk| {
        pk == department_members_pk(t, department) && parse_entity_sk(t, kind::EMPLOYEE, sk).is_ok()
    },
};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let read = |db: TenantDb, department: EntityId, limit, start| async move {
        Ok(store::members_page(&db, &department, limit, start).await?)
    };
    let view = |item| Ok(view_from_item::<Member>(item)?);
    partition_page(app, &req, MEMBERS, read, view).await
}
