//! events/<bin>.json: each route's sample request, as the event API Gateway hands its function.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::routes::{Caller, Route};

/// The JWT claims API Gateway's authorizer passes for the sample caller: a tenant user's ID token,
/// or an operator's access token (README, "Claims").
fn claims(
    caller: Caller,
) -> (
    BTreeMap<&'static str, &'static str>,
    Option<Vec<&'static str>>,
) {
    let mut claims = BTreeMap::from([
        ("sub", "5f1c2a9e-1111-4c6a-9d7e-0a1b2c3d4e5f"),
        (
            "iss",
            "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_EXAMPLE",
        ),
        ("custom:tenantId", "acme"),
        ("email", "dev@acme.example"),
        ("exp", "1795158000"),
        ("iat", "1795154400"),
    ]);
    if caller == Caller::Operator {
        claims.extend([
            ("token_use", "access"),
            ("scope", "pooltable/admin"),
            ("cognito:groups", "[platform-admin]"),
            ("client_id", "3n4b5urk1ft4fl3mg5e62d9ado"),
        ]);
        (claims, Some(vec!["pooltable/admin"]))
    } else {
        claims.extend([("token_use", "id"), ("aud", "3n4b5urk1ft4fl3mg5e62d9ado")]);
        (claims, None)
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    version: &'static str,
    route_key: String,
    raw_path: String,
    raw_query_string: String,
    headers: BTreeMap<String, String>,
    request_context: RequestContext,
    is_base64_encoded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    path_parameters: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    query_string_parameters: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestContext {
    account_id: &'static str,
    api_id: &'static str,
    authorizer: BTreeMap<&'static str, Jwt>,
    domain_name: &'static str,
    domain_prefix: &'static str,
    http: Http,
    request_id: &'static str,
    route_key: String,
    stage: &'static str,
    time: &'static str,
    time_epoch: u64,
}

#[derive(Serialize)]
struct Jwt {
    claims: BTreeMap<&'static str, &'static str>,
    scopes: Option<Vec<&'static str>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Http {
    method: String,
    path: String,
    protocol: &'static str,
    source_ip: &'static str,
    user_agent: &'static str,
}

fn strings(m: &serde_yaml::Mapping) -> Vec<(String, String)> {
    m.iter()
        .map(|(k, v)| {
            let text = |v: &serde_yaml::Value| match v {
                serde_yaml::Value::String(s) => s.clone(),
                other => serde_yaml::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            };
            (text(k), text(v))
        })
        .collect()
}

/// A query string's component, percent-encoded as API Gateway's rawQueryString is.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `events/<bin>.json`: the API Gateway (HTTP API, v2) event of the route's sample request.
pub(super) fn event(r: &Route) -> String {
    const HOST: &str = "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com";
    let sample = &r.function.sample;
    let path_values: BTreeMap<String, String> = strings(&sample.path).into_iter().collect();
    let raw_path = format!(
        "/dev{}",
        r.path
            .split('/')
            .map(
                |seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    Some(p) => path_values.get(p).cloned().unwrap_or_default(),
                    None => seg.to_owned(),
                }
            )
            .collect::<Vec<_>>()
            .join("/")
    );
    let query = strings(&sample.query);
    let raw_query = query
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let mut headers = BTreeMap::from([
        ("accept".to_owned(), "application/json".to_owned()),
        ("authorization".to_owned(), "Bearer eyJraWQiOiJleGFtcGxlIiwiYWxnIjoiUlMyNTYifQ.eyJzdWIiOiJ1c2VyLTEiLCJjdXN0b206dGVuYW50SWQiOiJhY21lIn0.c2lnbmF0dXJl".to_owned()),
        ("host".to_owned(), HOST.to_owned()),
        ("user-agent".to_owned(), "curl/8.5.0".to_owned()),
        ("x-amzn-trace-id".to_owned(), "Root=1-673ec2a0-0123456789abcdef01234567".to_owned()),
        ("x-forwarded-for".to_owned(), "198.51.100.7".to_owned()),
        ("x-forwarded-port".to_owned(), "443".to_owned()),
        ("x-forwarded-proto".to_owned(), "https".to_owned()),
    ]);
    if let Some(body) = &sample.body {
        headers.insert("content-length".into(), body.len().to_string());
        headers.insert("content-type".into(), "application/json".into());
    }
    headers.extend(strings(&sample.headers));
    let route_key = format!("{} {}", r.method, r.path);
    let (claims, scopes) = claims(r.function.caller);
    let event = Event {
        version: "2.0",
        route_key: route_key.clone(),
        raw_path: raw_path.clone(),
        raw_query_string: raw_query,
        headers,
        request_context: RequestContext {
            account_id: "123456789012",
            api_id: "a1b2c3d4e5",
            authorizer: BTreeMap::from([("jwt", Jwt { claims, scopes })]),
            domain_name: HOST,
            domain_prefix: "a1b2c3d4e5",
            http: Http {
                method: r.method.to_owned(),
                path: raw_path,
                protocol: "HTTP/1.1",
                source_ip: "198.51.100.7",
                user_agent: "curl/8.5.0",
            },
            request_id: "Bq3hZjH2oAMEbXw=",
            route_key,
            stage: "dev",
            time: "20/Nov/2026:06:00:00 +0000",
            time_epoch: 1_795_154_400_000,
        },
        is_base64_encoded: false,
        path_parameters: (!path_values.is_empty()).then_some(path_values),
        query_string_parameters: (!query.is_empty()).then(|| query.into_iter().collect()),
        body: sample.body.clone(),
    };
    let mut text = serde_json::to_string_pretty(&event).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_components_are_percent_encoded() {
        assert_eq!(encode("ada@acme.example"), "ada%40acme.example");
    }
}
