//! template.yaml as data: the tenant-access role's policies, with the CloudFormation references they
//! hold resolved to the ARNs a test names, so the IAM evaluator can judge the deployed policies.

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

/// YAML to JSON, resolving `!GetAtt Table.Arn`, `!GetAtt FunctionExecutionRole.Arn` and `!Sub` over
/// them; any other reference fails the test, so a new one cannot slip past unevaluated.
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
                ("!GetAtt", "FunctionExecutionRole.Arn") => {
                    Json::String(arns.functions_role.to_owned())
                }
                // The import functions' own roles (template.yaml names them by role name).
                ("!GetAtt", "ImportProducerRole.Arn") => Json::String(
                    arns.functions_role
                        .replace("-functions", "-import-producer"),
                ),
                ("!GetAtt", "ImportConsumerRole.Arn") => Json::String(
                    arns.functions_role
                        .replace("-functions", "-import-consumer"),
                ),
                ("!Sub", s) if s.matches("${").count() == s.matches("${Table.Arn}").count() => {
                    Json::String(s.replace("${Table.Arn}", arns.table))
                }
                other => panic!("the policy holds an unresolved reference {other:?}"),
            }
        }
    }
}

fn tenant_role() -> Yaml {
    load()["Resources"]["TenantAccessRole"]["Properties"].clone()
}

/// The tenant-access role's own (identity) policy, as deployed.
pub fn tenant_role_policy(arns: &Arns) -> Json {
    let policies = tenant_role()["Policies"].clone();
    let policies = policies.as_sequence().unwrap();
    assert_eq!(policies.len(), 1, "the tenant-access role has one policy");
    resolve(&policies[0]["PolicyDocument"], arns)
}

/// The functions' execution role's policy named `name`, as deployed.
pub fn function_role_policy(arns: &Arns, name: &str) -> Json {
    let role = load()["Resources"]["FunctionExecutionRole"]["Properties"].clone();
    let policy = role["Policies"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["PolicyName"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("the execution role has no policy {name}"))
        .clone();
    resolve(&policy["PolicyDocument"], arns)
}

/// The tenant-access role's trust policy, as deployed.
pub fn tenant_role_trust_policy(arns: &Arns) -> Json {
    resolve(&tenant_role()["AssumeRolePolicyDocument"], arns)
}
