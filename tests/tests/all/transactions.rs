//! Every transactional route under every way DynamoDB cancels a transaction. DynamoDB Local
//! serialises transactions, so conflicts and throttling never happen there on their own: the harness
//! injects each answer in DynamoDB's wire format, before the request reaches the table.
//!
//! For each route and each reason: the status is the documented one (throttling: 503 with
//! Retry-After; a conflict that persists: 409 after the bounded retries; in progress: 503; a failed
//! condition: the route's own 4xx), it is problem+json, and the table is unchanged. A conflict that
//! clears is retried and commits.

use std::collections::BTreeMap;

use integration::fixtures::arrange;
use integration::routes::{route_table, routes_with};
use integration::Harness;
use shared::store::client::transact::ATTEMPTS;

/// One transactional route and how it maps cancellations (routes.yaml's `transaction`).
struct Case {
    bin: String,
    /// Which action's condition the route maps, and to what.
    condition_index: usize,
    condition_status: u16,
    /// How many actions the transaction has (the length of the reasons list).
    actions: usize,
    /// Whether the route sends a transaction only with an `Idempotency-Key` (then the test sends one).
    keyed: bool,
}

fn cases() -> Vec<Case> {
    routes_with(|f| f.transaction.as_ref())
        .map(|(f, t)| Case {
            bin: f.bin.clone(),
            condition_index: t.condition,
            condition_status: t.condition_status,
            actions: t.actions,
            keyed: t.keyed,
        })
        .collect()
}

/// Calls the case's route, with a fresh `Idempotency-Key` when its transaction needs one.
async fn send(
    h: &Harness,
    case: &Case,
    params: &std::collections::BTreeMap<String, String>,
    body: Option<serde_json::Value>,
    auth: &integration::Auth,
) -> integration::Resp {
    let key = integration::unique("tx-key");
    let headers: Vec<(&str, &str)> = if case.keyed {
        vec![("Idempotency-Key", key.as_str())]
    } else {
        Vec::new()
    };
    h.caller(auth)
        .headers(&headers)
        .call(&case.bin, params, body)
        .await
}

/// One injected answer: the reason codes (`None`: TransactionInProgressException), and what the
/// route must answer (status, TransactWriteItems sends when asserted, whether Retry-After is set).
struct Scenario<'a> {
    name: &'a str,
    codes: Option<&'a Vec<String>>,
    status: u16,
    sends: Option<usize>,
    retry_after: bool,
}

/// `code` at action `index`, `None` for the others.
fn reasons(actions: usize, index: usize, code: &str) -> Vec<String> {
    (0..actions.max(index + 1))
        .map(|i| if i == index { code } else { "None" }.to_owned())
        .collect()
}

async fn table(h: &Harness) -> Vec<String> {
    let mut items: Vec<String> = h
        .all_items()
        .await
        .iter()
        .map(|i| format!("{:?}", i.iter().collect::<BTreeMap<_, _>>()))
        .collect();
    items.sort();
    items
}

#[tokio::test]
async fn every_cancellation_reason_gets_its_documented_answer_on_every_transactional_route() {
    cancellations_get_their_documented_answers(&Harness::new().await).await;
}

/// The same, for tenants with a key of their own: their items sealed, and a keyed `put-user` one
/// action longer (it always deletes the plain email item too, which may be left from before the
/// tenant was keyed). The reasons injected keep the plain tenant's length: DynamoDB's list has one
/// per action, and the mapper reads the codes by index, never the list's length.
#[tokio::test]
async fn every_cancellation_reason_gets_its_documented_answer_for_a_keyed_tenant_too() {
    let h = Harness::new().await.keyed().await;
    cancellations_get_their_documented_answers(&h).await;
    assert!(
        h.all_items()
            .await
            .iter()
            .any(shared::store::keys::is_sealed),
        "the tenants' items were sealed"
    );
}

async fn cancellations_get_their_documented_answers(h: &Harness) {
    for case in cases() {
        // (reason codes, attempts injected, expected status, TransactWriteItems sends, Retry-After)
        let throttled = reasons(case.actions, 0, "ThrottlingError");
        let over_capacity = reasons(
            case.actions,
            case.actions - 1,
            "ProvisionedThroughputExceeded",
        );
        let conflict = reasons(case.actions, 0, "TransactionConflict");
        let condition = reasons(case.actions, case.condition_index, "ConditionalCheckFailed");
        let scenarios = [
            Scenario {
                name: "throttling",
                codes: Some(&throttled),
                status: 503,
                sends: Some(1),
                retry_after: true,
            },
            Scenario {
                name: "over capacity",
                codes: Some(&over_capacity),
                status: 503,
                sends: Some(1),
                retry_after: true,
            },
            Scenario {
                name: "lasting conflict",
                codes: Some(&conflict),
                status: 409,
                sends: Some(ATTEMPTS as usize),
                retry_after: false,
            },
            Scenario {
                name: "in progress",
                codes: None,
                status: 503,
                sends: None,
                retry_after: true,
            },
            Scenario {
                name: "failed condition",
                codes: Some(&condition),
                status: case.condition_status,
                sends: None,
                retry_after: false,
            },
        ];
        for Scenario {
            name,
            codes,
            status,
            sends,
            retry_after,
        } in scenarios
        {
            // GIVEN the route's data in place
            let a = arrange(h, &case.bin).await;
            let (auth, params, body) = (a.auth, a.params, a.body);
            let mut before = table(h).await;
            // WHEN every transaction attempt is answered with this reason
            match codes {
                Some(codes) => {
                    let codes: Vec<&str> = codes.iter().map(String::as_str).collect();
                    h.faults.cancel_transactions(&codes, usize::MAX);
                }
                None => h.faults.transactions_in_progress(usize::MAX),
            }
            h.requests.reset();
            let r = send(h, &case, &params, body, &auth).await;
            h.faults.cancel_transactions(&[], 0);
            // THEN the documented status, as problem+json, and nothing written
            let what = format!("{} under {name}: {} {}", case.bin, r.status, r.body);
            assert_eq!(r.status, status, "{what}");
            assert_eq!(r.content_type, "application/problem+json", "{what}");
            assert_eq!(r.retry_after.is_some(), retry_after, "{what}");
            if let Some(sends) = sends {
                let sent = h.requests.by_operation().get("TransactWriteItems").copied();
                assert_eq!(sent, Some(sends), "{what}");
            }
            let mut after = table(h).await;
            if case.bin == "create-import" {
                // Its transaction is its last step: the import's record was claimed before its
                // items were sent, and stays claimed (`enqueuing`) for the retry that finishes it;
                // its deadline entry, listed before the claim, makes it final if none comes.
                // The items of `after` holding `marker` that were not there before.
                let added = |marker: &str| -> Vec<String> {
                    after
                        .iter()
                        .filter(|i| i.contains(marker) && !before.contains(i))
                        .cloned()
                        .collect()
                };
                let claims = added("#IMPORT#");
                assert_eq!(claims.len(), 1, "{what}: {claims:?}");
                assert!(
                    claims[0].contains(r#""state": S("enqueuing")"#),
                    "{what}: {claims:?}"
                );
                let due = added("#IMPORTS_DUE#");
                assert_eq!(due.len(), 1, "{what}: {due:?}");
                // AND, open until then, it counts among the tenant's open imports
                let counted = added("#SEALING#imports");
                assert_eq!(counted.len(), 1, "{what}: {counted:?}");
                assert!(counted[0].contains("openImports"), "{what}: {counted:?}");
                after.retain(|i| !claims.contains(i) && !due.contains(i) && !counted.contains(i));
                before.retain(|i| !i.contains("#SEALING#imports"));
                after.retain(|i| !i.contains("#SEALING#imports"));
            }
            assert_eq!(after, before, "{what}: the table changed");
        }
    }
}

#[tokio::test]
async fn a_conflict_that_clears_is_retried_and_commits() {
    let h = Harness::new().await;
    for case in cases() {
        // GIVEN the route's data, and one conflict on the first send
        let a = arrange(&h, &case.bin).await;
        let (auth, params, body) = (a.auth, a.params, a.body);
        let conflict = reasons(case.actions, 0, "TransactionConflict");
        let codes: Vec<&str> = conflict.iter().map(String::as_str).collect();
        h.faults.cancel_transactions(&codes, 1);
        h.requests.reset();
        // WHEN the route is called
        let r = send(&h, &case, &params, body, &auth).await;
        // THEN it succeeds on the second send
        assert!(r.status < 300, "{}: {} {}", case.bin, r.status, r.body);
        assert_eq!(
            h.requests.by_operation().get("TransactWriteItems").copied(),
            Some(2),
            "{}",
            case.bin
        );
    }
}

/// Modules that are no route but send a transaction for routes (and the import consumer), with the
/// call that marks a route as sending it.
const SHARED_WRITES: [(&str, &str); 12] = [
    ("store", "store_employee("),
    ("store", "store::put_root("),
    ("store", "store::put_child("),
    ("store", "store::delete_collection("),
    ("store", "store::delete_employee("),
    ("store", "store::save_user("),
    ("store", "store::place_order("),
    ("store", "store::store_transfer_code("),
    ("store", "store::redeem_transfer_code("),
    ("store", "mark_enqueued("),
    ("erasure", "erase_user("),
    ("erase-user", "erasure_response("),
];

#[test]
fn every_transactional_route_has_a_case_and_none_reads_cancellation_reasons_itself() {
    // GIVEN every handler source file
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../functions");
    let routes: Vec<String> = route_table()
        .routes()
        .map(|r| r.function.bin.clone())
        .collect();
    let mut transactional = Vec::new();
    for crate_dir in std::fs::read_dir(&root).unwrap() {
        let src = crate_dir.unwrap().path().join("src");
        for path in integration::rust_files_under(&src) {
            let text = std::fs::read_to_string(&path).unwrap();
            // A module's private submodules (`src/<module>/*.rs`) count as the module.
            let top = path.strip_prefix(&src).unwrap().iter().next().unwrap();
            let name = std::path::Path::new(top)
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .replace('_', "-");
            // THEN no handler classifies cancellations itself
            for needle in [
                "cancellation_reasons",
                "TransactionCanceledException",
                "TransactionConflict",
            ] {
                assert!(
                    !text.contains(needle),
                    "{} reads {needle} itself",
                    path.display()
                );
            }
            // A route's transaction of its own, the shared keyed put (a transaction with an
            // idempotency key), or a call of a crate's shared transactional write
            let sends_one = ["transact_write_items()", "idempotent::put_new("]
                .iter()
                .chain(SHARED_WRITES.iter().map(|(_, call)| call))
                .any(|call| text.contains(call));
            if routes.contains(&name) {
                if sends_one {
                    transactional.push(name);
                }
            } else if text.contains("transact_write_items()") {
                // AND a transaction outside a route is a shared write, whose callers are counted
                assert!(
                    SHARED_WRITES.iter().any(|(module, _)| name == *module),
                    "{} sends a transaction but is no route: add its writes to SHARED_WRITES",
                    path.display()
                );
            }
        }
    }
    // AND every route that sends a transaction is covered above
    transactional.sort();
    transactional.dedup();
    let mut covered: Vec<String> = cases().into_iter().map(|c| c.bin).collect();
    covered.sort();
    assert_eq!(transactional, covered);
}

#[tokio::test]
async fn twenty_simultaneous_child_creates_keep_the_parents_count_exact() {
    // GIVEN one parent session
    let h = std::sync::Arc::new(Harness::new().await);
    let a = arrange(&h, "create-session").await;
    let (auth, body) = (a.auth, a.body);
    let body = body.unwrap();
    let parent = body["parentSessionId"].as_str().unwrap().to_owned();
    // WHEN 20 children are created at once
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let (h, auth, body) = (h.clone(), auth.clone(), body.clone());
            tokio::spawn(async move { h.caller(&auth).create_session(body).await })
        })
        .collect();
    let mut created = 0;
    for t in tasks {
        let r = t.await.unwrap();
        // THEN each gets 201, or a 409 or 503 problem+json
        match r.status {
            201 => created += 1,
            409 | 503 => assert_eq!(r.content_type, "application/problem+json"),
            other => panic!("{other}: {}", r.body),
        }
    }
    // AND the parent's childCount equals the children written
    let items = h.all_items().await;
    let in_parent =
        |i: &&std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>| {
            i["PK"]
                .as_s()
                .unwrap()
                .ends_with(&format!("#SESSION#{parent}"))
        };
    let children = items
        .iter()
        .filter(in_parent)
        .filter(|i| i["SK"].as_s().unwrap().contains("#CHILD#"))
        .count();
    let count: usize = items
        .iter()
        .filter(in_parent)
        .find(|i| i["SK"].as_s().unwrap().contains("#CUSTOMER#"))
        .and_then(|root| root["childCount"].as_n().ok())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(children, created);
    assert_eq!(count, created);
    assert!(created > 0);
}
