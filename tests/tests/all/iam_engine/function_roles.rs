//! The function roles themselves (issue 56, item 6), judged by fakecloud: each generated role's
//! DynamoDB statements (its managed policies' as template.yaml holds them, as one inline policy: the
//! same statements), on a role of its own under the functions' path, and its credentials sending
//! every table-level and item request a function role could: fakecloud must answer each as the
//! project's evaluator does, which `roles.rs` holds to the role's routes.yaml entry.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, Tag};

use integration::iam::{is_allowed, AuthzRequest};
use integration::template::{function_role_dynamodb_policy, function_roles, Arns};
use shared::identity::keys::{raw_key, PK, SK};

use super::{engine, past_iam, session_client, Engine, ACCOUNT, POOL, REGION};

/// One request of the matrix: what the SDK sends, and what IAM evaluates of it.
#[derive(Debug, Clone, Copy)]
enum Probe {
    Get(&'static str, Key),
    Put(&'static str, Key),
    Query(&'static str, Key),
    Scan(&'static str),
    Describe(&'static str),
    DescribeTtl(&'static str),
    DescribeBackups(&'static str),
    ListTags(&'static str),
    TagTenant(&'static str),
    Create(&'static str, bool),
    Update(&'static str),
    Delete(&'static str),
    BatchWrite(&'static str),
    RestoreToPointInTime,
}

#[derive(Debug, Clone, Copy)]
enum Key {
    Record,
    Product,
    Reports,
    Drive,
}

impl Key {
    fn pk(self) -> String {
        match self {
            Key::Record => raw_key("acme", "TENANT"),
            Key::Product => raw_key("acme", "PRODUCT#1"),
            Key::Reports => raw_key("_platform", "OFFBOARDED#acme"),
            Key::Drive => raw_key("_platform", "DRIVE"),
        }
    }
}

const OWN: &str = "pooltable-engine-tenant-acme";
const MADE: &str = "pooltable-engine-tenant-made";
const RESTORE: &str = "pooltable-engine-restore-src";

const PROBES: [Probe; 22] = [
    Probe::Get(POOL, Key::Record),
    Probe::Get(POOL, Key::Product),
    Probe::Query(POOL, Key::Reports),
    Probe::Query(POOL, Key::Drive),
    Probe::Put(POOL, Key::Record),
    Probe::Scan(POOL),
    Probe::Describe(POOL),
    Probe::DescribeTtl(POOL),
    Probe::DescribeBackups(POOL),
    Probe::RestoreToPointInTime,
    Probe::Describe(OWN),
    Probe::ListTags(OWN),
    Probe::TagTenant(OWN),
    Probe::Create(MADE, false),
    Probe::Create(MADE, true),
    Probe::Update(OWN),
    Probe::Delete(OWN),
    Probe::Get(OWN, Key::Product),
    Probe::Describe(RESTORE),
    Probe::Query(RESTORE, Key::Product),
    Probe::Scan(RESTORE),
    Probe::BatchWrite(RESTORE),
];

fn arn(table: &str) -> String {
    format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}")
}

/// What IAM evaluates of `probe`: its action, resource, leading key and tags.
fn authz(probe: Probe) -> AuthzRequest {
    let plain = |action: &str, table: &str| AuthzRequest {
        action: format!("dynamodb:{action}"),
        resource: arn(table),
        ..Default::default()
    };
    let keyed = |action: &str, table: &str, key: Key| AuthzRequest {
        leading_keys: Some(vec![key.pk()]),
        ..plain(action, table)
    };
    match probe {
        Probe::Get(t, k) => keyed("GetItem", t, k),
        Probe::Put(t, k) => keyed("PutItem", t, k),
        Probe::Query(t, k) => keyed("Query", t, k),
        Probe::Scan(t) => plain("Scan", t),
        Probe::Describe(t) => plain("DescribeTable", t),
        Probe::DescribeTtl(t) => plain("DescribeTimeToLive", t),
        Probe::DescribeBackups(t) => plain("DescribeContinuousBackups", t),
        Probe::ListTags(t) => plain("ListTagsOfResource", t),
        // (an untagged table: the admin takes the tag off again after each role)
        Probe::TagTenant(t) => AuthzRequest {
            request_tags: [("tenant".to_owned(), "acme".to_owned())].into(),
            ..plain("TagResource", t)
        },
        Probe::Create(t, tagged) => AuthzRequest {
            request_tags: if tagged {
                [("tenant".to_owned(), "made".to_owned())].into()
            } else {
                Default::default()
            },
            ..plain("CreateTable", t)
        },
        Probe::Update(t) => plain("UpdateTable", t),
        Probe::Delete(t) => plain("DeleteTable", t),
        Probe::BatchWrite(t) => plain("BatchWriteItem", t),
        Probe::RestoreToPointInTime => plain("RestoreTableToPointInTime", POOL),
    }
}

fn item(key: Key) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(key.pk())),
        (SK.to_owned(), AttributeValue::S(key.pk())),
    ])
}

fn tenant_tag(value: &str) -> Tag {
    Tag::builder().key("tenant").value(value).build().unwrap()
}

/// Sends `probe` with `client`; `true` unless IAM refused it.
async fn send(client: &aws_sdk_dynamodb::Client, probe: Probe) -> bool {
    let query = |t: &str, k: Key| {
        client
            .query()
            .table_name(t)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(k.pk()))
    };
    match probe {
        Probe::Get(t, k) => past_iam(
            client
                .get_item()
                .table_name(t)
                .set_key(Some(item(k)))
                .send()
                .await,
        ),
        Probe::Put(t, k) => past_iam(
            client
                .put_item()
                .table_name(t)
                .set_item(Some(item(k)))
                .send()
                .await,
        ),
        Probe::Query(t, k) => past_iam(query(t, k).send().await),
        Probe::Scan(t) => past_iam(client.scan().table_name(t).send().await),
        Probe::Describe(t) => past_iam(client.describe_table().table_name(t).send().await),
        Probe::DescribeTtl(t) => {
            past_iam(client.describe_time_to_live().table_name(t).send().await)
        }
        Probe::DescribeBackups(t) => past_iam(
            client
                .describe_continuous_backups()
                .table_name(t)
                .send()
                .await,
        ),
        Probe::ListTags(t) => past_iam(
            client
                .list_tags_of_resource()
                .resource_arn(arn(t))
                .send()
                .await,
        ),
        Probe::TagTenant(t) => past_iam(
            client
                .tag_resource()
                .resource_arn(arn(t))
                .tags(tenant_tag("acme"))
                .send()
                .await,
        ),
        Probe::Create(t, tagged) => {
            let def = devtools::table_from_template(&devtools::default_template_path())
                .unwrap()
                .without_stream();
            let create = client
                .create_table()
                .table_name(t)
                .billing_mode(aws_sdk_dynamodb::types::BillingMode::PayPerRequest)
                .set_attribute_definitions(Some(def.attributes.clone()))
                .set_key_schema(Some(def.key_schema.clone()));
            let create = if tagged {
                create.tags(tenant_tag("made"))
            } else {
                create
            };
            past_iam(create.send().await)
        }
        Probe::Update(t) => past_iam(
            client
                .update_table()
                .table_name(t)
                .billing_mode(aws_sdk_dynamodb::types::BillingMode::PayPerRequest)
                .send()
                .await,
        ),
        Probe::Delete(t) => past_iam(client.delete_table().table_name(t).send().await),
        Probe::BatchWrite(t) => {
            let put = aws_sdk_dynamodb::types::PutRequest::builder()
                .set_item(Some(item(Key::Product)))
                .build()
                .unwrap();
            let write = aws_sdk_dynamodb::types::WriteRequest::builder()
                .put_request(put)
                .build();
            past_iam(
                client
                    .batch_write_item()
                    .request_items(t, vec![write])
                    .send()
                    .await,
            )
        }
        Probe::RestoreToPointInTime => past_iam(
            client
                .restore_table_to_point_in_time()
                .source_table_name(POOL)
                .target_table_name("pooltable-engine-restore-pitr")
                .use_latest_restorable_time(true)
                .send()
                .await,
        ),
    }
}

#[tokio::test]
#[ignore = "runs against fakecloud in strict IAM mode: scripts/iam-engine.sh"]
async fn iam_alone_holds_each_function_role_to_what_the_evaluator_allows_it() {
    // GIVEN the pool, an untagged own table and a restore copy, made with the template's definition
    let Engine { ddb, iam, sts, def } = engine();
    for table in [POOL, OWN, RESTORE] {
        // (the pool is there when another matrix ran first in this fakecloud)
        let _ = devtools::create_table(&ddb, table, &def).await;
    }
    let arns = Arns {
        table: &arn(POOL),
        functions_role: &format!("arn:aws:iam::{ACCOUNT}:role/pooltable-engine-functions"),
    };
    let trust = serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"AWS": format!("arn:aws:iam::{ACCOUNT}:root")}, "Action": "sts:AssumeRole"}]})
    .to_string();
    let (mut allowed_count, mut refused_count, mut roles) = (0usize, 0usize, 0usize);
    for logical in function_roles() {
        // AND the function's role, under the functions' path, holding its DynamoDB statements
        let policy = function_role_dynamodb_policy(&arns, &logical);
        let created = iam
            .create_role()
            .role_name(&logical)
            .path("/pooltable-engine/")
            .assume_role_policy_document(&trust)
            .send()
            .await
            .expect("CreateRole");
        if policy["Statement"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
        {
            iam.put_role_policy()
                .role_name(&logical)
                .policy_name("dynamodb")
                .policy_document(policy.to_string())
                .send()
                .await
                .expect("PutRolePolicy");
        }
        let role_arn = created.role().unwrap().arn().to_owned();
        assert!(role_arn.ends_with(&format!("role/pooltable-engine/{logical}")));
        // WHEN its credentials send every probe
        let out = sts
            .assume_role()
            .role_arn(&role_arn)
            .role_session_name("engine")
            .send()
            .await
            .expect("AssumeRole");
        let client = session_client(&out);
        for probe in PROBES {
            // THEN fakecloud answers each as the evaluator does
            let expected = is_allowed(&policy, &authz(probe));
            let allowed = send(&client, probe).await;
            match allowed {
                true => allowed_count += 1,
                false => refused_count += 1,
            }
            assert_eq!(allowed, expected, "{logical}: {probe:?}");
        }
        // (the own table untagged again, and the made one gone, for the next role)
        let _ = ddb
            .untag_resource()
            .resource_arn(arn(OWN))
            .tag_keys("tenant")
            .send()
            .await;
        let _ = ddb.delete_table().table_name(MADE).send().await;
        roles += 1;
    }
    println!(
        "fakecloud (strict IAM), the function roles: {roles} roles, {} requests, {allowed_count} allowed, {refused_count} refused, each as the evaluator decides",
        allowed_count + refused_count
    );
    assert!(allowed_count > 0 && refused_count > allowed_count);
}
