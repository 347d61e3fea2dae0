//! template.yaml as data: the tenant-access role's policies and the function roles' DynamoDB
//! statements, with the CloudFormation references they hold resolved to the ARNs a test names, so
//! the IAM evaluator can judge the deployed policies.

use serde_json::Value as Json;
use serde_yaml::Value as Yaml;

/// template.yaml, parsed once per test process: the property tests evaluate its policies thousands
/// of times, and parsing it (a debug build's serde_yaml, about 0.2 s a parse) was most of their time.
pub fn load() -> &'static Yaml {
    static TEMPLATE: std::sync::OnceLock<Yaml> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    })
}

/// The ARNs the role's policies refer to through `!GetAtt`.
pub struct Arns<'a> {
    pub table: &'a str,
    pub functions_role: &'a str,
}

/// The pool's ARN as the dev stage deploys it (`pooltable-dev` in us-east-1, account
/// 123456789012): what the role tests and the judge resolve the template's references to.
pub const DEV_TABLE_ARN: &str = "arn:aws:dynamodb:us-east-1:123456789012:table/pooltable-dev";

/// [`DEV_TABLE_ARN`], with the dev stage's functions' role.
pub const DEV_ARNS: Arns<'static> = Arns {
    table: DEV_TABLE_ARN,
    functions_role: "arn:aws:iam::123456789012:role/pooltable-dev-functions",
};

/// Every function's role, by logical id: the roles `pooltable gen` writes from routes.yaml, under
/// the path `/pooltable-<Stage>/` that the tenant-access and tenant-operator roles' trust admits.
pub fn function_roles() -> Vec<String> {
    let template = load();
    template["Resources"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| {
            r["Type"].as_str() == Some("AWS::IAM::Role")
                && serde_yaml::to_string(&r["Properties"]["Path"])
                    .unwrap()
                    .contains("/pooltable-${Stage}/")
        })
        .map(|(k, _)| k.as_str().unwrap().to_owned())
        .collect()
}

/// The account and stage of the test's deployment, read from its functions role
/// (`arn:aws:iam::<account>:role/pooltable-<stage>-functions`).
fn account_and_stage(arns: &Arns) -> (String, String) {
    let account = arns.functions_role.split(':').nth(4).unwrap().to_owned();
    let stage = arns
        .functions_role
        .rsplit('/')
        .next()
        .and_then(|n| n.strip_prefix("pooltable-"))
        .and_then(|n| n.strip_suffix("-functions"))
        .unwrap()
        .to_owned();
    (account, stage)
}

/// The ARN of function role `logical`, named as its logical id under the functions' path.
pub fn role_arn(arns: &Arns, logical: &str) -> Option<String> {
    let (account, stage) = account_and_stage(arns);
    function_roles()
        .iter()
        .any(|r| r == logical)
        .then(|| format!("arn:aws:iam::{account}:role/pooltable-{stage}/{logical}"))
}

/// A request from function role `logical`: its ARN and its tags (`aws:PrincipalArn`,
/// `aws:PrincipalTag/*`), as a trust policy sees its AssumeRole.
pub fn caller(arns: &Arns, logical: &str) -> crate::iam::AuthzRequest {
    let tags = role(logical)["Tags"]
        .as_sequence()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|t| {
            (
                t["Key"].as_str().unwrap().to_owned(),
                t["Value"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    crate::iam::AuthzRequest {
        principal_arn: role_arn(arns, logical),
        principal_tags: tags,
        ..Default::default()
    }
}

/// YAML to JSON, resolving `!GetAtt Table.Arn` (and its stream), `!GetAtt <function role>.Arn` and
/// `!Sub` over the table, the account, the region and the stage (a `${…}` left over fails the
/// test). Another resource's `!GetAtt X.Arn` becomes `arn:test:X` and a `!Ref X` becomes `ref:X`:
/// names no request of the tenant's ever carries, so a statement on them allows nothing the tests
/// ask unless they ask for that name; an `!If` is its first branch (the condition true).
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
                        .and_then(|r| role_arn(arns, r))
                        .is_some() =>
                {
                    Json::String(role_arn(arns, att.trim_end_matches(".Arn")).unwrap())
                }
                // `${!x}` is CloudFormation's escape for the literal `${x}` (an IAM policy variable).
                ("!Sub", s) => {
                    let (account, stage) = account_and_stage(arns);
                    let text = s
                        .replace("${Table.Arn}", arns.table)
                        .replace("${AWS::Partition}", "aws")
                        .replace("${AWS::Region}", "us-east-1")
                        .replace("${AWS::AccountId}", &account)
                        .replace("${Stage}", &stage);
                    assert_eq!(
                        text.matches("${").count(),
                        text.matches("${!").count(),
                        "the policy holds an unresolved reference {s:?}"
                    );
                    Json::String(text.replace("${!", "${"))
                }
                ("!GetAtt", "Table.StreamArn") => {
                    Json::String(format!("{}/stream/{STREAM_LABEL}", arns.table))
                }
                // Another resource of the template (a queue, a bus): named by its logical id.
                ("!GetAtt", att) if att.ends_with(".Arn") => {
                    Json::String(format!("arn:test:{}", att.trim_end_matches(".Arn")))
                }
                ("!Ref", name) => Json::String(format!("ref:{name}")),
                // A condition's branch: the deployment with the condition true (ControlPlane=sbt).
                ("!If", _) => {
                    let branches = t.value.as_sequence().unwrap();
                    resolve(&branches[1], arns)
                }
                other => panic!("the policy holds an unresolved reference {other:?}"),
            }
        }
    }
}

/// The label of the table's stream, in its ARN.
pub const STREAM_LABEL: &str = "2026-01-01T00:00:00.000";

/// Every statement of function role `logical`'s managed policies (a generated role has only those),
/// whatever the service, as one policy: queues and buses are `arn:test:<logical id>`, a `!Ref` is
/// `ref:<logical id>`, and a conditional statement is in (its condition true).
pub fn function_role_policy(arns: &Arns, logical: &str) -> Json {
    let template = load();
    let resources = &template["Resources"];
    let props = &resources[logical]["Properties"];
    assert!(
        props["Policies"].is_null(),
        "{logical}: a generated role has no inline policy"
    );
    let mut statements = Vec::new();
    for managed in props["ManagedPolicyArns"].as_sequence().unwrap() {
        let Yaml::Tagged(t) = managed else {
            panic!("{logical}: {managed:?}")
        };
        let name = match t.tag.to_string().as_str() {
            "!Ref" => t.value.as_str().unwrap().to_owned(),
            // The table key's (with TableKmsKeyArn; tests/tests/all/table_key.rs): kms: only.
            "!If" => continue,
            other => panic!("{logical}: {other}"),
        };
        let document = &resources[name.as_str()]["Properties"]["PolicyDocument"];
        for statement in document["Statement"].as_sequence().unwrap() {
            let resolved = resolve(statement, arns);
            // A conditional statement's other branch is AWS::NoValue: no statement.
            if resolved != Json::String("ref:AWS::NoValue".into()) {
                statements.push(resolved);
            }
        }
    }
    serde_json::json!({"Version": "2012-10-17", "Statement": statements})
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
    let (account, _) = account_and_stage(arns);
    let account_root = format!("arn:aws:iam::{account}:root");
    let mut trust = resolve(&role(logical)["AssumeRolePolicyDocument"], arns);
    let statements = trust["Statement"].as_array_mut().unwrap();
    // A statement naming the account's root applies to every principal of the account; its
    // conditions (aws:PrincipalArn, aws:PrincipalTag) then choose among them.
    statements.retain(|s| match &s["Principal"]["AWS"] {
        Json::String(p) => *p == principal || *p == account_root,
        Json::Array(ps) => ps.iter().any(|p| *p == principal || *p == account_root),
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
