//! `publish-lifecycle-events`: see [`tenants::publish_events`]. The table's stream invokes it, with
//! `ReportBatchItemFailures`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::service::runtime::init_tracing();
    let publisher: &'static tenants::publish_events::Publisher =
        Box::leak(Box::new(tenants::publish_events::Publisher::from_env()?));
    shared::service::runtime::run_events(
        publisher.metrics(),
        &shared::identity::clock::SystemClock,
        |event: aws_lambda_events::dynamodb::Event| async move {
            Ok::<_, std::convert::Infallible>(publisher.publish(event).await)
        },
    )
    .await
}
