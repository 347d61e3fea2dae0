//! Issue 56, item 3: the platform's partition (`_platform`) narrowed per function. A function that
//! does not act as the platform reaches it through a session tagged `PlatformAccess` (which the
//! tenant-access role's trust policy demands of its role: `events.rs`), and both layers hold that
//! session to its access: the tenant-access role's own policy, read from template.yaml, and the
//! session policy the function sends (`shared::isolation::policy::platform_session_policy`).
//! Judged by the project's IAM evaluator, each layer alone.

use std::collections::BTreeMap;

use integration::iam::{is_allowed, AuthzRequest};
use integration::template::{tenant_role_policy, DEV_ARNS, DEV_TABLE_ARN};
use serde_json::Value;
use shared::identity::keys::raw_key;
use shared::isolation::policy::{platform_session_policy, PlatformAccess, TableLocation};

const TABLE: &str = DEV_TABLE_ARN;

fn location() -> TableLocation {
    TableLocation::from_role_arn(
        "arn:aws:iam::123456789012:role/pooltable-dev-tenant-access",
        "us-east-1",
        "pooltable-dev",
    )
    .unwrap()
}

/// `action` on the pool's item of partition key `pk`, by a session tagged `tags`.
/// The request names the item's key attributes only (`dynamodb:Attributes`).
fn request(action: &str, pk: &str, tags: &[(&str, &str)]) -> AuthzRequest {
    naming(action, pk, &["PK", "SK"], tags)
}

/// `action` on the pool's item of partition key `pk`, naming the top-level attributes `attributes`
/// (its key's among them), by a session tagged `tags`.
fn naming(action: &str, pk: &str, attributes: &[&str], tags: &[(&str, &str)]) -> AuthzRequest {
    AuthzRequest {
        action: format!("dynamodb:{action}"),
        resource: TABLE.into(),
        leading_keys: Some(vec![pk.to_owned()]),
        attributes: Some(attributes.iter().map(|a| a.to_string()).collect()),
        principal_tags: tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        ..AuthzRequest::default()
    }
}

/// Whether an access allows `action` on partition key `pk`.
type Allows = fn(&str, &str) -> bool;

/// The platform's keys the sessions are judged on: an offboarding report, the driver's list, an
/// import deadline partition, a usage counter partition, the control plane's requests.
fn keys() -> [String; 5] {
    [
        "OFFBOARDED#acme",
        "DRIVE",
        "IMPORTS_DUE#3",
        "USAGE#5",
        "CONTROL",
    ]
    .map(|rest| raw_key("_platform", rest))
}

#[test]
fn each_narrowed_platform_session_reaches_exactly_its_keys_in_both_layers() {
    // GIVEN the tenant-access role's policy as deployed, and what each narrowed access must allow
    let role = tenant_role_policy(&DEV_ARNS);
    let reads = ["GetItem", "Query", "ConditionCheckItem"];
    let writes = ["PutItem", "UpdateItem", "DeleteItem"];
    let every_key = keys();
    let usage = &every_key[3];
    let cases: [(PlatformAccess, &str, Allows); 3] = [
        // the usage counters only, and only added to
        (PlatformAccess::Usage, "usage", |action, pk| {
            action == "UpdateItem" && pk.contains("#USAGE#")
        }),
        // reads of every key, and the usage counters
        (PlatformAccess::Read, "read", |action, pk| {
            ["GetItem", "Query", "ConditionCheckItem"].contains(&action)
                || (action == "UpdateItem" && pk.contains("#USAGE#"))
        }),
        // the imports' deadline list, only listed on and unlisted from, and the usage counters
        (PlatformAccess::ImportsDue, "imports-due", |action, pk| {
            (["UpdateItem", "DeleteItem"].contains(&action) && pk.contains("#IMPORTS_DUE#"))
                || (action == "UpdateItem" && pk.contains("#USAGE#"))
        }),
    ];
    for (access, tag, allowed) in cases {
        let session: Value =
            serde_json::from_str(&platform_session_policy(&location(), access).unwrap()).unwrap();
        let tags = [("TenantId", "_platform"), ("PlatformAccess", tag)];
        for pk in &every_key {
            for action in reads.iter().chain(&writes) {
                // WHEN the session sends the action on the key
                let r = request(action, pk, &tags);
                // THEN the role's policy alone, and the session policy alone, each decide it as the
                // access says: an offboarding report (which decides an operator's power) is never
                // deleted by the import producer's or the usage reader's session
                let expected = allowed(action, pk);
                assert_eq!(
                    is_allowed(&role, &r),
                    expected,
                    "role, {tag}: {action} {pk}"
                );
                assert_eq!(
                    is_allowed(&session, &r),
                    expected,
                    "session policy, {tag}: {action} {pk}"
                );
            }
        }
    }
    // AND a session of the whole partition (no PlatformAccess: the functions that act as the
    // platform) reaches every key of it
    let whole = [("TenantId", "_platform")];
    for pk in &every_key {
        for action in reads.iter().chain(&writes) {
            assert!(
                is_allowed(&role, &request(action, pk, &whole)),
                "{action} {pk}"
            );
        }
    }
    // AND a tenant's session carrying the tag is only ever narrowed, never widened: it reaches
    // nothing (no code path sends one)
    for tag in ["usage", "read", "imports-due"] {
        let tags = [("TenantId", "acme"), ("PlatformAccess", tag)];
        for action in reads.iter().chain(&writes) {
            assert!(
                !is_allowed(
                    &role,
                    &request(action, &raw_key("acme", "PRODUCT#p-1"), &tags)
                ),
                "{tag}: {action}"
            );
            assert!(!is_allowed(&role, &request(action, usage, &tags)), "{tag}");
        }
    }
}

/// One request of the import producer's session on its import's entry in the deadline list: the
/// attributes IAM sees it name (written from IAM's semantics: its key's, its expressions'
/// top-level names), the SDK input the guard sees, and whether it may be sent.
struct OnTheList {
    what: &'static str,
    action: &'static str,
    attributes: &'static [&'static str],
    /// `dynamodb:ReturnValues`, when the request asks.
    return_values: Option<&'static str>,
    input: aws_smithy_runtime_api::client::interceptors::context::Input,
    allowed: bool,
}

fn on_the_list() -> Vec<OnTheList> {
    use aws_sdk_dynamodb::operation::{
        delete_item::DeleteItemInput, put_item::PutItemInput, update_item::UpdateItemInput,
    };
    use aws_sdk_dynamodb::types::AttributeValue::{N, S};
    use aws_sdk_dynamodb::types::ReturnValue;
    use aws_smithy_runtime_api::client::interceptors::context::Input;
    let (pk, sk) = (
        raw_key("_platform", "IMPORTS_DUE#3"),
        raw_key("_platform", "IMPORTS_DUE#1767225600000#acme#i-1"),
    );
    let update_returning = |expression: &str,
                            condition: Option<&str>,
                            names: &[(&str, &str)],
                            returning: Option<ReturnValue>| {
        let mut u = UpdateItemInput::builder()
            .set_return_values(returning)
            .table_name("pooltable-dev")
            .key("PK", S(pk.clone()))
            .key("SK", S(sk.clone()))
            .update_expression(expression)
            .set_condition_expression(condition.map(str::to_owned))
            .expression_attribute_values(":v", N("1".into()));
        for (placeholder, name) in names {
            u = u.expression_attribute_names(*placeholder, *name);
        }
        Input::erase(u.build().unwrap())
    };
    let update = |expression: &str, condition: Option<&str>, names: &[(&str, &str)]| {
        update_returning(expression, condition, names, None)
    };
    let delete_returning = |returning: Option<ReturnValue>| {
        Input::erase(
            DeleteItemInput::builder()
                .table_name("pooltable-dev")
                .key("PK", S(pk.clone()))
                .key("SK", S(sk.clone()))
                .set_return_values(returning)
                .build()
                .unwrap(),
        )
    };
    let listing = [
        ("#kind", "kind"),
        ("#tenant", "tenantId"),
        ("#created", "createdAtMs"),
    ];
    let note = [
        ("#closed", "closedAtMs"),
        ("#import", "importId"),
        ("#kind", "itemKind"),
        ("#accepted", "accepted"),
        ("#counts", "finalCounts"),
    ];
    vec![
        OnTheList {
            what: "the listing (list_import)",
            action: "UpdateItem",
            attributes: &["PK", "SK", "kind", "tenantId", "createdAtMs"],
            return_values: None,
            input: update(
                "SET #kind = :v, #tenant = :v, #created = :v",
                None,
                &listing,
            ),
            allowed: true,
        },
        OnTheList {
            what: "the unlisting of an import refused over the bound (unlist_import)",
            action: "DeleteItem",
            attributes: &["PK", "SK"],
            return_values: None,
            input: delete_returning(None),
            allowed: true,
        },
        OnTheList {
            what: "the listing asking for nothing back by name",
            action: "UpdateItem",
            attributes: &["PK", "SK", "kind", "tenantId", "createdAtMs"],
            return_values: Some("NONE"),
            input: update_returning(
                "SET #kind = :v, #tenant = :v, #created = :v",
                None,
                &listing,
                Some(ReturnValue::None),
            ),
            allowed: true,
        },
        OnTheList {
            what: "the listing reading the entry back (another tenant's import and its counts)",
            action: "UpdateItem",
            attributes: &["PK", "SK", "kind", "tenantId", "createdAtMs"],
            return_values: Some("ALL_OLD"),
            input: update_returning(
                "SET #kind = :v, #tenant = :v, #created = :v",
                None,
                &listing,
                Some(ReturnValue::AllOld),
            ),
            allowed: false,
        },
        OnTheList {
            what: "the unlisting reading the entry back",
            action: "DeleteItem",
            attributes: &["PK", "SK"],
            return_values: Some("ALL_OLD"),
            input: delete_returning(Some(ReturnValue::AllOld)),
            allowed: false,
        },
        OnTheList {
            what: "the driver's note of the import's close (note_import_finished)",
            action: "UpdateItem",
            attributes: &[
                "PK",
                "SK",
                "closedAtMs",
                "importId",
                "itemKind",
                "accepted",
                "finalCounts",
            ],
            return_values: None,
            input: update(
                "SET #closed = :v, #import = :v, #kind = :v, #accepted = :v, #counts = :v",
                Some("attribute_exists(PK) AND attribute_not_exists(#closed)"),
                &note,
            ),
            allowed: false,
        },
        OnTheList {
            what: "a note set by its bare name",
            action: "UpdateItem",
            attributes: &["PK", "SK", "kind", "closedAtMs"],
            return_values: None,
            input: update("SET #kind = :v, closedAtMs = :v", None, &listing[..1]),
            allowed: false,
        },
        OnTheList {
            what: "a note taken off",
            action: "UpdateItem",
            attributes: &["PK", "SK", "closedAtMs"],
            return_values: None,
            input: update("REMOVE #closed", None, &note[..1]),
            allowed: false,
        },
        OnTheList {
            what: "a whole entry put, even of the listing's attributes",
            action: "PutItem",
            attributes: &["PK", "SK", "kind", "tenantId", "createdAtMs"],
            return_values: None,
            input: Input::erase(
                PutItemInput::builder()
                    .table_name("pooltable-dev")
                    .item("PK", S(pk.clone()))
                    .item("SK", S(sk.clone()))
                    .item("kind", S("IMPORT_DUE".into()))
                    .item("tenantId", S("_platform".into()))
                    .item("createdAtMs", N("1".into()))
                    .build()
                    .unwrap(),
            ),
            allowed: false,
        },
    ]
}

/// The lifecycle driver's note on an import's entry is its one `importFinished`: the import
/// producer's session, which may write the list, lists and unlists an entry and never notes one,
/// nor takes a note off, nor reads an entry back (`ReturnValues`), in each of the three layers.
#[test]
fn the_import_producers_session_lists_and_unlists_an_entry_but_never_notes_one_in_any_layer() {
    // GIVEN the tenant-access role's policy as deployed, the import producer's session policy, and
    // its guard
    let role = tenant_role_policy(&DEV_ARNS);
    let session: Value = serde_json::from_str(
        &platform_session_policy(&location(), PlatformAccess::ImportsDue).unwrap(),
    )
    .unwrap();
    let tags = [("TenantId", "_platform"), ("PlatformAccess", "imports-due")];
    for case in on_the_list() {
        // WHEN it sends the request on an import's entry
        let mut r = naming(
            case.action,
            &raw_key("_platform", "IMPORTS_DUE#3"),
            case.attributes,
            &tags,
        );
        if let Some(asked) = case.return_values {
            r.service_keys
                .insert("dynamodb:ReturnValues".into(), asked.into());
        }
        // THEN the role's policy alone, the session policy alone and the guard each decide it as
        // the list's use says
        assert_eq!(is_allowed(&role, &r), case.allowed, "role: {}", case.what);
        assert_eq!(
            is_allowed(&session, &r),
            case.allowed,
            "session policy: {}",
            case.what
        );
        let guard = shared::isolation::guard::check_platform_access(
            PlatformAccess::ImportsDue,
            &case.input,
        );
        assert_eq!(
            guard.is_ok(),
            case.allowed,
            "guard: {}: {guard:?}",
            case.what
        );
    }
    // AND a session of the whole partition (the driver's) is not narrowed by the guard
    for case in on_the_list() {
        assert!(
            shared::isolation::guard::check_platform_access(PlatformAccess::All, &case.input)
                .is_ok(),
            "{}",
            case.what
        );
    }
}

/// The attributes the role's policy lets the import producer name on the deadline list are the
/// ones the code's statement names (and the guard checks): written twice, in template.in.yaml and in
/// `PlatformAccess::statements`, so a listing attribute added to one is caught here, not in AWS.
#[test]
fn the_roles_deadline_list_attributes_are_the_codes() {
    // GIVEN the tenant-access role's policy as deployed
    let role = tenant_role_policy(&DEV_ARNS);
    // WHEN its statement of the deadline list and the code's are read
    let statement = role["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["Sid"] == "NarrowedPlatformSessionsImportDeadlines")
        .expect("the role's statement of the deadline list");
    let code = PlatformAccess::ImportsDue.statements().unwrap();
    let list = code
        .iter()
        .find(|s| s.attributes.is_some())
        .expect("the code's statement of the deadline list");
    // THEN both name the same attributes, the same return values and the same actions
    assert_eq!(
        statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"],
        serde_json::json!(list.attributes)
    );
    assert_eq!(
        statement["Condition"]["StringEqualsIfExists"]["dynamodb:ReturnValues"],
        serde_json::json!(list.return_values)
    );
    assert_eq!(statement["Action"], serde_json::json!(list.actions));
}

/// IAM has no condition key for `ReturnValuesOnConditionCheckFailure`: a session allowed a
/// conditional write on an entry could read it back when the condition fails. The import producer's
/// guard refuses such a request before it is sent (the role and the session policy allow it: this
/// limit is docs/isolation.md's).
#[test]
fn the_import_producers_guard_refuses_reading_an_entry_back_on_a_failed_condition() {
    use aws_sdk_dynamodb::operation::delete_item::DeleteItemInput;
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput;
    use aws_sdk_dynamodb::types::AttributeValue::S;
    use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure as OnFailure;
    use aws_sdk_dynamodb::types::{Delete, TransactWriteItem};
    use aws_smithy_runtime_api::client::interceptors::context::Input;
    // GIVEN an unlisting bound to fail (a condition on the key alone), alone and as a transaction's
    // one item, asking for the entry back when it fails or for nothing
    let (pk, sk) = (
        S(raw_key("_platform", "IMPORTS_DUE#3")),
        S(raw_key("_platform", "IMPORTS_DUE#1#acme#i-1")),
    );
    let unlisting = |on_failure: OnFailure| {
        Input::erase(
            DeleteItemInput::builder()
                .table_name("pooltable-dev")
                .key("PK", pk.clone())
                .key("SK", sk.clone())
                .condition_expression("attribute_not_exists(PK)")
                .return_values_on_condition_check_failure(on_failure)
                .build()
                .unwrap(),
        )
    };
    let in_a_transaction = |on_failure: OnFailure| {
        let delete = Delete::builder()
            .table_name("pooltable-dev")
            .key("PK", pk.clone())
            .key("SK", sk.clone())
            .condition_expression("attribute_not_exists(PK)")
            .return_values_on_condition_check_failure(on_failure)
            .build()
            .unwrap();
        Input::erase(
            TransactWriteItemsInput::builder()
                .transact_items(TransactWriteItem::builder().delete(delete).build())
                .build()
                .unwrap(),
        )
    };
    for (form, request) in [
        ("alone", &unlisting as &dyn Fn(OnFailure) -> Input),
        ("in a transaction", &in_a_transaction),
    ] {
        // WHEN the import producer's guard judges each
        let check = |on_failure| {
            let input = request(on_failure);
            shared::isolation::guard::check_platform_access(PlatformAccess::ImportsDue, &input)
        };
        // THEN it refuses the one asking for the entry, and lets the other through
        let refused = check(OnFailure::AllOld);
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.reason.contains("on a failed condition: true")),
            "{form}: {refused:?}"
        );
        let allowed = check(OnFailure::None);
        assert!(allowed.is_ok(), "{form}: {allowed:?}");
    }
}

/// The same through the code that runs: a container narrowed as `create-import`'s lists an import
/// and unlists it on DynamoDB Local, and its try at the driver's note is refused before it is sent;
/// the driver's container notes it. The raw entry holds exactly what each wrote.
#[tokio::test]
async fn an_import_producers_container_cannot_note_an_import_final_and_the_drivers_can() {
    use shared::identity::ids::{EntityId, TenantId};
    use shared::identity::keys::{import_due_pk, import_due_sk};
    use shared::store::imports::Finished;
    use shared::store::lifecycle::driving::{
        list_import, note_import_finished, unlist_import, DueImport,
    };
    // GIVEN a pool, the import producer's container (its platform sessions narrowed to
    // imports-due) and the lifecycle driver's (the whole partition)
    let driver = integration::Harness::new().await;
    let producer = driver
        .another_container_narrowed(PlatformAccess::ImportsDue)
        .await;
    let platform = TenantId::platform();
    let producer_db = producer.app.db_for_operator(&platform).await.unwrap();
    let driver_db = driver.app.db_for_operator(&platform).await.unwrap();
    let due = DueImport {
        due_at_ms: 1_767_225_600_000,
        tenant: TenantId::parse("acme").unwrap(),
        import: EntityId::parse("i-1").unwrap(),
        created_at_ms: 1_767_222_000_000,
    };
    let finished = Finished {
        item_kind: "product".into(),
        accepted: 2,
        final_counts: [("written".to_owned(), 2)].into(),
        noted: false,
    };
    let entry = || async {
        let pk = import_due_pk(&due.tenant, &due.import);
        let sk = import_due_sk(due.due_at_ms, &due.tenant, &due.import);
        driver
            .items_under(&pk)
            .await
            .into_iter()
            .filter(|i| i["SK"].as_s().ok() == Some(&sk))
            .map(|i| i.into_keys().collect::<std::collections::BTreeSet<_>>())
            .next()
    };
    // WHEN the producer lists the import
    list_import(&producer_db, &due).await.unwrap();
    // THEN the entry holds the listing's attributes and its key, nothing else
    let listed = ["PK", "SK", "kind", "tenantId", "createdAtMs"].map(str::to_owned);
    assert_eq!(entry().await, Some(listed.clone().into()));
    // WHEN the producer tries the driver's note
    let refused = note_import_finished(&producer_db, &due, &finished, 1_767_225_600_001).await;
    // THEN its guard refuses it before it is sent, and the entry is as listed
    let err = refused.expect_err("the producer's note");
    assert!(
        matches!(err, shared::store::client::error::StoreError::OutsideTenant),
        "{err:?}"
    );
    assert_eq!(entry().await, Some(listed.clone().into()));
    // AND the session moto recorded for it names the attributes it may write
    let mut policies = producer.recorded_policies(platform.as_str()).await;
    policies.extend(producer.recorded_operator_policies(platform.as_str()).await);
    assert!(
        policies.iter().any(|p| p.contains(
            r#""dynamodb:Attributes":["PK","SK","catalog","kind","tenantId","createdAtMs"]"#
        )),
        "{policies:?}"
    );
    // WHEN the producer changes the entry's kind, which it may (a listing's attribute), so that the
    // stream's filter would not take the note
    let (pk, sk) = (
        import_due_pk(&due.tenant, &due.import),
        import_due_sk(due.due_at_ms, &due.tenant, &due.import),
    );
    use shared::store::client::expr::{attr, Update};
    let change_kind = || {
        producer_db.update_item(
            shared::identity::keys::primary_key(pk.clone(), sk.clone()),
            Update::from(attr("kind").set("OTHER")),
        )
    };
    producer_db
        .transact_items(vec![change_kind().action().unwrap()])
        .await
        .unwrap();
    // (but not as an UpdateItem of its own, which reads the item back: refused before it is sent)
    let read_back = change_kind().send(&producer_db).await;
    assert!(
        matches!(
            read_back,
            Err(shared::store::client::transact::TransactError::Store(
                shared::store::client::error::StoreError::OutsideTenant
            ))
        ),
        "{read_back:?}"
    );
    // AND the driver notes it
    note_import_finished(&driver_db, &due, &finished, 1_767_225_600_001)
        .await
        .unwrap();
    // THEN the note is on the entry, and the entry is of the kind the stream's filter takes
    let kind = driver.items_under(&pk).await[0]["kind"].clone();
    assert_eq!(
        kind,
        aws_sdk_dynamodb::types::AttributeValue::S("IMPORT_DUE".into())
    );
    let noted = entry().await.unwrap();
    assert!(
        noted.contains("closedAtMs") && noted.contains("finalCounts"),
        "{noted:?}"
    );
    // AND the producer may still unlist an entry (an import refused over the bound)
    unlist_import(&producer_db, &due).await.unwrap();
    assert_eq!(entry().await, None);
}

/// The narrowed sessions every other function takes of the platform's partition pass their guards
/// on the code's own calls: a container narrowed to `usage` (every API function's) writes the
/// platform's usage, and one narrowed to `read` (the usage reader's) reports it.
#[tokio::test]
async fn the_usage_and_read_containers_write_and_report_the_platforms_usage_through_their_guards() {
    // GIVEN a pool with a tenant, and a container narrowed to each access
    let h = integration::Harness::new().await;
    let t = integration::unique("narrowed-usage");
    integration::onboard(&h, &t, 1).await;
    let api = h.another_container_narrowed(PlatformAccess::Usage).await;
    let reader = h.another_container_narrowed(PlatformAccess::Read).await;
    let before = integration::units_used(&reader, &[], "_platform", Some("narrowed-probe")).await;
    // WHEN the first does a call's work on the platform's account (as a request's pulls out of a
    // move's source are), and writes the platform's usage
    let r = api
        .app
        .on_platform_account(
            "narrowed-probe",
            integration::api::get_product_admitted(&api.app, &t),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    api.app.flush_platform_usage().await;
    // THEN the second reports it under its route: the usage counter's UpdateItem passed the
    // first's guard, and the counters' Query the second's
    let after = integration::units_used(&reader, &[], "_platform", Some("narrowed-probe")).await;
    assert!(after > before, "before {before}, after {after}");
}
