//! `drive-lifecycle`: see [`tenants::drive_lifecycle`]. An EventBridge schedule invokes it.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    let app = shared::service::runtime::start().await?;
    let lanes: &'static tenants::Lanes = Box::leak(Box::new(tenants::Lanes::from_env()?));
    shared::service::runtime::run_events(&app.metrics, &*app.clock, |_: serde_json::Value| {
        Box::pin(tenants::drive_lifecycle::drive(app, lanes))
    })
    .await
}
