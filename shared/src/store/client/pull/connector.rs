//! The HTTP layer of a moving tenant's client: each attempt's pull runs before it is sent.

use std::sync::Arc;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;

use super::{Puller, Touch};

/// `inner`, with the pull of what each request touches ([`super::Touches`]) run first. A failed
/// pull fails the attempt as an I/O error would: the SDK retries it, pull included.
#[derive(Debug, Clone)]
pub struct PullingHttpClient {
    inner: SharedHttpClient,
    puller: Arc<Puller>,
}

impl PullingHttpClient {
    pub fn new(inner: SharedHttpClient, puller: Arc<Puller>) -> Self {
        Self { inner, puller }
    }
}

impl HttpClient for PullingHttpClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(PullingConnector {
            inner: self.inner.http_connector(settings, components),
            puller: self.puller.clone(),
        })
    }
}

#[derive(Debug)]
struct PullingConnector {
    inner: SharedHttpConnector,
    puller: Arc<Puller>,
}

impl HttpConnector for PullingConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let inner = self.inner.clone();
        let puller = self.puller.clone();
        let touch = request.extension::<Touch>().cloned();
        HttpConnectorFuture::new(async move {
            if let Some(touch) = touch {
                // The move's cost, not the request's: metered apart, charged to the platform.
                let pulled = crate::store::client::meter::metered_apart(puller.pull(&touch));
                pulled.await.map_err(|e| {
                    tracing::warn!(error = %e, "a pull out of a move's source failed; the attempt is retried");
                    ConnectorError::io(Box::new(e))
                })?;
            }
            inner.call(request).await
        })
    }
}
