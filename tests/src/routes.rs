//! Every route, callable by name: the attack matrix and the load test drive the real handlers through
//! this table. Routes come from routes.yaml and handlers from the dispatch generated from it
//! (`tests/src/dispatch.rs`), so a route cannot be forgotten.

use std::collections::BTreeMap;

use lambda_http::Request;
use serde_json::Value;
use shared::App;

use crate::dispatch::dispatch;
use crate::{event, resp, Auth, Resp};

/// template.yaml, parsed once per test process: every routed call reads it, and parsing 2,600 lines
/// of YAML in a debug build costs tens of milliseconds, enough to starve a burst test's runtime.
fn template() -> &'static serde_yaml::Value {
    static TEMPLATE: std::sync::OnceLock<serde_yaml::Value> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    })
}

/// `bin → (METHOD, /route/{template})` for every route in routes.yaml.
pub fn api_routes() -> BTreeMap<String, (String, String)> {
    cached_routes().clone()
}

/// The route table, routes.yaml, read once.
pub fn route_table() -> &'static devtools::routes::RouteTable {
    static TABLE: std::sync::OnceLock<devtools::routes::RouteTable> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        devtools::routes::RouteTable::load(&root).expect("routes.yaml")
    })
}

fn cached_routes() -> &'static BTreeMap<String, (String, String)> {
    static ROUTES: std::sync::OnceLock<BTreeMap<String, (String, String)>> =
        std::sync::OnceLock::new();
    ROUTES.get_or_init(|| {
        route_table()
            .routes()
            .map(|r| {
                (
                    r.function.bin.clone(),
                    (r.method.to_owned(), r.path.to_owned()),
                )
            })
            .collect()
    })
}

/// `bin → (METHOD, /route/{template})` for every function template.yaml serves behind the API.
pub fn template_routes() -> BTreeMap<String, (String, String)> {
    let mut routes = BTreeMap::new();
    for (_, r) in template()["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let api = &r["Properties"]["Events"]["Api"]["Properties"];
        if api.is_null() {
            // Not behind the API (the import consumer, on its queue).
            continue;
        }
        routes.insert(
            r["Metadata"]["BuildProperties"]["Binary"]
                .as_str()
                .unwrap()
                .to_owned(),
            (
                api["Method"].as_str().unwrap().to_owned(),
                api["Path"].as_str().unwrap().to_owned(),
            ),
        );
    }
    routes
}

/// The binary of every function in template.yaml, behind the API or not.
pub fn template_binaries() -> std::collections::BTreeSet<String> {
    template()["Resources"]
        .as_mapping()
        .unwrap()
        .values()
        .filter(|r| r["Type"].as_str() == Some("AWS::Serverless::Function"))
        .map(|r| {
            r["Metadata"]["BuildProperties"]["Binary"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// The path parameters of a route template, in order.
pub fn path_params(route: &str) -> Vec<String> {
    route
        .split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        .map(str::to_owned)
        .collect()
}

/// Path parameters by name, for [`call`].
pub fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Calls route `bin` with the given path parameters (by name), query, body and caller.
pub async fn call(
    app: &App,
    bin: &str,
    params: &BTreeMap<String, String>,
    query: &[(&str, &str)],
    body: Option<Value>,
    auth: &Auth,
) -> Resp {
    call_with_headers(app, bin, params, query, body, auth, &[]).await
}

/// [`call`], served the way the Lambda runtime serves it: the tier quota decided first
/// (`respond_admitted`), then the handler with usage metering.
pub async fn call_admitted(
    app: &App,
    bin: &str,
    params: &BTreeMap<String, String>,
    body: Option<Value>,
    auth: &Auth,
) -> Resp {
    call_admitted_with_query(app, bin, params, &[], body, auth).await
}

/// [`call_admitted`] with a query string.
pub async fn call_admitted_with_query(
    app: &App,
    bin: &str,
    params: &BTreeMap<String, String>,
    query: &[(&str, &str)],
    body: Option<Value>,
    auth: &Auth,
) -> Resp {
    let req = request(bin, params, query, body, auth, &[]);
    // Boxed: every handler's future, inside the runtime's, overflows a test thread's stack in debug.
    let response = Box::pin(shared::service::runtime::respond_admitted(
        app,
        bin,
        "req".into(),
        req,
        |req| Box::pin(dispatch(app, bin, req)),
    ))
    .await;
    resp(Ok(response))
}

/// `GET /products/p-0` for `tenant`, served as the runtime serves it (quota first): the cheapest
/// tenant request the quota and lifecycle tests send.
pub async fn get_product_admitted(app: &App, tenant: &str) -> Resp {
    call_admitted(
        app,
        "get-product",
        &params(&[("productId", "p-0")]),
        None,
        &Auth::Tenant(tenant.into()),
    )
    .await
}

/// How many of `answers` have `status`.
pub fn count_status(answers: &[Resp], status: u16) -> usize {
    answers.iter().filter(|r| r.status == status).count()
}

/// [`call`] with extra request headers.
pub async fn call_with_headers(
    app: &App,
    bin: &str,
    params: &BTreeMap<String, String>,
    query: &[(&str, &str)],
    body: Option<Value>,
    auth: &Auth,
    headers: &[(&str, &str)],
) -> Resp {
    let req = request(bin, params, query, body, auth, headers);
    // Boxed: the dispatch future is as large as the largest handler's, too much for a test thread's
    // stack inside a long test in debug.
    resp(Box::pin(dispatch(app, bin, req)).await)
}

/// The API Gateway event for route `bin`.
pub fn request(
    bin: &str,
    params: &BTreeMap<String, String>,
    query: &[(&str, &str)],
    body: Option<Value>,
    auth: &Auth,
    headers: &[(&str, &str)],
) -> Request {
    let (method, route) = cached_routes()
        .get(bin)
        .unwrap_or_else(|| panic!("{bin} is not a route in routes.yaml"));
    let names = path_params(route);
    let pp: Vec<(&str, &str)> = names
        .iter()
        .map(|p| {
            let v = params
                .get(p)
                .unwrap_or_else(|| panic!("{bin} needs path parameter {p}"));
            (p.as_str(), v.as_str())
        })
        .collect();
    let mut req = event(method, route, &pp, query, body, auth);
    for (name, value) in headers {
        req.headers_mut().insert(
            lambda_http::http::HeaderName::from_bytes(name.as_bytes()).expect("a header name"),
            lambda_http::http::HeaderValue::from_str(value).expect("a header value"),
        );
    }
    req
}
