//! IAM for the functions' own credentials, on the stack: every DynamoDB request a function sends on
//! its execution role (not a tenant's session) while a test calls it, and every STS, KMS, SQS,
//! EventBridge and Secrets Manager request through the clients the harness builds ([`services`]),
//! is judged by the project's IAM evaluator against that function's role as template.yaml
//! generates it from routes.yaml. A request the role would refuse fails its test with the request
//! named (DynamoDB Local and moto evaluate no IAM, so without this a role missing an action the
//! code calls would pass every test here and be refused in AWS).
//!
//! Tenant sessions' requests are the guard's to hold (proven equal to their session policies), so
//! only the execution role's are judged here: told by the access key that signed them (the stack's
//! own, `AWS_ACCESS_KEY_ID`; a session's is STS's). A function is known while a test calls it through
//! [`as_function`] (every route's `dispatch`; the lane worker's, the driver's, the import
//! consumer's, the control plane's and the lifecycle publisher's entry in the harness); what a
//! binary run as a process sends is not judged, nor would be a task's a function spawned (the
//! task-local name does not follow a spawn; no function spawns one today).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::iam::{is_allowed, AuthzRequest};
use crate::template::{caller, function_role_policy, DEV_ARNS};
use devtools::routes::pascal_case;

mod services;
pub use services::{name_queue, stands_for, Judged};

/// The access key the functions' execution role signs with in the tests: the process's own
/// (`scripts/stack.sh` exports it), read once.
fn execution_role_key() -> &'static str {
    static KEY: OnceLock<String> = OnceLock::new();
    KEY.get_or_init(|| std::env::var("AWS_ACCESS_KEY_ID").unwrap_or_default())
}

/// The function a test is calling, and how many of its actions were judged.
struct Calling {
    bin: String,
    judged: Arc<AtomicUsize>,
}

tokio::task_local! {
    static FUNCTION: Calling;
}

/// Runs `work` as function `bin` (routes.yaml's name): its requests on its own credentials are
/// judged against its role.
pub async fn as_function<F: Future>(bin: &str, work: F) -> F::Output {
    as_function_counted(bin, work).await.0
}

/// [`as_function`], with how many actions were judged: a test holds it above zero, so a stack
/// whose access key changed cannot leave every request unjudged and every test passing.
pub async fn as_function_counted<F: Future>(bin: &str, work: F) -> (F::Output, usize) {
    let judged = Arc::new(AtomicUsize::new(0));
    let calling = Calling {
        bin: bin.to_owned(),
        judged: judged.clone(),
    };
    // Boxed: a handler's future is large, and a test thread's stack in debug is not.
    let out = FUNCTION.scope(calling, Box::pin(work)).await;
    (out, judged.load(Ordering::SeqCst))
}

/// Judges one signed DynamoDB request: panics, naming it, when the calling function's role would
/// refuse any action it needs. Requests outside [`as_function`], or signed by a session, pass.
pub fn judge(authorization: Option<&str>, target: Option<&str>, body: Option<&[u8]>) {
    let Ok((bin, judged)) = FUNCTION.try_with(|f| (f.bin.clone(), f.judged.clone())) else {
        return;
    };
    let key = authorization
        .and_then(|a| a.split("Credential=").nth(1))
        .and_then(|c| c.split('/').next());
    if key.is_none() || key != Some(execution_role_key()) {
        return;
    }
    // The signing scope names the service: `Credential=<key>/<date>/<region>/<service>/aws4_request`.
    let service = authorization
        .and_then(|a| a.split("Credential=").nth(1))
        .and_then(|c| c.split('/').nth(3))
        .unwrap_or_default();
    let operation = target
        .and_then(|t| t.rsplit('.').next())
        .unwrap_or_default();
    let asked = match service {
        "dynamodb" => {
            let body: Value = body
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or(Value::Null);
            authorizations(operation, &body)
        }
        other => services::authorizations(other, operation, body.unwrap_or_default()),
    };
    let logical = format!("{}Role", pascal_case(&bin));
    let policy = role_policy(&logical);
    for asked in asked {
        let request = AuthzRequest {
            action: asked.action.clone(),
            resource: asked.resource.clone(),
            leading_keys: asked.leading_keys.clone(),
            request_tags: asked.request_tags.clone(),
            service_keys: asked.service_keys.clone(),
            ..caller(&DEV_ARNS, &logical)
        };
        judged.fetch_add(1, Ordering::SeqCst);
        assert!(
            is_allowed(policy, &request),
            "IAM would refuse {bin}'s {operation} on its own credentials ({logical}): \
             {} on {} (leading keys {:?}, context {:?})",
            asked.action,
            asked.resource,
            asked.leading_keys,
            asked.service_keys
        );
    }
}

/// Function role `logical`'s policy, resolved once per role.
fn role_policy(logical: &str) -> &'static Value {
    static ROLES: OnceLock<std::sync::Mutex<BTreeMap<String, &'static Value>>> = OnceLock::new();
    let mut roles = ROLES.get_or_init(Default::default).lock().unwrap();
    roles
        .entry(logical.to_owned())
        .or_insert_with(|| Box::leak(Box::new(function_role_policy(&DEV_ARNS, logical))))
}

/// One action IAM authorizes for a request.
struct Asked {
    /// With its service's prefix (`dynamodb:GetItem`, `kms:Decrypt`).
    action: String,
    resource: String,
    leading_keys: Option<Vec<String>>,
    request_tags: BTreeMap<String, String>,
    /// A service's own condition keys (a KMS request's encryption context).
    service_keys: BTreeMap<String, String>,
}

/// What IAM authorizes for `operation` with `body`: a transaction's and a batch's items one by one.
fn authorizations(operation: &str, body: &Value) -> Vec<Asked> {
    let asked = |action: &str, table: &Value, keys: Option<Vec<String>>| Asked {
        action: format!("dynamodb:{action}"),
        resource: resource_of_table(table.as_str().unwrap_or_default()),
        leading_keys: keys,
        request_tags: BTreeMap::new(),
        service_keys: BTreeMap::new(),
    };
    let pk = |item: &Value| item["PK"]["S"].as_str().map(|s| vec![s.to_owned()]);
    match operation {
        "GetItem" | "UpdateItem" | "DeleteItem" => {
            vec![asked(operation, &body["TableName"], pk(&body["Key"]))]
        }
        "PutItem" => vec![asked(operation, &body["TableName"], pk(&body["Item"]))],
        "Query" | "Scan" => {
            let mut one = asked(operation, &body["TableName"], query_leading_key(body));
            if let Some(index) = body["IndexName"].as_str() {
                one.resource = format!("{}/index/{index}", one.resource);
            }
            vec![one]
        }
        "TransactWriteItems" | "TransactGetItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_object()?.iter().next())
            .map(|(kind, part)| {
                let action = match kind.as_str() {
                    "Put" => "PutItem",
                    "Update" => "UpdateItem",
                    "Delete" => "DeleteItem",
                    "ConditionCheck" => "ConditionCheckItem",
                    _ => "GetItem",
                };
                let key = if kind == "Put" {
                    &part["Item"]
                } else {
                    &part["Key"]
                };
                asked(action, &part["TableName"], pk(key))
            })
            .collect(),
        "BatchWriteItem" | "BatchGetItem" => body["RequestItems"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(table, _)| asked(operation, &Value::String(table.clone()), None))
            .collect(),
        "TagResource" | "UntagResource" | "ListTagsOfResource" => {
            let arn = body["ResourceArn"].as_str().unwrap_or_default();
            let table = arn.rsplit("table/").next().unwrap_or_default();
            let mut one = asked(operation, &Value::String(table.to_owned()), None);
            one.request_tags = tags(&body["Tags"]);
            vec![one]
        }
        "RestoreTableToPointInTime" => vec![asked(operation, &body["SourceTableName"], None)],
        "ListTables" => vec![Asked {
            action: "dynamodb:ListTables".to_owned(),
            resource: "*".to_owned(),
            leading_keys: None,
            request_tags: BTreeMap::new(),
            service_keys: BTreeMap::new(),
        }],
        // A table's own operations (DescribeTable, CreateTable, DeleteTable, UpdateTable, …).
        _ => {
            let mut one = asked(operation, &body["TableName"], None);
            one.request_tags = tags(&body["Tags"]);
            vec![one]
        }
    }
}

/// A Query's partition key value: the value its key condition binds first (`PK = :pk AND …`).
fn query_leading_key(body: &Value) -> Option<Vec<String>> {
    let condition = body["KeyConditionExpression"].as_str()?;
    let start = condition.find(':')?;
    let name: String = condition[start..]
        .chars()
        .take_while(|c| *c == ':' || c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let value = body["ExpressionAttributeValues"][name.as_str()]["S"].as_str()?;
    Some(vec![value.to_owned()])
}

/// A request's `Tags` (`[{"Key": …, "Value": …}]`), as `aws:RequestTag/*`.
fn tags(tags: &Value) -> BTreeMap<String, String> {
    tags.as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some((
                t["Key"].as_str()?.to_owned(),
                t["Value"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

/// The ARN a local table's name stands for in the template: the pool (each test's table), an own
/// table (`-tenant-<id>`), a restore's (`-restore-…`), the key table (`-keys`).
fn resource_of_table(name: &str) -> String {
    for infix in ["-tenant-", "-restore-"] {
        if let Some((_, rest)) = name.split_once(infix) {
            return format!("{}{infix}{rest}", DEV_ARNS.table);
        }
    }
    if name.ends_with("-keys") {
        return "arn:test:TenantKeysTable".to_owned();
    }
    DEV_ARNS.table.to_owned()
}
