//! getTenantUsage: `GET /tenants/{tenantId}/usage?from=YYYY-MM-DD&to=YYYY-MM-DD` (operator) → any
//! tenant's usage, as [`crate::get_usage`] answers the tenant itself: calls, capacity units,
//! throttled attempts and quota refusals per route and day. Read with credentials scoped to that
//! tenant.

use lambda_http::{Body, Request, Response};
use shared::service::app::require_operator;
use shared::service::http::path_tenant_id;
use shared::{ApiError, App};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    require_operator(&caller)?;
    let tenant = path_tenant_id(&req)?;
    let db = app.db_for_operator(&tenant).await?;
    crate::get_usage::usage_response(&db, &req).await
}
