//! Running a handler on the Lambda runtime: JSON logs, and errors turned into responses in one place.

use std::future::Future;
use std::time::Instant;

use lambda_http::{service_fn, Body, Request, RequestExt, Response};

use crate::error::ApiError;

/// Structured JSON logs through `tracing`, level from `RUST_LOG` (default `info`).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(false)
        .with_target(false)
        .without_time()
        .try_init();
}

/// Serves `handler` until the runtime stops. Each request is logged once with its status and latency.
pub async fn serve<F, Fut>(handler: F) -> Result<(), lambda_http::Error>
where
    F: Fn(Request) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Response<Body>, ApiError>> + Send + 'static,
{
    lambda_http::run(service_fn(|req: Request| {
        let request_id = req
            .lambda_context_ref()
            .map(|c| c.request_id.clone())
            .unwrap_or_default();
        let route = format!("{} {}", req.method(), req.raw_http_path());
        let started = Instant::now();
        let fut = handler(req);
        async move {
            let response = fut.await.unwrap_or_else(ApiError::into_response);
            tracing::info!(
                request_id,
                route,
                status = response.status().as_u16(),
                latency_ms = started.elapsed().as_secs_f64() * 1000.0,
                "request"
            );
            Ok::<_, std::convert::Infallible>(response)
        }
    }))
    .await
}
