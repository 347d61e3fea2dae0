//! `pre-token-generation`: the Cognito user pool's pre token generation trigger (event version 2,
//! `V2_0`), which makes Cognito's access tokens carry what pooltable reads from them.
//!
//! Out of the box an access token carries no `custom:tenantId` (the functions then answer 401), and
//! an operator, a member of `platform-admin`, has no `pooltable/admin` scope, which the HTTP API
//! demands on every operator-only route. So, for every token Cognito issues to a user:
//! - the access token gets the user's `custom:tenantId` (an attribute only the back end writes: no
//!   app client of the template may write it), and the same value as `tenantId`, which the API's
//!   access log names (a claim with a colon is no documented log variable);
//! - a member of `platform-admin` gets the `pooltable/admin` scope in the access token, and anyone
//!   else loses it: Cognito grants OAuth scopes per app client, not per user, so an app client
//!   allowed the scope would otherwise make every user who signs in through it an operator.
//!
//! Nothing else changes: a user without a tenant gets none (401), and neither groups nor the ID
//! token are touched. The answer is written as JSON by hand rather than with `aws_lambda_events`'
//! V2 types, which always serialize `groupOverrideDetails`, and an empty one would strip the
//! user's groups from both tokens.

use serde::Deserialize;
use serde_json::{json, Value};
use shared::isolation::claims::{
    ACCESS_LOG_TENANT_CLAIM, OPERATOR_GROUP, OPERATOR_SCOPE, TENANT_CLAIM,
};

/// What the trigger reads; every part may be absent or null (Cognito sends `null` for none).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Request {
    user_attributes: Option<std::collections::HashMap<String, String>>,
    group_configuration: Option<Groups>,
    scopes: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Groups {
    groups_to_override: Option<Vec<String>>,
}

/// The trigger's answer: the event, with `response.claimsAndScopeOverrideDetails` set.
pub fn handle(mut event: Value) -> Value {
    let request: Request = match serde_json::from_value(event["request"].clone()) {
        Ok(request) => request,
        Err(e) => {
            // Fails closed: no tenant claim (401), and the operator scope suppressed.
            tracing::error!(error = %e, "pre token generation: the request does not parse");
            Request::default()
        }
    };
    let mut access = serde_json::Map::new();
    let attributes = request.user_attributes.unwrap_or_default();
    if let Some(tenant) = attributes.get(TENANT_CLAIM) {
        access.insert(
            "claimsToAddOrOverride".into(),
            json!({ TENANT_CLAIM: tenant, ACCESS_LOG_TENANT_CLAIM: tenant }),
        );
    }
    let groups = request.group_configuration.unwrap_or_default();
    let operator = groups
        .groups_to_override
        .unwrap_or_default()
        .iter()
        .any(|g| g == OPERATOR_GROUP);
    let scoped = request
        .scopes
        .unwrap_or_default()
        .iter()
        .any(|s| s == OPERATOR_SCOPE);
    match (operator, scoped) {
        (true, false) => access.insert("scopesToAdd".into(), json!([OPERATOR_SCOPE])),
        (false, _) => access.insert("scopesToSuppress".into(), json!([OPERATOR_SCOPE])),
        (true, true) => None,
    };
    if event["version"] != "2" {
        // A V1_0 trigger can change the ID token only: a pool configured so gets nothing here.
        tracing::warn!(version = %event["version"], "pre token generation: configure the trigger as V2_0; access tokens are left as they are");
        return event;
    }
    event["response"] = json!({
        "claimsAndScopeOverrideDetails": { "accessTokenGeneration": access }
    });
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(attributes: Value, groups: Value, scopes: Value) -> Value {
        json!({
            "version": "2", "triggerSource": "TokenGeneration_Authentication",
            "region": "us-east-1", "userPoolId": "us-east-1_x", "userName": "u",
            "callerContext": {"awsSdkVersion": "x", "clientId": "c"},
            "request": {"userAttributes": attributes, "groupConfiguration": {"groupsToOverride": groups, "iamRolesToOverride": [], "preferredRole": null}, "scopes": scopes},
            "response": {"claimsAndScopeOverrideDetails": null}
        })
    }

    fn access(answer: &Value) -> &Value {
        &answer["response"]["claimsAndScopeOverrideDetails"]["accessTokenGeneration"]
    }

    #[test]
    fn a_tenant_user_gets_the_tenant_claim_in_the_access_token_and_never_the_operator_scope() {
        // GIVEN a user of tenant acme, in no group
        let e = event(
            json!({"sub": "s", "custom:tenantId": "acme"}),
            json!([]),
            json!(["openid"]),
        );
        // WHEN Cognito asks
        let answer = handle(e);
        // THEN exactly this is the answer: the tenant added to the access token, the scope withheld
        assert_eq!(
            answer["response"],
            json!({"claimsAndScopeOverrideDetails": {"accessTokenGeneration": {
                "claimsToAddOrOverride": {"custom:tenantId": "acme", "tenantId": "acme"},
                "scopesToSuppress": ["pooltable/admin"]
            }}})
        );
    }

    #[test]
    fn a_user_outside_the_group_loses_the_operator_scope_any_client_granted() {
        // GIVEN a tenant user who signed in through an app client allowed pooltable/admin, with
        // groups sent as null
        let e = event(
            json!({"custom:tenantId": "acme"}),
            json!(null),
            json!(["openid", "pooltable/admin"]),
        );
        // WHEN Cognito asks
        let answer = handle(e);
        // THEN the scope is suppressed, and the tenant still added
        assert_eq!(
            access(&answer)["scopesToSuppress"],
            json!(["pooltable/admin"])
        );
        assert_eq!(
            access(&answer)["claimsToAddOrOverride"],
            json!({"custom:tenantId": "acme", "tenantId": "acme"})
        );
    }

    #[test]
    fn a_platform_admin_gets_the_operator_scope_once() {
        let e = event(
            json!({"custom:tenantId": "ops"}),
            json!(["platform-admin"]),
            json!(["aws.cognito.signin.user.admin"]),
        );
        let answer = handle(e);
        assert_eq!(access(&answer)["scopesToAdd"], json!(["pooltable/admin"]));
        assert_eq!(
            access(&answer)["claimsToAddOrOverride"],
            json!({"custom:tenantId": "ops", "tenantId": "ops"})
        );
        // AND a token that has the scope already is neither given it twice nor stripped of it
        let e = event(
            json!({"custom:tenantId": "ops"}),
            json!(["platform-admin"]),
            json!(["pooltable/admin"]),
        );
        let answer = handle(e);
        assert!(access(&answer).get("scopesToAdd").is_none(), "{answer}");
        assert!(
            access(&answer).get("scopesToSuppress").is_none(),
            "{answer}"
        );
    }

    #[test]
    fn a_user_without_a_tenant_gets_no_claim_and_a_v1_event_is_answered_unchanged() {
        let e = event(
            json!({"sub": "s", "custom:role": "platform-admin"}),
            json!([]),
            json!(null),
        );
        assert_eq!(
            access(&handle(e)),
            &json!({"scopesToSuppress": ["pooltable/admin"]})
        );
        let mut v1 = event(json!({"custom:tenantId": "acme"}), json!([]), json!([]));
        v1["version"] = json!("1");
        assert_eq!(handle(v1.clone()), v1);
    }

    #[test]
    fn a_request_that_does_not_parse_adds_nothing() {
        let mut e = event(json!({"custom:tenantId": "acme"}), json!([]), json!([]));
        e["request"]["userAttributes"] = json!("not a map");
        assert_eq!(
            access(&handle(e)),
            &json!({"scopesToSuppress": ["pooltable/admin"]})
        );
    }
}
