//! `publish-lifecycle-events`: see [`tenants::publish_events`]. The table's stream invokes it, with
//! `ReportBatchItemFailures`.

use lambda_http::lambda_runtime::{self, service_fn, LambdaEvent};
use tracing::Instrument;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::service::runtime::init_tracing();
    let publisher: &'static tenants::publish_events::Publisher =
        Box::leak(Box::new(tenants::publish_events::Publisher::from_env()?));
    lambda_runtime::run(service_fn(
        |event: LambdaEvent<aws_lambda_events::dynamodb::Event>| async move {
            let span = shared::service::runtime::event_invocation(
                &event.context,
                publisher.metrics(),
                shared::identity::clock::Clock::now_millis(&shared::identity::clock::SystemClock),
            );
            let published = publisher.publish(event.payload).instrument(span).await;
            Ok::<_, lambda_http::Error>(published)
        },
    ))
    .await
}
