//! `import-consumer`: see [`imports::consume`]. An SQS event source mapping invokes it, with
//! `ReportBatchItemFailures`.

use lambda_http::lambda_runtime::{self, service_fn, LambdaEvent};
use tracing::Instrument;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::service::runtime::init_tracing();
    let app: &'static shared::App = Box::leak(Box::new(shared::App::from_env().await?));
    let settings: &'static imports::consume::ConsumerSettings =
        Box::leak(Box::new(imports::consume::ConsumerSettings::from_env()?));
    lambda_runtime::run(service_fn(
        |event: LambdaEvent<aws_lambda_events::sqs::SqsEvent>| async move {
            // Boxed: the consumer's future is deep, and the runtime nests it further.
            let span = shared::service::runtime::event_invocation(
                &event.context,
                &app.metrics,
                app.clock.now_millis(),
            );
            let consumed = Box::pin(imports::consume::consume(app, settings, event.payload));
            Ok::<_, lambda_http::Error>(consumed.instrument(span).await)
        },
    ))
    .await
}
