//! One IAM role per function, from its declaration in routes.yaml (`reaches`, `platform`): the
//! managed policies of template.in.yaml that its reaches name, and the tags the tenant-access and
//! tenant-operator roles' trust policies read (`PlatformSessions`: which sessions of the platform's
//! partition it may take; `OperatorSessions`: whether it may act as an operator). Every role is
//! under the path `/pooltable-<Stage>/`, which those trust policies admit, so they name no role.

use std::fmt::Write as _;

use crate::routes::{Function, Reach, RouteTable};

/// The path every function role is under (`aws:PrincipalArn` in the trust policies).
pub const ROLE_PATH: &str = "/pooltable-${Stage}/";

/// Every function's role, in the route table's order.
pub(super) fn roles(table: &RouteTable) -> String {
    table.functions.iter().map(role).collect()
}

fn role(f: &Function) -> String {
    let reaches = f.reaches();
    let names: Vec<&str> = reaches.iter().map(|r| r.name()).collect();
    let mut policies = vec!["!Ref TelemetryPolicy".to_owned()];
    policies.extend(reaches.iter().map(|r| format!("!Ref {}", r.policy())));
    if reaches.iter().any(|r| r.reads_table_data()) {
        policies.push("!If [HasTableKmsKey, !Ref TableKeyUsePolicy, !Ref AWS::NoValue]".into());
    }
    if reaches.iter().any(|r| r.makes_tables()) {
        policies.push("!If [HasTableKmsKey, !Ref TableKeyGrantsPolicy, !Ref AWS::NoValue]".into());
    }
    let mut tags = Vec::new();
    if let Some(platform) = f.platform_sessions() {
        tags.push(format!(
            "{{Key: PlatformSessions, Value: {}}}",
            platform.as_str()
        ));
    }
    if reaches.contains(&Reach::OperatorSessions) {
        tags.push("{Key: OperatorSessions, Value: \"yes\"}".to_owned());
    }
    let mut s = format!(
        "  # {bin}'s role (routes.yaml): {reach}.
  {logical}:
    Type: AWS::IAM::Role
    Properties:
      Path: !Sub \"{ROLE_PATH}\"
      AssumeRolePolicyDocument:
        {{Version: \"2012-10-17\", Statement: [{{Effect: Allow, Principal: {{Service: lambda.amazonaws.com}}, Action: sts:AssumeRole}}]}}
      ManagedPolicyArns: [{policies}]
",
        bin = f.bin,
        reach = if names.is_empty() {
            "its log lines and traces only".to_owned()
        } else {
            names.join(", ")
        },
        logical = f.role(),
        policies = policies.join(", "),
    );
    if !tags.is_empty() {
        let _ = writeln!(s, "      Tags: [{}]", tags.join(", "));
    }
    s
}

/// `extra` (a route's `template:` lines) with `PLATFORM_SESSION_ACCESS` set to `value`: in its
/// `Environment.Variables` when it has them, else in an `Environment` of its own.
pub(super) fn with_platform_access(extra: &str, value: &str) -> String {
    let variable = format!("    PLATFORM_SESSION_ACCESS: {value}\n");
    let mut out = String::with_capacity(extra.len() + variable.len());
    let mut in_environment = false;
    let mut set = false;
    for line in extra.lines() {
        out.push_str(line);
        out.push('\n');
        if line == "Environment:" {
            in_environment = true;
        } else if in_environment && line == "  Variables:" && !set {
            out.push_str(&variable);
            set = true;
        }
    }
    if !set {
        out.push_str("Environment:\n  Variables:\n");
        out.push_str(&variable);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_platform_access_joins_the_routes_variables_or_makes_its_own() {
        let with =
            with_platform_access("Timeout: 30\nEnvironment:\n  Variables:\n    A: b\n", "all");
        assert_eq!(
            with,
            "Timeout: 30\nEnvironment:\n  Variables:\n    PLATFORM_SESSION_ACCESS: all\n    A: b\n"
        );
        let alone = with_platform_access("Timeout: 30\n", "read");
        assert_eq!(
            alone,
            "Timeout: 30\nEnvironment:\n  Variables:\n    PLATFORM_SESSION_ACCESS: read\n"
        );
    }
}
