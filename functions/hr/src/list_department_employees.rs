//! listDepartmentEmployees: `GET /departments/{departmentId}/employees?limit=&cursor=` →
//! `{items, nextCursor}`. One Query of the department's membership partition per page.

use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use shared::identity::keys::{department_members_pk, kind, parse_entity_sk};
use shared::service::http::path_entity_id;
use shared::service::paging::{partition_page, PartitionList};
use shared::{ApiError, App};

use crate::{store, view_from_item};

pub const ROUTE: &str = "list-department-employees";

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Member {
    employee_id: String,
    name: String,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let department = path_entity_id(&req, "departmentId")?;
    let partition = department_members_pk(t, &department);
    let list = PartitionList {
        tenant: t,
        route: ROUTE,
        belongs: |pk: &str, sk: &str| {
            pk == partition && parse_entity_sk(t, kind::EMPLOYEE, sk).is_ok()
        },
    };
    let read = |limit, start| async move {
        let db = app.db(t).await?;
        Ok(store::members_page(&db, &department, limit, start).await?)
    };
    let view = |item| Ok(view_from_item::<Member>(item)?);
    partition_page(app, &req, list, read, view).await
}
