//! updateTenant: `PATCH /tenants/{tenantId}` `{tier?, limits?, status?}`, `{shardCount}` or
//! `{placement}` → 200
//! with the record, 404 when the tenant does not exist, 409 for an operator suspending its own
//! tenant or for a tenant being offboarded.
//!
//! Operator only. Changes the tier, sets custom limits (tier `custom`), or suspends or resumes the
//! tenant (`status`). One conditional UpdateItem, sent with credentials scoped to the tenant changed.
//! `{shardCount}` alone starts or continues a re-sharding ([`crate::reshard_tenant`]), `{placement}`
//! alone a move between the pool and an own table ([`crate::move_tenant`]), `{keyed: true}` alone
//! the sealing of its items under a key of its own, `{rotateKey: true}` alone the next version of
//! that key ([`crate::key_tenant`]).
//! Every container reads the change within [`shared::store::tenancy::tenants::RECORD_TTL_SECONDS`]; this
//! container at once.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::identity::ids::TenantId;
use shared::identity::shard::{MAX_OWN_TABLE_SHARDS, MAX_SHARDS, MIN_SHARDS};
use shared::service::http::{json_body, json_response, path_tenant_id};
use shared::store::tenancy::tenants::{
    update_record, Placement, RecordChange, TenantStatus, Tier, Updated,
};
use shared::{ApiError, App};

use crate::operation::Operation;
use crate::{tier_and_limits, TenantView};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UpdateInput {
    #[serde(default)]
    tier: Option<Tier>,
    #[serde(default)]
    limits: Option<crate::LimitsInput>,
    #[serde(default)]
    status: Option<TenantStatus>,
    #[serde(
        default,
        deserialize_with = "shared::service::http::optional_whole_number"
    )]
    shard_count: Option<u32>,
    #[serde(default)]
    placement: Option<Placement>,
    /// `true` alone: seal the tenant's items under a key of its own ([`crate::key_tenant`]).
    #[serde(default)]
    keyed: Option<bool>,
    /// `true` alone: the next version of the tenant's key ([`crate::key_tenant::rotate`]).
    #[serde(default)]
    rotate_key: Option<bool>,
}

pub async fn handle(
    app: &App,
    lanes: &crate::Lanes,
    req: Request,
) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    app.require_operator(&caller).await?;
    let tenant = path_tenant_id(&req)?;
    let input: UpdateInput = json_body(&req)?;
    // Read whatever the body asks: a wrong `?lanes=` is refused even where it would not apply.
    let asked = crate::lane_walk::asked_lanes(&req)?;
    let others_than_keys = input.tier.is_some()
        || input.limits.is_some()
        || input.status.is_some()
        || input.shard_count.is_some()
        || input.placement.is_some();
    if let Some(rotate) = input.rotate_key {
        let others = others_than_keys || input.keyed.is_some();
        crate::key_tenant::check_rotation_alone(rotate, others)?;
        return crate::key_tenant::rotate(app, &tenant).await;
    }
    if let Some(keyed) = input.keyed {
        crate::key_tenant::check_alone(keyed, others_than_keys)?;
        let run = crate::key_tenant::run(app, &caller.tenant, &tenant);
        return Operation::Keying.charged(app, run).await;
    }
    if let Some(to) = input.placement {
        if input.tier.is_some()
            || input.limits.is_some()
            || input.status.is_some()
            || input.shard_count.is_some()
        {
            return Err(ApiError::bad_request(
                "placement",
                "placement is changed on its own, without tier, limits, status or shardCount",
            ));
        }
        let run = crate::move_tenant::run(app, lanes, &caller.tenant, &tenant, to, asked);
        return Operation::Moving.charged(app, run).await;
    }
    if let Some(to) = input.shard_count {
        if input.tier.is_some() || input.limits.is_some() || input.status.is_some() {
            return Err(ApiError::bad_request(
                "shardCount",
                "shardCount is changed on its own, without tier, limits or status",
            ));
        }
        if !(MIN_SHARDS..=MAX_OWN_TABLE_SHARDS).contains(&to) {
            return Err(ApiError::bad_request(
                "shardCount",
                format!(
                    "shardCount must be {MIN_SHARDS} to {MAX_SHARDS}, or to \
                     {MAX_OWN_TABLE_SHARDS} for a tenant in its own table"
                ),
            ));
        }
        let reshard =
            crate::reshard_tenant::reshard(app, lanes, &caller.tenant, &tenant, to, asked);
        return Operation::Resharding.charged(app, reshard).await;
    }
    if matches!(
        input.status,
        Some(TenantStatus::Offboarding | TenantStatus::Restoring)
    ) {
        return Err(ApiError::bad_request(
            "status",
            "status must be active or suspended; offboarding starts with DELETE /tenants/{tenantId}, \
             a restore with POST /tenants/{tenantId}/restore",
        ));
    }
    let tier = match (input.tier, input.limits, input.status) {
        (None, None, Some(_)) => None,
        (None, None, None) => {
            return Err(ApiError::bad_request(
                "tier",
                "tier, limits, status, shardCount or placement is required",
            ))
        }
        (tier, limits, _) => Some(tier_and_limits(tier, limits)?),
    };
    // An operator acts as a member of its own tenant, and the runtime refuses every request of a
    // suspended tenant before any route runs: suspending one's own tenant would lock out every
    // operator in it, with no route left to resume it.
    if input.status == Some(TenantStatus::Suspended) && tenant == caller.tenant {
        return Err(ApiError::Conflict(
            "An operator cannot suspend its own tenant: that would lock out every operator in it. \
             Ask an operator of another tenant."
                .into(),
        ));
    }
    let change = RecordChange {
        tier,
        status: input.status,
    };
    let view = change_record(app, &caller.tenant, &tenant, change).await?;
    Ok(json_response(StatusCode::OK, &view))
}

/// Changes `tenant`'s tier or status, asked by an operator of `by` (the platform, for the control
/// plane): the record as changed, 404 without one, 409 while it is offboarded, restored (its
/// status) or moved (its tier and limits).
pub(crate) async fn change_record(
    app: &App,
    by: &TenantId,
    tenant: &TenantId,
    change: RecordChange,
) -> Result<TenantView, ApiError> {
    let db = app.db_to_change(tenant).await?;
    let record = match update_record(&db, change, by).await? {
        Updated::Record(record) => *record,
        Updated::NotOnboarded => return Err(ApiError::NotFound("No such tenant.".into())),
        Updated::Offboarding => {
            return Err(ApiError::Conflict(
                "This tenant is being offboarded; its record no longer changes.".into(),
            ))
        }
        Updated::Restoring => {
            return Err(ApiError::Conflict(
                "This tenant is being restored, and is active again when the restore ends: change its status then.".into(),
            ))
        }
        Updated::Moving => {
            return Err(ApiError::Conflict(
                "This tenant is moving; its tier and limits change when the move ends.".into(),
            ))
        }
    };
    tracing::info!(tenant = %tenant, ?change, by = %by, "tenant record changed");
    let record = std::sync::Arc::new(record);
    app.directory.remember(tenant, Some(record.clone()));
    Ok(TenantView::from((*record).clone()))
}
