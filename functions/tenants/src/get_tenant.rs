//! getTenant: `GET /tenants/{tenantId}` → 200 or 404.
//!
//! A tenant may read its own record; an operator (scope `pooltable/admin` or group `platform-admin`)
//! may read any. One GetItem, with credentials scoped to the tenant whose record is read. A tenant's
//! own user does not see which operator's tenant started a re-sharding (`migration.requestedBy`).

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, path_tenant_id};
use shared::store::tenancy::tenants::read_record;
use shared::{ApiError, App};

use crate::TenantView;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let tenant = path_tenant_id(&req)?;
    let db = if tenant == caller.tenant {
        app.db(&tenant).await?
    } else {
        app.require_operator(&caller).await?;
        app.db_for_operator(&tenant).await?
    };
    let record = read_record(&db)
        .await?
        .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
    let view = match caller.operator {
        true => TenantView::from(record),
        false => TenantView::from(record).for_tenant_user(),
    };
    Ok(json_response(StatusCode::OK, &view))
}
