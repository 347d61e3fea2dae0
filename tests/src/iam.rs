//! A small IAM policy evaluator: exactly the features pooltable's policies use (Allow and Deny
//! statements, Action and Resource matching with `*` and `?`, the `StringLike`, `StringEquals`,
//! `StringNotEquals`, `StringEqualsIfExists`, `ArnLike`, `ArnEquals`, `ForAllValues:StringLike`, `ForAllValues:StringEquals` and `Null` conditions, the condition keys
//! `dynamodb:LeadingKeys`, `dynamodb:Attributes`, `dynamodb:ReturnValues`, `aws:PrincipalTag/*`, `aws:RequestTag/*`, `aws:ResourceTag/*`,
//! `aws:PrincipalArn`, `events:source`, `kms:EncryptionContext:*`, `kms:EncryptionContextKeys`
//! and `aws:TagKeys`, and the policy
//! variable `${aws:PrincipalTag/*}` in condition values). It is the oracle of the isolation property
//! test, so it is written from IAM's documented semantics, not from the guard's code. `Principal` is
//! not evaluated: every request is taken to come from the principal a statement names.

use std::collections::BTreeMap;

use serde_json::Value;

/// What IAM evaluates for one authorized action.
#[derive(Debug, Clone, Default)]
pub struct AuthzRequest {
    pub action: String,
    pub resource: String,
    /// `dynamodb:LeadingKeys`; `None` when the request carries no such key.
    pub leading_keys: Option<Vec<String>>,
    /// `dynamodb:Attributes`: the top-level attribute names the request names (its key's among
    /// them); `None` when not modelled.
    pub attributes: Option<Vec<String>>,
    /// The session's tags (`aws:PrincipalTag/<key>`, and the `${aws:PrincipalTag/<key>}` variable).
    pub principal_tags: BTreeMap<String, String>,
    /// The tags an STS request passes (`aws:RequestTag/<key>`; their keys are `aws:TagKeys`), or a
    /// CreateTable's.
    pub request_tags: BTreeMap<String, String>,
    /// The tags of the resource acted on (`aws:ResourceTag/<key>`: an own table's `tenant`).
    pub resource_tags: BTreeMap<String, String>,
    /// The caller's ARN (`aws:PrincipalArn`; a role's, with its path, for its sessions).
    pub principal_arn: Option<String>,
    /// A service's own condition keys the request carries (`events:source`, `dynamodb:ReturnValues`; a KMS request's
    /// encryption context as `kms:EncryptionContext:<key>`, whose keys are `kms:EncryptionContextKeys`).
    pub service_keys: BTreeMap<String, String>,
}

/// IAM's `*` (any run, including empty) and `?` (exactly one character) matching.
pub fn glob(pattern: &str, value: &str) -> bool {
    let (p, v): (Vec<char>, Vec<char>) = (pattern.chars().collect(), value.chars().collect());
    let (mut pi, mut vi, mut star, mut mark) = (0, 0, None, 0);
    while vi < v.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == v[vi]) {
            pi += 1;
            vi += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = vi;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            vi = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        _ => vec![],
    }
}

fn key_values(req: &AuthzRequest, key: &str) -> Option<Vec<String>> {
    if key == "dynamodb:LeadingKeys" {
        return req.leading_keys.clone();
    }
    if key == "dynamodb:Attributes" {
        return req.attributes.clone();
    }
    if key == "aws:TagKeys" {
        return (!req.request_tags.is_empty()).then(|| req.request_tags.keys().cloned().collect());
    }
    if let Some(tag) = key.strip_prefix("aws:PrincipalTag/") {
        return req.principal_tags.get(tag).map(|v| vec![v.clone()]);
    }
    if let Some(tag) = key.strip_prefix("aws:RequestTag/") {
        return req.request_tags.get(tag).map(|v| vec![v.clone()]);
    }
    if let Some(tag) = key.strip_prefix("aws:ResourceTag/") {
        return req.resource_tags.get(tag).map(|v| vec![v.clone()]);
    }
    if key == "aws:PrincipalArn" {
        return req.principal_arn.clone().map(|a| vec![a]);
    }
    if key == "events:source"
        || key == "dynamodb:ReturnValues"
        || key.starts_with("kms:EncryptionContext:")
    {
        return req.service_keys.get(key).map(|v| vec![v.clone()]);
    }
    // Multi-valued: the keys of the request's encryption context.
    if key == "kms:EncryptionContextKeys" {
        let keys: Vec<String> = req
            .service_keys
            .keys()
            .filter_map(|k| k.strip_prefix("kms:EncryptionContext:").map(str::to_owned))
            .collect();
        return (!keys.is_empty()).then_some(keys);
    }
    panic!("the evaluator does not model condition key {key}")
}

/// A condition value or a resource with its `${aws:PrincipalTag/<key>}` variables replaced; `None` when a variable
/// names a tag the session does not have (IAM: the condition then does not match).
fn substitute(pattern: &str, req: &AuthzRequest) -> Option<String> {
    let mut out = String::new();
    let mut rest = pattern;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = start
            + rest[start..]
                .find('}')
                .expect("a policy variable is closed by }");
        let variable = &rest[start + 2..end];
        let tag = variable
            .strip_prefix("aws:PrincipalTag/")
            .unwrap_or_else(|| panic!("the evaluator does not model the variable ${{{variable}}}"));
        let value = req.principal_tags.get(tag)?;
        // Tag values cannot hold IAM's wildcards (STS's tag alphabet has neither * nor ?), so a
        // substituted value is always literal text.
        assert!(
            !value.contains(['*', '?']),
            "tag value {value:?} holds a wildcard"
        );
        out.push_str(value);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

fn conditions_hold(conditions: &Value, req: &AuthzRequest) -> bool {
    let Some(ops) = conditions.as_object() else {
        return true;
    };
    ops.iter().all(|(op, keys)| {
        keys.as_object().unwrap().iter().all(|(key, expected)| {
            let patterns: Vec<String> = strings(expected)
                .iter()
                .filter_map(|p| substitute(p, req))
                .collect();
            let actual = key_values(req, key);
            let actual = actual.as_deref();
            match op.as_str() {
                // True when every value in the request matches some pattern; vacuously true when the
                // request has no values for the key (IAM's documented ForAllValues behaviour).
                "ForAllValues:StringLike" => actual
                    .unwrap_or(&[])
                    .iter()
                    .all(|a| patterns.iter().any(|p| glob(p, a))),
                "ForAllValues:StringEquals" => actual
                    .unwrap_or(&[])
                    .iter()
                    .all(|a| patterns.iter().any(|p| p == a)),
                // True when some value in the request matches some pattern; false on no values.
                "ForAnyValue:StringEquals" => actual
                    .unwrap_or(&[])
                    .iter()
                    .any(|a| patterns.iter().any(|p| p == a)),
                // Single-valued: the key must be present and match.
                // An ARN is matched as a string with IAM's wildcards (pooltable's ARN patterns
                // wildcard only the resource part).
                "StringLike" | "ArnLike" => actual
                    .and_then(|a| a.first())
                    .is_some_and(|a| patterns.iter().any(|p| glob(p, a))),
                "StringEquals" | "ArnEquals" => actual
                    .and_then(|a| a.first())
                    .is_some_and(|a| patterns.iter().any(|p| p == a)),
                // As StringEquals when the key is present; true when it is absent.
                "StringEqualsIfExists" => actual
                    .and_then(|a| a.first())
                    .is_none_or(|a| patterns.iter().any(|p| p == a)),
                // Negated: true when the key is absent, or present and equal to none of them
                // (IAM: a negated operator on a missing key matches).
                "StringNotEquals" => !actual
                    .and_then(|a| a.first())
                    .is_some_and(|a| patterns.iter().any(|p| p == a)),
                // "true": the key is absent; "false": it is present.
                "Null" => {
                    let absent = actual.is_none_or(|a| a.is_empty());
                    match patterns.first().map(String::as_str) {
                        Some("true") => absent,
                        Some("false") => !absent,
                        other => panic!("Null takes true or false, not {other:?}"),
                    }
                }
                other => panic!("the evaluator does not model condition operator {other}"),
            }
        })
    })
}

fn statement_matches(st: &Value, req: &AuthzRequest) -> bool {
    let action_ok = strings(&st["Action"])
        .iter()
        .any(|a| glob(&a.to_lowercase(), &req.action.to_lowercase()));
    // A trust policy (resource-based) names no Resource: the role it is attached to is implied.
    let resource_ok = st.get("Resource").is_none()
        || strings(&st["Resource"])
            .iter()
            .any(|r| substitute(r, req).is_some_and(|r| glob(&r, &req.resource)));
    action_ok && resource_ok && conditions_hold(&st["Condition"], req)
}

/// IAM's decision: an explicit Deny wins, else any matching Allow, else the implicit deny.
pub fn is_allowed(policy: &Value, req: &AuthzRequest) -> bool {
    let statements = match &policy["Statement"] {
        Value::Array(a) => a.clone(),
        single => vec![single.clone()],
    };
    if statements
        .iter()
        .any(|s| s["Effect"] == "Deny" && statement_matches(s, req))
    {
        return false;
    }
    statements
        .iter()
        .any(|s| s["Effect"] == "Allow" && statement_matches(s, req))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use shared::identity::keys::raw_key;

    fn req(action: &str, resource: &str, keys: Option<&[&str]>) -> AuthzRequest {
        AuthzRequest {
            action: action.into(),
            resource: resource.into(),
            leading_keys: keys.map(|k| k.iter().map(|s| s.to_string()).collect()),
            ..AuthzRequest::default()
        }
    }

    const TABLE: &str = "arn:aws:dynamodb:us-west-2:123456789012:table/GameScores";

    /// AWS's documented fine-grained access example for DynamoDB ("allow access only to items whose
    /// partition key matches the user id"), with StringLike in place of StringEquals.
    fn leading_keys_policy() -> Value {
        json!({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow",
            "Action": ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem"],
            "Resource": [TABLE],
            "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["user-123*"]}}
        }]})
    }

    #[test]
    fn glob_follows_iam_wildcards() {
        assert!(glob("home/*", "home/"));
        assert!(glob("home/*", "home/alice/x"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(!glob(&raw_key("a", "*"), &raw_key("a-b", "x")));
        assert!(glob("*", ""));
        assert!(!glob("abc", "abcd"));
    }

    #[test]
    fn for_all_values_allows_matching_keys_and_refuses_others() {
        let p = leading_keys_policy();
        assert!(is_allowed(
            &p,
            &req("dynamodb:GetItem", TABLE, Some(&["user-123"]))
        ));
        assert!(!is_allowed(
            &p,
            &req("dynamodb:GetItem", TABLE, Some(&["user-124"]))
        ));
        assert!(!is_allowed(
            &p,
            &req("dynamodb:GetItem", TABLE, Some(&["user-123", "user-999"]))
        ));
    }

    #[test]
    fn string_equals_if_exists_holds_when_the_key_is_absent_or_equal() {
        // IAM docs: "...IfExists: if the policy key is present in the context of the request,
        // process the key as specified in the policy. If the key is not present, evaluate the
        // condition element as true."
        let mut p = leading_keys_policy();
        p["Statement"][0]["Condition"]["StringEqualsIfExists"] =
            json!({"dynamodb:ReturnValues": ["NONE"]});
        let returning = |value: Option<&str>| {
            let mut r = req("dynamodb:PutItem", TABLE, Some(&["user-123"]));
            if let Some(v) = value {
                r.service_keys
                    .insert("dynamodb:ReturnValues".into(), v.into());
            }
            r
        };
        assert!(is_allowed(&p, &returning(None)));
        assert!(is_allowed(&p, &returning(Some("NONE"))));
        assert!(!is_allowed(&p, &returning(Some("ALL_OLD"))));
    }

    #[test]
    fn for_all_values_is_vacuously_true_without_keys_which_null_false_closes() {
        // IAM docs: "ForAllValues ... also returns true if there are no keys in the request".
        let p = leading_keys_policy();
        assert!(is_allowed(&p, &req("dynamodb:GetItem", TABLE, None)));
        let mut closed = p.clone();
        closed["Statement"][0]["Condition"]["Null"] = json!({"dynamodb:LeadingKeys": "false"});
        assert!(!is_allowed(&closed, &req("dynamodb:GetItem", TABLE, None)));
        assert!(!is_allowed(
            &closed,
            &req("dynamodb:GetItem", TABLE, Some(&[]))
        ));
        assert!(is_allowed(
            &closed,
            &req("dynamodb:GetItem", TABLE, Some(&["user-123"]))
        ));
    }

    #[test]
    fn actions_and_resources_must_match_and_deny_wins() {
        let p = leading_keys_policy();
        assert!(!is_allowed(
            &p,
            &req("dynamodb:Scan", TABLE, Some(&["user-123"]))
        ));
        assert!(!is_allowed(
            &p,
            &req(
                "dynamodb:GetItem",
                &format!("{TABLE}2"),
                Some(&["user-123"])
            )
        ));
        let wildcard = json!({"Statement": {"Effect": "Allow", "Action": "dynamodb:Get*", "Resource": "arn:aws:dynamodb:*:*:table/*"}});
        assert!(is_allowed(&wildcard, &req("dynamodb:GetItem", TABLE, None)));
        assert!(!is_allowed(
            &wildcard,
            &req("dynamodb:PutItem", TABLE, None)
        ));
        let with_deny = json!({"Statement": [
            {"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"},
            {"Effect": "Deny", "Action": "dynamodb:Scan", "Resource": "*"}
        ]});
        assert!(!is_allowed(&with_deny, &req("dynamodb:Scan", TABLE, None)));
        assert!(is_allowed(&with_deny, &req("dynamodb:Query", TABLE, None)));
    }

    #[test]
    fn null_true_requires_the_key_to_be_absent() {
        // IAM docs example: {"Null": {"aws:TokenIssueTime": "true"}}, here on LeadingKeys.
        let p = json!({"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*",
            "Condition": {"Null": {"dynamodb:LeadingKeys": "true"}}}});
        assert!(is_allowed(&p, &req("dynamodb:ListTables", "*", None)));
        assert!(!is_allowed(
            &p,
            &req("dynamodb:ListTables", "*", Some(&["x"]))
        ));
    }

    #[test]
    fn string_like_with_a_single_value() {
        let p = json!({"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*",
            "Condition": {"StringLike": {"dynamodb:LeadingKeys": ["home/*/docs"]}}}});
        assert!(is_allowed(&p, &req("a:b", "*", Some(&["home/alice/docs"]))));
        assert!(!is_allowed(
            &p,
            &req("a:b", "*", Some(&["home/alice/pics"]))
        ));
        assert!(!is_allowed(&p, &req("a:b", "*", None)));
    }

    #[test]
    fn principal_tag_variables_are_substituted_and_a_missing_tag_matches_nothing() {
        // IAM docs: "Variables are replaced with values from the request"; a condition naming a
        // missing key does not match.
        let p = json!({"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*",
            "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["T#${aws:PrincipalTag/TenantId}#*"]},
                          "Null": {"dynamodb:LeadingKeys": "false", "aws:PrincipalTag/TenantId": "false"}}}});
        let tagged = |tenant: Option<&str>, keys: &[&str]| AuthzRequest {
            principal_tags: tenant
                .map(|t| BTreeMap::from([("TenantId".to_string(), t.to_string())]))
                .unwrap_or_default(),
            ..req("dynamodb:GetItem", TABLE, Some(keys))
        };
        assert!(is_allowed(&p, &tagged(Some("a"), &["T#a#1"])));
        assert!(!is_allowed(&p, &tagged(Some("a"), &["T#b#1"])));
        assert!(!is_allowed(&p, &tagged(Some("a"), &["T#a-b#1"])));
        assert!(!is_allowed(&p, &tagged(None, &["T#a#1"])));
        assert!(!is_allowed(&p, &tagged(None, &["T##1"])));
    }

    #[test]
    fn request_tags_and_tag_keys() {
        let p = json!({"Statement": {"Effect": "Allow", "Action": "sts:TagSession", "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestTag/TenantId": "a"},
                          "ForAllValues:StringEquals": {"aws:TagKeys": ["TenantId"]}}}});
        let tags = |pairs: &[(&str, &str)]| AuthzRequest {
            request_tags: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..req("sts:TagSession", "*", None)
        };
        assert!(is_allowed(&p, &tags(&[("TenantId", "a")])));
        assert!(!is_allowed(&p, &tags(&[("TenantId", "b")])));
        assert!(!is_allowed(&p, &tags(&[("TenantId", "a"), ("Other", "x")])));
        assert!(!is_allowed(&p, &tags(&[])));
    }
}
