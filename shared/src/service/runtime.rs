//! Running a handler on the Lambda runtime: JSON logs, and errors turned into responses in one place.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use lambda_http::{service_fn, Body, Request, RequestExt, Response};
use tracing::Instrument;

use crate::identity::ids::TenantId;
use crate::service::app::App;
use crate::service::error::ApiError;
use crate::service::http::{requested_limit, MAX_SHARDED_LIMIT};
use crate::service::metrics::{self, Refusal};
use crate::service::telemetry::{self, Invocation};
use crate::store::client::meter::{self, PageBudget, RequestMeta};
use crate::store::quota::limiter::{Admission, Charge, Exceeded};
use crate::store::quota::usage;

/// Structured JSON logs through `tracing`, in the Powertools shape (`service::telemetry`).
pub fn init_tracing() {
    let _ = tracing::subscriber::set_global_default(json_subscriber(std::io::stdout));
}

/// What a function's `main` starts with: the JSON logs ([`init_tracing`]), then the container's
/// `App`, built from the environment and kept for the container's life.
pub async fn start() -> Result<&'static App, lambda_http::Error> {
    init_tracing();
    Ok(Box::leak(Box::new(App::from_env().await?)))
}

/// [`start`], for a read-only route (routes.yaml: its declared requests are reads): its tenant
/// sessions read, and write only its metering counters ([`Scope::Reader`]).
///
/// [`Scope::Reader`]: crate::isolation::policy::Scope::Reader
pub async fn start_read_only() -> Result<&'static App, lambda_http::Error> {
    init_tracing();
    let mut app = App::from_env().await?;
    app.settings.tenant_scope = crate::isolation::policy::Scope::Reader;
    Ok(Box::leak(Box::new(app)))
}

/// The span of an invocation of a function not behind the API (a queue's, a stream's, a schedule's,
/// a bus's), its cold start counted in `metrics`.
pub fn event_invocation(
    context: &lambda_http::lambda_runtime::Context,
    metrics: &metrics::MetricsSink,
    now_ms: u64,
) -> tracing::Span {
    let invocation = Invocation::of_context(context);
    metrics.note_invocation(&invocation, now_ms);
    invocation.span()
}

/// Serves a function not behind the API (a queue's, a stream's, a schedule's, a bus's): `handle`
/// answers each event's payload in its invocation's span ([`event_invocation`]); the answer goes
/// back as JSON.
pub async fn run_events<A, R, E, F, Fut>(
    metrics: &'static metrics::MetricsSink,
    clock: &'static dyn crate::identity::clock::Clock,
    handle: F,
) -> Result<(), lambda_http::Error>
where
    A: for<'de> serde::Deserialize<'de> + Send + 'static,
    R: serde::Serialize,
    E: Into<lambda_http::Error>,
    F: Fn(A) -> Fut,
    Fut: Future<Output = Result<R, E>>,
{
    let handle = &handle;
    lambda_http::lambda_runtime::run(lambda_http::lambda_runtime::service_fn(
        move |event: lambda_http::lambda_runtime::LambdaEvent<A>| async move {
            let span = event_invocation(&event.context, metrics, clock.now_millis());
            let answer = handle(event.payload)
                .instrument(span)
                .await
                .map_err(Into::into)?;
            Ok::<_, lambda_http::Error>(serde_json::to_value(answer)?)
        },
    ))
    .await
}

/// The log format of every function, writing to `writer` (stdout in Lambda; a buffer in the log
/// tests).
pub fn json_subscriber<W>(writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    telemetry::subscriber(writer)
}

/// `METHOD /route/{template}` from the API Gateway request context, or the method alone.
pub fn route_key(req: &Request) -> String {
    use lambda_http::request::RequestContext;
    match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(c)) => c.route_key.clone().unwrap_or_default(),
        Some(RequestContext::ApiGatewayV1(c)) => format!(
            "{} {}",
            req.method(),
            c.resource_path.clone().unwrap_or_default()
        ),
        _ => req.method().to_string(),
    }
}

/// Runs one request's handler and turns its error into a response: the one place errors become
/// problem+json. Logs one summary line per request; bodies, headers, tokens and path ids never.
pub async fn respond(
    invocation: Invocation,
    route: String,
    handler: impl Future<Output = Result<Response<Body>, ApiError>>,
) -> Response<Body> {
    respond_metered(None, invocation, route, handler).await
}

/// [`respond`], plus usage metering when `meter` is `(app, bin)`: as soon as the handler has verified
/// the tenant, the call is added to the container's [`usage::UsageMeter`]; when the tenant's counts
/// are due, they are written concurrently with the handler's own DynamoDB work and awaited before
/// returning (a Lambda is frozen once it answers, so a detached task could be lost). A metering
/// failure is logged and never fails the request.
pub async fn respond_metered(
    meter: Option<(&App, &str)>,
    invocation: Invocation,
    route: String,
    handler: impl Future<Output = Result<Response<Body>, ApiError>>,
) -> Response<Body> {
    respond_counted(meter, None, route, handler)
        .instrument(invocation.span())
        .await
        .0
}

/// [`respond_metered`]; with the `admitted` charge of its quota decision, the call is also counted
/// in the tenant's quota window, and its estimate is corrected to what it consumed. It runs inside
/// the invocation's span, on which it records the tenant once one verifies.
async fn respond_counted(
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
                        .settle(&tenant, bin, meta.page_limit(), charge, read + write, now);
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
    let (usage, _) = tokio::join!(app.usage.flush(&db, now_millis), window);
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

/// Serves one request: the tier quota is decided first, before the handler runs; an admitted
/// request runs its handler with usage metering ([`respond_metered`]), a limited one gets 429 with
/// `Retry-After` and touches nothing (its count waits for the tenant's next flush). A caller
/// that does not verify is left to the handler, which answers 401 or 403.
pub async fn respond_admitted<F, Fut>(
    app: &App,
    bin: &str,
    invocation: Invocation,
    req: Request,
    handler: F,
) -> Response<Body>
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Result<Response<Body>, ApiError>>,
{
    let span = invocation.span();
    let invocation = &invocation;
    // Everything the request logs is inside its invocation's span.
    async move {
        let publisher = &app.metrics.publisher;
        app.metrics
            .note_invocation(invocation, app.clock.now_millis());
        let started = Instant::now();
        // Keys read from a secret are read again when stale (a rotation reaches this container); a
        // failed read keeps the keys it has.
        if let Err(e) = app.signing.refresh(app.clock.now_millis()).await {
            tracing::error!(error = %e, "no signing keys: routes that sign or verify answer 503");
        }
        let (response, meta, refusal) = admitted(app, bin, req, handler).await;
        let tier = match meta.tenant().map(TenantId::parse) {
            Some(Ok(tenant)) => app.tier_name(&tenant).await,
            _ => "none",
        };
        let (read, write) = meta.capacity_milli_units();
        let line = metrics::request_line(
            &metrics::RequestMetrics {
                route: bin,
                tier,
                status: response.status().as_u16(),
                latency_ms: started.elapsed().as_secs_f64() * 1000.0,
                read_units: read as f64 / 1000.0,
                write_units: write as f64 / 1000.0,
                throttles: meta.throttles(),
                refusal,
                tenant: meta.tenant(),
                invocation,
            },
            publisher,
            app.clock.now_millis(),
        );
        app.metrics.emit(line);
        response
    }
    .instrument(span)
    .await
}

/// [`respond_admitted`] without its metrics line: the response, what the request consumed, and
/// which quota refused it, if one did.
async fn admitted<F, Fut>(
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
    // record is read without its credentials); the handler would refuse it too, in `App::db`.
    if let Some(refusal) = app.refusal(&who).await {
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

/// Serves `handler` until the runtime stops. Each request is logged once with its status and latency.
pub async fn serve<F, Fut>(
    app: &'static App,
    bin: &'static str,
    handler: F,
) -> Result<(), lambda_http::Error>
where
    F: Fn(Request) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Response<Body>, ApiError>> + Send + 'static,
{
    lambda_http::run(service_fn(|req: Request| {
        let invocation = Invocation::of(&req);
        let handler = &handler;
        async move {
            let response = respond_admitted(app, bin, invocation, req, handler).await;
            Ok::<_, std::convert::Infallible>(response)
        }
    }))
    .await
}
