//! Requests as API Gateway sends them ([`event`], [`Auth`]) and their answers ([`Resp`]).

use lambda_http::{Body, Request, Response};
use serde_json::{json, Value};

use shared::ApiError;

/// Who a test request claims to be.
#[derive(Debug, Clone)]
pub enum Auth {
    Tenant(String),
    /// A tenant user who wrote `custom:role = <role>` into their own profile: a writable custom
    /// attribute, which never makes an operator.
    TenantWithRole(String, String),
    /// An operator of tenant `t`: the access token carries the `pooltable/admin` scope, which the
    /// HTTP API's JWT authorizer verified (`requestContext.authorizer.jwt.scopes`).
    Operator(String),
    /// An operator by group: `cognito:groups` holds `platform-admin` (as HTTP API flattens it).
    OperatorByGroup(String),
    /// An authorizer block with no tenant claim.
    NoTenant,
    /// What an HTTP API's JWT authorizer passes for a token it verified: its claims (each value a
    /// string, arrays flattened to `"[a b]"`) and, for an access token, its scopes.
    Verified {
        claims: Value,
        scopes: Value,
    },
}

/// What an API Gateway event is made into: the JSON the Lambda service delivers (for a function
/// binary on a Runtime API), or the request `lambda_http` makes of it (for a handler).
pub trait FromEvent {
    fn from_event(json: Value) -> Self;
}

impl FromEvent for Value {
    fn from_event(json: Value) -> Self {
        json
    }
}

impl FromEvent for Request {
    fn from_event(json: Value) -> Self {
        lambda_http::request::from_str(&json.to_string()).expect("a valid API Gateway v2 event")
    }
}

/// An API Gateway HTTP API (v2) event, as API Gateway sends it after the JWT authorizer ran.
pub fn event<T: FromEvent>(
    method: &str,
    route: &str,
    path_params: &[(&str, &str)],
    query: &[(&str, &str)],
    body: Option<Value>,
    auth: &Auth,
) -> T {
    let mut path = route.to_owned();
    for (k, v) in path_params {
        path = path.replace(&format!("{{{k}}}"), v);
    }
    let raw_query = query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let claims = match auth {
        Auth::Tenant(t) => json!({"sub": "user-1", "custom:tenantId": t}),
        Auth::TenantWithRole(t, r) => {
            json!({"sub": "user-1", "custom:tenantId": t, "custom:role": r})
        }
        Auth::Operator(t) => {
            json!({"sub": "user-1", "custom:tenantId": t, "scope": "pooltable/admin"})
        }
        Auth::OperatorByGroup(t) => {
            json!({"sub": "user-1", "custom:tenantId": t, "cognito:groups": "[platform-admin]"})
        }
        Auth::NoTenant => json!({"sub": "user-1"}),
        Auth::Verified { claims, .. } => claims.clone(),
    };
    let scopes = match auth {
        Auth::Operator(_) => json!(["pooltable/admin"]),
        Auth::Verified { scopes, .. } => scopes.clone(),
        _ => Value::Null,
    };
    T::from_event(json!({
        "version": "2.0",
        "routeKey": format!("{method} {route}"),
        "rawPath": path,
        "rawQueryString": raw_query,
        "headers": {"content-type": "application/json", "host": "api.example.com"},
        "queryStringParameters": query.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "pathParameters": path_params.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "requestContext": {
            "accountId": "123456789012", "apiId": "api", "domainName": "api.example.com",
            "domainPrefix": "api", "requestId": "req-1", "routeKey": format!("{method} {route}"),
            "stage": "$default", "time": "20/Nov/2026:06:00:00 +0000", "timeEpoch": 1795154400000u64,
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "tests"},
            "authorizer": {"jwt": {"claims": claims, "scopes": scopes}}
        },
        "body": body.map(|b| b.to_string()),
        "isBase64Encoded": false
    }))
}

/// Every response goes out as text in Lambda's response, as `lambda_http`'s runtime converts it (by
/// its content type): one sent as binary is base64 there, 4/3 its size (past Lambda's 6 MB for a
/// page cut at 5 MB), and a REST API with no binary media types hands the client the base64.
fn assert_sent_as_text(r: &Response<Body>) {
    let body = match r.body() {
        Body::Text(t) => Body::Text(t.clone()),
        Body::Binary(b) => Body::Binary(b.clone()),
        _ => return,
    };
    let mut copy = Response::new(body);
    *copy.headers_mut() = r.headers().clone();
    let carried = futures::executor::block_on(lambda_http::IntoResponse::into_response(copy));
    assert!(
        matches!(carried.body(), Body::Text(_)),
        "a {} response of content type {:?} goes out in base64",
        r.status(),
        r.headers().get("content-type")
    );
}

/// A response, decoded for assertions.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub content_type: String,
    pub retry_after: Option<String>,
    /// The `Link` header (export pages).
    pub link: Option<String>,
    /// The `Location` header (an accepted import).
    pub location: Option<String>,
    /// Whether `Idempotent-Replayed: true` was sent.
    pub replayed: bool,
    pub body: Value,
    /// The body as sent (NDJSON pages are not one JSON value).
    pub text: String,
}

pub fn resp(result: Result<Response<Body>, ApiError>) -> Resp {
    let r = result.unwrap_or_else(ApiError::into_response);
    assert_sent_as_text(&r);
    let content_type = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let retry_after = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let header = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let link = header("link");
    let location = header("location");
    let replayed = header("idempotent-replayed").as_deref() == Some("true");
    let text = match r.body() {
        Body::Text(t) => t.clone(),
        Body::Binary(b) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    };
    let body = match r.body() {
        Body::Text(t) => serde_json::from_str(t).unwrap_or(Value::String(t.clone())),
        Body::Binary(b) => serde_json::from_slice(b).unwrap_or(Value::Null),
        _ => Value::Null,
    };
    Resp {
        status: r.status().as_u16(),
        content_type,
        retry_after,
        link,
        location,
        replayed,
        body,
        text,
    }
}

impl Resp {
    /// The `field` of each item of a list page's `items`, in order.
    pub fn ids(&self, field: &str) -> Vec<String> {
        self.body["items"]
            .as_array()
            .expect("a list page")
            .iter()
            .map(|item| item[field].as_str().expect("an id").to_owned())
            .collect()
    }

    /// The cursor of the next page, from a `Link: <…&cursor=…>; rel="next"` header (an export
    /// page); None on the last page.
    pub fn next_cursor(&self) -> Option<String> {
        self.link.as_deref().map(|link| {
            let from = link.find("cursor=").expect("a cursor in the Link header") + "cursor=".len();
            let to = from + link[from..].find('>').expect("a Link header's <url>");
            link[from..to].to_owned()
        })
    }

    /// Asserts a problem+json of `status` whose `detail` holds `words`, and returns self.
    pub fn assert_problem_naming(&self, status: u16, words: &str) -> &Self {
        self.assert_problem(status);
        let detail = self.body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(words),
            "not naming {words:?}: {}",
            self.body
        );
        self
    }

    /// Asserts a 4xx problem+json and returns self.
    pub fn assert_problem(&self, status: u16) -> &Self {
        assert_eq!(self.status, status, "body: {}", self.body);
        assert_eq!(self.content_type, "application/problem+json");
        assert_eq!(self.body["status"], status);
        self
    }
}
