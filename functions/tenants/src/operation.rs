//! The operations on a tenant that run over many calls: an offboarding, a re-sharding, a move
//! between placements and a restore. Each call, and each step of the lifecycle driver, works on one
//! for a while, on the platform's account under the route a call of it is
//! ([`App::on_platform_account`]): its cost is the platform's, never the operator's tenant's, nor
//! the target tenant's quota.

use std::future::Future;

use shared::identity::ids::TenantId;
use shared::store::tenancy::tenants::TenantRecord;
use shared::{ApiError, App};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Offboarding,
    Resharding,
    Moving,
    Restoring,
    Keying,
}

impl Operation {
    /// The operation running on `record`, if any (at most one: they refuse each other).
    pub fn running_on(record: &TenantRecord) -> Option<Self> {
        if record.offboarding.is_some() {
            Some(Self::Offboarding)
        } else if record.migration.is_some() {
            Some(Self::Resharding)
        } else if record.moving.is_some() {
            Some(Self::Moving)
        } else if record.restore.is_some() {
            Some(Self::Restoring)
        } else if record.keying.is_some() {
            Some(Self::Keying)
        } else {
            None
        }
    }

    /// The route its calls are, and its steps are charged under: a re-sharding and a move are
    /// both asked by `PATCH /tenants/{tenantId}`.
    pub const fn route(self) -> &'static str {
        match self {
            Self::Offboarding => "offboard-tenant",
            Self::Resharding | Self::Moving | Self::Keying => {
                shared::store::lifecycle::moving::ROUTE
            }
            Self::Restoring => "restore-tenant",
        }
    }

    /// Whether its work may go on now for `tenant`: not while the tenant's key refuses (revoked),
    /// unless it is an offboarding, which needs no key (a revoked tenant may still leave). A
    /// revoked tenant's data is not moved, re-sharded, restored or sealed: the operation waits,
    /// listed and with its lanes on the queue, and goes on once the key is usable again. The
    /// operator's calls are refused (403) meanwhile; this is the rule for the driver and the lane
    /// worker, which nobody calls. Only a refusal stops it: a key that cannot be checked now (KMS
    /// unreachable) leaves work already allowed going, which carries sealed items without the key,
    /// rather than failing lane messages into the dead-letter queue.
    pub async fn may_go_on(self, app: &App, tenant: &TenantId) -> bool {
        if self == Self::Offboarding {
            return true;
        }
        match app.refuse_revoked(tenant).await {
            Ok(()) => true,
            Err(ApiError::Forbidden(_)) => {
                tracing::info!(tenant = %tenant, operation = ?self, "the tenant's key refuses: its operation waits");
                false
            }
            Err(e) => {
                tracing::warn!(tenant = %tenant, operation = ?self, error = %e, "the tenant's key could not be checked; its operation goes on");
                true
            }
        }
    }

    /// Runs `work` (a call of this operation) on the platform's account.
    pub async fn charged<T>(self, app: &App, work: impl Future<Output = T>) -> T {
        app.on_platform_account(self.route(), work).await
    }
}
