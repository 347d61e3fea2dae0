//! getTenantUsage: `GET /tenants/{tenantId}/usage?from=YYYY-MM-DD&to=YYYY-MM-DD` (operator) → any
//! tenant's usage, as [`crate::get_usage`] answers the tenant itself: calls, capacity units,
//! throttled attempts and quota refusals per route and day. Read with credentials scoped to that
//! tenant. `GET /tenants/_platform/usage` answers the platform's account: what operators' offboardings
//! (`offboard-tenant`) and re-shardings (`update-tenant`) consumed, by a call or by the driver.

use lambda_http::{Body, Request, Response};
use shared::identity::ids::TenantId;
use shared::service::http::path_tenant_id;
use shared::{ApiError, App};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    app.require_operator(&caller).await?;
    // `_platform`: the platform's account, which operators' lifecycle steps are charged to.
    let tenant = match shared::service::http::path_param(&req, "tenantId")? {
        platform if platform == TenantId::PLATFORM => TenantId::platform(),
        _ => path_tenant_id(&req)?,
    };
    let db = app.db_for_operator(&tenant).await?;
    crate::get_usage::usage_response(&db, &req).await
}
