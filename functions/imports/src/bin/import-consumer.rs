//! `import-consumer`: see [`imports::consume`]. An SQS event source mapping invokes it, with
//! `ReportBatchItemFailures`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    let app = shared::service::runtime::start().await?;
    let settings: &'static imports::consume::ConsumerSettings =
        Box::leak(Box::new(imports::consume::ConsumerSettings::from_env()?));
    shared::service::runtime::run_events(
        &app.metrics,
        &*app.clock,
        |batch: aws_lambda_events::sqs::SqsEvent| async move {
            // Boxed: the consumer's future is deep, and the runtime nests it further.
            let consumed = Box::pin(imports::consume::consume(app, settings, batch)).await;
            Ok::<_, std::convert::Infallible>(consumed)
        },
    )
    .await
}
