//! `get-session-by-session-id`: see [`sessions::get_session_by_session_id`].

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::service::runtime::init_tracing();
    let app: &'static shared::App = Box::leak(Box::new(shared::App::from_env().await?));
    shared::service::runtime::serve(app, env!("CARGO_BIN_NAME"), |req| {
        sessions::get_session_by_session_id::handle(app, req)
    })
    .await
}
