//! template.yaml as data: the tenant-access role's policies and the function roles' DynamoDB
//! statements, with the CloudFormation references they hold resolved to the ARNs a test names, so
//! the IAM evaluator can judge the deployed policies.

use serde_json::Value as Json;
use serde_yaml::Value as Yaml;

pub fn load() -> Yaml {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The ARNs the role's policies refer to through `!GetAtt`.
pub struct Arns<'a> {
    pub table: &'a str,
    pub functions_role: &'a str,
}

/// The function roles the tenant-access role's trust policy may name, by logical id.
pub const FUNCTION_ROLES: [&str; 7] = [
    "FunctionExecutionRole",
    "OnboardingFunctionRole",
    "PlatformFunctionRole",
    "UsageReaderFunctionRole",
    "ImportProducerRole",
    "ImportConsumerRole",
    "ControlPlaneFunctionRole",
];

/// The ARN of function role `logical` (template.yaml names them `pooltable-<stage>-functions`,
/// `…-platform-functions`, `…-import-producer`, `…-import-consumer`), from the test's functions role.
pub fn role_arn(arns: &Arns, logical: &str) -> Option<String> {
    let suffix = match logical {
        "FunctionExecutionRole" => "-functions",
        "OnboardingFunctionRole" => "-onboarding",
        "PlatformFunctionRole" => "-platform-functions",
        "UsageReaderFunctionRole" => "-usage-reader",
        "ImportProducerRole" => "-import-producer",
        "ImportConsumerRole" => "-import-consumer",
        "ControlPlaneFunctionRole" => "-control-plane",
        _ => return None,
    };
    Some(arns.functions_role.replace("-functions", suffix))
}

/// YAML to JSON, resolving `!GetAtt Table.Arn`, `!GetAtt <function role>.Arn` and `!Sub` over the
/// table; any other reference fails the test, so a new one cannot slip past unevaluated.
fn resolve(v: &Yaml, arns: &Arns) -> Json {
    match v {
        Yaml::Null => Json::Null,
        Yaml::Bool(b) => Json::Bool(*b),
        Yaml::Number(n) => Json::String(n.to_string()),
        Yaml::String(s) => Json::String(s.clone()),
        Yaml::Sequence(items) => Json::Array(items.iter().map(|i| resolve(i, arns)).collect()),
        Yaml::Mapping(m) => Json::Object(
            m.iter()
                .map(|(k, v)| (k.as_str().unwrap().to_owned(), resolve(v, arns)))
                .collect(),
        ),
        Yaml::Tagged(t) => {
            let text = t.value.as_str().unwrap_or_default();
            match (t.tag.to_string().as_str(), text) {
                ("!GetAtt", "Table.Arn") => Json::String(arns.table.to_owned()),
                ("!GetAtt", att)
                    if att
                        .strip_suffix(".Arn")
                        .is_some_and(|r| FUNCTION_ROLES.contains(&r)) =>
                {
                    Json::String(role_arn(arns, att.trim_end_matches(".Arn")).unwrap())
                }
                // `${!x}` is CloudFormation's escape for the literal `${x}` (an IAM policy variable).
                ("!Sub", s)
                    if s.matches("${").count()
                        == s.matches("${Table.Arn}").count() + s.matches("${!").count() =>
                {
                    Json::String(s.replace("${Table.Arn}", arns.table).replace("${!", "${"))
                }
                other => panic!("the policy holds an unresolved reference {other:?}"),
            }
        }
    }
}

fn tenant_role() -> Yaml {
    role("TenantAccessRole")
}

fn role(logical: &str) -> Yaml {
    load()["Resources"][logical]["Properties"].clone()
}

/// The tenant-operator role's own policy (`TenantOperatorRole`: the operator paths' sessions).
pub fn tenant_operator_role_policy(arns: &Arns) -> Json {
    let policies = role("TenantOperatorRole")["Policies"].clone();
    let policies = policies.as_sequence().unwrap();
    assert_eq!(policies.len(), 1, "the tenant-operator role has one policy");
    resolve(&policies[0]["PolicyDocument"], arns)
}

/// The statements of role `logical`'s trust policy (the tenant-access or the tenant-operator role)
/// that name function role `function_role` as a principal: those IAM applies to its callers.
pub fn trust_policy_for(arns: &Arns, logical: &str, function_role: &str) -> Json {
    let principal =
        role_arn(arns, function_role).unwrap_or_else(|| panic!("no function role {function_role}"));
    let mut trust = resolve(&role(logical)["AssumeRolePolicyDocument"], arns);
    let statements = trust["Statement"].as_array_mut().unwrap();
    statements.retain(|s| match &s["Principal"]["AWS"] {
        Json::String(p) => *p == principal,
        Json::Array(ps) => ps.iter().any(|p| *p == principal),
        _ => false,
    });
    trust
}

/// The tenant-access role's own (identity) policy, as deployed.
pub fn tenant_role_policy(arns: &Arns) -> Json {
    let policies = tenant_role()["Policies"].clone();
    let policies = policies.as_sequence().unwrap();
    assert_eq!(policies.len(), 1, "the tenant-access role has one policy");
    resolve(&policies[0]["PolicyDocument"], arns)
}

/// Every statement of function role `role`'s policies, inline and managed (`ManagedPolicyArns`
/// naming the template's own policies), that mentions DynamoDB, as one policy. A managed policy
/// named any other way fails the test, so none can slip past unevaluated.
pub fn function_role_dynamodb_policy(arns: &Arns, role: &str) -> Json {
    let template = load();
    let resources = &template["Resources"];
    let props = &resources[role]["Properties"];
    let mut documents: Vec<Yaml> = props["Policies"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|p| p["PolicyDocument"].clone())
        .collect();
    for managed in props["ManagedPolicyArns"]
        .as_sequence()
        .into_iter()
        .flatten()
    {
        let Yaml::Tagged(t) = managed else {
            panic!("{role} holds a managed policy the template does not define: {managed:?}")
        };
        if t.tag == "!If" {
            // The customer-managed table key's policies (kms: actions only, through DynamoDB;
            // tests/tests/all/table_key.rs): no DynamoDB action to evaluate.
            let parts = t.value.as_sequence().cloned().unwrap_or_default();
            let key_policy = serde_yaml::to_string(&parts).unwrap_or_default();
            assert!(
                parts.first().and_then(Yaml::as_str) == Some("HasTableKmsKey")
                    && (key_policy.contains("TableKeyUsePolicy")
                        || key_policy.contains("TableKeyGrantsPolicy")),
                "{role}: a conditional managed policy other than the table key's: {key_policy}"
            );
            continue;
        }
        let name = t.value.as_str().unwrap_or_default();
        assert_eq!(t.tag.to_string(), "!Ref", "{role}: {name}");
        assert_eq!(
            resources[name]["Type"].as_str(),
            Some("AWS::IAM::ManagedPolicy"),
            "{role}: {name}"
        );
        documents.push(resources[name]["Properties"]["PolicyDocument"].clone());
    }
    let statements: Vec<Json> = documents
        .iter()
        .flat_map(|d| d["Statement"].as_sequence().cloned().unwrap_or_default())
        .filter(|s| serde_yaml::to_string(s).unwrap().contains("dynamodb"))
        .map(|s| resolve(&s, arns))
        .collect();
    serde_json::json!({"Version": "2012-10-17", "Statement": statements})
}

/// The tenant-access role's trust policy, as deployed.
pub fn tenant_role_trust_policy(arns: &Arns) -> Json {
    resolve(&tenant_role()["AssumeRolePolicyDocument"], arns)
}

/// The statements of the tenant-access role's trust policy that apply to a caller holding function
/// role `role`: IAM applies a statement of a resource policy only to the principals it names, which
/// the evaluator (`crate::iam`) does not model, so they are chosen here.
pub fn tenant_role_trust_policy_for(arns: &Arns, role: &str) -> Json {
    trust_policy_for(arns, "TenantAccessRole", role)
}
