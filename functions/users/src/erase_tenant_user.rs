//! eraseTenantUser: `DELETE /tenants/{tenantId}/users/{userId}` (operator) → what `erase-user`
//! answers the tenant itself: the user and every item of its own deleted and recorded for good (no
//! restore brings it back), 200 with what was deleted (the same on a retry, by either route), or 404.
//!
//! For a customer's erasure request that reaches the platform rather than the tenant, and for a
//! suspended tenant, whose own routes are refused. Written with the tenant's session and its key,
//! as its own request would be. 409 while the tenant is being offboarded, 503 while it is restored,
//! 403 when its key is revoked. Its cost is the platform's ([`App::on_platform_account`]), as an
//! operator's lifecycle step is: never the tenant's usage or quota, nor the operator's own tenant's.

use lambda_http::{Body, Request, Response};
use shared::service::http::{path_entity_id, path_tenant_id};
use shared::{ApiError, App};

use crate::erase_user::erasure_response;

pub const ROUTE: &str = "erase-tenant-user";

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    app.require_operator(&caller).await?;
    let tenant = path_tenant_id(&req)?;
    let id = path_entity_id(&req, "userId")?;
    app.on_platform_account(ROUTE, async {
        let db = app.db_for_operator_in_tenants_name(&tenant).await?;
        erasure_response(app, &db, &id).await
    })
    .await
}
