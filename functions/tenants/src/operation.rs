//! The operations on a tenant that run over many calls: an offboarding, a re-sharding, a move
//! between placements and a restore. Each call, and each step of the lifecycle driver, works on one
//! for a while, on the platform's account under the route a call of it is
//! ([`App::on_platform_account`]): its cost is the platform's, never the operator's tenant's, nor
//! the target tenant's quota.

use std::future::Future;
use std::time::Instant;

use lambda_http::{Body, Response};
use shared::store::client::scoped::TenantDb;
use shared::store::tenancy::tenants::TenantRecord;
use shared::{ApiError, App};

use crate::{move_tenant, offboard_tenant, reshard_tenant, restore_tenant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Offboarding,
    Resharding,
    Moving,
    Restoring,
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
        } else {
            None
        }
    }

    /// The route its calls are, and its steps are charged under.
    pub fn route(self) -> &'static str {
        match self {
            Self::Offboarding => offboard_tenant::ROUTE,
            Self::Resharding => reshard_tenant::ROUTE,
            Self::Moving => move_tenant::ROUTE,
            Self::Restoring => restore_tenant::ROUTE,
        }
    }

    /// Runs `work` (a call of this operation) on the platform's account.
    pub async fn charged<T>(self, app: &App, work: impl Future<Output = T>) -> T {
        app.on_platform_account(self.route(), work).await
    }

    /// One call's worth of this operation, already begun on `record`, on the platform's account:
    /// 200 once it has ended, 202 while it runs.
    pub async fn advance(
        self,
        app: &App,
        db: &TenantDb,
        record: TenantRecord,
    ) -> Result<Response<Body>, ApiError> {
        let work = async move {
            match self {
                Self::Offboarding => offboard_tenant::advance(app, db, record).await,
                Self::Resharding => {
                    let deadline = Instant::now() + reshard_tenant::WORK_PER_REQUEST;
                    reshard_tenant::migrate(app, db, record, deadline).await
                }
                Self::Moving => {
                    let deadline = Instant::now() + move_tenant::WORK_PER_REQUEST;
                    move_tenant::advance(app, db, record, deadline).await
                }
                Self::Restoring => restore_tenant::advance(app, db, record).await,
            }
        };
        self.charged(app, work).await
    }
}
