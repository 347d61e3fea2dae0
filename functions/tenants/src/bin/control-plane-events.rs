//! `control-plane-events`: see [`tenants::control_plane`]. An EventBridge rule on the SaaS Builder
//! Toolkit control plane's bus invokes it (template parameter `ControlPlane=sbt`).

use lambda_http::lambda_runtime::{self, service_fn, LambdaEvent};
use tracing::Instrument;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::service::runtime::init_tracing();
    let app: &'static shared::App = Box::leak(Box::new(shared::App::from_env().await?));
    let plane: &'static tenants::control_plane::ControlPlane =
        Box::leak(Box::new(tenants::control_plane::ControlPlane::from_env()?));
    lambda_runtime::run(service_fn(
        |event: LambdaEvent<serde_json::Value>| async move {
            let span = shared::service::runtime::event_invocation(
                &event.context,
                &app.metrics,
                app.clock.now_millis(),
            );
            let handled = Box::pin(tenants::control_plane::handle(app, plane, event.payload))
                .instrument(span)
                .await?;
            Ok::<_, lambda_http::Error>(serde_json::json!(handled))
        },
    ))
    .await
}
