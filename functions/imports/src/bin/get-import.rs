//! `get-import`: see [`imports::get_import`].

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::service::runtime::init_tracing();
    let app: &'static shared::App = Box::leak(Box::new(shared::App::from_env().await?));
    shared::service::runtime::serve(app, env!("CARGO_BIN_NAME"), |req| {
        imports::get_import::handle(app, req)
    })
    .await
}
