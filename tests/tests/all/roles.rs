//! One role per function, generated from routes.yaml (issue 56): every function's role, as
//! template.yaml holds it, judged by the project's IAM evaluator against its declaration: what it
//! reaches (`reaches`, and for a route what every route reaches), the sessions of the platform's
//! partition it takes (`platform`), and the DynamoDB requests its route declares (`doc.requests`).
//! Each probe is a request some declaration names, or one none may send; a function's role must
//! allow exactly the probes its declaration grants.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::operation::delete_item::DeleteItemInput;
use aws_sdk_dynamodb::operation::get_item::GetItemInput;
use aws_sdk_dynamodb::operation::put_item::PutItemInput;
use aws_sdk_dynamodb::operation::query::QueryInput;
use aws_sdk_dynamodb::operation::update_item::UpdateItemInput;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_runtime_api::client::interceptors::context::Input;
use devtools::routes::{Function, PlatformSessions, Reach, RouteTable};
use integration::iam::{is_allowed, AuthzRequest};
use integration::template::{
    caller, function_role_policy, function_roles, load, tenant_operator_role_policy,
    tenant_role_policy, trust_policy_for, DEV_ARNS, DEV_TABLE_ARN, STREAM_LABEL,
};
use integration::{onboarded, Harness};
use shared::identity::ids::TenantId;
use shared::identity::keys::{
    quota_window_pk, raw_key, tenant_record_key, usage_counter_pk, PK, SK,
};
use shared::isolation::guard::{check_scoped_input, is_guard_violation};
use shared::isolation::policy::{scoped_session_policy, Scope, TableLocation, TenantTables};

const TABLE: &str = DEV_TABLE_ARN;
const TENANT_ACCESS: &str = "arn:aws:iam::123456789012:role/pooltable-dev-tenant-access";
const TENANT_OPERATOR: &str = "arn:aws:iam::123456789012:role/pooltable-dev-tenant-operator";

/// Every reach a declaration can name: each must be granted by some probe below.
const REACHES: [Reach; 15] = [
    Reach::TenantSessions,
    Reach::OffboardingReports,
    Reach::OperatorSessions,
    Reach::TenantKeys,
    Reach::TenantKeysShredding,
    Reach::OwnTables,
    Reach::OwnTablesReading,
    Reach::RestoreTables,
    Reach::RestoreTablesReading,
    Reach::ImportQueueSend,
    Reach::ImportQueueConsume,
    Reach::LaneQueueSend,
    Reach::LaneQueueConsume,
    Reach::ControlPlaneBus,
    Reach::TableStream,
];

/// A request a function's own credentials could send, and the reaches that grant it (none: no
/// function may send it; `ALL`: every function, its log lines).
struct Probe {
    request: AuthzRequest,
    granted_by: &'static [Reach],
}

const ALL: &[Reach] = &[];

fn request(action: &str, resource: &str) -> AuthzRequest {
    AuthzRequest {
        action: action.to_owned(),
        resource: resource.to_owned(),
        ..Default::default()
    }
}

fn keyed(action: &str, resource: &str, key: &str) -> AuthzRequest {
    AuthzRequest {
        leading_keys: Some(vec![key.to_owned()]),
        ..request(action, resource)
    }
}

fn probes() -> Vec<(Probe, bool)> {
    use Reach::*;
    let own = format!("{TABLE}-tenant-acme");
    let restore = format!("{TABLE}-restore-yesterday");
    // A point-in-time restore's copy, named as point_in_time::scratch_table names it.
    let copy = format!("{TABLE}-restore-acme-1733460000000");
    let stream = format!("{TABLE}/stream/{STREAM_LABEL}");
    let record = raw_key("acme", "TENANT");
    let mut tagged_create = request("dynamodb:CreateTable", &own);
    tagged_create.request_tags = [("tenant".to_owned(), "acme".to_owned())].into();
    let mut tagged_own = request("dynamodb:TagResource", &own);
    tagged_own.resource_tags = [("tenant".to_owned(), "globex".to_owned())].into();
    let mut reply = request("events:PutEvents", "ref:ControlPlaneBusArn");
    reply.service_keys = [(
        "events:source".to_owned(),
        "ref:ApplicationPlaneEventSource".to_owned(),
    )]
    .into();
    // A tenant's data key: KMS only under a tenant's encryption context (store::keys).
    let kms_key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd";
    let in_context = |action: &str, context: &[(&str, &str)]| {
        let mut r = request(action, kms_key);
        r.service_keys = context
            .iter()
            .map(|(k, v)| (format!("kms:EncryptionContext:{k}"), (*v).to_owned()))
            .collect();
        r
    };
    let tenant_context = [("pooltable:tenant", "acme"), ("pooltable:keyVersion", "1")];
    let foreign_context = [("pooltable:tenant", "acme"), ("aws:ebs:id", "vol-1")];
    let mut forged = reply.clone();
    forged.service_keys = [("events:source".to_owned(), "sbt-control-plane".to_owned())].into();
    let granted: Vec<(AuthzRequest, &'static [Reach])> = vec![
        (
            request(
                "logs:PutLogEvents",
                "arn:aws:logs:us-east-1:123456789012:log-group:/pooltable/dev/get-product:log-stream:s",
            ),
            ALL,
        ),
        (request("sts:AssumeRole", TENANT_ACCESS), &[TenantSessions]),
        // Every session it takes carries its tenant's tag: the caller's own policy must allow
        // passing it, besides the role's trust policy (the account root there defers to it).
        (request("sts:TagSession", TENANT_ACCESS), &[TenantSessions]),
        (
            request("secretsmanager:GetSecretValue", "ref:SigningKeysSecret"),
            &[TenantSessions],
        ),
        (keyed("dynamodb:GetItem", TABLE, &record), &[TenantSessions]),
        (
            request("dynamodb:Query", "arn:test:TenantKeysTable"),
            &[TenantSessions],
        ),
        (in_context("kms:Decrypt", &tenant_context), &[TenantSessions]),
        (
            request("dynamodb:PutItem", "arn:test:TenantKeysTable"),
            &[TenantKeys],
        ),
        (
            request("dynamodb:DeleteItem", "arn:test:TenantKeysTable"),
            &[TenantKeys, TenantKeysShredding],
        ),
        (
            in_context("kms:GenerateDataKey", &tenant_context),
            &[TenantKeys],
        ),
        (
            keyed("dynamodb:Query", TABLE, &raw_key("_platform", "OFFBOARDED#acme")),
            &[OffboardingReports],
        ),
        (request("sts:AssumeRole", TENANT_OPERATOR), &[OperatorSessions]),
        (
            request("sts:TagSession", TENANT_OPERATOR),
            &[OperatorSessions],
        ),
        (
            request("dynamodb:DescribeTable", TABLE),
            &[OwnTables, RestoreTables],
        ),
        (
            request("dynamodb:DescribeContinuousBackups", TABLE),
            &[OwnTables, RestoreTables],
        ),
        (request("dynamodb:DescribeTimeToLive", TABLE), &[OwnTables]),
        (
            request("dynamodb:DescribeTable", &own),
            &[OwnTables, OwnTablesReading],
        ),
        (request("dynamodb:ListTagsOfResource", &own), &[OwnTables]),
        (request("dynamodb:TagResource", &own), &[OwnTables]),
        (tagged_create, &[OwnTables]),
        (
            request("dynamodb:RestoreTableToPointInTime", TABLE),
            &[RestoreTables],
        ),
        (
            request("dynamodb:DescribeTable", &restore),
            &[RestoreTables, RestoreTablesReading],
        ),
        (
            request("dynamodb:DeleteTable", &copy),
            &[RestoreTables, RestoreTablesReading],
        ),
        (
            request("dynamodb:GetItem", &restore),
            &[RestoreTables, RestoreTablesReading],
        ),
        (
            request("dynamodb:Query", &restore),
            &[RestoreTables, RestoreTablesReading],
        ),
        (
            request("dynamodb:Query", &format!("{restore}/index/GSI2")),
            &[RestoreTables, RestoreTablesReading],
        ),
        // The target's item actions a RestoreTableToPointInTime needs: only where one is started.
        (request("dynamodb:Scan", &restore), &[RestoreTables]),
        (request("dynamodb:PutItem", &restore), &[RestoreTables]),
        (request("dynamodb:BatchWriteItem", &restore), &[RestoreTables]),
        (
            request("sqs:SendMessage", "arn:test:ImportQueue"),
            &[ImportQueueSend, ImportQueueConsume],
        ),
        (
            request("sqs:ReceiveMessage", "arn:test:ImportQueue"),
            &[ImportQueueConsume],
        ),
        (
            request("sqs:DeleteMessage", "arn:test:ImportQueue"),
            &[ImportQueueConsume],
        ),
        (
            request("sqs:GetQueueAttributes", "arn:test:ImportQueue"),
            &[ImportQueueConsume],
        ),
        (
            request("sqs:SendMessage", "arn:test:LaneQueue"),
            &[LaneQueueSend, LaneQueueConsume],
        ),
        (
            request("sqs:ReceiveMessage", "arn:test:LaneQueue"),
            &[LaneQueueConsume],
        ),
        (
            request("sqs:DeleteMessage", "arn:test:LaneQueue"),
            &[LaneQueueConsume],
        ),
        (
            request("sqs:GetQueueAttributes", "arn:test:LaneQueue"),
            &[LaneQueueConsume],
        ),
        (
            request("sqs:SendMessage", "arn:test:ControlPlaneDeadLetterQueue"),
            &[ControlPlaneBus],
        ),
        (reply, &[ControlPlaneBus]),
        (request("dynamodb:GetRecords", &stream), &[TableStream]),
        (request("dynamodb:GetShardIterator", &stream), &[TableStream]),
        (request("dynamodb:DescribeStream", &stream), &[TableStream]),
        (
            request("dynamodb:ListStreams", &format!("{TABLE}/stream/*")),
            &[TableStream],
        ),
        (
            request("events:PutEvents", "arn:test:LifecycleEventBus"),
            &[TableStream],
        ),
        (
            request("sqs:SendMessage", "arn:test:LifecycleEventsDeadLetterQueue"),
            &[TableStream],
        ),
    ];
    // What no declaration names: no function's own credentials may send it.
    let refused = vec![
        forged,
        tagged_own,
        request("dynamodb:Scan", TABLE),
        request("dynamodb:DeleteTable", TABLE),
        // A restore source an operator made: read, never deleted (only a copy's name is).
        request("dynamodb:DeleteTable", &restore),
        request("dynamodb:UpdateTable", TABLE),
        request("dynamodb:CreateTable", &own),
        request("dynamodb:UpdateTable", &own),
        request("dynamodb:DeleteTable", &own),
        request("dynamodb:UpdateTimeToLive", &own),
        request("dynamodb:UpdateContinuousBackups", &own),
        request("dynamodb:GetItem", &own),
        request("dynamodb:RestoreTableToPointInTime", &own),
        keyed("dynamodb:GetItem", TABLE, &raw_key("acme", "PRODUCT#1")),
        keyed("dynamodb:PutItem", TABLE, &record),
        keyed("dynamodb:UpdateItem", TABLE, &record),
        keyed("dynamodb:Query", TABLE, &record),
        keyed("dynamodb:Query", TABLE, &raw_key("_platform", "DRIVE")),
        keyed(
            "dynamodb:PutItem",
            TABLE,
            &raw_key("_platform", "OFFBOARDED#acme"),
        ),
        request(
            "dynamodb:GetRecords",
            &format!("{TABLE}-tenant-acme/stream/x"),
        ),
        request("sqs:ReceiveMessage", "arn:test:ControlPlaneDeadLetterQueue"),
        request("sqs:SendMessage", "arn:test:ImportDeadLetterQueue"),
        request("sqs:SendMessage", "arn:test:LaneDeadLetterQueue"),
        request("sqs:ReceiveMessage", "arn:test:LaneDeadLetterQueue"),
        request("events:PutEvents", "arn:test:OtherBus"),
        request(
            "sts:AssumeRole",
            "arn:aws:iam::123456789012:role/pooltable-dev-other",
        ),
        request("secretsmanager:GetSecretValue", "ref:OtherSecret"),
        request("kms:Decrypt", "*"),
        in_context("kms:Decrypt", &foreign_context),
        in_context("kms:Decrypt", &[]),
        in_context("kms:GenerateDataKey", &[]),
        in_context("kms:ScheduleKeyDeletion", &tenant_context),
        request("dynamodb:Scan", "arn:test:TenantKeysTable"),
        request("dynamodb:UpdateItem", "arn:test:TenantKeysTable"),
        request("iam:PassRole", "*"),
    ];
    granted
        .into_iter()
        .map(|(request, granted_by)| {
            (
                Probe {
                    request,
                    granted_by,
                },
                true,
            )
        })
        .chain(refused.into_iter().map(|request| {
            (
                Probe {
                    request,
                    granted_by: &[],
                },
                false,
            )
        }))
        .collect()
}

fn table() -> RouteTable {
    RouteTable::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")).unwrap()
}

#[test]
fn every_function_has_its_generated_role_and_nothing_else_holds_one() {
    // GIVEN the route table and the template
    let table = table();
    let template = load();
    // THEN each function runs as its own role, and the template's function roles are exactly those
    let mut roles = BTreeSet::new();
    for f in &table.functions {
        let resource = &template["Resources"][f.resource().as_str()];
        let role = serde_yaml::to_string(&resource["Properties"]["Role"]).unwrap();
        assert_eq!(
            role.trim(),
            format!("!GetAtt {}.Arn", f.role()),
            "{}",
            f.bin
        );
        roles.insert(f.role());
    }
    let generated: BTreeSet<String> = function_roles().into_iter().collect();
    assert_eq!(generated, roles);
}

#[test]
fn each_functions_role_allows_exactly_what_its_declaration_names() {
    // GIVEN every probe, with the reaches that grant it
    let probes = probes();
    let probed: BTreeSet<Reach> = probes
        .iter()
        .flat_map(|(p, _)| p.granted_by.iter().copied())
        .collect();
    assert_eq!(
        probed,
        REACHES.into_iter().collect(),
        "a reach no probe grants"
    );
    for f in &table().functions {
        // WHEN its role's policies judge each probe
        let policy = function_role_policy(&DEV_ARNS, &f.role());
        let reaches = f.reaches();
        for (probe, grantable) in &probes {
            let expected = *grantable
                && (probe.granted_by.is_empty()
                    || probe.granted_by.iter().any(|r| reaches.contains(r)));
            // THEN it allows what its declaration grants, and refuses everything else
            assert_eq!(
                is_allowed(&policy, &probe.request),
                expected,
                "{} ({}, reaching {reaches:?}): {} on {}",
                f.bin,
                f.role(),
                probe.request.action,
                probe.request.resource
            );
        }
    }
}

#[test]
fn only_the_functions_whose_code_makes_keys_or_own_tables_may_make_them() {
    // GIVEN the functions whose code makes a tenant's key (onboarding, keying and a rotation, the
    // control plane's onboarding) and those that make or take an own table (onboarding, a move's
    // start, the control plane's onboarding)
    let make_keys = [
        "onboard-tenant",
        "update-tenant",
        "drive-lifecycle",
        "control-plane-events",
    ];
    let make_tables = ["onboard-tenant", "update-tenant", "control-plane-events"];
    // AND those that end an offboarding or a move back to the pool
    let end_offboardings = [
        "offboard-tenant",
        "drive-lifecycle",
        "work-lanes",
        "control-plane-events",
    ];
    let own = format!("{TABLE}-tenant-acme");
    let mut tagged_create = request("dynamodb:CreateTable", &own);
    tagged_create.request_tags = [("tenant".to_owned(), "acme".to_owned())].into();
    let mut generate = request(
        "kms:GenerateDataKey",
        "arn:aws:kms:us-east-1:123456789012:key/1",
    );
    generate.service_keys = [
        ("kms:EncryptionContext:pooltable:tenant", "acme"),
        ("kms:EncryptionContext:pooltable:keyVersion", "1"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .into();
    for f in &table().functions {
        let policy = function_role_policy(&DEV_ARNS, &f.role());
        let allowed = |r: &AuthzRequest| is_allowed(&policy, r);
        let bin = f.bin.as_str();
        // THEN only the first may put a key row or generate a data key
        let puts_keys = request("dynamodb:PutItem", "arn:test:TenantKeysTable");
        assert_eq!(allowed(&puts_keys), make_keys.contains(&bin), "{bin}");
        assert_eq!(allowed(&generate), make_keys.contains(&bin), "{bin}");
        // AND only the second may make or tag an own table
        assert_eq!(allowed(&tagged_create), make_tables.contains(&bin), "{bin}");
        let tags = request("dynamodb:TagResource", &own);
        assert_eq!(allowed(&tags), make_tables.contains(&bin), "{bin}");
        // AND each function that ends an offboarding may shred the key and describe the table
        if end_offboardings.contains(&bin) {
            let shreds = request("dynamodb:DeleteItem", "arn:test:TenantKeysTable");
            assert!(allowed(&shreds), "{bin}");
            assert!(allowed(&request("dynamodb:DescribeTable", &own)), "{bin}");
        }
    }
}

#[test]
fn only_the_functions_whose_code_starts_a_restore_may_restore_the_pool_or_write_a_copy() {
    // GIVEN the functions whose code starts a point-in-time restore (a restore's call, and the
    // driver stepping its preparing phase: point_in_time::start)
    let start_restores = ["restore-tenant", "drive-lifecycle"];
    // AND those that step a restore's lanes or end it (reading the copy, dropping it at the end)
    let step_restores = ["restore-tenant", "drive-lifecycle", "work-lanes"];
    let copy = format!("{TABLE}-restore-acme-1733460000000");
    for f in &table().functions {
        let policy = function_role_policy(&DEV_ARNS, &f.role());
        let allowed =
            |action: &str, resource: &str| is_allowed(&policy, &request(action, resource));
        let bin = f.bin.as_str();
        // THEN only the first may restore the pool, or write to or scan a copy (the target's item
        // actions AWS requires of whoever calls RestoreTableToPointInTime)
        let starts = start_restores.contains(&bin);
        assert_eq!(
            allowed("dynamodb:RestoreTableToPointInTime", TABLE),
            starts,
            "{bin}"
        );
        for action in [
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchWriteItem",
            "dynamodb:Scan",
        ] {
            assert_eq!(allowed(action, &copy), starts, "{bin}: {action}");
        }
        // AND only the second may read, describe and drop a copy
        for action in [
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:DescribeTable",
            "dynamodb:DeleteTable",
        ] {
            let steps = step_restores.contains(&bin);
            assert_eq!(allowed(action, &copy), steps, "{bin}: {action}");
        }
        // AND none may delete a source named otherwise (an operator's, which a restore only reads)
        for source in ["yesterday", "acme-1", "acme-1733460000000/index/GSI2"] {
            let table = format!("{TABLE}-restore-{source}");
            assert!(!allowed("dynamodb:DeleteTable", &table), "{bin}: {table}");
        }
    }
}

/// Whether function `f`'s role may take a session of role `target` (its trust policy) for
/// `tenant`, tagged `PlatformAccess=access` unless `all`.
fn takes_session(f: &Function, target: &str, tenant: &str, access: &str) -> bool {
    let trust = trust_policy_for(&DEV_ARNS, target, &f.role());
    let mut tags: BTreeMap<String, String> = [("TenantId".to_owned(), tenant.to_owned())].into();
    if access != "all" {
        tags.insert("PlatformAccess".into(), access.into());
    }
    ["sts:AssumeRole", "sts:TagSession"].iter().all(|action| {
        is_allowed(
            &trust,
            &AuthzRequest {
                action: (*action).into(),
                resource: TENANT_ACCESS.into(),
                request_tags: tags.clone(),
                ..caller(&DEV_ARNS, &f.role())
            },
        )
    })
}

#[test]
fn each_function_takes_exactly_the_sessions_it_declares() {
    let accesses = ["all", "usage", "read", "imports-due"];
    let template = load();
    let default_access = template["Globals"]["Function"]["Environment"]["Variables"]
        ["PLATFORM_SESSION_ACCESS"]
        .as_str()
        .unwrap()
        .to_owned();
    for f in &table().functions {
        let reaches = f.reaches();
        // GIVEN its declaration: tenant sessions, and which of the platform's partition
        let platform = f.platform_sessions();
        // THEN the tenant-access role admits it for a tenant exactly when it reaches tenants
        assert_eq!(
            takes_session(f, "TenantAccessRole", "acme", "all"),
            reaches.contains(&Reach::TenantSessions),
            "{}",
            f.bin
        );
        // AND for the platform's partition, exactly the access it declares (all: every one)
        let admitted: Vec<&str> = accesses
            .into_iter()
            .filter(|a| takes_session(f, "TenantAccessRole", "_platform", a))
            .collect();
        let expected: Vec<&str> = match platform {
            None => vec![],
            Some(PlatformSessions::All) => accesses.to_vec(),
            Some(p) => vec![p.as_str()],
        };
        assert_eq!(admitted, expected, "{}", f.bin);
        // AND the function asks for that access (its resource's PLATFORM_SESSION_ACCESS)
        if let Some(p) = platform {
            let variables = &template["Resources"][f.resource().as_str()]["Properties"]
                ["Environment"]["Variables"];
            let asked = variables["PLATFORM_SESSION_ACCESS"]
                .as_str()
                .unwrap_or(&default_access);
            assert_eq!(asked, p.as_str(), "{}", f.bin);
        }
        // AND the tenant-operator role admits it exactly when it declares operator sessions, and
        // never for the platform's partition
        assert_eq!(
            takes_session(f, "TenantOperatorRole", "acme", "all"),
            reaches.contains(&Reach::OperatorSessions),
            "{}",
            f.bin
        );
        assert!(!takes_session(f, "TenantOperatorRole", "_platform", "all"));
    }
}

#[test]
fn each_routes_declared_requests_are_allowed_on_the_credentials_it_sends_them_with() {
    let tenant_session = tenant_role_policy(&DEV_ARNS);
    // (a read-only route's sessions also carry a reader's session policy)
    let location =
        TableLocation::from_role_arn(TENANT_ACCESS, "us-east-1", "pooltable-dev").unwrap();
    let reader: serde_json::Value = serde_json::from_str(
        &scoped_session_policy(
            &TenantId::parse("acme").unwrap(),
            &location,
            &TenantTables::pooled("pooltable-dev"),
            Scope::Reader,
        )
        .unwrap(),
    )
    .unwrap();
    let operator_session = tenant_operator_role_policy(&DEV_ARNS);
    let session = |policy: &serde_json::Value, action: &str, key: &str| {
        is_allowed(
            policy,
            &AuthzRequest {
                principal_tags: [("TenantId".to_owned(), "acme".to_owned())].into(),
                ..keyed(&format!("dynamodb:{action}"), TABLE, key)
            },
        )
    };
    for f in &table().functions {
        let Some(doc) = &f.doc else { continue };
        let reaches = f.reaches();
        let own = function_role_policy(&DEV_ARNS, &f.role());
        for (operation, _) in &doc.requests.operations {
            // GIVEN each operation its route declares
            let allowed = match operation.as_str() {
                // THEN an item operation goes out on a tenant session, which its role takes, on
                // the tenant's items; a transaction's items are authorized one by one
                "GetItem" | "Query" | "PutItem" | "UpdateItem" | "DeleteItem"
                | "ConditionCheckItem" | "TransactWriteItems" | "TransactGetItems" => {
                    let actions: &[&str] = match operation.as_str() {
                        "TransactWriteItems" => &["PutItem", "UpdateItem", "DeleteItem"],
                        "TransactGetItems" => &["GetItem"],
                        op => &[op],
                    };
                    reaches.contains(&Reach::TenantSessions)
                        && actions.iter().all(|a| {
                            session(&tenant_session, a, &raw_key("acme", "PRODUCT#1"))
                                || (reaches.contains(&Reach::OperatorSessions)
                                    && session(&operator_session, a, &raw_key("acme", "TENANT")))
                        })
                }
                // AND a DescribeTable (a restore's source) on the function's own credentials
                "DescribeTable" => is_allowed(
                    &own,
                    &request(
                        "dynamodb:DescribeTable",
                        &format!("{TABLE}-restore-yesterday"),
                    ),
                ),
                other => panic!("{}: the evaluator does not model {other}", f.bin),
            };
            assert!(allowed, "{}: {operation}", f.bin);
            // AND a read-only route's declared reads pass its reader's session policy too
            if f.reads_only() {
                assert!(
                    session(&reader, operation, &raw_key("acme", "PRODUCT#1")),
                    "{}: {operation} on a reader's session",
                    f.bin
                );
            }
        }
    }
}

#[test]
fn a_tenant_route_never_holds_operator_sessions_tables_or_the_whole_platform() {
    // GIVEN every route a tenant calls
    for f in table()
        .functions
        .iter()
        .filter(|f| f.route().is_some() && f.caller == devtools::routes::Caller::Tenant)
    {
        // THEN its role reaches tenants' sessions, the reports, and at most a queue to send to
        let extra: Vec<Reach> = f
            .reaches()
            .into_iter()
            .filter(|r| {
                !matches!(
                    r,
                    Reach::TenantSessions | Reach::OffboardingReports | Reach::ImportQueueSend
                )
            })
            .collect();
        assert!(extra.is_empty(), "{}: {extra:?}", f.bin);
        assert_ne!(
            f.platform_sessions(),
            Some(PlatformSessions::All),
            "{}",
            f.bin
        );
    }
}

/// An SDK input of `action` at partition key `pk` (its sort key the same) in `table`.
fn input(action: &str, table: &str, pk: &str) -> Input {
    let key = Some(std::collections::HashMap::from([
        (PK.to_owned(), AttributeValue::S(pk.to_owned())),
        (SK.to_owned(), AttributeValue::S(pk.to_owned())),
    ]));
    match action {
        "GetItem" => Input::erase(
            GetItemInput::builder()
                .table_name(table)
                .set_key(key)
                .build()
                .unwrap(),
        ),
        "PutItem" => Input::erase(
            PutItemInput::builder()
                .table_name(table)
                .set_item(key)
                .build()
                .unwrap(),
        ),
        "UpdateItem" => Input::erase(
            UpdateItemInput::builder()
                .table_name(table)
                .set_key(key)
                .update_expression("ADD n :one")
                .build()
                .unwrap(),
        ),
        "DeleteItem" => Input::erase(
            DeleteItemInput::builder()
                .table_name(table)
                .set_key(key)
                .build()
                .unwrap(),
        ),
        "Query" => Input::erase(
            QueryInput::builder()
                .table_name(table)
                .key_condition_expression("PK = :pk")
                .expression_attribute_values(":pk", AttributeValue::S(pk.to_owned()))
                .build()
                .unwrap(),
        ),
        other => panic!("no input for {other}"),
    }
}

/// Issue 56, item 1: a read-only route holds read actions only. Its role's own are reads (above);
/// its tenant sessions read, and write only its metering counters, in the session policy, with
/// the tenant-access role, and in the guard alike.
#[test]
fn a_read_only_routes_sessions_read_and_write_only_its_counters_in_every_layer() {
    // GIVEN the route table: a route whose declared requests are all reads starts read-only
    let table = table();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut readers = 0;
    for f in table.functions.iter().filter(|f| f.route().is_some()) {
        let main = std::fs::read_to_string(
            root.join(format!("functions/{}/src/bin/{}.rs", f.krate, f.bin)),
        )
        .unwrap();
        assert_eq!(
            main.contains("runtime::start_read_only()"),
            f.reads_only(),
            "{}",
            f.bin
        );
        readers += usize::from(f.reads_only());
    }
    assert!(readers >= 20, "{readers} read-only routes");
    // AND a reader's session, pooled and in its own table, under the tenant-access role
    let acme = TenantId::parse("acme").unwrap();
    let location =
        TableLocation::from_role_arn(TENANT_ACCESS, "us-east-1", "pooltable-dev").unwrap();
    let role = tenant_role_policy(&DEV_ARNS);
    let product = raw_key("acme", "PRODUCT#1");
    let record = tenant_record_key(&acme);
    let usage = usage_counter_pk(&acme, 3);
    let window = quota_window_pk(&acme, 0);
    let cases = [
        ("GetItem", &product, true),
        ("Query", &product, true),
        ("PutItem", &product, false),
        ("UpdateItem", &product, false),
        ("DeleteItem", &product, false),
        ("UpdateItem", &usage, true),
        ("UpdateItem", &window, true),
        ("Query", &window, true),
        ("PutItem", &usage, false),
        ("DeleteItem", &window, false),
        ("GetItem", &record, true),
        ("UpdateItem", &record, false),
        ("PutItem", &record, false),
    ];
    for tables in [
        TenantTables::pooled("pooltable-dev"),
        TenantTables::own("pooltable-dev-tenant-acme", "pooltable-dev"),
    ] {
        let session: serde_json::Value = serde_json::from_str(
            &scoped_session_policy(&acme, &location, &tables, Scope::Reader).unwrap(),
        )
        .unwrap();
        for (action, pk, expected) in &cases {
            // WHEN it sends each request, at the table the key is in
            let at = match *pk == &record {
                true => tables.record.to_string(),
                false => tables.items.to_string(),
            };
            let asked = AuthzRequest {
                principal_tags: [("TenantId".to_owned(), "acme".to_owned())].into(),
                ..keyed(
                    &format!("dynamodb:{action}"),
                    &location.of_table(&at).table_arn(),
                    pk,
                )
            };
            // THEN IAM (the session policy and the role) allows exactly the reads and the counters
            let iam = is_allowed(&session, &asked) && is_allowed(&role, &asked);
            assert_eq!(iam, *expected, "{action} {pk} in {at}");
            // AND the guard decides the same
            let guard = check_scoped_input(&acme, Scope::Reader, &input(action, &at, pk)).is_ok();
            assert_eq!(guard, *expected, "guard: {action} {pk}");
        }
    }
    // AND while its tenant moves, its session holds the pull's writes (on the puller's client,
    // whose guard is a tenant route's), never the record's
    let moving = TenantTables::own("pooltable-dev-tenant-acme", "pooltable-dev").with_move(
        shared::isolation::policy::Moving {
            other: std::sync::Arc::from("pooltable-dev"),
            pull: true,
            writes_move_at: 0,
            settled_at: 0,
        },
    );
    let session: serde_json::Value = serde_json::from_str(
        &scoped_session_policy(&acme, &location, &moving, Scope::Reader).unwrap(),
    )
    .unwrap();
    let own = location.of_table("pooltable-dev-tenant-acme").table_arn();
    let pool = location.table_arn();
    let with_tag = |r: AuthzRequest| AuthzRequest {
        principal_tags: [("TenantId".to_owned(), "acme".to_owned())].into(),
        ..r
    };
    assert!(is_allowed(
        &session,
        &with_tag(keyed("dynamodb:PutItem", &own, &product))
    ));
    assert!(is_allowed(
        &session,
        &with_tag(keyed("dynamodb:DeleteItem", &pool, &product))
    ));
    assert!(!is_allowed(
        &session,
        &with_tag(keyed("dynamodb:PutItem", &pool, &record))
    ));
    assert!(check_scoped_input(
        &acme,
        Scope::Reader,
        &input("PutItem", "pooltable-dev", &product)
    )
    .is_err());
}

#[tokio::test]
async fn a_read_only_routes_client_reads_adds_to_its_counters_and_is_refused_a_write() {
    // GIVEN an onboarded tenant, and its client as a read-only route gets it
    let h = Harness::new().await;
    let tenant = onboarded(&h, "reader").await;
    let id = TenantId::parse(&tenant).unwrap();
    let db = h
        .app
        .tenants
        .for_tenant(&id, &TenantTables::pooled(&h.table), Scope::Reader)
        .await
        .expect("a reader's client");
    let product = raw_key(&tenant, "PRODUCT#0");
    let before = h.items_under(&product).await;
    // WHEN it reads a product partition, adds to a usage counter, and tries to overwrite the product
    let read = db
        .sdk_client()
        .query()
        .table_name(db.table.as_ref())
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(product.clone()))
        .send()
        .await;
    let counted = db
        .sdk_client()
        .update_item()
        .table_name(db.table.as_ref())
        .key(PK, AttributeValue::S(usage_counter_pk(&id, 1)))
        .key(SK, AttributeValue::S(usage_counter_pk(&id, 1)))
        .update_expression("ADD n :one")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .send()
        .await;
    let written = db
        .sdk_client()
        .put_item()
        .table_name(db.table.as_ref())
        .item(PK, AttributeValue::S(product.clone()))
        .item(SK, AttributeValue::S(product.clone()))
        .send()
        .await;
    // THEN the read and the count go out, the write is refused before it leaves the process, and
    // the product is as it was
    assert!(read.is_ok(), "{read:?}");
    assert!(counted.is_ok(), "{counted:?}");
    let err = written.expect_err("a reader's session never writes an item");
    assert!(is_guard_violation(&err), "{err:?}");
    assert_eq!(h.items_under(&product).await, before);
    // AND moto recorded the reader's session with its read-only policy
    let location =
        TableLocation::from_role_arn(integration::ROLE_ARN, "us-east-1", &h.table).unwrap();
    let expected = scoped_session_policy(
        &id,
        &location,
        &TenantTables::pooled(&h.table),
        Scope::Reader,
    )
    .unwrap();
    assert!(h.recorded_policies(&tenant).await.contains(&expected));
}

/// The judge of the functions' own requests (`integration::judge`) refuses an action a role does
/// not hold: a DeleteTable of the pool by `get-product`, signed with the stack's own key.
#[tokio::test]
async fn the_judge_refuses_an_action_the_functions_role_does_not_hold() {
    // GIVEN a request signed as the functions' execution role
    let key = std::env::var("AWS_ACCESS_KEY_ID").expect("the stack's access key");
    let authorization = format!("AWS4-HMAC-SHA256 Credential={key}/20261205/us-east-1/dynamodb");
    // WHEN get-product's call sends a DeleteTable of the pool
    let judged = tokio::spawn(integration::judge::as_function("get-product", async move {
        integration::judge::judge(
            Some(&authorization),
            Some("DynamoDB_20120810.DeleteTable"),
            Some(br#"{"TableName": "pooltable-test-x"}"#),
        )
    }))
    .await;
    // THEN the judge fails it
    assert!(judged.is_err_and(|e| e.is_panic()));
}

/// And it judges what a route sends on its own credentials on the stack: a fresh container's
/// read of the tenant's record (the directory) while `get-product` runs.
#[tokio::test]
async fn the_judge_judges_a_routes_own_credential_requests_on_the_stack() {
    // GIVEN an onboarded tenant, and a container that has not read its record
    let h = Harness::new().await;
    let tenant = onboarded(&h, "judged").await;
    let fresh = h.another_container().await;
    // WHEN the tenant reads a product there
    let auth = integration::Auth::Tenant(tenant.clone());
    let req = fresh.caller(&auth).request(
        "get-product",
        &integration::routes::params(&[("productId", "p-1")]),
        None,
    );
    let dispatched = integration::dispatch::dispatch(&fresh.app, "get-product", req);
    let (answer, judged) =
        integration::judge::as_function_counted("get-product", Box::pin(dispatched)).await;
    // THEN it answered, and at least its record read was judged against its role
    assert_eq!(integration::resp(answer).status, 404);
    assert!(judged > 0, "nothing get-product sent was judged");
}
