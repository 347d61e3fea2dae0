//! The telemetry layer, outermost: the invocation's span around everything the request logs, the
//! signing keys refreshed when stale, and the request's metrics line (EMF) once it is answered.

use std::future::Future;
use std::time::Instant;

use lambda_http::{Body, Request, Response};
use tracing::Instrument;

use crate::identity::ids::TenantId;
use crate::service::app::App;
use crate::service::error::ApiError;
use crate::service::metrics;
use crate::service::telemetry::Invocation;

use super::admission::admitted;

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
