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

use crate::{LanesProgress, TenantView};

/// The progress of `record`'s offboarding lanes, while it runs in them (one consistent Query).
async fn lanes_of(
    app: &App,
    db: &shared::store::client::scoped::TenantDb,
    record: &shared::store::tenancy::tenants::TenantRecord,
) -> Result<Option<LanesProgress>, ApiError> {
    use shared::store::lifecycle::{lanes, offboarding::OPERATION};
    let Some(state) = record
        .offboarding
        .as_ref()
        .filter(|o| o.lanes.is_some() && !o.walked)
    else {
        return Ok(None);
    };
    let sources = crate::offboard_tenant::walk_sources(record)?;
    let all = lanes::read(db, OPERATION).await?;
    Ok(Some(LanesProgress::of(
        &db.tenant,
        &sources,
        &all,
        state,
        app.clock.now_millis(),
    )))
}

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
    let lanes = lanes_of(app, &db, &record).await?;
    let mut view = TenantView::from(record);
    if let (Some(offboarding), Some(lanes)) = (&mut view.offboarding, lanes) {
        offboarding.deleted_total = lanes.items_done;
        offboarding.deleted = lanes.by_kind.clone();
        offboarding.lanes = Some(lanes);
    }
    let view = match caller.operator {
        true => view,
        false => view.for_tenant_user(),
    };
    Ok(json_response(StatusCode::OK, &view))
}
