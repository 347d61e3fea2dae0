//! The inline session policy passed to STS AssumeRole for one tenant. Built with serde, never by
//! string replacement: the tenant id is already validated, and serde escapes whatever JSON needs.
//!
//! The effective permissions of the tenant's credentials are the intersection of the tenant-access
//! role's policy and this one, so even a bug in the function cannot reach past the tenant's prefix.

use serde::Serialize;
use thiserror::Error;

use crate::identity::ids::TenantId;
use crate::identity::keys::tenant_prefix;

/// The item-level actions the functions use. Never Scan, never PartiQL (`ExecuteStatement`, …), and
/// no batch operations (no code path sends one with tenant credentials).
pub const TENANT_ACTIONS: [&str; 6] = [
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:Query",
    "dynamodb:ConditionCheckItem",
];

/// The session tag every tenant session carries, naming its tenant. The tenant-access role's own
/// policy (template.yaml) allows item actions only where `dynamodb:LeadingKeys` is
/// `TENANT#${aws:PrincipalTag/TenantId}#*`, and its trust policy refuses an AssumeRole without it, so
/// the role is bound to one tenant per session even when no session policy is sent. A tenant id
/// (`[A-Za-z0-9_-]{1,64}`) is always a valid tag value (STS: `[\p{L}\p{Z}\p{N}_.:/=+\-@]{0,256}`).
pub const TENANT_TAG_KEY: &str = "TenantId";

/// STS refuses a packed session policy above 2,048 characters.
pub const MAX_POLICY_CHARS: usize = 2048;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyError {
    #[error("the session policy is {0} characters, over STS's limit of {MAX_POLICY_CHARS}")]
    TooLarge(usize),
    #[error("TENANT_ROLE_ARN is not an IAM role ARN (arn:<partition>:iam::<account>:role/<name>)")]
    BadRoleArn,
}

/// Where the table lives. The table ARN is derived, not configured, so it cannot disagree with
/// `TABLE_NAME`: partition and account come from the tenant role's ARN, region from `AWS_REGION`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableLocation {
    pub partition: String,
    pub region: String,
    pub account: String,
    pub table_name: String,
}

impl TableLocation {
    pub fn from_role_arn(
        role_arn: &str,
        region: &str,
        table_name: &str,
    ) -> Result<Self, PolicyError> {
        let parts: Vec<&str> = role_arn.splitn(6, ':').collect();
        match parts.as_slice() {
            ["arn", partition, "iam", "", account, resource]
                if !partition.is_empty()
                    && account.len() == 12
                    && account.bytes().all(|b| b.is_ascii_digit())
                    && resource.starts_with("role/") =>
            {
                Ok(Self {
                    partition: (*partition).to_owned(),
                    region: region.to_owned(),
                    account: (*account).to_owned(),
                    table_name: table_name.to_owned(),
                })
            }
            _ => Err(PolicyError::BadRoleArn),
        }
    }

    pub fn table_arn(&self) -> String {
        format!(
            "arn:{}:dynamodb:{}:{}:table/{}",
            self.partition, self.region, self.account, self.table_name
        )
    }

    pub fn indexes_arn(&self) -> String {
        format!("{}/index/*", self.table_arn())
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct PolicyDocument {
    version: &'static str,
    statement: Vec<Statement>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Statement {
    sid: &'static str,
    effect: &'static str,
    action: Vec<&'static str>,
    resource: Vec<String>,
    condition: Condition,
}

#[derive(Serialize)]
struct Condition {
    #[serde(rename = "ForAllValues:StringLike")]
    for_all_values_string_like: LeadingKeys<Vec<String>>,
    /// `ForAllValues` is vacuously true on an empty set: `Null = false` demands the key is present.
    #[serde(rename = "Null")]
    null: LeadingKeys<&'static str>,
}

#[derive(Serialize)]
struct LeadingKeys<T> {
    #[serde(rename = "dynamodb:LeadingKeys")]
    leading_keys: T,
}

/// The session policy for `tenant`, as the compact JSON string sent to STS.
pub fn session_policy(tenant: &TenantId, table: &TableLocation) -> Result<String, PolicyError> {
    let doc = PolicyDocument {
        version: "2012-10-17",
        statement: vec![Statement {
            sid: "TenantItemsOnly",
            effect: "Allow",
            action: TENANT_ACTIONS.to_vec(),
            resource: vec![table.table_arn(), table.indexes_arn()],
            condition: Condition {
                for_all_values_string_like: LeadingKeys {
                    leading_keys: vec![format!("{}*", tenant_prefix(tenant))],
                },
                null: LeadingKeys {
                    leading_keys: "false",
                },
            },
        }],
    };
    // Serializing plain structs of strings cannot fail.
    let json = serde_json::to_string(&doc).unwrap_or_default();
    if json.len() > MAX_POLICY_CHARS {
        return Err(PolicyError::TooLarge(json.len()));
    }
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> TableLocation {
        TableLocation::from_role_arn(
            "arn:aws:iam::123456789012:role/pooltable-tenant-access",
            "eu-west-1",
            "pooltable-dev",
        )
        .unwrap()
    }

    #[test]
    fn golden_policy_json() {
        let tenant = TenantId::parse("acme").unwrap();
        let expected = concat!(
            r#"{"Version":"2012-10-17","Statement":[{"Sid":"TenantItemsOnly","Effect":"Allow","#,
            r#""Action":["dynamodb:GetItem","dynamodb:PutItem","dynamodb:UpdateItem","dynamodb:DeleteItem","#,
            r#""dynamodb:Query","dynamodb:ConditionCheckItem"],"#,
            r#""Resource":["arn:aws:dynamodb:eu-west-1:123456789012:table/pooltable-dev","#,
            r#""arn:aws:dynamodb:eu-west-1:123456789012:table/pooltable-dev/index/*"],"#,
            r#""Condition":{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["<prefix>*"]},"#,
            r#""Null":{"dynamodb:LeadingKeys":"false"}}}]}"#
        )
        // `<prefix>` is the tenant's key prefix, `TENANT#acme#`
        .replace("<prefix>", &tenant_prefix(&tenant));
        assert_eq!(session_policy(&tenant, &table()).unwrap(), expected);
    }

    #[test]
    fn policy_never_allows_scan_or_partiql() {
        let json = session_policy(&TenantId::parse("acme").unwrap(), &table()).unwrap();
        for forbidden in ["Scan", "PartiQL", "ExecuteStatement", "dynamodb:*"] {
            assert!(!json.contains(forbidden), "policy mentions {forbidden}");
        }
    }

    #[test]
    fn policy_for_the_longest_tenant_and_table_fits_sts() {
        let tenant = TenantId::parse(&"t".repeat(64)).unwrap();
        let mut big = table();
        big.table_name = "x".repeat(255);
        let json = session_policy(&tenant, &big).unwrap();
        assert!(json.len() <= MAX_POLICY_CHARS, "{} chars", json.len());
    }

    #[test]
    fn table_location_refuses_a_non_role_arn() {
        for bad in [
            "",
            "arn:aws:iam::123:role/x",
            "arn:aws:s3:::bucket",
            "arn:aws:iam::123456789012:user/x",
        ] {
            assert_eq!(
                TableLocation::from_role_arn(bad, "r", "t"),
                Err(PolicyError::BadRoleArn)
            );
        }
    }
}
