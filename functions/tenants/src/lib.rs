//! Tenant records. Onboarding and changing a tenant are operator actions: they need the
//! `pooltable/admin` scope or the `platform-admin` group (never a custom attribute; see
//! `shared::isolation::claims`), and even so they write through scoped credentials of the tenant
//! concerned.

pub mod get_tenant;
pub mod onboard_tenant;
pub mod update_tenant;

use serde::Serialize;
pub use shared::service::app::require_operator;
use shared::store::tenants::{Limits, TenantRecord, TenantStatus, Tier};
use shared::ApiError;

/// A tenant record as the API returns it, with the limits in force.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantView {
    pub tenant_id: String,
    pub tier: Tier,
    pub limits: Limits,
    pub shard_count: u32,
    pub created_at: String,
    pub status: TenantStatus,
}

impl From<TenantRecord> for TenantView {
    fn from(r: TenantRecord) -> Self {
        Self {
            status: r.status,
            limits: r.limits(),
            tenant_id: r.tenant_id,
            tier: r.tier,
            shard_count: r.shard_count,
            created_at: r.created_at,
        }
    }
}

/// Custom limits as an operator sends them (whole numbers, also when written as `5.0`).
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsInput {
    #[serde(deserialize_with = "shared::service::http::whole_number")]
    requests_per_second: u32,
    #[serde(deserialize_with = "shared::service::http::whole_number")]
    capacity_units_per_second: u32,
}

impl From<LimitsInput> for Limits {
    fn from(l: LimitsInput) -> Self {
        Limits {
            requests_per_second: l.requests_per_second,
            capacity_units_per_second: l.capacity_units_per_second,
        }
    }
}

/// The tier and custom limits an operator asks for, checked together: `custom` needs `limits`, any
/// other tier takes its own (so `limits` alone means `custom`).
pub fn tier_and_limits(
    tier: Option<Tier>,
    limits: Option<impl Into<Limits>>,
) -> Result<(Tier, Option<Limits>), ApiError> {
    let limits: Option<Limits> = limits.map(Into::into);
    if let Some(limits) = &limits {
        limits
            .check()
            .map_err(|detail| ApiError::bad_request("limits", detail))?;
    }
    match (tier, limits) {
        (None | Some(Tier::Custom), Some(limits)) => Ok((Tier::Custom, Some(limits))),
        (Some(Tier::Custom), None) => Err(ApiError::bad_request(
            "limits",
            "tier custom needs limits {requestsPerSecond, capacityUnitsPerSecond}",
        )),
        (Some(tier), None) => Ok((tier, None)),
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "limits",
            "limits go with tier custom only; the other tiers have their own",
        )),
        (None, None) => Err(ApiError::bad_request("tier", "tier is required")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_limits_need_the_custom_tier_and_the_custom_tier_needs_limits() {
        let l = Limits {
            requests_per_second: 5,
            capacity_units_per_second: 10,
        };
        assert_eq!(
            tier_and_limits(Some(Tier::Premium), None::<Limits>).unwrap(),
            (Tier::Premium, None)
        );
        assert_eq!(
            tier_and_limits(None, Some(l)).unwrap(),
            (Tier::Custom, Some(l))
        );
        assert_eq!(
            tier_and_limits(Some(Tier::Custom), Some(l)).unwrap(),
            (Tier::Custom, Some(l))
        );
        assert!(tier_and_limits(Some(Tier::Custom), None::<Limits>).is_err());
        assert!(tier_and_limits(Some(Tier::Basic), Some(l)).is_err());
        assert!(tier_and_limits(None, None::<Limits>).is_err());
        let zero = Limits {
            requests_per_second: 0,
            ..l
        };
        assert!(tier_and_limits(None, Some(zero)).is_err());
    }
}
