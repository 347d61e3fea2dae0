//! A customer-managed key on the table (`TableKmsKeyArn`, issue #56): DynamoDB asks KMS on the
//! caller's behalf, so every role whose calls reach table data must be able to use the key, and
//! every role that makes a table under it (an own table, a point-in-time copy) must be able to grant
//! DynamoDB its use. Read from template.yaml: which roles reach the table is derived from their
//! policies (inline and managed), not listed here, so a role added later is held to the same rule.

use std::collections::BTreeMap;

use serde_yaml::Value;

fn template() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The value under a YAML tag (`!Ref X` → `X`), or the value itself.
fn untagged(v: &Value) -> &Value {
    match v {
        Value::Tagged(t) => &t.value,
        other => other,
    }
}

fn tag_of(v: &Value) -> Option<String> {
    match v {
        Value::Tagged(t) => Some(t.tag.to_string()),
        _ => None,
    }
}

/// Every action a policy document allows, lower-cased.
fn allowed_actions(document: &Value) -> Vec<String> {
    let statements = untagged(&document["Statement"]);
    let statements = statements
        .as_sequence()
        .cloned()
        .unwrap_or_else(|| vec![statements.clone()]);
    statements
        .iter()
        .filter(|s| s["Effect"].as_str() == Some("Allow"))
        .flat_map(|s| match untagged(&s["Action"]) {
            Value::Sequence(actions) => actions.clone(),
            one => vec![one.clone()],
        })
        .filter_map(|a| a.as_str().map(str::to_ascii_lowercase))
        .collect()
}

/// A role's managed policies: the names of the template's own (`!Ref X`), and whether each is
/// attached only under `HasTableKmsKey` (`!If [HasTableKmsKey, !Ref X, !Ref AWS::NoValue]`).
fn managed(role: &Value) -> Vec<(String, bool)> {
    let list = untagged(&role["Properties"]["ManagedPolicyArns"]);
    list.as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|entry| match tag_of(entry).as_deref() {
            Some("!Ref") => Some((untagged(entry).as_str()?.to_owned(), false)),
            Some("!If") => {
                let parts = untagged(entry).as_sequence()?;
                (parts[0].as_str() == Some("HasTableKmsKey")
                    && tag_of(&parts[1]).as_deref() == Some("!Ref"))
                .then(|| {
                    (
                        untagged(&parts[1]).as_str().unwrap_or_default().to_owned(),
                        true,
                    )
                })
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_customer_managed_table_key_is_usable_by_every_role_that_reaches_the_table_and_granted_by_its_makers(
) {
    // GIVEN the template's roles, and every action each may take (its inline policies and the
    // template's managed policies it attaches)
    let t = template();
    let resources = t["Resources"].as_mapping().unwrap();
    let resource = |name: &str| &t["Resources"][name];
    let mut actions_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut key_use: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for (name, body) in resources {
        if body["Type"].as_str() != Some("AWS::IAM::Role") {
            continue;
        }
        let name = name.as_str().unwrap().to_owned();
        let mut actions: Vec<String> = untagged(&body["Properties"]["Policies"])
            .as_sequence()
            .into_iter()
            .flatten()
            .flat_map(|p| allowed_actions(&p["PolicyDocument"]))
            .collect();
        let mut uses = (false, false);
        for (policy, conditional) in managed(body) {
            let document = &resource(&policy)["Properties"]["PolicyDocument"];
            actions.extend(allowed_actions(document));
            match policy.as_str() {
                "TableKeyUsePolicy" => uses.0 = conditional,
                "TableKeyGrantsPolicy" => uses.1 = conditional,
                _ => {}
            }
        }
        actions_of.insert(name.clone(), actions);
        key_use.insert(name, uses);
    }

    // THEN every role with a DynamoDB data action (items, batches, queries, the stream) holds the
    // key's use, and only when the key is set
    let data = |a: &String| {
        a.starts_with("dynamodb:")
            && ["item", "query", "scan", "getrecords", "batch"]
                .iter()
                .any(|verb| a.contains(verb))
    };
    let reaching: Vec<&String> = actions_of
        .iter()
        .filter(|(_, actions)| actions.iter().any(data))
        .map(|(name, _)| name)
        .collect();
    assert!(
        reaching.len() >= 8,
        "the roles that reach the table: {reaching:?}"
    );
    for role in &reaching {
        assert!(
            key_use[*role].0,
            "{role} reaches the table but holds no TableKeyUsePolicy under HasTableKmsKey"
        );
    }
    // AND every role that makes tables (own tables, point-in-time copies) may grant the key to them
    for (role, actions) in &actions_of {
        let makes = actions
            .iter()
            .any(|a| a == "dynamodb:createtable" || a == "dynamodb:restoretabletopointintime");
        assert_eq!(
            makes, key_use[role].1,
            "{role}: makes tables {makes}, holds TableKeyGrantsPolicy {}",
            key_use[role].1
        );
    }
    // AND no role holds the key but through DynamoDB, and a grant only for an AWS resource
    for policy in ["TableKeyUsePolicy", "TableKeyGrantsPolicy"] {
        let body = resource(policy);
        assert_eq!(body["Condition"].as_str(), Some("HasTableKmsKey"));
        let statements = body["Properties"]["PolicyDocument"]["Statement"]
            .as_sequence()
            .unwrap();
        for s in statements {
            let condition = serde_yaml::to_string(&s["Condition"]).unwrap();
            assert!(
                condition.contains("kms:ViaService"),
                "{policy}: {condition}"
            );
            assert!(s["Action"]
                .as_sequence()
                .map(|a| a
                    .iter()
                    .all(|a| a.as_str().is_some_and(|a| a.starts_with("kms:"))))
                .unwrap_or(s["Action"].as_str().is_some_and(|a| a.starts_with("kms:"))));
        }
    }
    let grants = serde_yaml::to_string(
        &resource("TableKeyGrantsPolicy")["Properties"]["PolicyDocument"]["Statement"][0]
            ["Condition"],
    )
    .unwrap();
    assert!(grants.contains("kms:GrantIsForAWSResource"), "{grants}");
    // AND the table itself is under the key when it is set
    let sse = serde_yaml::to_string(&resource("Table")["Properties"]["SSESpecification"]).unwrap();
    assert!(
        sse.contains("HasTableKmsKey")
            && sse.contains("KMSMasterKeyId")
            && sse.contains("TableKmsKeyArn"),
        "{sse}"
    );
}
