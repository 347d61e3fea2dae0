//! Running a handler on the Lambda runtime. A request passes three layers, each its own room, the
//! outer one wrapping the inner as tower's `limit/rate` wraps a service:
//!
//! 1. [`telemetry`]: the invocation's span, the signing keys' refresh, and the request's metrics
//!    line (`respond_admitted`, what `serve` runs);
//! 2. [`admission`]: the caller verified, a refused tenant answered, the tier quota decided before
//!    the handler runs (429 with `Retry-After`, touching nothing);
//! 3. [`metering`]: the handler run inside its request meter, the call counted and the tenant's
//!    counts written when due, the quota's estimate settled to what it consumed, errors turned into
//!    problem+json (the one place), and the request's log line.
//!
//! [`respond`] and [`respond_metered`] are the metering layer alone (a route's own tests, the
//! functions not behind the API).

use std::future::Future;

use lambda_http::{service_fn, Body, Request, RequestExt, Response};
use tracing::Instrument;

use crate::service::app::App;
use crate::service::error::ApiError;
use crate::service::metrics;
use crate::service::telemetry::Invocation;

mod admission;
mod metering;
mod telemetry;

pub use telemetry::respond_admitted;

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
    crate::service::telemetry::subscriber(writer)
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
    metering::respond_counted(meter, None, route, handler)
        .instrument(invocation.span())
        .await
        .0
}

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
