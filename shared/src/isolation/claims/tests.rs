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

/// A REST API (v1) proxy event whose Cognito authorizer verified `claims`.
fn v1_with_claims(claims: Value) -> Request {
    let event = serde_json::json!({
        "resource": "/x", "path": "/x", "httpMethod": "GET",
        "headers": {"host": "example.com"}, "multiValueHeaders": {"host": ["example.com"]},
        "queryStringParameters": null, "multiValueQueryStringParameters": null,
        "pathParameters": null, "stageVariables": null,
        "requestContext": {
            "accountId": "123456789012", "resourceId": "r", "stage": "dev", "requestId": "r",
            "identity": {"sourceIp": "1.2.3.4"}, "resourcePath": "/x", "httpMethod": "GET",
            "apiId": "api", "authorizer": {"claims": claims}
        },
        "body": null, "isBase64Encoded": false
    });
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

#[test]
fn only_the_templates_app_clients_are_accepted_when_it_names_them() {
    // GIVEN the app clients the template names (tenant isolation mode), and tokens the REST
    // API's Cognito authorizer verified: ID tokens name their client in `aud`, access tokens
    // in `client_id`
    let accepted = ["tenants-client".to_string(), "admin-client".to_string()];
    let t = "custom:tenantId";
    let id = |aud: &str| serde_json::json!({t: "acme", "token_use": "id", "aud": aud});
    let access =
        |client: &str| serde_json::json!({t: "acme", "token_use": "access", "client_id": client});
    let verdict = |claims: Value, accepted: Option<&[String]>| {
        caller_accepting(&v1_with_claims(claims), AuthMode::Authorizer, accepted)
    };
    // THEN a token of one of them is served
    for claims in [id("tenants-client"), access("admin-client")] {
        let c = verdict(claims.clone(), Some(&accepted)).unwrap();
        assert_eq!(c.tenant.as_str(), "acme", "{claims}");
    }
    // AND a token of another client of the same pool is refused (403), as is one that names its
    // client in the other claim than its token_use says, or has no token_use
    for claims in [
        id("other-client"),
        access("other-client"),
        serde_json::json!({t: "acme", "token_use": "access", "aud": "tenants-client"}),
        serde_json::json!({t: "acme", "token_use": "id", "client_id": "tenants-client"}),
        serde_json::json!({t: "acme", "aud": "tenants-client", "client_id": "tenants-client"}),
    ] {
        let refused = verdict(claims.clone(), Some(&accepted)).unwrap_err();
        // (a 403 problem+json: `service::error`'s lower_layer_errors_map_to_their_statuses)
        assert_eq!(refused, ClaimsError::OtherAppClient, "{claims}");
    }
    // AND the HTTP API's JWT claims are held to the same list
    let v2 = v2_with_claims(
        serde_json::json!({t: "acme", "token_use": "access", "client_id": "other-client"}),
    );
    assert_eq!(
        caller_accepting(&v2, AuthMode::Authorizer, Some(&accepted)).unwrap_err(),
        ClaimsError::OtherAppClient
    );
    // AND without a list (the pooled HTTP API, whose authorizer checks the audience) any is
    assert!(verdict(id("other-client"), None).is_ok());
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
