//! updateTenant: `PATCH /tenants/{tenantId}` `{tier?, limits?}` → 200 with the record, 404 when the
//! tenant does not exist.
//!
//! Operator only. Changes the tier, or sets custom limits (tier `custom`). One conditional
//! UpdateItem, sent with credentials scoped to the tenant changed. Every container reads the new
//! limits within [`shared::store::tenants::RECORD_TTL_SECONDS`]; this container at once.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::identity::ids::TenantId;
use shared::service::http::{json_body, json_response, path_param};
use shared::store::tenants::{set_tier, Tier};
use shared::{ApiError, App};

use crate::{require_operator, tier_and_limits, TenantView};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UpdateInput {
    #[serde(default)]
    tier: Option<Tier>,
    #[serde(default)]
    limits: Option<crate::LimitsInput>,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    require_operator(&caller)?;
    let raw = path_param(&req, "tenantId")?;
    let tenant = TenantId::parse(&raw)
        .map_err(|e| ApiError::bad_request("tenantId", format!("tenantId {e}")))?;
    let input: UpdateInput = json_body(&req)?;
    let (tier, limits) = tier_and_limits(input.tier, input.limits)?;
    let db = app.db(&tenant).await?;
    let record = set_tier(&db, tier, limits)
        .await?
        .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
    tracing::info!(tenant = %tenant, ?tier, by = %caller.tenant, "tenant tier changed");
    let record = std::sync::Arc::new(record);
    app.directory.remember(&tenant, Some(record.clone()));
    Ok(json_response(
        StatusCode::OK,
        &TenantView::from((*record).clone()),
    ))
}
