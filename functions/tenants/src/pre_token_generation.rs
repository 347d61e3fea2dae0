//! `pre-token-generation`: the Cognito user pool's pre token generation trigger (event version 2,
//! `V2_0`), which makes Cognito's access tokens carry what pooltable reads from them.
//!
//! Out of the box an access token carries no `custom:tenantId` (the functions then answer 401), and
//! an operator who is one only by the `platform-admin` group has no `pooltable/admin` scope, which
//! the HTTP API demands on every operator route. So, for every token Cognito issues to a user:
//! - the access token gets the user's `custom:tenantId` (an attribute only the back end writes: no
//!   app client of the template may write it);
//! - a member of `platform-admin` gets the `pooltable/admin` scope in the access token.
//!
//! Nothing else changes: a user without a tenant gets none (401), and neither groups nor the ID
//! token are touched. The answer is written as JSON by hand rather than with `aws_lambda_events`'
//! V2 types, which always serialize `groupOverrideDetails`, and an empty one would strip the
//! user's groups from both tokens.

use serde::Deserialize;
use serde_json::{json, Value};
use shared::isolation::claims::{OPERATOR_GROUP, OPERATOR_SCOPE, TENANT_CLAIM};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Request {
    user_attributes: std::collections::HashMap<String, String>,
    group_configuration: Groups,
    scopes: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Groups {
    groups_to_override: Option<Vec<String>>,
}

/// The trigger's answer: the event, with `response.claimsAndScopeOverrideDetails` set.
pub fn handle(mut event: Value) -> Value {
    let request: Request = serde_json::from_value(event["request"].clone()).unwrap_or_default();
    let mut access = serde_json::Map::new();
    if let Some(tenant) = request.user_attributes.get(TENANT_CLAIM) {
        access.insert(
            "claimsToAddOrOverride".into(),
            json!({ TENANT_CLAIM: tenant }),
        );
    }
    let groups = request.group_configuration.groups_to_override;
    let operator = groups
        .unwrap_or_default()
        .iter()
        .any(|g| g == OPERATOR_GROUP);
    if operator && !request.scopes.iter().any(|s| s == OPERATOR_SCOPE) {
        access.insert("scopesToAdd".into(), json!([OPERATOR_SCOPE]));
    }
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

    #[test]
    fn a_tenant_user_gets_the_tenant_claim_in_the_access_token_and_no_scope() {
        // GIVEN a user of tenant acme, in no group
        let e = event(
            json!({"sub": "s", "custom:tenantId": "acme"}),
            json!([]),
            json!(["openid"]),
        );
        // WHEN Cognito asks
        let answer = handle(e);
        // THEN exactly this is added, to the access token only
        assert_eq!(
            answer["response"],
            json!({"claimsAndScopeOverrideDetails": {"accessTokenGeneration": {
                "claimsToAddOrOverride": {"custom:tenantId": "acme"}
            }}})
        );
    }

    #[test]
    fn a_platform_admin_gets_the_operator_scope_once() {
        let e = event(
            json!({"custom:tenantId": "ops"}),
            json!(["platform-admin"]),
            json!(["aws.cognito.signin.user.admin"]),
        );
        let access =
            &handle(e)["response"]["claimsAndScopeOverrideDetails"]["accessTokenGeneration"];
        assert_eq!(access["scopesToAdd"], json!(["pooltable/admin"]));
        assert_eq!(
            access["claimsToAddOrOverride"],
            json!({"custom:tenantId": "ops"})
        );
        // AND a token that has the scope already (an operators' app client) is not given it twice
        let e = event(
            json!({"custom:tenantId": "ops"}),
            json!(["platform-admin"]),
            json!(["pooltable/admin"]),
        );
        let access =
            &handle(e)["response"]["claimsAndScopeOverrideDetails"]["accessTokenGeneration"];
        assert!(access.get("scopesToAdd").is_none(), "{access}");
    }

    #[test]
    fn a_user_without_a_tenant_gets_nothing_and_a_v1_event_is_answered_unchanged() {
        let e = event(
            json!({"sub": "s", "custom:role": "platform-admin"}),
            json!([]),
            json!([]),
        );
        let access =
            &handle(e)["response"]["claimsAndScopeOverrideDetails"]["accessTokenGeneration"];
        assert_eq!(access, &json!({}));
        let mut v1 = event(json!({"custom:tenantId": "acme"}), json!([]), json!([]));
        v1["version"] = json!("1");
        assert_eq!(handle(v1.clone()), v1);
    }
}
