//! Who is calling. The tenant comes only from authorizer claims in the request context, which API
//! Gateway fills after verifying the JWT; never from the path, the query or the body.
//!
//! Sources, first match wins:
//! - HTTP API (v2) JWT authorizer: `requestContext.authorizer.jwt.claims["custom:tenantId"]`
//! - REST API (v1) Cognito authorizer: `requestContext.authorizer.claims["custom:tenantId"]`
//! - Lambda authorizer context (v1 or v2): `tenantId`
//! - Local development only ([`AuthMode::UnsignedDevJwt`]): the payload of an unsigned JWT in the
//!   `Authorization` header, because `cargo lambda watch` sends no authorizer block.

use base64::Engine;
use lambda_http::request::RequestContext;
use lambda_http::{Request, RequestExt};
use serde_json::Value;

use crate::identity::ids::TenantId;

pub const TENANT_CLAIM: &str = "custom:tenantId";
pub const ROLE_CLAIM: &str = "custom:role";
pub const LAMBDA_AUTHORIZER_TENANT: &str = "tenantId";
pub const LAMBDA_AUTHORIZER_ROLE: &str = "role";

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
    /// `custom:role`, e.g. `platform-admin` for operator routes.
    pub role: Option<String>,
}

/// Raw claim values, before validation.
#[derive(Debug, Default, PartialEq, Eq)]
struct RawClaims {
    tenant: Option<String>,
    role: Option<String>,
}

fn string_of(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_owned)
}

fn from_context(ctx: &RequestContext) -> RawClaims {
    match ctx {
        RequestContext::ApiGatewayV2(c) => {
            let Some(auth) = c.authorizer.as_ref() else {
                return RawClaims::default();
            };
            if let Some(jwt) = auth.jwt.as_ref() {
                if let Some(tenant) = jwt.claims.get(TENANT_CLAIM) {
                    return RawClaims {
                        tenant: Some(tenant.clone()),
                        role: jwt.claims.get(ROLE_CLAIM).cloned(),
                    };
                }
            }
            RawClaims {
                tenant: string_of(auth.fields.get(LAMBDA_AUTHORIZER_TENANT)),
                role: string_of(auth.fields.get(LAMBDA_AUTHORIZER_ROLE)),
            }
        }
        RequestContext::ApiGatewayV1(c) => {
            let fields = &c.authorizer.fields;
            if let Some(claims) = fields.get("claims") {
                // Cognito passes claims as an object; some integrations pass them as a JSON string.
                let claims = match claims {
                    Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Null),
                    other => other.clone(),
                };
                if let Some(tenant) = string_of(claims.get(TENANT_CLAIM)) {
                    return RawClaims {
                        tenant: Some(tenant),
                        role: string_of(claims.get(ROLE_CLAIM)),
                    };
                }
            }
            RawClaims {
                tenant: string_of(fields.get(LAMBDA_AUTHORIZER_TENANT)),
                role: string_of(fields.get(LAMBDA_AUTHORIZER_ROLE)),
            }
        }
        _ => RawClaims::default(),
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
    RawClaims {
        tenant: string_of(claims.get(TENANT_CLAIM)),
        role: string_of(claims.get(ROLE_CLAIM)),
    }
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
    let Some(tenant) = raw.tenant else {
        return Err(ClaimsError::NoTenantClaim);
    };
    let tenant =
        TenantId::parse(&tenant).map_err(|e| ClaimsError::InvalidTenantClaim(e.to_string()))?;
    Ok(Caller {
        tenant,
        role: raw.role,
    })
}

/// An unsigned development JWT for `tenant` (and optionally a role), as the local stack prints it.
pub fn dev_jwt(tenant: &str, role: Option<&str>) -> String {
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let mut claims =
        serde_json::json!({ TENANT_CLAIM: tenant, "sub": format!("dev-user-{tenant}") });
    if let Some(role) = role {
        claims[ROLE_CLAIM] = Value::String(role.to_owned());
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
        let event = serde_json::json!({
            "version": "2.0", "routeKey": "GET /x", "rawPath": "/x", "rawQueryString": "",
            "headers": {"host": "example.com"},
            "requestContext": {
                "accountId": "123456789012", "apiId": "api", "domainName": "example.com",
                "domainPrefix": "example", "requestId": "r", "routeKey": "GET /x", "stage": "$default",
                "time": "20/Nov/2026:06:00:00 +0000", "timeEpoch": 1795154400000u64,
                "http": {"method": "GET", "path": "/x", "protocol": "HTTP/1.1", "sourceIp": "1.2.3.4", "userAgent": "t"},
                "authorizer": {"jwt": {"claims": claims, "scopes": null}}
            },
            "isBase64Encoded": false
        });
        lambda_http::request::from_str(&event.to_string()).unwrap()
    }

    #[test]
    fn tenant_comes_from_the_jwt_claims() {
        let req = v2_with_claims(
            serde_json::json!({"custom:tenantId": "acme", "custom:role": "platform-admin"}),
        );
        let c = caller(&req, AuthMode::Authorizer).unwrap();
        assert_eq!(c.tenant.as_str(), "acme");
        assert_eq!(c.role.as_deref(), Some("platform-admin"));
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
    fn dev_jwt_is_read_only_in_dev_mode() {
        let mut req = v2_with_claims(serde_json::json!({}));
        let bearer = format!("Bearer {}", dev_jwt("acme", None));
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
