//! The template's Cognito setup (UserPool=create), end to end on a local Cognito that issues real
//! tokens and runs the pre token generation trigger: cognito-local (scripts/cognito-local.cjs)
//! invokes the `pre-token-generation` binary over the Lambda Invoke API, and
//! scripts/cognito_tokens.py signs in a tenant user, an operator (a `platform-admin` member) by
//! password and through an OAuth flow asking for `pooltable/admin`, and users who must be refused,
//! among them a tenant user asking for that scope through an app client allowed it. Each ID and access token
//! then goes through what the HTTP API's JWT authorizer does (signature against the pool's JWKS,
//! issuer, audience, expiry, the route's `AuthorizationScopes` from template.yaml), and through what
//! the REST API's Cognito authorizer does (per-tenant mode: no audience, an ID token for a method
//! naming no scopes, an access token holding one of them otherwise), and, when it passes, to the
//! function with the claims the authorizer passes on. README ("Operating pooltable":
//! Cognito) states the same table.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use integration::process::{built_bin, json_output, start_function};
use integration::routes::params;
use integration::runtime_api::{function_env, RuntimeApi};
use integration::{onboard, unique, Auth, Harness};
use serde_json::{json, Value};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn b64(part: &str) -> Vec<u8> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .expect("base64url")
}

/// Which gateway's authorizer: the HTTP API's JWT authorizer (TenantIsolation=pooled) or the REST
/// API's Cognito user pool authorizer (per-tenant).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Gateway {
    Http,
    Rest,
}

/// What the API's authorizer does with a bearer token, as AWS documents it.
struct JwtAuthorizer {
    issuer: String,
    audience: Vec<String>,
    /// RSA public keys by `kid`: (modulus, exponent).
    keys: HashMap<String, (Vec<u8>, Vec<u8>)>,
}

/// The authorizer's verdict: refused at the gateway with a status, or the claims it passes on.
#[derive(Debug)]
enum Verdict {
    Refused(u16),
    Passed(Auth),
}

impl JwtAuthorizer {
    fn new(setup: &Value) -> Self {
        let keys = setup["jwks"]["keys"]
            .as_array()
            .expect("a JWKS")
            .iter()
            .map(|k| {
                let field = |f: &str| b64(k[f].as_str().unwrap());
                (
                    k["kid"].as_str().unwrap().to_owned(),
                    (field("n"), field("e")),
                )
            })
            .collect();
        Self {
            issuer: setup["issuer"].as_str().unwrap().to_owned(),
            audience: serde_json::from_value(setup["audience"].clone()).unwrap(),
            keys,
        }
    }

    fn authorize(&self, gateway: Gateway, token: &str, route_scopes: &[String]) -> Verdict {
        let parts: Vec<&str> = token.split('.').collect();
        let [header, payload, signature] = parts[..] else {
            return Verdict::Refused(401);
        };
        let header: Value = serde_json::from_slice(&b64(header)).unwrap_or_default();
        let claims: Value = serde_json::from_slice(&b64(payload)).unwrap_or_default();
        // The signature, with the issuer's key of that kid (RS256 only).
        let Some((n, e)) = header["kid"].as_str().and_then(|kid| self.keys.get(kid)) else {
            return Verdict::Refused(401);
        };
        let signed = format!("{header_b64}.{payload}", header_b64 = parts[0]);
        let key = ring::signature::RsaPublicKeyComponents { n, e };
        if header["alg"] != "RS256"
            || key
                .verify(
                    &ring::signature::RSA_PKCS1_2048_8192_SHA256,
                    signed.as_bytes(),
                    &b64(signature),
                )
                .is_err()
        {
            return Verdict::Refused(401);
        }
        let now = integration::real_now_millis() / 1000;
        let audience = match claims["token_use"].as_str() {
            Some("id") => &claims["aud"],
            Some("access") => &claims["client_id"],
            _ => &Value::Null,
        };
        // The REST API's authorizer trusts every app client of the pool: it checks no audience.
        if claims["iss"] != self.issuer.as_str()
            || claims["exp"].as_u64().is_none_or(|exp| exp <= now)
            || (gateway == Gateway::Http && !self.audience.iter().any(|a| audience == a.as_str()))
        {
            return Verdict::Refused(401);
        }
        // The REST API's takes a method with no scopes as asking for an ID token, and one with
        // scopes for an access token holding one of them; anything else is 401.
        if gateway == Gateway::Rest {
            let wanted = if route_scopes.is_empty() {
                "id"
            } else {
                "access"
            };
            let held = claims["scope"].as_str().unwrap_or_default();
            if claims["token_use"] != wanted
                || (!route_scopes.is_empty()
                    && !held
                        .split_whitespace()
                        .any(|s| route_scopes.iter().any(|r| r == s)))
            {
                return Verdict::Refused(401);
            }
        }
        let scopes: Option<Vec<String>> = (claims["token_use"] == "access").then(|| {
            claims["scope"]
                .as_str()
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        });
        // A route with AuthorizationScopes admits a token holding at least one of them.
        if !route_scopes.is_empty() && !scopes.iter().flatten().any(|s| route_scopes.contains(s)) {
            return Verdict::Refused(403);
        }
        // HTTP API passes every claim as a string; an array as "[a b]".
        let flattened: serde_json::Map<String, Value> = claims
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Array(items) => format!(
                        "[{}]",
                        items
                            .iter()
                            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                            .collect::<Vec<_>>()
                            .join(" ")
                    ),
                    other => other.to_string(),
                };
                (k.clone(), Value::String(text))
            })
            .collect();
        Verdict::Passed(Auth::Verified {
            claims: Value::Object(flattened),
            scopes: json!(scopes),
        })
    }
}

/// The route's scopes in template.yaml: its HttpApi event's `AuthorizationScopes`, or its method's
/// `TenantCognito` scopes in the REST API's definition.
fn gateway_scopes(gateway: Gateway, method: &str, path: &str) -> Vec<String> {
    let template = integration::template::load();
    if gateway == Gateway::Rest {
        let definition = &template["Resources"]["TenantRestApi"]["Properties"]["DefinitionBody"];
        let security = &definition["paths"][path][method.to_ascii_lowercase().as_str()]["security"];
        return security[0]["TenantCognito"]
            .as_sequence()
            .unwrap_or_else(|| panic!("the REST API has no security for {method} {path}"))
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
    }
    for (_, resource) in template["Resources"].as_mapping().unwrap() {
        let Some(events) = resource["Properties"]["Events"].as_mapping() else {
            continue;
        };
        for (_, event) in events {
            let p = &event["Properties"];
            if event["Type"] == "HttpApi" && p["Method"] == method && p["Path"] == path {
                return p["Auth"]["AuthorizationScopes"]
                    .as_sequence()
                    .map(|s| s.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
                    .unwrap_or_default();
            }
        }
    }
    panic!("template.yaml has no HttpApi route {method} {path}");
}

/// The trigger binary, as a Lambda process on a Runtime API whose Invoke API Cognito calls.
async fn start_trigger() -> (std::sync::Arc<RuntimeApi>, tokio::process::Child) {
    let api = RuntimeApi::start().await;
    let process = start_function(
        &built_bin("debug", "pre-token-generation"),
        function_env("unused", &api.addr, "pre-token-generation"),
        Stdio::null(),
        "scripts/test.sh builds it: cargo build -p tenants --bin pre-token-generation",
    );
    (api, process)
}

/// cognito-local on a free port, its trigger pointed at `trigger_api`.
async fn start_cognito(trigger_api: &str) -> (String, tokio::process::Child) {
    let modules = std::env::var("COGNITO_LOCAL_MODULES").expect(
        "COGNITO_LOCAL_MODULES is not set: run the tests with ./scripts/test.sh, which installs cognito-local",
    );
    let dir = std::env::temp_dir().join(unique("cognito-local"));
    std::fs::create_dir_all(dir.join(".cognito")).unwrap();
    let config = json!({
        "TriggerFunctions": {"PreTokenGeneration": "pre-token-generation"},
        "LambdaClient": {
            "endpoint": format!("http://{trigger_api}"),
            "region": "us-east-1",
            "credentials": {"accessKeyId": "local", "secretAccessKey": "local"}
        },
        "UserPoolDefaults": {"UsernameAttributes": []}
    });
    std::fs::write(dir.join(".cognito/config.json"), config.to_string()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = std::fs::File::create(dir.join("cognito-local.log")).unwrap();
    let process = tokio::process::Command::new("node")
        .arg(repo().join("scripts/cognito-local.cjs"))
        .current_dir(&dir)
        .env("COGNITO_LOCAL_MODULES", modules)
        .env("PORT", port.to_string())
        .env("HOST", "127.0.0.1")
        .stdout(Stdio::from(log))
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs cognito-local");
    let endpoint = format!("127.0.0.1:{port}");
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(&endpoint).await.is_ok() {
            return (format!("http://{endpoint}"), process);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("cognito-local did not start: see {}", dir.display());
}

/// The pool, its users and their tokens (scripts/cognito_tokens.py).
async fn sign_everyone_in(endpoint: &str) -> Value {
    json_output(
        tokio::process::Command::new(repo().join(".tools/venv/bin/python"))
            .arg(repo().join("scripts/cognito_tokens.py"))
            .args([endpoint, "https://localhost/callback"]),
        "scripts/cognito_tokens.py (in .tools/venv, which scripts/test.sh makes)",
    )
    .await
}

fn payload(token: &str) -> Value {
    serde_json::from_slice(&b64(token.split('.').nth(1).unwrap())).unwrap()
}

#[tokio::test]
async fn cognito_tokens_are_accepted_or_refused_as_readme_states() {
    // GIVEN the template's user pool on a local Cognito whose trigger is pre-token-generation, and
    // the tenants its users belong to
    let (trigger_api, _trigger) = start_trigger().await;
    let (endpoint, _cognito) = start_cognito(&trigger_api.addr).await;
    let setup = sign_everyone_in(&endpoint).await;
    let authorizer = JwtAuthorizer::new(&setup);
    let h = Harness::new().await;
    for tenant in ["acme", "ops", "globex"] {
        onboard(&h, tenant, 4).await;
    }
    let tokens = &setup["tokens"];

    // THEN the trigger put the tenant into every access token, the operator scope into a
    // platform-admin's, and took it from a tenant user whose app client granted it
    let access = |who: &str| payload(tokens[who]["access"].as_str().unwrap());
    assert_eq!(access("tenant_user")["custom:tenantId"], "acme");
    // (and the same tenant under the name the API's access log reads)
    assert_eq!(access("tenant_user")["tenantId"], "acme");
    assert_eq!(access("operator_by_group")["custom:tenantId"], "ops");
    assert!(access("operator_by_group")["scope"]
        .as_str()
        .unwrap()
        .contains("pooltable/admin"));
    for who in ["tenant_user", "tenant_user_asking_admin"] {
        assert!(
            !access(who)["scope"]
                .as_str()
                .unwrap()
                .contains("pooltable/admin"),
            "{who}: {}",
            access(who)
        );
    }
    assert!(access("no_tenant").get("custom:tenantId").is_none());

    // AND `pooltable login` gets an operator the same access token from the same pool, and a wrong
    // password nothing (exit 3) (run on tokio's process API: the trigger the sign-in invokes is
    // served by this test's runtime)
    let login = |password: &'static str| {
        tokio::process::Command::new(built_bin("debug", "pooltable"))
            .args([
                "login",
                "--client-id",
                setup["audience"][0].as_str().unwrap(),
                "--username",
                "greg",
            ])
            .env("POOLTABLE_COGNITO_ENDPOINT", &endpoint)
            .env("POOLTABLE_PASSWORD", password)
            .output()
    };
    let signed_in = login("Correct-Horse-9")
        .await
        .expect("run target/debug/pooltable (scripts/test.sh builds it)");
    assert!(
        signed_in.status.success(),
        "{}",
        String::from_utf8_lossy(&signed_in.stderr)
    );
    let token = String::from_utf8(signed_in.stdout).unwrap();
    assert_eq!(payload(token.trim())["custom:tenantId"], "ops");
    assert!(payload(token.trim())["scope"]
        .as_str()
        .unwrap()
        .contains("pooltable/admin"));
    let refused = login("not-the-password").await.expect("run pooltable");
    assert_eq!(
        refused.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // WHEN each token calls a tenant route, an operator read and an operator write
    let routes = [
        (
            "get-product",
            "GET",
            "/products/{productId}",
            params(&[("productId", "p-1")]),
            None,
        ),
        (
            "get-tenant",
            "GET",
            "/tenants/{tenantId}",
            params(&[("tenantId", "globex")]),
            None,
        ),
        ("onboard-tenant", "POST", "/tenants", params(&[]), Some(())),
    ];
    let mut answers: Vec<(String, Vec<u16>)> = Vec::new();
    for gateway in [Gateway::Http, Gateway::Rest] {
        for who in [
            "tenant_user",
            "tenant_user_asking_admin",
            "operator_by_group",
            "operator_by_scope",
            "self_made_admin",
            "no_tenant",
            "other_client",
            "other_pool",
        ] {
            for kind in ["id", "access"] {
                let token = tokens[who][kind].as_str().unwrap();
                let mut statuses = Vec::new();
                for (bin, method, path, params, body) in &routes {
                    let scopes = gateway_scopes(gateway, method, path);
                    let status = match authorizer.authorize(gateway, token, &scopes) {
                        Verdict::Refused(status) => status,
                        Verdict::Passed(auth) => {
                            let body =
                                body.map(|_| json!({"tenantId": unique("new"), "tier": "basic"}));
                            h.caller(&auth).call(bin, params, body).await.status
                        }
                    };
                    statuses.push(status);
                }
                answers.push((format!("{gateway:?} {who} {kind}"), statuses));
            }
        }
    }

    // THEN: 404 is a tenant route that ran (no such product); 401 and 403 are refusals, at the
    // gateway or by the function
    let expected: Vec<(String, Vec<u16>)> = [
        // tenant route, GET /tenants/{other}, POST /tenants
        ("tenant_user id", [404, 403, 403]),
        ("tenant_user access", [404, 403, 403]),
        ("tenant_user_asking_admin id", [404, 403, 403]),
        ("tenant_user_asking_admin access", [404, 403, 403]),
        ("operator_by_group id", [404, 200, 403]),
        ("operator_by_group access", [404, 200, 201]),
        ("operator_by_scope id", [404, 200, 403]),
        ("operator_by_scope access", [404, 200, 201]),
        ("self_made_admin id", [404, 403, 403]),
        ("self_made_admin access", [404, 403, 403]),
        ("no_tenant id", [401, 401, 403]),
        ("no_tenant access", [401, 401, 403]),
        ("other_client id", [401, 401, 401]),
        ("other_client access", [401, 401, 401]),
        ("other_pool id", [401, 401, 401]),
        ("other_pool access", [401, 401, 401]),
    ]
    .into_iter()
    .map(|(who, s)| (format!("Http {who}"), s.to_vec()))
    .chain(
        // The REST API (TenantIsolation=per-tenant): the access token only (before the mend its
        // tenant routes named no scopes, took the ID token only, and refused every access token
        // with 401), from any app client of the pool
        [
            ("tenant_user id", [401, 401, 401]),
            ("tenant_user access", [404, 403, 401]),
            ("tenant_user_asking_admin id", [401, 401, 401]),
            ("tenant_user_asking_admin access", [404, 403, 401]),
            ("operator_by_group id", [401, 401, 401]),
            ("operator_by_group access", [404, 200, 201]),
            ("operator_by_scope id", [401, 401, 401]),
            ("operator_by_scope access", [404, 200, 201]),
            ("self_made_admin id", [401, 401, 401]),
            ("self_made_admin access", [404, 403, 401]),
            ("no_tenant id", [401, 401, 401]),
            ("no_tenant access", [401, 401, 401]),
            ("other_client id", [401, 401, 401]),
            ("other_client access", [404, 403, 401]),
            ("other_pool id", [401, 401, 401]),
            ("other_pool access", [401, 401, 401]),
        ]
        .into_iter()
        .map(|(who, s)| (format!("Rest {who}"), s.to_vec())),
    )
    .collect();
    assert_eq!(answers, expected);
}
