//! Property: the in-process guard, the generated session policy and the tenant-access role's own
//! policy (template.yaml, written against the session tag `TenantId`) agree. For random tenants,
//! random requests of every operation the functions send, and random key values (including the
//! delimiter corner cases), the guard lets a real SDK request through exactly when IAM, evaluating
//! the session policy the generator wrote, would allow every action in it; and exactly when it would
//! under the role's policy alone, for a session tagged with that tenant (an AssumeRole without a
//! session policy). Together: the effective permissions (their intersection) are the guard's.
//!
//! The oracle's `dynamodb:LeadingKeys` for a request are all the key values that can become a
//! partition key: every `PK` (the table's) and every `SK` (GSI1's partition key) the request carries or
//! writes, and every value its key condition binds. IAM itself only sees the partition key of the
//! table or index addressed; pooltable holds SK to the same rule because an item's SK *becomes* a
//! GSI1 partition, and the guard is where that is enforced (the delimiter cases show it is no looser).

use shared::identity::keys::TENANT_SEGMENT;
use std::collections::HashMap;

use aws_sdk_dynamodb::operation::{
    batch_get_item::BatchGetItemInput, batch_write_item::BatchWriteItemInput,
    delete_item::DeleteItemInput, execute_statement::ExecuteStatementInput, get_item::GetItemInput,
    put_item::PutItemInput, query::QueryInput, scan::ScanInput,
    transact_write_items::TransactWriteItemsInput, update_item::UpdateItemInput,
};
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, DeleteRequest, KeysAndAttributes, Put, PutRequest,
    TransactWriteItem, Update, WriteRequest,
};
use aws_smithy_runtime_api::client::interceptors::context::Input;
use std::collections::BTreeMap;

use integration::iam::{is_allowed, AuthzRequest};
use integration::template::{tenant_role_policy, tenant_role_trust_policy, Arns};
use proptest::prelude::*;
use shared::identity::ids::TenantId;
use shared::isolation::guard::check_input;
use shared::isolation::policy::{session_policy, TableLocation};

const TABLE: &str = "pooltable-prop";

fn location() -> TableLocation {
    TableLocation::from_role_arn(
        "arn:aws:iam::123456789012:role/tenant-access",
        "us-east-1",
        TABLE,
    )
    .unwrap()
}

/// A key attribute value as generated: mostly strings, sometimes a number (never valid).
#[derive(Debug, Clone)]
enum KeyValue {
    S(String),
    N(u32),
}

impl KeyValue {
    fn av(&self) -> AttributeValue {
        match self {
            Self::S(s) => AttributeValue::S(s.clone()),
            Self::N(n) => AttributeValue::N(n.to_string()),
        }
    }
    /// How IAM would see the value: a string, or something that can never match a string pattern.
    fn iam(&self) -> String {
        match self {
            Self::S(s) => s.clone(),
            Self::N(n) => format!("\u{0}number:{n}"),
        }
    }
}

#[derive(Debug, Clone)]
struct Key {
    pk: KeyValue,
    sk: KeyValue,
}

impl Key {
    fn item(&self) -> HashMap<String, AttributeValue> {
        HashMap::from([("PK".into(), self.pk.av()), ("SK".into(), self.sk.av())])
    }
    fn iam(&self) -> Vec<String> {
        vec![self.pk.iam(), self.sk.iam()]
    }
}

/// A Query, on the table or on GSI1: its partition value, perhaps a sort-key prefix and a start key.
#[derive(Debug, Clone)]
struct Query {
    gsi: bool,
    partition: KeyValue,
    sort: Option<KeyValue>,
    start: Option<Key>,
}

#[derive(Debug, Clone)]
enum Op {
    Get(Key),
    Put(Key),
    Update(Key),
    Delete(Key),
    Query(Query),
    BatchGet(Vec<Key>),
    BatchWrite(Vec<(bool, Key)>),
    TransactWrite(Vec<(u8, Key)>),
    Scan,
    PartiQl,
}

/// Key values around tenant `t`: its own keys, the delimiter corner cases, and noise.
fn key_value(t: String) -> impl Strategy<Value = KeyValue> {
    let own = t.clone();
    prop_oneof![
        4 => "[A-Z]{1,8}#[A-Za-z0-9_-]{0,12}".prop_map(move |rest| KeyValue::S(format!("{TENANT_SEGMENT}{own}#{rest}"))),
        1 => Just(KeyValue::S(format!("{TENANT_SEGMENT}{t}#"))),
        // The tenant's record, which its session reads but never writes.
        2 => Just(KeyValue::S(format!("{TENANT_SEGMENT}{t}#TENANT"))),
        1 => Just(KeyValue::S(format!("{TENANT_SEGMENT}{t}"))),
        1 => Just(KeyValue::S(format!("{TENANT_SEGMENT}{t}-b#X#1"))),
        1 => Just(KeyValue::S(format!("{TENANT_SEGMENT}{t}_#X#1"))),
        1 => Just(KeyValue::S(format!("{TENANT_SEGMENT}{}#X#1", t.to_uppercase()))),
        1 => Just(KeyValue::S(format!("{TENANT_SEGMENT}{}#X#1", t.to_lowercase()))),
        1 => Just(KeyValue::S(format!("tenant#{t}#X#1"))),
        1 => Just(KeyValue::S(format!("{TENANT_SEGMENT}{t}b#X"))),
        1 => Just(KeyValue::S(format!("X{TENANT_SEGMENT}{t}#X"))),
        1 => Just(KeyValue::S(format!("{TENANT_SEGMENT}{t}#*"))),
        1 => "[a-z]{1,3}#[A-Z]{1,4}".prop_map(|rest| KeyValue::S(format!("{TENANT_SEGMENT}{rest}"))),
        1 => ".{0,12}".prop_map(KeyValue::S),
        1 => Just(KeyValue::S(String::new())),
        1 => any::<u32>().prop_map(KeyValue::N),
    ]
}

fn key(t: String) -> impl Strategy<Value = Key> {
    (key_value(t.clone()), key_value(t)).prop_map(|(pk, sk)| Key { pk, sk })
}

fn op(t: String) -> impl Strategy<Value = Op> {
    prop_oneof![
        key(t.clone()).prop_map(Op::Get),
        key(t.clone()).prop_map(Op::Put),
        key(t.clone()).prop_map(Op::Update),
        key(t.clone()).prop_map(Op::Delete),
        (
            any::<bool>(),
            key_value(t.clone()),
            proptest::option::of(key_value(t.clone())),
            proptest::option::of(key(t.clone()))
        )
            .prop_map(|(gsi, partition, sort, start)| Op::Query(Query {
                gsi,
                partition,
                sort,
                start
            })),
        proptest::collection::vec(key(t.clone()), 1..4).prop_map(Op::BatchGet),
        proptest::collection::vec((any::<bool>(), key(t.clone())), 1..4).prop_map(Op::BatchWrite),
        proptest::collection::vec((0u8..4, key(t)), 1..5).prop_map(Op::TransactWrite),
        Just(Op::Scan),
        Just(Op::PartiQl),
    ]
}

/// The real SDK input the functions would send for `op`.
fn sdk_input(op: &Op) -> Input {
    // `on_table!(Type.step(arg)...)`: a `Type` for this test's table, with those steps, built.
    macro_rules! on_table {
        ($ty:ident $(.$step:ident($($arg:expr),*))*) => {
            $ty::builder().table_name(TABLE)$(.$step($($arg),*))*.build().unwrap()
        };
    }
    match op {
        Op::Get(k) => Input::erase(on_table!(GetItemInput.set_key(Some(k.item())))),
        Op::Put(k) => Input::erase(on_table!(PutItemInput.set_item(Some(k.item())))),
        Op::Update(k) => Input::erase(on_table!(UpdateItemInput
            .set_key(Some(k.item()))
            .update_expression("SET a = :a"))),
        Op::Delete(k) => Input::erase(on_table!(DeleteItemInput.set_key(Some(k.item())))),
        Op::Query(q) => {
            let (p, s) = if q.gsi { ("SK", "PK") } else { ("PK", "SK") };
            let mut b = QueryInput::builder()
                .table_name(TABLE)
                .expression_attribute_values(":p", q.partition.av())
                .set_exclusive_start_key(q.start.as_ref().map(Key::item));
            if q.gsi {
                b = b.index_name("GSI1");
            }
            b = match &q.sort {
                Some(v) => b
                    .key_condition_expression(format!("{p} = :p AND begins_with({s}, :s)"))
                    .expression_attribute_values(":s", v.av()),
                None => b.key_condition_expression(format!("{p} = :p")),
            };
            Input::erase(b.build().unwrap())
        }
        Op::BatchGet(keys) => Input::erase(
            BatchGetItemInput::builder()
                .request_items(
                    TABLE,
                    KeysAndAttributes::builder()
                        .set_keys(Some(keys.iter().map(Key::item).collect()))
                        .build()
                        .unwrap(),
                )
                .build()
                .unwrap(),
        ),
        Op::BatchWrite(writes) => Input::erase(
            BatchWriteItemInput::builder()
                .request_items(
                    TABLE,
                    writes
                        .iter()
                        .map(|(put, k)| {
                            if *put {
                                WriteRequest::builder()
                                    .put_request(
                                        PutRequest::builder()
                                            .set_item(Some(k.item()))
                                            .build()
                                            .unwrap(),
                                    )
                                    .build()
                            } else {
                                WriteRequest::builder()
                                    .delete_request(
                                        DeleteRequest::builder()
                                            .set_key(Some(k.item()))
                                            .build()
                                            .unwrap(),
                                    )
                                    .build()
                            }
                        })
                        .collect(),
                )
                .build()
                .unwrap(),
        ),
        Op::TransactWrite(items) => Input::erase(
            TransactWriteItemsInput::builder()
                .set_transact_items(Some(
                    items
                        .iter()
                        .map(|(kind, k)| match kind {
                            0 => TransactWriteItem::builder()
                                .put(on_table!(Put.set_item(Some(k.item()))))
                                .build(),
                            1 => TransactWriteItem::builder()
                                .update(on_table!(Update
                                    .set_key(Some(k.item()))
                                    .update_expression("SET a = :a")))
                                .build(),
                            2 => TransactWriteItem::builder()
                                .delete(on_table!(Delete.set_key(Some(k.item()))))
                                .build(),
                            _ => TransactWriteItem::builder()
                                .condition_check(on_table!(ConditionCheck
                                    .set_key(Some(k.item()))
                                    .condition_expression("attribute_exists(PK)")))
                                .build(),
                        })
                        .collect(),
                ))
                .build()
                .unwrap(),
        ),
        Op::Scan => Input::erase(on_table!(ScanInput)),
        Op::PartiQl => Input::erase(
            ExecuteStatementInput::builder()
                .statement(format!("SELECT * FROM \"{TABLE}\""))
                .build()
                .unwrap(),
        ),
    }
}

const FUNCTIONS_ROLE: &str = "arn:aws:iam::123456789012:role/pooltable-prop-functions";

/// The tenant-access role's policy from template.yaml, over this test's table (read once).
fn role_policy() -> &'static serde_json::Value {
    static POLICY: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| {
        let table = location().table_arn();
        tenant_role_policy(&Arns {
            table: &table,
            functions_role: FUNCTIONS_ROLE,
        })
    })
}

fn tenant_tag(tenant: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("TenantId".to_string(), tenant.to_string())])
}

/// What IAM authorizes for `op` in a session tagged with `tenant`: one check per action (batch and
/// transaction items are authorized one by one, as their own actions).
fn authz(op: &Op, tenant: &str) -> Vec<AuthzRequest> {
    let loc = location();
    let table = loc.table_arn();
    let index = format!("{table}/index/GSI1");
    let one = |action: &str, resource: &str, keys: Vec<String>| AuthzRequest {
        action: format!("dynamodb:{action}"),
        resource: resource.to_owned(),
        leading_keys: Some(keys),
        principal_tags: tenant_tag(tenant),
        ..AuthzRequest::default()
    };
    match op {
        Op::Get(k) => vec![one("GetItem", &table, k.iam())],
        Op::Put(k) => vec![one("PutItem", &table, k.iam())],
        Op::Update(k) => vec![one("UpdateItem", &table, k.iam())],
        Op::Delete(k) => vec![one("DeleteItem", &table, k.iam())],
        Op::Query(q) => {
            let mut keys = vec![q.partition.iam()];
            keys.extend(q.sort.iter().map(KeyValue::iam));
            keys.extend(q.start.iter().flat_map(Key::iam));
            vec![one("Query", if q.gsi { &index } else { &table }, keys)]
        }
        Op::BatchGet(keys) => keys
            .iter()
            .map(|k| one("BatchGetItem", &table, k.iam()))
            .collect(),
        Op::BatchWrite(w) => w
            .iter()
            .map(|(_, k)| one("BatchWriteItem", &table, k.iam()))
            .collect(),
        Op::TransactWrite(items) => items
            .iter()
            .map(|(kind, k)| {
                let action =
                    ["PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"][*kind as usize];
                one(action, &table, k.iam())
            })
            .collect(),
        Op::Scan => vec![AuthzRequest {
            action: "dynamodb:Scan".into(),
            resource: table,
            principal_tags: tenant_tag(tenant),
            ..AuthzRequest::default()
        }],
        Op::PartiQl => vec![AuthzRequest {
            action: "dynamodb:PartiQLSelect".into(),
            resource: table,
            principal_tags: tenant_tag(tenant),
            ..AuthzRequest::default()
        }],
    }
}

fn tenant_id() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Za-z0-9_-]{1,16}",
        1 => Just("a".to_string()),
        1 => Just("A".to_string()),
        1 => Just("a-b".to_string()),
        1 => Just("a_".to_string()),
        1 => "[A-Za-z0-9_-]{64}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    #[test]
    fn the_guard_allows_exactly_what_the_session_policy_and_the_role_policy_allow(
        (t, op) in tenant_id().prop_flat_map(|t| (Just(t.clone()), op(t)))
    ) {
        let tenant = TenantId::parse(&t).unwrap();
        let session: serde_json::Value = serde_json::from_str(&session_policy(&tenant, &location()).unwrap()).unwrap();
        let role = role_policy();
        let requests = authz(&op, &t);
        let session_allows = requests.iter().all(|r| is_allowed(&session, r));
        let role_allows = requests.iter().all(|r| is_allowed(role, r));
        let guard_allows = check_input(&tenant, &sdk_input(&op)).is_ok();
        prop_assert_eq!(guard_allows, session_allows, "session policy: tenant {} op {:?}", t, op);
        prop_assert_eq!(guard_allows, role_allows, "role policy: tenant {} op {:?}", t, op);
        prop_assert_eq!(guard_allows, session_allows && role_allows, "together: tenant {} op {:?}", t, op);
    }
}

#[test]
fn delimiter_corner_cases_are_refused_by_both() {
    let a = TenantId::parse("a").unwrap();
    let policy: serde_json::Value =
        serde_json::from_str(&session_policy(&a, &location()).unwrap()).unwrap();
    for other in ["a-b", "a_", "A", "ab"] {
        let k = Key {
            pk: KeyValue::S(format!("{TENANT_SEGMENT}{other}#X#1")),
            sk: KeyValue::S(format!("{TENANT_SEGMENT}{other}#Y#1")),
        };
        let op = Op::Get(k);
        assert!(check_input(&a, &sdk_input(&op)).is_err(), "{other}");
        assert!(
            !authz(&op, "a").iter().all(|r| is_allowed(&policy, r)),
            "{other}"
        );
        assert!(
            !authz(&op, "a").iter().all(|r| is_allowed(role_policy(), r)),
            "{other}"
        );
    }
    // "a#b" cannot be a tenant (refused as an id), and its keys are tenant a's own entity keys.
    assert!(TenantId::parse("a#b").is_err());
    let k = Key {
        pk: KeyValue::S(format!("{TENANT_SEGMENT}a#b#1")),
        sk: KeyValue::S(format!("{TENANT_SEGMENT}a#b#2")),
    };
    assert!(check_input(&a, &sdk_input(&Op::Get(k))).is_ok());
}

#[test]
fn a_session_without_the_tenant_tag_reaches_nothing_through_the_role() {
    // GIVEN an AssumeRole that somehow carried no TenantId tag (the trust policy refuses it)
    let own = Key {
        pk: KeyValue::S(format!("{TENANT_SEGMENT}a#X#1")),
        sk: KeyValue::S(format!("{TENANT_SEGMENT}a#Y#1")),
    };
    for op in [Op::Get(own.clone()), Op::Put(own)] {
        let untagged: Vec<AuthzRequest> = authz(&op, "a")
            .into_iter()
            .map(|r| AuthzRequest {
                principal_tags: BTreeMap::new(),
                ..r
            })
            .collect();
        // THEN the role's policy allows not even tenant-looking keys
        assert!(!untagged.iter().all(|r| is_allowed(role_policy(), r)));
        // and the tagged session would have been allowed
        assert!(authz(&op, "a").iter().all(|r| is_allowed(role_policy(), r)));
    }
    // An empty tag value cannot widen it either: TENANT##* is no tenant's prefix.
    let empty = Key {
        pk: KeyValue::S(format!("{TENANT_SEGMENT}#X")),
        sk: KeyValue::S(format!("{TENANT_SEGMENT}#Y")),
    };
    assert!(authz(&Op::Get(empty), "")
        .iter()
        .all(|r| is_allowed(role_policy(), r)));
}

/// An AssumeRole (with its sts:TagSession) by a tenant route's role, as the trust policy judges it.
fn assume_role_with_tags(tags: &[(&str, &str)]) -> Vec<AuthzRequest> {
    let table = location().table_arn();
    let arns = Arns {
        table: &table,
        functions_role: FUNCTIONS_ROLE,
    };
    ["sts:AssumeRole", "sts:TagSession"]
        .into_iter()
        .map(|action| AuthzRequest {
            action: action.into(),
            resource: "arn:aws:iam::123456789012:role/pooltable-prop-tenant-access".into(),
            request_tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..integration::template::caller(&arns, "GetProductRole")
        })
        .collect()
}

fn trust_allows(tags: &[(&str, &str)]) -> bool {
    let table = location().table_arn();
    let trust = tenant_role_trust_policy(&Arns {
        table: &table,
        functions_role: FUNCTIONS_ROLE,
    });
    assume_role_with_tags(tags)
        .iter()
        .all(|r| is_allowed(&trust, r))
}

#[test]
fn the_trust_policy_demands_one_well_formed_tenant_tag() {
    // A well-formed tenant tag alone: allowed.
    for tenant in ["a", "acme-1", "A_b", &"z".repeat(64)] {
        assert!(trust_allows(&[("TenantId", tenant)]), "{tenant}");
    }
    // No tag, an empty one, another tag beside it, or another tag instead: refused.
    assert!(!trust_allows(&[]));
    assert!(!trust_allows(&[("TenantId", "")]));
    assert!(!trust_allows(&[("TenantId", "a"), ("Team", "x")]));
    assert!(!trust_allows(&[("Tenant", "a")]));
    // Values STS would accept in a tag but no tenant id has: refused.
    for bad in [
        "a b",
        "a.b",
        "a:b",
        "a/b",
        "a=b",
        "a+b",
        "a@b",
        &"z".repeat(65),
    ] {
        assert!(!trust_allows(&[("TenantId", bad)]), "{bad}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn the_trust_policy_admits_every_valid_tenant_id(t in tenant_id()) {
        prop_assert!(TenantId::parse(&t).is_ok());
        prop_assert!(trust_allows(&[("TenantId", &t)]), "{}", t);
    }
}

#[test]
fn the_role_policy_is_bound_to_the_tag_with_the_null_guard_and_no_scan_or_partiql() {
    let statements = role_policy()["Statement"].as_array().unwrap();
    // (its other statements: the record's refusal, record_writes.rs's; the narrowed sessions of
    // the platform's partition, platform_sessions.rs's)
    assert_eq!(statements.len(), 5);
    let st = &statements[0];
    assert_eq!(st["Effect"], "Allow");
    assert_eq!(statements[1]["Sid"], "NoTenantRecordWrites");
    assert_eq!(
        statements[1]["Action"],
        serde_json::json!(shared::isolation::policy::RECORD_WRITE_ACTIONS)
    );
    assert_eq!(
        st["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"],
        serde_json::json!([format!("{TENANT_SEGMENT}${{aws:PrincipalTag/TenantId}}#*")])
    );
    assert_eq!(st["Condition"]["Null"]["dynamodb:LeadingKeys"], "false");
    assert_eq!(
        st["Condition"]["Null"]["aws:PrincipalTag/TenantId"],
        "false"
    );
    // (a session narrowed by PlatformAccess has none of it)
    assert_eq!(
        st["Condition"]["Null"]["aws:PrincipalTag/PlatformAccess"],
        "true"
    );
    let actions: Vec<String> = serde_json::from_value(st["Action"].clone()).unwrap();
    assert_eq!(actions, shared::isolation::policy::TENANT_ACTIONS.to_vec());
    assert!(actions
        .iter()
        .all(|a| !a.contains('*') && !a.contains("Scan") && !a.contains("PartiQL")));
}
