//! `control-plane-events`: see [`tenants::control_plane`]. An EventBridge rule on the SaaS Builder
//! Toolkit control plane's bus invokes it (template parameter `ControlPlane=sbt`).

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    let app = shared::service::runtime::start().await?;
    let plane: &'static tenants::control_plane::ControlPlane =
        Box::leak(Box::new(tenants::control_plane::ControlPlane::from_env()?));
    shared::service::runtime::run_events(&app.metrics, &*app.clock, |event: serde_json::Value| {
        Box::pin(tenants::control_plane::handle(app, plane, event))
    })
    .await
}
