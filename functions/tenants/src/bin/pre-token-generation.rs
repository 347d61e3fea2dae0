//! `pre-token-generation`: see [`tenants::pre_token_generation`]. The template's optional Cognito
//! user pool invokes it (`V2_0`) before it issues tokens.

use lambda_http::lambda_runtime::{self, service_fn, LambdaEvent};
use shared::service::telemetry::Invocation;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::service::runtime::init_tracing();
    lambda_runtime::run(service_fn(
        |event: LambdaEvent<serde_json::Value>| async move {
            let span = Invocation::of_context(&event.context).span();
            let _entered = span.enter();
            Ok::<_, lambda_http::Error>(tenants::pre_token_generation::handle(event.payload))
        },
    ))
    .await
}
