//! The judge's reading of the requests a function sends on its own credentials to services other
//! than DynamoDB: STS (AssumeRole, with its session tags), KMS (a tenant key made or unwrapped,
//! with its encryption context), SQS (a lane's turn, an import's messages), EventBridge (the
//! control plane's replies, the lifecycle events) and Secrets Manager (the signing keys). The
//! harness adds [`Judged`] to the clients it builds for these services, so a role missing an
//! action the code calls there fails the test that called it, as it would be refused in AWS.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use serde_json::Value;
use shared::store::client::hooks::{Bag, HookResult, Intercept, Parts, RequestRef};

use super::Asked;
use crate::template::DEV_ARNS;

/// Judges each request of the SDK client it is added to (STS, KMS, SQS), as
/// [`super::judge`] does DynamoDB's.
#[derive(Debug)]
pub struct Judged;

impl Intercept for Judged {
    fn name(&self) -> &'static str {
        "Judged"
    }

    fn read_before_transmit(&self, ctx: RequestRef, _: &Parts, _: &mut Bag) -> HookResult {
        let header = |name: &str| ctx.request().headers().get(name);
        super::judge(
            header("authorization"),
            header("x-amz-target"),
            ctx.request().body().bytes(),
        );
        Ok(())
    }
}

/// What each local resource a request names stands for in the template, as `crate::template`
/// resolves it there: a queue's URL `arn:test:LaneQueue`, a bus's name `ref:ControlPlaneBusArn`,
/// a secret's ARN `ref:SigningKeysSecret`, an event source `ref:ApplicationPlaneEventSource`.
fn stand_ins() -> &'static Mutex<BTreeMap<String, String>> {
    static STAND_INS: OnceLock<Mutex<BTreeMap<String, String>>> = OnceLock::new();
    STAND_INS.get_or_init(Default::default)
}

/// Judges a request that names the local resource `local` as one naming `template` (see
/// [`stand_ins`]). A queue, bus or secret not named is none of the template's: a function's
/// request to it is refused.
pub fn stands_for(local: &str, template: &str) {
    stand_ins()
        .lock()
        .unwrap()
        .insert(local.to_owned(), template.to_owned());
}

/// What `local` stands for, or `None`.
fn stand_in(local: &str) -> Option<String> {
    stand_ins().lock().unwrap().get(local).cloned()
}

/// Judges the messages sent to the local queue at `url` as sent to template.yaml's queue `logical`
/// (`LaneQueue`, `ImportQueue`).
pub fn name_queue(url: &str, logical: &str) {
    stands_for(url, &format!("arn:test:{logical}"));
}

/// `kind` `local` as the template names it, or a resource no template names.
fn template_resource(kind: &str, local: &str) -> String {
    stand_in(local)
        .unwrap_or_else(|| format!("arn:test:a {kind} of no template resource ({local})"))
}

/// What IAM authorizes for `service`'s `operation` (its `X-Amz-Target`'s last part; none for STS,
/// whose query protocol names it in the body) with `body`.
pub(super) fn authorizations(service: &str, operation: &str, body: &[u8]) -> Vec<Asked> {
    let asked = |action: String, resource: String| Asked {
        action,
        resource,
        leading_keys: None,
        request_tags: BTreeMap::new(),
        service_keys: BTreeMap::new(),
    };
    match service {
        "sts" => {
            let form: BTreeMap<String, String> =
                form_urlencoded::parse(body).into_owned().collect();
            let action = form.get("Action").cloned().unwrap_or_default();
            let role = dev_role(form.get("RoleArn").map(String::as_str).unwrap_or_default());
            let tags: BTreeMap<String, String> = (1..)
                .map_while(|n| {
                    let key = form.get(&format!("Tags.member.{n}.Key"))?;
                    let value = form.get(&format!("Tags.member.{n}.Value"))?;
                    Some((key.clone(), value.clone()))
                })
                .collect();
            let mut all = vec![Asked {
                request_tags: tags.clone(),
                ..asked(format!("sts:{action}"), role.clone())
            }];
            // A session given tags is authorized for sts:TagSession too.
            if !tags.is_empty() {
                all.push(Asked {
                    request_tags: tags,
                    ..asked("sts:TagSession".into(), role)
                });
            }
            all
        }
        "kms" => {
            let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let key = body["KeyId"].as_str().unwrap_or("*");
            let resource = match key.starts_with("arn:") {
                true => key.to_owned(),
                false => format!("arn:aws:kms:us-east-1:{}:key/{key}", account()),
            };
            let context = body["EncryptionContext"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| {
                    Some((format!("kms:EncryptionContext:{k}"), v.as_str()?.to_owned()))
                })
                .collect();
            vec![Asked {
                service_keys: context,
                ..asked(format!("kms:{operation}"), resource)
            }]
        }
        "sqs" => {
            let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let queue = template_resource("queue", body["QueueUrl"].as_str().unwrap_or_default());
            // IAM authorizes a batch as its single action.
            let action = operation.strip_suffix("Batch").unwrap_or(operation);
            vec![asked(format!("sqs:{action}"), queue)]
        }
        // Each entry of a PutEvents is authorized on its own bus, with its source
        // (`events:source`) and detail type (`events:detail-type`).
        "events" => {
            let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let entries = body["Entries"].as_array().cloned().unwrap_or_default();
            entries
                .iter()
                .map(|entry| {
                    let bus = entry["EventBusName"].as_str().unwrap_or("default");
                    let source = entry["Source"].as_str().unwrap_or_default();
                    let keys = [
                        (
                            "events:source",
                            stand_in(source).unwrap_or(source.to_owned()),
                        ),
                        (
                            "events:detail-type",
                            entry["DetailType"].as_str().unwrap_or_default().to_owned(),
                        ),
                    ];
                    Asked {
                        service_keys: keys.map(|(k, v)| (k.to_owned(), v)).into(),
                        ..asked(format!("events:{operation}"), template_resource("bus", bus))
                    }
                })
                .collect()
        }
        "secretsmanager" => {
            let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let secret = body["SecretId"].as_str().unwrap_or_default();
            vec![asked(
                format!("secretsmanager:{operation}"),
                template_resource("secret", secret),
            )]
        }
        other => panic!("the judge does not read {other}'s requests ({operation})"),
    }
}

/// The dev stage's account (in [`DEV_ARNS`]).
fn account() -> &'static str {
    DEV_ARNS.table.split(':').nth(4).unwrap_or_default()
}

/// The dev stage's ARN of the role a local ARN names (`…:role/pooltable-<stage>-tenant-access`).
fn dev_role(arn: &str) -> String {
    let name = arn.rsplit('/').next().unwrap_or_default();
    let rest = name
        .strip_prefix("pooltable-")
        .and_then(|n| n.split_once('-'))
        .map_or(name, |(_, rest)| rest);
    format!("arn:aws:iam::{}:role/pooltable-dev-{rest}", account())
}
