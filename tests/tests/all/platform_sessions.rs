//! Issue 56, item 3: the platform's partition (`_platform`) narrowed per function. A function that
//! does not act as the platform reaches it through a session tagged `PlatformAccess` (which the
//! tenant-access role's trust policy demands of its role: `events.rs`), and both layers hold that
//! session to its access: the tenant-access role's own policy, read from template.yaml, and the
//! session policy the function sends (`shared::isolation::policy::platform_session_policy`).
//! Judged by the project's IAM evaluator, each layer alone.

use std::collections::BTreeMap;

use integration::iam::{is_allowed, AuthzRequest};
use integration::template::{tenant_role_policy, Arns};
use serde_json::Value;
use shared::identity::keys::raw_key;
use shared::isolation::policy::{platform_session_policy, PlatformAccess, TableLocation};

const TABLE: &str = "arn:aws:dynamodb:us-east-1:123456789012:table/pooltable-dev";

fn location() -> TableLocation {
    TableLocation::from_role_arn(
        "arn:aws:iam::123456789012:role/pooltable-dev-tenant-access",
        "us-east-1",
        "pooltable-dev",
    )
    .unwrap()
}

/// `action` on the pool's item of partition key `pk`, by a session tagged `tags`.
fn request(action: &str, pk: &str, tags: &[(&str, &str)]) -> AuthzRequest {
    AuthzRequest {
        action: format!("dynamodb:{action}"),
        resource: TABLE.into(),
        leading_keys: Some(vec![pk.to_owned()]),
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
    let role = tenant_role_policy(&Arns {
        table: TABLE,
        functions_role: "arn:aws:iam::123456789012:role/pooltable-dev-functions",
    });
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
        // the imports' deadline list, and the usage counters
        (PlatformAccess::ImportsDue, "imports-due", |action, pk| {
            pk.contains("#IMPORTS_DUE#") || (action == "UpdateItem" && pk.contains("#USAGE#"))
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
