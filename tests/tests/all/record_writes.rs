//! Issue 56, item 2: a tenant's record (`TENANT#t#TENANT`: status, tier, limits, placement, a
//! restore's state) is written by the operator paths only. A tenant route's session reads it and
//! checks it in a transaction, but its session policy, the tenant-access role and the guard each
//! refuse a write of it; the operator paths' sessions assume the tenant-operator role, which only
//! the operator functions' roles may assume.

use aws_sdk_dynamodb::operation::{
    delete_item::DeleteItemInput, get_item::GetItemInput, put_item::PutItemInput,
    transact_write_items::TransactWriteItemsInput, update_item::UpdateItemInput,
};
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem, Update};
use aws_smithy_runtime_api::client::interceptors::context::Input;
use serde_json::{json, Value};

use integration::iam::{is_allowed, AuthzRequest};
use integration::template::{
    caller, function_roles, tenant_operator_role_policy, tenant_role_policy, trust_policy_for,
    DEV_ARNS, DEV_TABLE_ARN,
};
use integration::{onboarded, Harness};
use shared::identity::ids::TenantId;
use shared::identity::keys::{raw_key, tenant_record_key};
use shared::isolation::guard::{check_input, check_scoped_input, is_guard_violation};
use shared::isolation::policy::{
    scoped_session_policy, session_policy_for, Scope, TableLocation, TenantTables,
};

const POOL: &str = "pooltable-dev";
const TABLE: &str = DEV_TABLE_ARN;
const WRITES: [&str; 3] = ["PutItem", "UpdateItem", "DeleteItem"];

fn location() -> TableLocation {
    TableLocation::from_role_arn(
        "arn:aws:iam::123456789012:role/pooltable-dev-tenant-access",
        "us-east-1",
        POOL,
    )
    .unwrap()
}

/// IAM's question for `action` on the pool at partition key `key`, in a session tagged `acme`.
fn on_pool(action: &str, key: &str) -> AuthzRequest {
    AuthzRequest {
        action: format!("dynamodb:{action}"),
        resource: TABLE.into(),
        leading_keys: Some(vec![key.to_owned()]),
        principal_tags: [("TenantId".to_string(), "acme".to_string())].into(),
        ..Default::default()
    }
}

fn policy(json: &str) -> Value {
    serde_json::from_str(json).unwrap()
}

#[test]
fn a_tenants_session_and_role_refuse_writes_of_its_record_and_an_operators_allow_them() {
    // GIVEN acme's record key, one of its items, and the four policies: a tenant route's session
    // (pooled and in its own table), the tenant-access role, an operator's session and the
    // tenant-operator role
    let acme = TenantId::parse("acme").unwrap();
    let record = tenant_record_key(&acme);
    let product = raw_key("acme", "PRODUCT#0");
    let own = TenantTables::own("pooltable-dev-tenant-acme", POOL);
    let pooled = TenantTables::pooled(POOL);
    let tenants = [
        (
            "pooled session",
            policy(&session_policy_for(&acme, &location(), &pooled).unwrap()),
        ),
        (
            "own-table session",
            policy(&session_policy_for(&acme, &location(), &own).unwrap()),
        ),
        ("tenant-access role", tenant_role_policy(&DEV_ARNS)),
    ];
    let operators = [
        (
            "operator's pooled session",
            policy(&scoped_session_policy(&acme, &location(), &pooled, Scope::Operator).unwrap()),
        ),
        (
            "operator's own-table session",
            policy(&scoped_session_policy(&acme, &location(), &own, Scope::Operator).unwrap()),
        ),
        (
            "tenant-operator role",
            tenant_operator_role_policy(&DEV_ARNS),
        ),
    ];
    for (name, p) in &tenants {
        // THEN a tenant's refuses every write of the record, and reads and checks it
        for action in WRITES {
            assert!(
                !is_allowed(p, &on_pool(action, &record)),
                "{name}: {action}"
            );
        }
        for action in ["GetItem", "ConditionCheckItem"] {
            assert!(is_allowed(p, &on_pool(action, &record)), "{name}: {action}");
        }
    }
    for (name, p) in &operators {
        // AND an operator's writes it
        for action in WRITES.into_iter().chain(["GetItem", "ConditionCheckItem"]) {
            assert!(is_allowed(p, &on_pool(action, &record)), "{name}: {action}");
        }
    }
    // AND both still write the tenant's other items, and neither another tenant's record
    for (name, p) in tenants
        .iter()
        .chain(&operators)
        .filter(|(n, _)| !n.contains("own-table"))
    {
        for action in WRITES {
            assert!(
                is_allowed(p, &on_pool(action, &product)),
                "{name}: {action}"
            );
            let other = raw_key("acme2", "TENANT");
            assert!(!is_allowed(p, &on_pool(action, &other)), "{name}: {action}");
        }
    }
}

#[test]
fn the_tenant_operator_roles_items_statement_is_the_tenant_access_roles() {
    // GIVEN the two roles' policies, as template.yaml deploys them
    let statement = |p: &Value, sid: &str| {
        p["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["Sid"] == sid)
            .cloned()
            .unwrap_or_else(|| panic!("no statement {sid}"))
    };
    let access = tenant_role_policy(&DEV_ARNS);
    let operator = tenant_operator_role_policy(&DEV_ARNS);
    // THEN they grant the same items, and only the tenant-access role refuses the record's writes
    assert_eq!(
        statement(&access, "OwnTenantItemsOnly"),
        statement(&operator, "OwnTenantItemsOnly")
    );
    assert_eq!(statement(&access, "NoTenantRecordWrites")["Effect"], "Deny");
    // (its one other statement: its tenant's own table, own_table_management.rs's)
    let sids: Vec<&str> = operator["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["Sid"].as_str())
        .collect();
    assert_eq!(sids, ["OwnTenantItemsOnly", "OwnTableOfItsTenant"]);
}

#[test]
fn only_the_operator_functions_may_assume_the_tenant_operator_role_and_never_for_the_platform() {
    // GIVEN each function role asking for a tenant-operator session tagged with a tenant id
    let assumes = |role: &str, tenant: &str| {
        let trust = trust_policy_for(&DEV_ARNS, "TenantOperatorRole", role);
        ["sts:AssumeRole", "sts:TagSession"].iter().all(|action| {
            is_allowed(
                &trust,
                &AuthzRequest {
                    action: (*action).into(),
                    resource: "arn:aws:iam::123456789012:role/pooltable-dev-tenant-operator".into(),
                    request_tags: [("TenantId".to_string(), tenant.to_string())].into(),
                    ..caller(&DEV_ARNS, role)
                },
            )
        })
    };
    let operators = [
        "OnboardTenantRole",
        "UpdateTenantRole",
        "OffboardTenantRole",
        "RestoreTenantRole",
        "DriveLifecycleRole",
        "ControlPlaneEventsRole",
        "WorkLanesRole",
    ];
    let roles = function_roles();
    for role in roles.iter().map(String::as_str) {
        // THEN only the operator paths' roles get one (routes.yaml: operator-sessions), for a tenant
        assert_eq!(assumes(role, "acme"), operators.contains(&role), "{role}");
        // AND none for the platform's partition, nor for an id a tenant cannot have
        for refused in ["_platform", "a b", "a@b", ""] {
            assert!(!assumes(role, refused), "{role}: {refused:?}");
        }
    }
}

fn record_item() -> std::collections::HashMap<String, AttributeValue> {
    let record = AttributeValue::S(tenant_record_key(&TenantId::parse("acme").unwrap()));
    [
        ("PK".to_string(), record.clone()),
        ("SK".to_string(), record),
    ]
    .into()
}

#[test]
fn the_guard_refuses_what_the_tenants_policy_refuses_and_lets_an_operator_write() {
    // GIVEN every way a request can write acme's record, and the ways it reads it
    let acme = TenantId::parse("acme").unwrap();
    let key = Some(record_item());
    let update = || {
        UpdateItemInput::builder()
            .table_name(POOL)
            .set_key(key.clone())
            .update_expression("SET tier = :t")
    };
    let in_transaction = |item: TransactWriteItem| {
        Input::erase(
            TransactWriteItemsInput::builder()
                .transact_items(item)
                .build()
                .unwrap(),
        )
    };
    let writes = [
        Input::erase(
            PutItemInput::builder()
                .table_name(POOL)
                .set_item(key.clone())
                .build()
                .unwrap(),
        ),
        Input::erase(update().build().unwrap()),
        Input::erase(
            DeleteItemInput::builder()
                .table_name(POOL)
                .set_key(key.clone())
                .build()
                .unwrap(),
        ),
        in_transaction(
            TransactWriteItem::builder()
                .update(
                    Update::builder()
                        .table_name(POOL)
                        .set_key(key.clone())
                        .update_expression("SET tier = :t")
                        .build()
                        .unwrap(),
                )
                .build(),
        ),
    ];
    let reads = [
        Input::erase(
            GetItemInput::builder()
                .table_name(POOL)
                .set_key(key.clone())
                .build()
                .unwrap(),
        ),
        in_transaction(
            TransactWriteItem::builder()
                .condition_check(
                    ConditionCheck::builder()
                        .table_name(POOL)
                        .set_key(key.clone())
                        .condition_expression("attribute_exists(PK)")
                        .build()
                        .unwrap(),
                )
                .build(),
        ),
    ];
    // THEN a tenant route's guard refuses each write and an operator's lets it through
    for input in &writes {
        let refused = check_input(&acme, input).unwrap_err();
        assert!(
            refused.reason.contains("never writes its record"),
            "{refused}"
        );
        assert!(check_scoped_input(&acme, Scope::Operator, input).is_ok());
    }
    // AND both read and check it
    for input in &reads {
        assert!(check_input(&acme, input).is_ok());
        assert!(check_scoped_input(&acme, Scope::Operator, input).is_ok());
    }
}

#[tokio::test]
async fn a_tenant_routes_client_cannot_change_its_record_and_the_operator_paths_still_do() {
    // GIVEN an onboarded tenant, its record as onboarding wrote it
    let h = Harness::new().await;
    let tenant = onboarded(&h, "rec").await;
    let id = TenantId::parse(&tenant).unwrap();
    let before = h.items_under(&tenant_record_key(&id)).await;
    assert_eq!(before.len(), 1);
    // WHEN a tenant route's client (what every tenant route gets from App::db) tries to raise its
    // own tier
    let db = h.app.db(&id).await.expect("the tenant's client");
    let record = AttributeValue::S(tenant_record_key(&id));
    let sent = db
        .sdk_client()
        .update_item()
        .table_name(db.record_table.as_ref())
        .key("PK", record.clone())
        .key("SK", record)
        .update_expression("SET tier = :t")
        .expression_attribute_values(":t", AttributeValue::S("premium".into()))
        .send()
        .await;
    // THEN the guard refused it before it left the process, and the record is as it was
    let err = sent.expect_err("a tenant's session never writes its record");
    assert!(is_guard_violation(&err), "{err:?}");
    assert_eq!(h.items_under(&tenant_record_key(&id)).await, before);
    // AND moto recorded the tenant's session with the refusal in its policy
    let location =
        TableLocation::from_role_arn(integration::ROLE_ARN, "us-east-1", &h.table).unwrap();
    let expected = session_policy_for(&id, &location, &TenantTables::pooled(&h.table)).unwrap();
    assert_eq!(h.recorded_policies(&tenant).await, vec![expected]);
    // WHEN an operator changes its tier, suspends and resumes it
    for change in [
        json!({"tier": "premium"}),
        json!({"status": "suspended"}),
        json!({"status": "active"}),
    ] {
        let r = h.operator().update_tenant(&tenant, change.clone()).await;
        assert_eq!(r.status, 200, "{change}: {}", r.body);
    }
    // THEN each change holds, through sessions of the tenant-operator role with no refusal
    let r = h.operator().get_tenant(&tenant).await;
    assert_eq!(
        (r.body["tier"].as_str(), r.body["status"].as_str()),
        (Some("premium"), Some("active"))
    );
    let operators = h.recorded_operator_policies(&tenant).await;
    assert!(!operators.is_empty());
    let operator_policy = scoped_session_policy(
        &id,
        &location,
        &TenantTables::pooled(&h.table),
        Scope::Operator,
    )
    .unwrap();
    assert!(operators
        .iter()
        .all(|p| *p == operator_policy && !p.contains("Deny")));
}

#[tokio::test]
async fn an_operator_call_for_a_tenant_never_onboarded_vends_no_credentials() {
    // GIVEN a tenant id that was never onboarded
    let h = Harness::new().await;
    let ghost = integration::unique("ghost");
    // WHEN an operator restores, re-shards, moves, exports and reads it
    let restore = h
        .operator()
        .restore_tenant(
            &ghost,
            json!({"from": {"table": format!("{}-restore-x", h.table)}}),
        )
        .await;
    let reshard = h
        .operator()
        .update_tenant(&ghost, json!({"shardCount": 4}))
        .await;
    let moved = h
        .operator()
        .update_tenant(&ghost, json!({"placement": "own"}))
        .await;
    let tier = h
        .operator()
        .update_tenant(&ghost, json!({"tier": "premium"}))
        .await;
    let read = h.operator().get_tenant(&ghost).await;
    // THEN each answers 404, and STS was never asked for a session of it
    for r in [&restore, &reshard, &moved, &tier, &read] {
        r.assert_problem(404);
    }
    assert!(h.recorded_policies(&ghost).await.is_empty());
    assert!(h.recorded_operator_policies(&ghost).await.is_empty());
}
