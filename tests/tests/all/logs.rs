//! The request log: one JSON line per request, in Powertools' keys (`function_request_id`,
//! `tenant_id`, `cold_start`, …), with the route, status, latency,
//! DynamoDB request count, consumed capacity and throttles, and never a secret: no token, no body,
//! no id from the path.

use integration::api::NO_PATH;
use integration::Harness;
use serde_json::{json, Value};

#[tokio::test(flavor = "current_thread")]
async fn each_request_logs_one_summary_line_and_no_secret() {
    // GIVEN logs captured in the production JSON format
    let (logs, _guard) = integration::CapturedLogs::install();
    let (h, tenant) = Harness::with_tenant("logs", 1).await;
    let secret_state = "state-secret-7f3a9c";
    let bearer = shared::isolation::claims::dev_jwt(&tenant, false);

    // WHEN a session is created (with a bearer token and secret state) and read back
    let mut create = h.tenant(&tenant).request(
        "create-session",
        &NO_PATH,
        Some(json!({"customerId": "cust-logs", "state": secret_state})),
    );
    create
        .headers_mut()
        .insert("authorization", format!("Bearer {bearer}").parse().unwrap());
    let created = shared::service::runtime::respond(
        "req-1".into(),
        "POST /sessions".into(),
        integration::dispatch(&h.app, "create-session", create),
    )
    .await;
    assert_eq!(created.status(), 201);
    let body: Value = match created.body() {
        lambda_http::Body::Text(t) => serde_json::from_str(t).unwrap(),
        _ => panic!(),
    };
    let id = body["sessionId"].as_str().unwrap().to_owned();
    // (by the tenant, then by a caller with no tenant claim)
    for (caller, request_id) in [(h.tenant(&tenant), "req-2"), (h.anonymous(), "req-3")] {
        let get = caller.request("get-session-by-session-id", &[("sessionId", &id)], None);
        shared::service::runtime::respond(
            request_id.into(),
            "GET /sessions/{sessionId}".into(),
            integration::dispatch(&h.app, "get-session-by-session-id", get),
        )
        .await;
    }

    // THEN there is one summary line per request, with the documented fields
    let text = logs.text();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("every log line is JSON"))
        .collect();
    let requests: Vec<&Value> = lines.iter().filter(|l| l["message"] == "request").collect();
    assert_eq!(requests.len(), 3, "{text}");
    assert_eq!(requests[0]["function_request_id"], "req-1");
    assert_eq!(requests[0]["tenant_id"], tenant.as_str());
    assert_eq!(requests[0]["level"], "INFO");
    assert_eq!(requests[0]["cold_start"], false);
    assert!(requests[0]["timestamp"].is_string());
    assert_eq!(requests[0]["route"], "POST /sessions");
    assert_eq!(requests[0]["status"], 201);
    assert_eq!(requests[0]["dynamodb_requests"], 1);
    assert!(requests[0]["latency_ms"].as_f64().unwrap() > 0.0);
    // the capacity DynamoDB reported: a small PutItem on the table, GSI1 and the catalog index
    // (GSI2), then a one-item Query
    assert_eq!(
        (&requests[0]["wcu"], &requests[0]["rcu"]),
        (&json!(3.0), &json!(0.0))
    );
    assert_eq!(requests[0]["throttles"], 0);
    assert_eq!(requests[1]["status"], 200);
    assert_eq!(requests[1]["dynamodb_requests"], 1);
    assert_eq!(
        (&requests[1]["wcu"], &requests[1]["rcu"]),
        (&json!(0.0), &json!(0.5))
    );
    assert_eq!(requests[2]["status"], 401);
    assert!(requests[2].get("tenant_id").is_none(), "{}", requests[2]);
    // AND no secret, token, body or path id appears anywhere in the logs
    for secret in [
        secret_state,
        bearer.as_str(),
        bearer.split('.').nth(1).unwrap(),
        id.as_str(),
        "cust-logs",
    ] {
        assert!(
            !text.contains(secret),
            "the logs contain {secret:?}:\n{text}"
        );
    }
}
