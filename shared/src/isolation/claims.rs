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
//!
//! **App clients.** A REST API's Cognito authorizer accepts a token of any app client of its user
//! pool. In tenant isolation mode the template therefore sets [`APP_CLIENTS_ENV`] to its own app
//! clients, and a token issued to another (an ID token's `aud`, an access token's `client_id`) is
//! refused (403), whatever it claims. The HTTP API's JWT authorizer checks the audience itself.

use base64::Engine;
use lambda_http::request::RequestContext;
use lambda_http::{Request, RequestExt};
use serde_json::Value;

use crate::identity::ids::TenantId;

pub const TENANT_CLAIM: &str = "custom:tenantId";
/// The same tenant again, under a name API Gateway's access log can name
/// (`$context.authorizer.claims.tenantId`: a claim's name with a colon is not a documented log
/// variable). Cognito's pre token generation trigger adds it beside [`TENANT_CLAIM`]; nothing
/// authorizes on it.
pub const ACCESS_LOG_TENANT_CLAIM: &str = "tenantId";
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

/// The app client ids (comma-separated) whose tokens are accepted; unset or empty: any the
/// authorizer verified. The template sets it in tenant isolation mode only (REST API).
pub const APP_CLIENTS_ENV: &str = "ACCEPTED_APP_CLIENT_IDS";
/// Which token a Cognito token is (`id` or `access`): it says which claim names its app client.
pub const TOKEN_USE_CLAIM: &str = "token_use";

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
    /// The app client the token was issued to: an ID token's `aud`, an access token's `client_id`.
    app_client: Option<String>,
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

/// The app client a Cognito token names, by its `token_use`; `None` for anything else.
fn app_client_of<'a>(claim: impl Fn(&str) -> Option<&'a str>) -> Option<String> {
    let client = match claim(TOKEN_USE_CLAIM)? {
        "id" => claim("aud"),
        "access" => claim("client_id"),
        _ => None,
    };
    client.map(str::to_owned)
}

/// The claims of a token's payload (or a Cognito REST authorizer's `claims` object).
fn from_claims(claims: &Value) -> RawClaims {
    RawClaims {
        tenant: string_of(claims.get(TENANT_CLAIM)),
        scopes: list_of(claims.get(SCOPE_CLAIM)),
        groups: list_of(claims.get(GROUPS_CLAIM)),
        app_client: app_client_of(|name| claims.get(name).and_then(Value::as_str)),
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
                        app_client: app_client_of(|name| jwt.claims.get(name).map(String::as_str)),
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
        app_client: None,
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
    /// A token issued to an app client this API does not accept ([`APP_CLIENTS_ENV`]): 403.
    #[error("The token was issued to an app client this API does not accept.")]
    OtherAppClient,
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

/// The app clients [`APP_CLIENTS_ENV`] names, read once; `None` when it names none.
fn accepted_app_clients() -> Option<&'static [String]> {
    static ACCEPTED: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let accepted = ACCEPTED.get_or_init(|| {
        std::env::var(APP_CLIENTS_ENV)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .collect()
    });
    (!accepted.is_empty()).then_some(accepted.as_slice())
}

/// The caller of `req`: no tenant claim, or one that is not a valid tenant id, is an error; so is a
/// token of another app client than [`APP_CLIENTS_ENV`] names, when it names any.
pub fn caller(req: &Request, mode: AuthMode) -> Result<Caller, ClaimsError> {
    caller_accepting(req, mode, accepted_app_clients())
}

fn caller_accepting(
    req: &Request,
    mode: AuthMode,
    app_clients: Option<&[String]>,
) -> Result<Caller, ClaimsError> {
    let mut raw = req
        .request_context_ref()
        .map(from_context)
        .unwrap_or_default();
    if raw.tenant.is_none() && mode == AuthMode::UnsignedDevJwt {
        raw = from_dev_jwt(req);
    }
    if let Some(accepted) = app_clients {
        if !raw
            .app_client
            .as_ref()
            .is_some_and(|c| accepted.contains(c))
        {
            return Err(ClaimsError::OtherAppClient);
        }
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
mod tests;
