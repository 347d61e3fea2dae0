//! The metering layer: the handler inside its request meter; the call counted, and the tenant's
//! counts written when due, concurrently with the handler; the quota's estimate settled to what the
//! request consumed; the error turned into problem+json; one log line per request.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use lambda_http::{Body, Response};

use crate::identity::ids::TenantId;
use crate::service::app::App;
use crate::service::error::ApiError;
use crate::store::client::meter::{self, RequestMeta};
use crate::store::quota::limiter::Charge;
use crate::store::quota::usage;

/// [`respond_metered`]; with the `admitted` charge of its quota decision, the call is also counted
/// in the tenant's quota window, and its estimate is corrected to what it consumed. It runs inside
/// the invocation's span, on which it records the tenant once one verifies.
pub(super) async fn respond_counted(
    meter: Option<(&App, &str)>,
    admitted: Option<Charge>,
    route: String,
    handler: impl Future<Output = Result<Response<Body>, ApiError>>,
) -> (Response<Body>, Arc<RequestMeta>) {
    let started = Instant::now();
    let quota = admitted.is_some();
    let (meta, verified_tenant) = RequestMeta::with_tenant_listener();
    meta.set_route(&route);
    let meta = Arc::new(meta);
    let main = async {
        let result = meter::scope(meta.clone(), handler).await;
        // No tenant was verified: release the meter.
        meta.close_tenant_listener();
        result
    };
    let metering = async {
        let Ok(tenant) = verified_tenant.await else {
            return;
        };
        tracing::Span::current().record("tenant_id", tenant.as_str());
        let Some((app, bin)) = meter else {
            return;
        };
        match count_call(app, &tenant, bin, quota).await {
            Ok(()) => {}
            // An operator whose own tenant has no record, or a tenant refused meanwhile: nowhere
            // to count it, and nothing of it may land in a later tenant of the same id.
            Err(ApiError::Forbidden(_)) => app.forget_counts(&tenant),
            Err(e) => {
                tracing::warn!(error = %e, "usage metering failed; the request is unaffected")
            }
        }
    };
    let (result, ()) = tokio::join!(main, metering);
    if let Some((app, _)) = meter {
        // A sealed item this container's key view could not open (a 503): meet the key now.
        app.meet_keys_again(&meta.keys_not_met());
        // The request's pulls out of a move's source are the platform's, and an operator's
        // lifecycle step ran on the platform's account: their units are written now.
        app.bill_pulls(&meta);
        app.flush_platform_usage().await;
    }
    if let (Some((app, bin)), Some(tenant)) = (meter, meta.tenant()) {
        // This call's units are known only now: they ride on the tenant's next flush, and on its
        // next quota count.
        let (read, write) = meta.capacity_milli_units();
        let left = usage::Pending {
            read_milli: read,
            write_milli: write,
            throttles: u64::from(meta.throttles()),
            ..usage::Pending::default()
        };
        if let Ok(tenant) = TenantId::parse(tenant) {
            app.usage.add(&tenant, bin, left);
            let now = app.clock.now_seconds();
            match admitted {
                Some(charge) => {
                    app.limiter
                        .settle(&tenant, bin, meta.page_size(), charge, read + write, now);
                    if read + write > charge.estimate_milli {
                        Box::pin(count_debt(app, &tenant)).await;
                    }
                }
                None => app.limiter.charge(&tenant, now, read + write),
            }
        }
    }
    let response = result.unwrap_or_else(ApiError::into_response);
    if let Some(tenant) = meta.tenant() {
        tracing::Span::current().record("tenant_id", tenant);
    }
    tracing::info!(
        route,
        status = response.status().as_u16(),
        latency_ms = started.elapsed().as_secs_f64() * 1000.0,
        dynamodb_requests = meta.dynamodb_requests(),
        rcu = meta.read_capacity_units(),
        wcu = meta.write_capacity_units(),
        throttles = meta.throttles(),
        "request"
    );
    (response, meta)
}

/// Counts one call of `tenant` on `bin` and, when its counts are due (every 100 ms per container, or
/// with every call once its quota is close), writes them: the usage counters and, with `quota`, the
/// quota window, concurrently.
async fn count_call(app: &App, tenant: &TenantId, bin: &str, quota: bool) -> Result<(), ApiError> {
    let calls = usage::Pending {
        calls: 1,
        ..usage::Pending::default()
    };
    app.usage.add(tenant, bin, calls);
    let now_millis = app.clock.now_millis();
    let now = now_millis / 1000;
    let limits = match quota {
        true => Some(app.limits(tenant).await?),
        false => None,
    };
    let near_limit = limits.is_some_and(|l| app.limiter.near_limit(tenant, &l, now));
    if !near_limit && !app.usage.due(tenant, now_millis) {
        return Ok(());
    }
    let db = app.db(tenant).await?;
    let window = async {
        let Some(limits) = limits else {
            return Ok(());
        };
        app.limiter.count(&db, &limits, now).await.map_err(|e| {
            failed_open(app, tenant, &e);
            ApiError::from(e)
        })
    };
    let (usage, _) = tokio::join!(
        app.usage
            .flush(&db, now_millis, crate::store::quota::usage::METER_TIMEOUT),
        window
    );
    Ok(usage?)
}

/// Writes `tenant`'s quota count now when a request cost more than its estimate and left the tenant
/// near a limit: every container learns of the debt from the next answer, before this response
/// returns, rather than with this container's next request of the tenant (which may never come).
async fn count_debt(app: &App, tenant: &TenantId) {
    let now = app.clock.now_seconds();
    let Ok(limits) = app.limits(tenant).await else {
        return;
    };
    if !app.limiter.near_limit(tenant, &limits, now) {
        return;
    }
    let counted = async {
        let db = app.db(tenant).await?;
        app.limiter.count(&db, &limits, now).await?;
        Ok::<_, ApiError>(())
    };
    match counted.await {
        Ok(()) => {}
        Err(ApiError::Forbidden(_)) => app.forget_counts(tenant),
        Err(e) => failed_open(app, tenant, &e),
    }
}

/// The quota counter could not be written: the container decides alone on its share. Logged, and
/// counted in the `LimiterFailOpen` metric (an alarm watches it).
fn failed_open(app: &App, tenant: &TenantId, error: &dyn std::fmt::Display) {
    tracing::warn!(error = %error, "the quota counter could not be written: deciding alone on a share (fail open)");
    app.emit_event(
        &[("LimiterFailOpen", 1.0)],
        &[("tenant_id", tenant.as_str())],
    );
}
