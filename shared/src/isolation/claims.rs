//! Who is calling. The tenant comes only from authorizer claims in the request context, which API
//! Gateway fills after verifying the JWT; never from the path, the query or the body.
//!
//! Sources, first match wins:
//! - HTTP API (v2) JWT authorizer: `requestContext.authorizer.jwt.claims["custom:tenantId"]`
//! - REST API (v1) Cognito authorizer: `requestContext.authorizer.claims["custom:tenantId"]`
//! - Lambda authorizer context (v1 or v2): `tenantId`
//! - Local development only ([`AuthMode::UnsignedDevJwt`]): the payload of an unsigned JWT in the
//!   `Authorization` header, because `cargo lambda watch` sends no authorizer block.
//!
//! **Operators.** A caller is an operator only through something a user cannot write about
//! themselves: the OAuth scope `pooltable/admin` (granted to an app client, checked by the HTTP API's
//! `AuthorizationScopes` too) or membership of the `platform-admin` group (`cognito:groups`, which
//! only an administrator sets). A custom attribute such as `custom:role` is never enough: a Cognito
//! app client can write custom attributes by default, so it is not read at all.

use base64::Engine;
use lambda_http::request::RequestContext;
use lambda_http::{Request, RequestExt};
use serde_json::Value;

use crate::identity::ids::TenantId;

pub const TENANT_CLAIM: &str = "custom:tenantId";
pub const LAMBDA_AUTHORIZER_TENANT: &str = "tenantId";
/// The OAuth scope that makes a caller an operator.
pub const OPERATOR_SCOPE: &str = "pooltable/admin";
/// The identity-provider group that makes a caller an operator.
pub const OPERATOR_GROUP: &str = "platform-admin";
/// Space-separated scopes, in an access token's claims or a Lambda authorizer's context.
pub const SCOPE_CLAIM: &str = "scope";
pub const GROUPS_CLAIM: &str = "cognito:groups";
/// A Lambda authorizer's context field listing groups.
pub const LAMBDA_AUTHORIZER_GROUPS: &str = "groups";

/// Set to `1` only by the local run command. `template.yaml` never sets it, and a function started
/// inside AWS Lambda with it set refuses to start.
pub const DEV_AUTH_ENV: &str = "POOLTABLE_DEV_UNSIGNED_JWT";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Production: claims only from the API Gateway authorizer.
    Authorizer,
    /// Local development: also accept an unsigned JWT from the `Authorization` header.
    UnsignedDevJwt,
}

/// The verified caller of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub tenant: TenantId,
    /// Holds the `pooltable/admin` scope or is in the `platform-admin` group (see the module docs).
    pub operator: bool,
}

/// Raw claim values, before validation.
#[derive(Debug, Default, PartialEq, Eq)]
struct RawClaims {
    tenant: Option<String>,
    /// Every scope and group named anywhere the caller's token or authorizer put them.
    scopes: Vec<String>,
    groups: Vec<String>,
}

impl RawClaims {
    fn operator(&self) -> bool {
        self.scopes.iter().any(|s| s == OPERATOR_SCOPE)
            || self.groups.iter().any(|g| g == OPERATOR_GROUP)
    }
}

fn string_of(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_owned)
}

/// A list claim in whichever shape it arrives: a JSON array (a token's payload, a Cognito REST
/// authorizer), HTTP API's flattening of an array into `"[a b]"`, or a space- or comma-separated
/// string (`scope`, a Lambda authorizer's context).
fn list_of(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(s)) => list_in_string(s),
        _ => Vec::new(),
    }
}

fn list_in_string(s: &str) -> Vec<String> {
    s.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split([' ', ','])
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The claims of a token's payload (or a Cognito REST authorizer's `claims` object).
fn from_claims(claims: &Value) -> RawClaims {
    RawClaims {
        tenant: string_of(claims.get(TENANT_CLAIM)),
        scopes: list_of(claims.get(SCOPE_CLAIM)),
        groups: list_of(claims.get(GROUPS_CLAIM)),
    }
}

fn from_context(ctx: &RequestContext) -> RawClaims {
    match ctx {
        RequestContext::ApiGatewayV2(c) => {
            let Some(auth) = c.authorizer.as_ref() else {
                return RawClaims::default();
            };
            if let Some(jwt) = auth.jwt.as_ref() {
                if let Some(tenant) = jwt.claims.get(TENANT_CLAIM) {
                    let claim = |name| jwt.claims.get(name).map(|v| list_in_string(v));
                    // The authorizer's own `scopes` are those it verified against the route.
                    let mut scopes = jwt.scopes.clone().unwrap_or_default();
                    scopes.extend(claim(SCOPE_CLAIM).unwrap_or_default());
                    return RawClaims {
                        tenant: Some(tenant.clone()),
                        scopes,
                        groups: claim(GROUPS_CLAIM).unwrap_or_default(),
                    };
                }
            }
            from_lambda_authorizer(&auth.fields)
        }
        RequestContext::ApiGatewayV1(c) => {
            let fields = &c.authorizer.fields;
            if let Some(claims) = fields.get("claims") {
                // Cognito passes claims as an object; some integrations pass them as a JSON string.
                let claims = match claims {
                    Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Null),
                    other => other.clone(),
                };
                let raw = from_claims(&claims);
                if raw.tenant.is_some() {
                    return raw;
                }
            }
            from_lambda_authorizer(fields)
        }
        _ => RawClaims::default(),
    }
}

/// A Lambda authorizer's context: written by the deployer's own authorizer code, never by a user.
fn from_lambda_authorizer(fields: &std::collections::HashMap<String, Value>) -> RawClaims {
    RawClaims {
        tenant: string_of(fields.get(LAMBDA_AUTHORIZER_TENANT)),
        scopes: list_of(fields.get(SCOPE_CLAIM)),
        groups: list_of(fields.get(LAMBDA_AUTHORIZER_GROUPS)),
    }
}

/// Reads the claims of an unsigned development JWT (`header.payload.` or `header.payload.sig`).
fn from_dev_jwt(req: &Request) -> RawClaims {
    let Some(token) = req
        .headers()
        .get(lambda_http::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return RawClaims::default();
    };
    let Some(payload) = token.split('.').nth(1) else {
        return RawClaims::default();
    };
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload) else {
        return RawClaims::default();
    };
    let Ok(claims) = serde_json::from_slice::<Value>(&bytes) else {
        return RawClaims::default();
    };
    from_claims(&claims)
}

/// Why a request has no verified caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimsError {
    /// No tenant claim at all: the service layer answers 401.
    #[error("No tenant claim in the request's authorizer context.")]
    NoTenantClaim,
    /// A tenant claim that is not a valid tenant id: 403.
    #[error("The tenant claim is not a valid tenant id: it {0}.")]
    InvalidTenantClaim(String),
    /// In tenant isolation mode, a claim for a tenant other than the one this execution
    /// environment serves: 403. It means the front door mapped the tenant wrongly, or was bypassed.
    #[error("This execution environment serves another tenant.")]
    OtherTenantsEnvironment,
}

/// In tenant isolation mode (`TenancyConfig: PER_TENANT`) the Lambda service runs an execution
/// environment for one tenant only and names it with every invocation (`Context::tenant_id`, from the
/// runtime header `Lambda-Runtime-Aws-Tenant-Id`). A caller whose claim names another tenant is
/// refused, so the environment's memory, credential cache included, only ever holds that one tenant.
/// Without a runtime tenant (the pooled mode) there is nothing to compare.
pub fn check_execution_tenant(
    caller: &Caller,
    execution_tenant: Option<&str>,
) -> Result<(), ClaimsError> {
    match execution_tenant {
        Some(tenant) if tenant != caller.tenant.as_str() => {
            Err(ClaimsError::OtherTenantsEnvironment)
        }
        _ => Ok(()),
    }
}

/// The caller of `req`: no tenant claim, or one that is not a valid tenant id, is an error.
pub fn caller(req: &Request, mode: AuthMode) -> Result<Caller, ClaimsError> {
    let mut raw = req
        .request_context_ref()
        .map(from_context)
        .unwrap_or_default();
    if raw.tenant.is_none() && mode == AuthMode::UnsignedDevJwt {
        raw = from_dev_jwt(req);
    }
    let operator = raw.operator();
    let Some(tenant) = raw.tenant else {
        return Err(ClaimsError::NoTenantClaim);
    };
    let tenant =
        TenantId::parse(&tenant).map_err(|e| ClaimsError::InvalidTenantClaim(e.to_string()))?;
    Ok(Caller { tenant, operator })
}

/// An unsigned development JWT for `tenant` as the local stack prints it; an operator's carries the
/// `pooltable/admin` scope.
pub fn dev_jwt(tenant: &str, operator: bool) -> String {
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let mut claims =
        serde_json::json!({ TENANT_CLAIM: tenant, "sub": format!("dev-user-{tenant}") });
    if operator {
        claims[SCOPE_CLAIM] = Value::String(OPERATOR_SCOPE.to_owned());
    }
    format!(
        "{}.{}.",
        b64(&serde_json::json!({"alg": "none", "typ": "JWT"})),
        b64(&claims)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2_with_claims(claims: Value) -> Request {
        v2_with(claims, Value::Null)
    }

    fn v2_with(claims: Value, scopes: Value) -> Request {
        let event = serde_json::json!({
            "version": "2.0", "routeKey": "GET /x", "rawPath": "/x", "rawQueryString": "",
            "headers": {"host": "example.com"},
            "requestContext": {
                "accountId": "123456789012", "apiId": "api", "domainName": "example.com",
                "domainPrefix": "example", "requestId": "r", "routeKey": "GET /x", "stage": "$default",
                "time": "20/Nov/2026:06:00:00 +0000", "timeEpoch": 1795154400000u64,
                "http": {"method": "GET", "path": "/x", "protocol": "HTTP/1.1", "sourceIp": "1.2.3.4", "userAgent": "t"},
                "authorizer": {"jwt": {"claims": claims, "scopes": scopes}}
            },
            "isBase64Encoded": false
        });
        lambda_http::request::from_str(&event.to_string()).unwrap()
    }

    #[test]
    fn tenant_comes_from_the_jwt_claims() {
        let req = v2_with_claims(serde_json::json!({"custom:tenantId": "acme"}));
        let c = caller(&req, AuthMode::Authorizer).unwrap();
        assert_eq!(c.tenant.as_str(), "acme");
        assert!(!c.operator);
    }

    #[test]
    fn a_custom_role_attribute_alone_never_makes_an_operator() {
        // GIVEN a user who wrote custom:role = platform-admin into their own profile
        let req = v2_with_claims(
            serde_json::json!({"custom:tenantId": "acme", "custom:role": "platform-admin"}),
        );
        // THEN they are a tenant user, nothing more
        assert!(!caller(&req, AuthMode::Authorizer).unwrap().operator);
    }

    #[test]
    fn the_admin_scope_or_the_admin_group_makes_an_operator() {
        let operator = |claims: Value, scopes: Value| {
            caller(&v2_with(claims, scopes), AuthMode::Authorizer)
                .unwrap()
                .operator
        };
        let t = "custom:tenantId";
        // The authorizer's verified scopes, or the access token's scope claim.
        assert!(operator(
            serde_json::json!({t: "ops"}),
            serde_json::json!(["pooltable/admin"])
        ));
        assert!(operator(
            serde_json::json!({t: "ops", "scope": "openid pooltable/admin"}),
            Value::Null
        ));
        // cognito:groups as HTTP API flattens it ("[a b]"), or as a plain string.
        assert!(operator(
            serde_json::json!({t: "ops", "cognito:groups": "[support platform-admin]"}),
            Value::Null
        ));
        assert!(operator(
            serde_json::json!({t: "ops", "cognito:groups": "platform-admin"}),
            Value::Null
        ));
        // Near misses are not operators.
        for (claims, scopes) in [
            (
                serde_json::json!({t: "ops", "scope": "pooltable/admins"}),
                Value::Null,
            ),
            (
                serde_json::json!({t: "ops", "scope": "pooltable/read"}),
                serde_json::json!(["pooltable/read"]),
            ),
            (
                serde_json::json!({t: "ops", "cognito:groups": "[platform-admins]"}),
                Value::Null,
            ),
            (
                serde_json::json!({t: "ops", "custom:scope": "pooltable/admin"}),
                Value::Null,
            ),
            (
                serde_json::json!({t: "ops", "custom:groups": "platform-admin"}),
                Value::Null,
            ),
        ] {
            assert!(!operator(claims.clone(), scopes), "{claims}");
        }
    }

    #[test]
    fn a_missing_tenant_and_an_invalid_one_are_told_apart() {
        let req = v2_with_claims(serde_json::json!({"sub": "x"}));
        assert_eq!(
            caller(&req, AuthMode::Authorizer).unwrap_err(),
            ClaimsError::NoTenantClaim
        );
        for bad in ["*", "a#b", "${aws:username}", ""] {
            let req = v2_with_claims(serde_json::json!({"custom:tenantId": bad}));
            assert!(
                matches!(
                    caller(&req, AuthMode::Authorizer).unwrap_err(),
                    ClaimsError::InvalidTenantClaim(_)
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_claim_for_another_tenant_than_the_environments_is_refused() {
        let acme = Caller {
            tenant: TenantId::parse("acme").unwrap(),
            operator: false,
        };
        assert_eq!(check_execution_tenant(&acme, None), Ok(()));
        assert_eq!(check_execution_tenant(&acme, Some("acme")), Ok(()));
        for other in ["globex", "Acme", "acme ", ""] {
            assert_eq!(
                check_execution_tenant(&acme, Some(other)),
                Err(ClaimsError::OtherTenantsEnvironment),
                "{other:?}"
            );
        }
    }

    #[test]
    fn dev_jwt_is_read_only_in_dev_mode() {
        let mut req = v2_with_claims(serde_json::json!({}));
        let bearer = format!("Bearer {}", dev_jwt("acme", false));
        req.headers_mut()
            .insert("authorization", bearer.parse().unwrap());
        assert_eq!(
            caller(&req, AuthMode::Authorizer).unwrap_err(),
            ClaimsError::NoTenantClaim
        );
        assert_eq!(
            caller(&req, AuthMode::UnsignedDevJwt)
                .unwrap()
                .tenant
                .as_str(),
            "acme"
        );
    }
}
