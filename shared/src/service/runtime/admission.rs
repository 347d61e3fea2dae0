//! The admission layer: the caller verified, a tenant without a record, suspended or offboarding
//! refused, and the tier quota decided on this container's view before the handler runs. An admitted
//! request goes on to the metering layer with its charge; a limited one is answered 429 with
//! `Retry-After` and touches nothing (its count waits for the tenant's next flush).

use std::future::Future;
use std::sync::Arc;

use lambda_http::{Body, Request, Response};

use crate::service::app::App;
use crate::service::error::ApiError;
use crate::service::http::{requested_limit, MAX_SHARDED_LIMIT};
use crate::service::metrics::Refusal;
use crate::store::client::meter::{self, PageBudget, RequestMeta};
use crate::store::quota::limiter::{Admission, Exceeded};
use crate::store::quota::usage;

use super::metering::respond_counted;
use super::route_key;

/// [`respond_admitted`] without its metrics line: the response, what the request consumed, and
/// which quota refused it, if one did.
pub(super) async fn admitted<F, Fut>(
    app: &App,
    bin: &str,
    req: Request,
    handler: F,
) -> (Response<Body>, Arc<RequestMeta>, Option<Refusal>)
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Result<Response<Body>, ApiError>>,
{
    // The route template (e.g. `GET /sessions/{sessionId}`), not the raw path, which holds ids.
    let route = route_key(&req);
    let Some(who) = app.verified_caller(&req) else {
        let (response, meta) = respond_counted(Some((app, bin)), None, route, handler(req)).await;
        return (response, meta, None);
    };
    let tenant = who.tenant.clone();
    // A tenant without a record, suspended or being offboarded is refused before anything else (its
    // record is read without its credentials); the handler would refuse it too, in `App::db`. A
    // cold tenant's key is fetched beside that read, so it costs the request no round trip.
    let (refused, ()) = tokio::join!(app.refusal(&who), app.warm_key(&tenant));
    if let Some(refusal) = refused {
        let refusal = async {
            meter::note_tenant(&tenant);
            Err(refusal)
        };
        let (response, meta) = respond_counted(None, None, route, refusal).await;
        return (response, meta, None);
    }
    // The estimate is the route's last cost: per item times the page asked for, or per request.
    // A write is estimated at no less than what its body will write: a unit per started kilobyte.
    let limit = requested_limit(&req, MAX_SHARDED_LIMIT).unwrap_or(1);
    let estimate = app
        .limiter
        .estimate(&tenant, bin, limit)
        .max(body_estimate_milli(&req));
    let (exceeded, retry_after_seconds) = match app.admit(&tenant, bin, estimate).await {
        Admission::Admitted(charge) => {
            let budget = PageBudget {
                budget_milli: charge.budget_milli,
                milli_per_item: app.limiter.cost_per_item(&tenant, bin),
            };
            let handler = async {
                // Only a tenant's own pages are held to its bucket; an operator's walk of another
                // tenant is not.
                if !who.operator {
                    meter::set_budget(budget);
                }
                handler(req).await
            };
            let (response, meta) =
                respond_counted(Some((app, bin)), Some(charge), route, handler).await;
            return (response, meta, None);
        }
        Admission::Limited {
            exceeded,
            retry_after_seconds,
        } => (exceeded, retry_after_seconds),
    };
    let left = usage::Pending {
        limited: 1,
        ..usage::Pending::default()
    };
    app.usage.add(&tenant, bin, left);
    let refusal = async {
        meter::note_tenant(&tenant);
        let what = match exceeded {
            Exceeded::Requests => "requests per second",
            Exceeded::CapacityUnits => "capacity units per second",
        };
        Err(ApiError::TooManyRequests {
            detail: format!(
                "This tenant is over its tier's {what}. Retry after the time in Retry-After."
            ),
            retry_after_seconds,
        })
    };
    let (response, meta) = respond_counted(None, None, route, refusal).await;
    let refused = match exceeded {
        Exceeded::Requests => Refusal::Requests,
        Exceeded::CapacityUnits => Refusal::CapacityUnits,
    };
    (response, meta, Some(refused))
}

/// What a request's body will at least cost to write, in thousandths of a write unit: one unit per
/// started kilobyte (the stored item holds the body, and more), up to the largest item a route
/// stores (64 KB: a larger body is refused, or, for an import, goes to the queue, not the table).
/// Nothing for a request without one.
fn body_estimate_milli(req: &Request) -> u64 {
    let bytes = match req.body() {
        Body::Text(text) => text.len(),
        Body::Binary(bytes) => bytes.len(),
        _ => 0,
    };
    (bytes as u64).div_ceil(1024).min(LARGEST_ITEM_KB) * 1000
}

/// The largest item a route stores, in kilobytes (a body over 64 KB is refused, 413).
const LARGEST_ITEM_KB: u64 = 64;
