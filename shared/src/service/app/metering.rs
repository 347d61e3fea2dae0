//! What a container does for the tier quota and usage metering around requests: admission
//! against the shared window, billing work done outside a request, and the platform's account.

use crate::identity::ids::TenantId;
use crate::isolation::policy::Scope;
use crate::service::error::ApiError;
use crate::store::quota::limiter::{Admission, Charge};
use crate::store::quota::usage::{DRAIN_TIMEOUT, METER_TIMEOUT};
use crate::store::tenancy::tenants::Limits;

use super::App;

impl App {
    /// Whether `tenant`'s request, estimated at `estimate_milli` thousandths of a capacity unit, may
    /// run now under its tier quota. Fails open: when the limits cannot be read, the request is
    /// admitted (with no budget to shrink its pages) and a warning logged.
    pub async fn admit(&self, tenant: &TenantId, route: &str, estimate_milli: u64) -> Admission {
        match self.directory.record(tenant).await {
            Ok(record) => {
                if let Some(record) = &record {
                    // Counts held for an earlier tenant of this id (offboarded, then onboarded
                    // again) are never written into this one.
                    if self.incarnations.changed(tenant, &record.created_at) {
                        self.forget_counts(tenant);
                    }
                }
                let limits = record.map_or(Limits::UNONBOARDED, |r| r.limits());
                // Boxed: the shared window's reads and writes sit in every route's future.
                Box::pin(self.admit_shared(tenant, route, &limits, estimate_milli)).await
            }
            Err(e) => {
                tracing::warn!(tenant = %tenant, error = %e, "tenant limits unavailable: admitting (the quota fails open)");
                Admission::Admitted(Charge {
                    estimate_milli: 0,
                    budget_milli: u64::MAX,
                })
            }
        }
    }

    /// [`Self::admit`] once the limits are known. A container that has no recent answer of the
    /// tenant's shared window learns it (and the debt carried into it) first; then it decides on its
    /// own view only while that view is fresh and the tenant far from its limit
    /// ([`RateLimiter::admits_alone`]); otherwise the admission is reserved in the shared window
    /// ([`RateLimiter::reserve`]), so containers never give out the same room twice. When the
    /// window cannot be written, the container decides alone on its share (fail open).
    async fn admit_shared(
        &self,
        tenant: &TenantId,
        route: &str,
        limits: &Limits,
        estimate: u64,
    ) -> Admission {
        let now = self.clock.now_seconds();
        // Without a client the runtime admits; the handler answers the refusal or outage itself.
        let Some(db) = self.db(tenant).await.ok() else {
            return self.limiter.decide(tenant, limits, now, estimate);
        };
        if !self.limiter.knows(tenant, now) {
            if let Err(e) = self.limiter.count(&db, limits, now).await {
                tracing::warn!(tenant = %tenant, error = %e, "the quota window could not be read before a first admission: deciding alone on a share (fail open)");
            }
        }
        for _ in 0..2 {
            let admission = self.limiter.decide(tenant, limits, now, estimate);
            let Admission::Admitted(_) = admission else {
                return admission;
            };
            // A route whose cost this container has not measured yet is never admitted alone: its
            // estimate is a guess.
            let measured = self.limiter.cost_known(tenant, route);
            if measured && self.limiter.admits_alone(tenant, limits, now, estimate) {
                return admission;
            }
            match self.limiter.reserve(&db, limits, now, estimate).await {
                Ok(true) => return admission,
                // Refused by the shared window: decided again on what it said.
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(tenant = %tenant, error = %e, "the quota window could not be reserved: admitting on this container's view (fail open)");
                    return admission;
                }
            }
        }
        Admission::Limited {
            exceeded: crate::store::quota::limiter::Exceeded::CapacityUnits,
            retry_after_seconds: self
                .limiter
                .wait_seconds(tenant, limits, now)
                .max(crate::store::quota::limiter::LIMITED_RETRY_AFTER_SECONDS),
        }
    }

    /// Whole seconds until `tenant`'s capacity bucket, as this container knows it, holds something
    /// (0 when it does, or when its limits cannot be read).
    pub async fn quota_wait_seconds(&self, tenant: &TenantId) -> u32 {
        match self.limits(tenant).await {
            Ok(limits) => self
                .limiter
                .wait_seconds(tenant, &limits, self.clock.now_seconds()),
            Err(_) => 0,
        }
    }

    /// Bills `tenant` for work done on its behalf outside its own requests (an import's writes, an
    /// operator's export of it): one call of `route` with the capacity `meta` recorded, added to its
    /// usage and charged to its capacity quota (counted with [`Self::count_quota`]).
    pub fn bill(
        &self,
        tenant: &TenantId,
        route: &str,
        meta: &crate::store::client::meter::RequestMeta,
    ) {
        let used = one_call(meta);
        let units = used.read_milli + used.write_milli;
        self.usage.add(tenant, route, used);
        self.limiter.charge(tenant, self.clock.now_seconds(), units);
        self.bill_pulls(meta);
    }

    /// Adds what `meta`'s pulls out of a move's source consumed to the platform's account, under
    /// the route that asks for a move: the operator's move caused them, so the tenant's usage and
    /// quota never see them. Written with the platform's next flush.
    pub fn bill_pulls(&self, meta: &crate::store::client::meter::RequestMeta) {
        let (read_milli, write_milli) = meta.pulled_capacity_milli_units();
        if read_milli + write_milli == 0 {
            return;
        }
        let pulled = crate::store::quota::usage::Pending {
            read_milli,
            write_milli,
            ..Default::default()
        };
        self.usage.add(
            &TenantId::platform(),
            crate::store::lifecycle::moving::ROUTE,
            pulled,
        );
    }

    /// Runs `work`, an operator's lifecycle step on a tenant (a re-sharding or an offboarding, by
    /// a call or by the lifecycle driver), on the platform's account: what its DynamoDB requests
    /// consume is added to the platform's usage under `route` (one call), written after the call by
    /// the runtime or at the end of the driver's run ([`Self::flush_platform_usage`]). It is
    /// never charged to the calling operator's tenant, in usage or in quota, nor to the target's
    /// quota (an operator's re-sharding must not throttle the tenant's own users; an offboarded
    /// tenant keeps no usage). `GET /tenants/_platform/usage` reports it.
    pub async fn on_platform_account<T>(
        &self,
        route: &str,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        // Boxed: a lifecycle step's future is large, and sits inside the route's or the driver's.
        let (out, meta) = Box::pin(crate::store::client::meter::with_request_meta(Box::pin(
            work,
        )))
        .await;
        self.usage
            .add(&TenantId::platform(), route, one_call(&meta));
        self.bill_pulls(&meta);
        out
    }

    /// Writes the platform's account's pending usage ([`Self::on_platform_account`]), if any: after
    /// an operator's call (by the runtime, once the handler has answered) and at the end of a
    /// lifecycle driver's run. Its writes are the platform's, never a request's.
    pub async fn flush_platform_usage(&self) {
        let platform = TenantId::platform();
        if !self.usage.tenants_pending().contains(&platform) {
            return;
        }
        let flushed = crate::store::client::meter::with_request_meta(async {
            let db = self
                .tenants
                .for_tenant(&platform, &self.tenants.pooled(), Scope::Tenant)
                .await?;
            self.usage
                .flush(&db, self.clock.now_millis(), METER_TIMEOUT)
                .await
        })
        .await
        .0;
        if let Err(e) = flushed {
            tracing::warn!(error = %e, "the platform's usage could not be written; it is kept for the next flush");
        }
    }

    /// Reads `tenant`'s shared quota window (and the debt carried into it) unless this container
    /// has had an answer of it within the last second: what a container does before it decides
    /// alone on work outside a request (an import's message). A failure is logged: the container
    /// then decides on what it knows.
    pub async fn learn_quota(&self, tenant: &TenantId) {
        if self.limiter.knows(tenant, self.clock.now_seconds()) {
            return;
        }
        if let Err(e) = self.count_quota(tenant).await {
            tracing::warn!(tenant = %tenant, error = %e, "the quota window could not be read; deciding on this container's view");
        }
    }

    /// Writes the units `tenant` consumed outside a request (an import's writes) to its quota
    /// window now, and learns the window's totals and debt from the answer.
    pub async fn count_quota(&self, tenant: &TenantId) -> Result<(), ApiError> {
        let limits = self.limits(tenant).await?;
        let db = self.db(tenant).await?;
        self.limiter
            .count(&db, &limits, self.clock.now_seconds())
            .await?;
        Ok(())
    }

    /// Writes every tenant's pending usage counts now, each write within [`DRAIN_TIMEOUT`]: nothing
    /// waits on it (the end of an import batch; a container told it is stopping; tests, which read
    /// usage right after their calls). The tenants are written side by side, so a batch of ten
    /// tenants' imports waits one budget at most, not ten; the first error is returned once every
    /// tenant's flush has ended.
    pub async fn flush_usage(&self) -> Result<(), ApiError> {
        let now = self.clock.now_millis();
        let tenants = self.usage.tenants_pending();
        let drains = tenants.iter().map(|tenant| self.drain_usage(tenant, now));
        futures::future::join_all(drains)
            .await
            .into_iter()
            .collect::<Result<Vec<()>, ApiError>>()
            .map(|_| ())
    }

    /// Writes `tenant`'s pending usage counts at `now`, within [`DRAIN_TIMEOUT`].
    async fn drain_usage(&self, tenant: &TenantId, now: u64) -> Result<(), ApiError> {
        // The platform's account (operators' lifecycle steps) has no record to be active by.
        let db = match *tenant == TenantId::platform() {
            true => self
                .tenants
                .for_tenant(tenant, &self.tenants.pooled(), Scope::Tenant)
                .await
                .map_err(ApiError::from),
            false => self.db(tenant).await,
        };
        match db {
            Ok(db) => Ok(self.usage.flush(&db, now, DRAIN_TIMEOUT).await?),
            // A tenant refused its own data (no record, suspended, offboarding): its counts cannot
            // be written, and are dropped.
            Err(ApiError::Forbidden(_)) => {
                self.forget_counts(tenant);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// One call's usage: what its DynamoDB requests consumed and how often they were throttled.
fn one_call(
    meta: &crate::store::client::meter::RequestMeta,
) -> crate::store::quota::usage::Pending {
    let (read_milli, write_milli) = meta.capacity_milli_units();
    crate::store::quota::usage::Pending {
        calls: 1,
        read_milli,
        write_milli,
        throttles: u64::from(meta.throttles()),
        ..Default::default()
    }
}
