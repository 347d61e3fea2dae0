//! The state a route's handler takes besides the app (routes.yaml's `state:`), built for the tests:
//! one function per type, named after it (`imports::ImportQueue` → [`import_queue`]), which the
//! generated dispatch (`tests/src/dispatch.rs`) calls.

tokio::task_local! {
    /// The queue `create-import` sends to inside [`sending_to`].
    static IMPORT_QUEUE: imports::ImportQueue;
}

/// Runs `calls` with `create-import` sending to `queue`: an import test's own, which its consumer
/// reads. The calls go through the harness's one way (`Client::call`, `Client::send`) as any other.
pub async fn sending_to<F: std::future::Future>(
    queue: imports::ImportQueue,
    calls: F,
) -> F::Output {
    IMPORT_QUEUE.scope(queue, calls).await
}

/// The state `create-import` takes (routes.yaml: `state: imports::ImportQueue`): the queue of
/// [`sending_to`] when the call is inside it, else the queue of [`shared_import_queue`], with a
/// client per call (a test's runtime ends with the test, and its connections too).
pub(crate) async fn import_queue() -> imports::ImportQueue {
    if let Ok(queue) = IMPORT_QUEUE.try_with(imports::ImportQueue::clone) {
        return queue;
    }
    imports::ImportQueue {
        client: aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::config::Builder::from(&shared::service::app::load_sdk_config().await)
                .interceptor(crate::judge::Judged)
                .build(),
        ),
        url: shared_import_queue().await.to_owned(),
    }
}

/// The URL of the import queue the route table's `create-import` sends to: one per test process,
/// never consumed (the import tests make their own, with a consumer).
async fn shared_import_queue() -> &'static str {
    static QUEUE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    QUEUE
        .get_or_init(|| async { crate::import_queue::ImportQueues::create(5, 30).await.url })
        .await
}

/// The state `offboard-tenant` takes (routes.yaml: `state: tenants::Lanes`): lanes stepped by the
/// call itself, as in a local run with no lane queue. The lane queue's own tests
/// (`tests/tests/all/lanes.rs`) give the route and the driver a queue.
pub(crate) async fn lanes() -> tenants::Lanes {
    tenants::Lanes::in_process()
}
