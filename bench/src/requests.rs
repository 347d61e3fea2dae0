//! The API requests the figures send: their events, and the requests timed as the Lambda
//! runtime serves them (`respond_admitted`: the tier quota decided first, then the handler beside
//! the usage meter's and the quota counter's writes).

use integration::{event, Auth};
use lambda_http::{Body, Request, Response};
use serde_json::Value;
use shared::{ApiError, App};

use crate::report::time_ms;
use crate::runtime::status_of;

/// `GET /products/{id}` of `auth`'s tenant.
pub(crate) fn get_product(auth: &Auth, id: &str) -> Request {
    event(
        "GET",
        "/products/{productId}",
        &[("productId", id)],
        &[],
        None,
        auth,
    )
}

/// `PUT /products/{id}` of `auth`'s tenant, with `body`.
pub(crate) fn put_product(auth: &Auth, id: &str, body: Value) -> Request {
    event(
        "PUT",
        "/products/{productId}",
        &[("productId", id)],
        &[],
        Some(body),
        auth,
    )
}

/// `GET /sessions/{session_id}` of `auth`'s tenant.
pub(crate) fn get_session(auth: &Auth, session_id: &str) -> Request {
    event(
        "GET",
        "/sessions/{sessionId}",
        &[("sessionId", session_id)],
        &[],
        None,
        auth,
    )
}

/// [`get_product`], admitted: its time (ms) and status.
pub(crate) async fn get_product_admitted(app: &App, auth: &Auth, id: &str) -> (f64, u16) {
    admitted(app, "get-product", get_product(auth, id), |req| {
        products::get_product::handle(app, req)
    })
    .await
}

/// [`put_product`], admitted: its time (ms) and status.
pub(crate) async fn put_product_admitted(
    app: &App,
    auth: &Auth,
    id: &str,
    body: Value,
) -> (f64, u16) {
    admitted(app, "put-product", put_product(auth, id, body), |req| {
        products::put_product::handle(app, req)
    })
    .await
}

/// The first page of `limit` of `auth`'s tenant's products (`GET /products`), admitted: its time
/// (ms) and status.
pub(crate) async fn list_products_admitted(app: &App, auth: &Auth, limit: usize) -> (f64, u16) {
    let limit = limit.to_string();
    let req = event("GET", "/products", &[], &[("limit", &limit)], None, auth);
    admitted(app, "query-tenant-products", req, |req| {
        products::query_tenant_products::handle(app, req)
    })
    .await
}

/// `GET /orders/{id}` of `auth`'s tenant (its header and line items), admitted: its time (ms) and
/// status.
pub(crate) async fn get_order_admitted(app: &App, auth: &Auth, id: &str) -> (f64, u16) {
    let req = event(
        "GET",
        "/orders/{orderId}",
        &[("orderId", id)],
        &[],
        None,
        auth,
    );
    admitted(app, "get-order", req, |req| {
        users::get_order::handle(app, req)
    })
    .await
}

/// `PUT /users/{id}` of `auth`'s tenant with `body` (its profile and its email's item), admitted:
/// its time (ms) and status.
pub(crate) async fn put_user_admitted(app: &App, auth: &Auth, id: &str, body: Value) -> (f64, u16) {
    let req = event(
        "PUT",
        "/users/{userId}",
        &[("userId", id)],
        &[],
        Some(body),
        auth,
    );
    admitted(app, "put-user", req, |req| {
        users::put_user::handle(app, req)
    })
    .await
}

/// `POST /users/{user}/orders` of `auth`'s tenant with `body`, admitted: its time (ms) and status.
pub(crate) async fn create_order_admitted(
    app: &App,
    auth: &Auth,
    user: &str,
    body: Value,
) -> (f64, u16) {
    let req = event(
        "POST",
        "/users/{userId}/orders",
        &[("userId", user)],
        &[],
        Some(body),
        auth,
    );
    admitted(app, "create-order", req, |req| {
        users::create_order::handle(app, req)
    })
    .await
}

/// `req` served by route `bin`'s `handler` as the runtime serves it, timed. Boxed before the clock
/// starts: the runtime's future around a handler's is large.
async fn admitted<F, Fut>(app: &App, bin: &str, req: Request, handler: F) -> (f64, u16)
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Result<Response<Body>, ApiError>>,
{
    let (ms, r) = time_ms(Box::pin(shared::service::runtime::respond_admitted(
        app,
        bin,
        "bench".into(),
        req,
        handler,
    )))
    .await;
    (ms, status_of(&r))
}
