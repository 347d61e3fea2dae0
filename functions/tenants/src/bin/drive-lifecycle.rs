//! `drive-lifecycle`: see [`tenants::drive_lifecycle`]. An EventBridge schedule invokes it.

use lambda_http::lambda_runtime::{self, service_fn, LambdaEvent};
use tracing::Instrument;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::service::runtime::init_tracing();
    let app: &'static shared::App = Box::leak(Box::new(shared::App::from_env().await?));
    lambda_runtime::run(service_fn(
        |event: LambdaEvent<serde_json::Value>| async move {
            let span = shared::service::runtime::event_invocation(
                &event.context,
                &app.metrics,
                app.clock.now_millis(),
            );
            let driven = Box::pin(tenants::drive_lifecycle::drive(app))
                .instrument(span)
                .await?;
            Ok::<_, lambda_http::Error>(serde_json::json!(driven))
        },
    ))
    .await
}
