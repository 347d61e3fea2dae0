//! Per-request metering: what the request log line and the usage meter learn while a request runs.
//! A task-local [`RequestMeta`] is set by the service layer around each handler; the
//! [`RequestMetering`] interceptor on every tenant client counts the DynamoDB requests sent, and
//! [`note_tenant`] records the tenant once the caller is verified.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use tokio::sync::oneshot;

use crate::identity::ids::TenantId;

/// What the request log line reports beyond status and latency, filled in while the request runs.
#[derive(Debug, Default)]
pub struct RequestMeta {
    tenant: OnceLock<String>,
    dynamodb_requests: AtomicU32,
    /// Hands the verified tenant to whoever waits for it (the usage meter) as soon as it is known.
    tenant_listener: Mutex<Option<oneshot::Sender<TenantId>>>,
}

impl RequestMeta {
    /// A meta whose verified tenant is also sent to the returned receiver (once, when known).
    pub fn with_tenant_listener() -> (Self, oneshot::Receiver<TenantId>) {
        let (tx, rx) = oneshot::channel();
        let meta = Self {
            tenant_listener: Mutex::new(Some(tx)),
            ..Self::default()
        };
        (meta, rx)
    }

    pub fn tenant(&self) -> Option<&str> {
        self.tenant.get().map(String::as_str)
    }

    pub fn dynamodb_requests(&self) -> u32 {
        self.dynamodb_requests.load(Ordering::Relaxed)
    }

    /// Drops the tenant listener: no tenant will be verified any more, so the listener stops waiting.
    pub fn close_tenant_listener(&self) {
        lock(&self.tenant_listener).take();
    }
}

tokio::task_local! {
    static REQUEST: Arc<RequestMeta>;
}

/// Runs `fut` with `meta` as the current request's meta.
pub async fn scope<T>(meta: Arc<RequestMeta>, fut: impl Future<Output = T>) -> T {
    REQUEST.scope(meta, fut).await
}

/// Runs `fut` with a fresh [`RequestMeta`] and returns it with the result.
pub async fn with_request_meta<T>(fut: impl Future<Output = T>) -> (T, Arc<RequestMeta>) {
    let meta = Arc::new(RequestMeta::default());
    let out = scope(meta.clone(), fut).await;
    (out, meta)
}

/// Records the verified tenant of the current request (for the log line and the usage meter).
pub fn note_tenant(tenant: &TenantId) {
    let _ = REQUEST.try_with(|m| {
        let _ = m.tenant.set(tenant.to_string());
        if let Some(tx) = lock(&m.tenant_listener).take() {
            let _ = tx.send(tenant.clone());
        }
    });
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counts DynamoDB requests sent on behalf of the current request (retries included), so the log line
/// shows what each request cost. Installed on every tenant client.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestMetering;

impl Intercept for RequestMetering {
    fn name(&self) -> &'static str {
        "RequestMetering"
    }

    fn read_before_transmit(
        &self,
        _ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let _ = REQUEST.try_with(|m| m.dynamodb_requests.fetch_add(1, Ordering::Relaxed));
        Ok(())
    }
}
