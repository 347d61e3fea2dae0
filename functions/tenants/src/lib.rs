//! Tenant records. Onboarding is an operator action: it needs the `pooltable/admin` scope or the
//! `platform-admin` group (never a custom attribute; see `shared::isolation::claims`), and even so it
//! writes through scoped credentials of the tenant being created.

pub mod get_tenant;
pub mod onboard_tenant;

use serde::Serialize;
use shared::isolation::claims::{Caller, OPERATOR_GROUP, OPERATOR_SCOPE};
use shared::store::tenants::{TenantRecord, Tier};
use shared::ApiError;

pub fn require_operator(caller: &Caller) -> Result<(), ApiError> {
    if caller.operator {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!(
            "This route needs the OAuth scope {OPERATOR_SCOPE} or membership of the group {OPERATOR_GROUP}."
        )))
    }
}

/// A tenant record as the API returns it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantView {
    pub tenant_id: String,
    pub tier: Tier,
    pub shard_count: u32,
    pub created_at: String,
}

impl From<TenantRecord> for TenantView {
    fn from(r: TenantRecord) -> Self {
        Self {
            tenant_id: r.tenant_id,
            tier: r.tier,
            shard_count: r.shard_count,
            created_at: r.created_at,
        }
    }
}
