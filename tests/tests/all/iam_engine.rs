//! IAM alone, judged by an engine we did not write: fakecloud (crates.io `fakecloud`, AGPL, run as a
//! separate server by `scripts/iam-engine.sh`, never linked) in its strict IAM mode, which evaluates
//! a role's policies, the session policy, policy variables and `dynamodb:LeadingKeys`. Requests go
//! out on raw clients with each tenant's STS credentials and no guard: whatever is refused here, IAM
//! refused.
//!
//! A pooled tenant and two tenants in their own tables; for each caller, every operation the
//! functions send (and Scan) at each tenant's keys in each table: allowed exactly when the key is
//! the caller's and the table is its items' table, or the key is its record in the pool (read, never
//! written: issue 56); every cross-tenant request refused. And each narrowed session of the
//! platform's partition, held to its keys (issue 56). First with pooltable's session policy, then with the template's role
//! policy alone (a session without a session policy).
//!
//! fakecloud reads `aws:PrincipalTag/…` from the role's tags and ignores AssumeRole's session tags,
//! so each tenant gets a role of its own, tagged `TenantId`, holding the template's role policy; in
//! AWS one role serves every tenant and the session tag binds it (docs/isolation.md). Not run by
//! the test command: fakecloud takes too long to build there (README, docs/isolation.md).

mod function_roles;
mod reader;

use std::collections::HashMap;

use aws_sdk_dynamodb::config::{Credentials, SharedCredentialsProvider};
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use shared::identity::ids::TenantId;
use shared::identity::keys::{raw_key, tenant_record_key, GSI1, PK, SK};
use shared::isolation::credentials::{assume_role_request, CredentialSettings};
use shared::isolation::policy::{Moving, PlatformAccess, Scope, TableLocation, TenantTables};

const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";
const POOL: &str = "pooltable-engine";

fn endpoint() -> String {
    std::env::var("FAKECLOUD_ENDPOINT")
        .expect("FAKECLOUD_ENDPOINT is not set: run scripts/iam-engine.sh, which builds and starts fakecloud")
}

fn sdk_config(access_key: &str, secret: &str, token: Option<String>) -> aws_config::SdkConfig {
    aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(REGION))
        .endpoint_url(endpoint())
        .http_client(shared::service::app::https_client())
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            access_key, secret, token, None, "engine",
        )))
        .build()
}

/// A DynamoDB client on the credentials of an AssumeRole's answer.
fn session_client(
    out: &aws_sdk_sts::operation::assume_role::AssumeRoleOutput,
) -> aws_sdk_dynamodb::Client {
    let c = out.credentials().unwrap();
    aws_sdk_dynamodb::Client::new(&sdk_config(
        c.access_key_id(),
        c.secret_access_key(),
        Some(c.session_token().to_owned()),
    ))
}

/// fakecloud lets an access key starting with `test` past IAM: the administrator's.
fn admin() -> aws_config::SdkConfig {
    sdk_config("test", "test", None)
}

/// The administrator's DynamoDB, IAM and STS clients, and the table as the template defines it
/// (without its stream).
struct Engine {
    ddb: aws_sdk_dynamodb::Client,
    iam: aws_sdk_iam::Client,
    sts: aws_sdk_sts::Client,
    def: devtools::TableDefinition,
}

fn engine() -> Engine {
    let admin = admin();
    Engine {
        ddb: aws_sdk_dynamodb::Client::new(&admin),
        iam: aws_sdk_iam::Client::new(&admin),
        sts: aws_sdk_sts::Client::new(&admin),
        def: devtools::table_from_template(&devtools::default_template_path())
            .unwrap()
            .without_stream(),
    }
}

/// A role named `name` tagged `tags` (fakecloud reads `aws:PrincipalTag/…` from the role's tags,
/// not the session's), holding the template's tenant-access role policy, which a principal of the
/// account may assume: its ARN.
async fn tenant_access_role(
    iam: &aws_sdk_iam::Client,
    name: &str,
    tags: &[(&str, &str)],
) -> String {
    let arns = integration::template::Arns {
        table: &format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{POOL}"),
        functions_role: &format!("arn:aws:iam::{ACCOUNT}:role/pooltable-engine-functions"),
    };
    let trust = serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"AWS": format!("arn:aws:iam::{ACCOUNT}:root")}, "Action": ["sts:AssumeRole", "sts:TagSession"]}]})
    .to_string();
    let tags = tags.iter().map(|(k, v)| {
        aws_sdk_iam::types::Tag::builder()
            .key(*k)
            .value(*v)
            .build()
            .unwrap()
    });
    iam.create_role()
        .role_name(name)
        .assume_role_policy_document(&trust)
        .set_tags(Some(tags.collect()))
        .send()
        .await
        .expect("CreateRole");
    iam.put_role_policy()
        .role_name(name)
        .policy_name("tenant-items")
        .policy_document(integration::template::tenant_role_policy(&arns).to_string())
        .send()
        .await
        .expect("PutRolePolicy");
    format!("arn:aws:iam::{ACCOUNT}:role/{name}")
}

fn role_arn(tenant: &str) -> String {
    format!("arn:aws:iam::{ACCOUNT}:role/pooltable-engine-tenant-{tenant}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Get,
    Put,
    Update,
    Delete,
    Query,
    QueryGsi1,
    Transact,
    Scan,
}

const OPS: [Op; 8] = [
    Op::Get,
    Op::Put,
    Op::Update,
    Op::Delete,
    Op::Query,
    Op::QueryGsi1,
    Op::Transact,
    Op::Scan,
];

/// Sends `op` at `pk` (its SK the same) in `table`; `true` unless IAM refused it.
async fn iam_allows(client: &aws_sdk_dynamodb::Client, op: Op, table: &str, pk: &str) -> bool {
    let key = HashMap::from([
        (PK.to_owned(), AttributeValue::S(pk.to_owned())),
        (SK.to_owned(), AttributeValue::S(pk.to_owned())),
    ]);
    let value = AttributeValue::S(pk.to_owned());
    // `send!(op.step(arg)...)`: `client.op()` on `table`, with those steps, sent; past IAM or not.
    macro_rules! send {
        ($op:ident $(.$step:ident($($arg:expr),*))*) => {
            past_iam(client.$op().table_name(table)$(.$step($($arg),*))*.send().await)
        };
    }
    match op {
        Op::Get => send!(get_item.set_key(Some(key))),
        Op::Put => send!(put_item.set_item(Some(key))),
        Op::Update => send!(update_item
            .set_key(Some(key))
            .update_expression("SET #v = :v")
            .expression_attribute_names("#v", "v")
            .expression_attribute_values(":v", AttributeValue::N("1".into()))),
        Op::Delete => send!(delete_item.set_key(Some(key))),
        Op::Query => send!(query
            .expression_attribute_values(":pk", value)
            .key_condition_expression("PK = :pk")),
        Op::QueryGsi1 => send!(query
            .expression_attribute_values(":pk", value)
            .index_name(GSI1)
            .key_condition_expression("SK = :pk")),
        Op::Transact => {
            let put = Put::builder()
                .table_name(table)
                .set_item(Some(key))
                .build()
                .unwrap();
            let transact = TransactWriteItem::builder().put(put).build();
            past_iam(
                client
                    .transact_write_items()
                    .transact_items(transact)
                    .send()
                    .await,
            )
        }
        Op::Scan => send!(scan),
    }
}

/// `true` unless IAM refused the request (AccessDenied): any other error is DynamoDB's own answer,
/// from past IAM.
fn past_iam<T, E, R>(result: Result<T, aws_sdk_dynamodb::error::SdkError<E, R>>) -> bool
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::fmt::Debug,
    R: std::fmt::Debug,
{
    let Err(e) = result else { return true };
    let code = e
        .as_service_error()
        .and_then(|s| s.code().map(str::to_owned))
        .unwrap_or_else(|| format!("{e:?}"));
    !code.contains("AccessDenied")
}

struct Tenant {
    id: TenantId,
    tables: TenantTables,
}

#[tokio::test]
#[ignore = "runs against fakecloud in strict IAM mode: scripts/iam-engine.sh"]
async fn iam_alone_refuses_every_cross_tenant_request_in_both_placements_and_a_move() {
    // GIVEN the pool and two own tables, made with the template's definition, and three tenants:
    // `pooled` in the pool, `ownb` and `ownc` in their own tables
    let Engine { ddb, iam, sts, def } = engine();
    // AND `movd`, moving from the pool into its own table, its writes moved (both tables named)
    let tenants: Vec<Tenant> = [
        ("pooled", false),
        ("ownb", true),
        ("ownc", true),
        ("movd", true),
    ]
    .into_iter()
    .map(|(t, own)| Tenant {
        id: TenantId::parse(t).unwrap(),
        tables: match (own, t) {
            (true, "movd") => {
                TenantTables::own(&format!("{POOL}-tenant-{t}"), POOL).with_move(Moving {
                    other: std::sync::Arc::from(POOL),
                    pull: true,
                    writes_move_at: 0,
                    settled_at: 0,
                })
            }
            (true, _) => TenantTables::own(&format!("{POOL}-tenant-{t}"), POOL),
            (false, _) => TenantTables::pooled(POOL),
        },
    })
    .collect();
    let mut tables = vec![POOL.to_owned()];
    tables.extend(
        tenants
            .iter()
            .filter(|t| !t.tables.is_pooled())
            .map(|t| t.tables.items.to_string()),
    );
    for table in &tables {
        // (the pool is there when the narrowed sessions' matrix ran first in this fakecloud)
        if let Err(e) = devtools::create_table(&ddb, table, &def).await {
            assert!(
                *table == POOL && format!("{e:?}").contains("ResourceInUse"),
                "create a table: {e:?}"
            );
        }
    }
    // AND for each tenant a role tagged with it, holding the template's tenant-access role policy,
    // which a principal of the account may assume
    for t in &tenants {
        let name = format!("pooltable-engine-tenant-{}", t.id);
        tenant_access_role(&iam, &name, &[("TenantId", t.id.as_str())]).await;
    }

    let (mut allowed_count, mut refused_count) = (0usize, 0usize);
    for scoped in [true, false] {
        for caller in &tenants {
            // WHEN the caller's credentials come from an AssumeRole with pooltable's session policy
            // (or, the second time, with none: the role's policy alone)
            let settings = CredentialSettings {
                role_arn: role_arn(caller.id.as_str()),
                operator_role_arn: None,
                platform_access: Default::default(),
                table: TableLocation::from_role_arn(&role_arn(caller.id.as_str()), REGION, POOL)
                    .unwrap(),
                duration_seconds: 900,
            };
            let mut request =
                assume_role_request(&sts, &settings, &caller.id, &caller.tables, Scope::Tenant)
                    .unwrap();
            if !scoped {
                request = request.set_policy(None);
            }
            let out = request.send().await.expect("AssumeRole");
            let client = session_client(&out);
            // THEN every operation at every tenant's keys in every table is allowed exactly when it
            // is the caller's own, in its placement
            for target in &tenants {
                for table in &tables {
                    for (pk, is_record) in [
                        (raw_key(target.id.as_str(), "PRODUCT#0"), false),
                        (tenant_record_key(&target.id), true),
                    ] {
                        for op in OPS {
                            // A tenant's session never writes its record (issue 56: the session
                            // policy's and the role's `Deny`); reads and condition checks it does.
                            let record_write = is_record
                                && matches!(op, Op::Put | Op::Update | Op::Delete | Op::Transact);
                            let own = target.id == caller.id && op != Op::Scan && !record_write;
                            let expected = match scoped {
                                true => {
                                    own && (caller.tables.item_tables().any(|t| **t == **table)
                                        || (*table == *caller.tables.record
                                            && is_record
                                            && !matches!(op, Op::Query | Op::QueryGsi1)))
                                }
                                // The role alone: its tenant's keys in the pool and in its own
                                // table (`<pool>-tenant-<its id>`), whatever its placement.
                                false => {
                                    own && (*table == POOL
                                        || *table == format!("{POOL}-tenant-{}", caller.id))
                                }
                            };
                            let allowed = iam_allows(&client, op, table, &pk).await;
                            match allowed {
                                true => allowed_count += 1,
                                false => refused_count += 1,
                            }
                            assert_eq!(
                                allowed,
                                expected,
                                "{} ({}) {op:?} {pk} in {table}",
                                caller.id,
                                if scoped {
                                    "session policy"
                                } else {
                                    "role alone"
                                }
                            );
                        }
                    }
                }
            }
        }
    }
    // AND the matrix held both answers: IAM allowed the tenants' own requests and refused the rest
    println!("fakecloud (strict IAM): {allowed_count} requests allowed, {refused_count} refused, each as expected");
    assert!(allowed_count > 0 && refused_count > allowed_count);
}

/// Whether a narrowed session of the platform's partition may send `op` at `pk` (issue 56: the
/// same rule as `platform_sessions.rs`).
fn platform_access_allows(access: PlatformAccess, op: Op, pk: &str) -> bool {
    let usage = pk.contains("#USAGE#");
    match access {
        PlatformAccess::All => true,
        PlatformAccess::Usage => usage && op == Op::Update,
        PlatformAccess::Read => matches!(op, Op::Get | Op::Query) || (usage && op == Op::Update),
        // (the probe's update names `v`, outside the listing's attributes: only its delete is the
        // list's use)
        PlatformAccess::ImportsDue => {
            (pk.contains("#IMPORTS_DUE#") && op == Op::Delete) || (usage && op == Op::Update)
        }
    }
}

#[tokio::test]
#[ignore = "runs against fakecloud in strict IAM mode: scripts/iam-engine.sh"]
async fn iam_alone_holds_each_narrowed_platform_session_to_its_keys() {
    // GIVEN the pool, and for each narrowed access a role tagged with the platform's id and that
    // access, holding the template's tenant-access role policy (fakecloud reads principal tags
    // from the role, not the session)
    let Engine { ddb, iam, sts, def } = engine();
    // (made by the cross-tenant matrix when it ran first in this fakecloud)
    let _ = devtools::create_table(&ddb, POOL, &def).await;
    let platform = TenantId::platform();
    let keys = ["OFFBOARDED#acme", "DRIVE", "IMPORTS_DUE#3", "USAGE#5"]
        .map(|rest| raw_key(platform.as_str(), rest));
    let (mut allowed_count, mut refused_count) = (0usize, 0usize);
    for access in [
        PlatformAccess::Usage,
        PlatformAccess::Read,
        PlatformAccess::ImportsDue,
    ] {
        let tag = access.tag().unwrap();
        let name = format!("pooltable-engine-platform-{tag}");
        let role = tenant_access_role(
            &iam,
            &name,
            &[("TenantId", platform.as_str()), ("PlatformAccess", tag)],
        )
        .await;
        for scoped in [true, false] {
            // WHEN a session of the platform's partition narrowed to `access` is taken, with the
            // function's narrowed session policy (or, the second time, none: the role alone)
            let settings = CredentialSettings {
                role_arn: role.clone(),
                operator_role_arn: None,
                platform_access: access,
                table: TableLocation::from_role_arn(&role, REGION, POOL).unwrap(),
                duration_seconds: 900,
            };
            let pooled = TenantTables::pooled(POOL);
            let mut request =
                assume_role_request(&sts, &settings, &platform, &pooled, Scope::Tenant).unwrap();
            if !scoped {
                request = request.set_policy(None);
            }
            let out = request.send().await.expect("AssumeRole");
            let client = session_client(&out);
            // THEN each operation at each of the platform's keys is allowed exactly as the access
            // says: an offboarding report is never written by the usage reader or the import
            // producer
            for pk in &keys {
                for op in [Op::Get, Op::Put, Op::Update, Op::Delete, Op::Query] {
                    let allowed = iam_allows(&client, op, POOL, pk).await;
                    match allowed {
                        true => allowed_count += 1,
                        false => refused_count += 1,
                    }
                    assert_eq!(
                        allowed,
                        platform_access_allows(access, op, pk),
                        "{tag} ({}) {op:?} {pk}",
                        if scoped {
                            "session policy"
                        } else {
                            "role alone"
                        }
                    );
                }
            }
        }
    }
    println!("fakecloud (strict IAM), the platform's narrowed sessions: {allowed_count} requests allowed, {refused_count} refused, each as expected");
    assert!(allowed_count > 0 && refused_count > 0);
}
