//! `create-import`: see [`imports::create_import`].

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::service::runtime::init_tracing();
    let app: &'static shared::App = Box::leak(Box::new(shared::App::from_env().await?));
    let queue: &'static imports::ImportQueue =
        Box::leak(Box::new(imports::ImportQueue::from_env()?));
    shared::service::runtime::serve(app, env!("CARGO_BIN_NAME"), |req| {
        imports::create_import::handle(app, queue, req)
    })
    .await
}
