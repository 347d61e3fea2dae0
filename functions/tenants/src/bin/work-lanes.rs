//! `work-lanes`: see [`tenants::work_lanes`]. The lane queue's event source mapping invokes it,
//! with `ReportBatchItemFailures`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    let app = shared::service::runtime::start().await?;
    let lanes: &'static tenants::Lanes = Box::leak(Box::new(tenants::Lanes::from_env()?));
    shared::service::runtime::run_events(
        &app.metrics,
        &*app.clock,
        |batch: aws_lambda_events::sqs::SqsEvent| async move {
            // Boxed: a lane's future is deep, and the runtime nests it further.
            let worked = Box::pin(tenants::work_lanes::work(app, lanes, batch)).await;
            Ok::<_, std::convert::Infallible>(worked)
        },
    )
    .await
}
