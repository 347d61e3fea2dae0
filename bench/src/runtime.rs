//! Requests served as Lambda serves them: release function binaries spawned on a local Runtime
//! API, the API Gateway events they are sent, and what their answers and processes tell.

use std::process::Stdio;

use integration::process::{built_bin, start_function};
use serde_json::{json, Value};

pub(crate) fn status_of(r: &lambda_http::Response<lambda_http::Body>) -> u16 {
    r.status().as_u16()
}

pub(crate) fn body_json(r: &lambda_http::Response<lambda_http::Body>) -> Value {
    match r.body() {
        lambda_http::Body::Text(t) => serde_json::from_str(t).unwrap(),
        _ => panic!("a text body"),
    }
}

pub(crate) fn spawn_function(
    bin: &str,
    table: &str,
    api: &str,
    dynamodb_url: &str,
) -> tokio::process::Child {
    let mut env = integration::runtime_api::function_env(table, api, bin);
    env.push(("AWS_ENDPOINT_URL_DYNAMODB".into(), dynamodb_url.into()));
    let bin_path = built_bin("release", bin);
    start_function(&bin_path, env, Stdio::null(), "scripts/bench.sh builds it")
}

pub(crate) fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub(crate) fn api_event(
    method: &str,
    route: &str,
    params: &[(&str, &str)],
    query: &[(&str, &str)],
    tenant: &str,
) -> String {
    let raw = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../events/get-product.json"
    ))
    .unwrap();
    let mut ev: Value = serde_json::from_str(&raw).unwrap();
    let mut path = route.to_owned();
    for (k, v) in params {
        path = path.replace(&format!("{{{k}}}"), v);
    }
    ev["routeKey"] = json!(format!("{method} {route}"));
    ev["rawPath"] = json!(path);
    ev["requestContext"]["http"]["method"] = json!(method);
    ev["requestContext"]["http"]["path"] = json!(path);
    ev["requestContext"]["authorizer"]["jwt"]["claims"]["custom:tenantId"] = json!(tenant);
    ev["pathParameters"] = json!(params
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect::<serde_json::Map<_, _>>());
    ev["queryStringParameters"] = json!(query
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect::<serde_json::Map<_, _>>());
    ev["rawQueryString"] = json!(query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&"));
    ev.to_string()
}
