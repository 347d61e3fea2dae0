//! CloudWatch metrics in the Embedded Metric Format: every request served through the runtime
//! writes one line, checked here against the EMF specification
//! (<https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html>)
//! and for its dimensions and values on a read, a write, a 429 and a throttled request.

use integration::routes::params;
use integration::{onboard_custom, onboarded_on_shards, unique, Harness};
use serde_json::{json, Value};
use shared::service::runtime::respond_admitted;
use shared::service::telemetry::Invocation;

/// The units the specification allows.
const UNITS: &[&str] = &[
    "Seconds",
    "Microseconds",
    "Milliseconds",
    "Bytes",
    "Kilobytes",
    "Megabytes",
    "Gigabytes",
    "Terabytes",
    "Bits",
    "Kilobits",
    "Megabits",
    "Gigabits",
    "Terabits",
    "Percent",
    "Count",
    "Bytes/Second",
    "Kilobytes/Second",
    "Megabytes/Second",
    "Gigabytes/Second",
    "Terabytes/Second",
    "Bits/Second",
    "Kilobits/Second",
    "Megabits/Second",
    "Gigabits/Second",
    "Terabits/Second",
    "Count/Second",
    "None",
];

/// Panics unless `line` is a valid EMF document: the `_aws` metadata (an integer millisecond
/// `Timestamp` and 1+ `CloudWatchMetrics` directives, each with a `Namespace` of 1-255 characters,
/// `Dimensions` as arrays of at most 30 keys, and at most 100 `Metrics` with a `Name` of 1-255
/// characters and an allowed `Unit`), every dimension key a top-level string member, and every
/// metric a top-level number (or array of at most 100 numbers).
fn assert_emf(line: &Value) {
    let aws = &line["_aws"];
    assert!(aws["Timestamp"].is_u64(), "Timestamp: {line}");
    let directives = aws["CloudWatchMetrics"]
        .as_array()
        .expect("CloudWatchMetrics");
    assert!(!directives.is_empty());
    for d in directives {
        let namespace = d["Namespace"].as_str().expect("Namespace");
        assert!((1..=255).contains(&namespace.len()) && !namespace.trim().is_empty());
        for set in d["Dimensions"].as_array().expect("Dimensions") {
            let keys = set.as_array().expect("a dimension set is an array");
            assert!(keys.len() <= 30);
            for key in keys {
                let key = key.as_str().expect("a dimension key is a string");
                assert!(
                    line[key]
                        .as_str()
                        .is_some_and(|v| !v.is_empty() && v.len() <= 1024),
                    "dimension {key} is not a string member: {line}"
                );
            }
        }
        let metrics = d["Metrics"].as_array().expect("Metrics");
        assert!(metrics.len() <= 100);
        for m in metrics {
            let name = m["Name"].as_str().expect("Name");
            assert!((1..=255).contains(&name.len()));
            if let Some(unit) = m.get("Unit") {
                assert!(UNITS.contains(&unit.as_str().unwrap()), "unit {unit}");
            }
            let value = &line[name];
            let numeric = value.is_number()
                || value
                    .as_array()
                    .is_some_and(|a| a.len() <= 100 && a.iter().all(Value::is_number));
            assert!(numeric, "metric {name} has no numeric value: {line}");
        }
    }
}

/// The lines `h`'s container wrote for route `route`, in order.
fn lines_of(h: &Harness, route: &str) -> Vec<Value> {
    let lines = h.app.metrics.lines();
    lines.iter().for_each(assert_emf);
    lines.into_iter().filter(|l| l["route"] == route).collect()
}

#[tokio::test]
async fn every_request_writes_one_emf_line_with_bounded_dimensions_and_its_values() {
    // GIVEN a standard tenant
    let (h, t) = Harness::with_tenant("emf", 4).await;
    let client = h.tenant(&t).admitted();
    // WHEN it writes a product, then reads it
    let put = client.put_product("p-1", json!({"n": 1})).await;
    assert_eq!(put.status, 201);
    let got = client.get_product("p-1").await;
    assert_eq!(got.status, 200);

    // THEN each wrote one line, published under `service` and under route, tier and status class,
    // with the tenant as a property only
    let write = &lines_of(&h, "put-product")[0];
    let directive = &write["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(directive["Namespace"], "pooltable");
    assert_eq!(directive["Dimensions"], json!([["service"]]));
    assert_eq!(
        (&write["service"], &write["tier"], &write["statusClass"]),
        (&json!("pooltable"), &json!("standard"), &json!("2xx"))
    );
    assert_eq!(write["tenant_id"], t.as_str());
    assert_eq!(write["Requests"], 1.0);
    assert!(
        write["WriteCapacityUnits"].as_f64().unwrap() >= 1.0,
        "{write}"
    );
    assert_eq!(write["ServerErrors"], 0.0);
    let read = &lines_of(&h, "get-product")[0];
    assert!(read["ReadCapacityUnits"].as_f64().unwrap() > 0.0, "{read}");
    assert_eq!(read["WriteCapacityUnits"], 0.0);
    assert!(read["Latency"].as_f64().unwrap() > 0.0);
    for line in [write, read] {
        let dimensions = &line["_aws"]["CloudWatchMetrics"][0]["Dimensions"];
        assert_eq!(dimensions, &json!([["service"]]), "{line}");
    }
}

#[tokio::test]
async fn a_429_and_a_throttled_request_are_counted_by_reason() {
    // GIVEN a tenant of one request a second
    let h = Harness::new().await;
    let t = unique("emf429");
    onboard_custom(&h, &t, 1, 1, 1_000).await;
    let client = h.tenant(&t).admitted();
    // WHEN it sends two reads in one second, the second refused on the request rate
    let first = client.get_product("p-1").await;
    assert_eq!(first.status, 404);
    let refused = client.get_product("p-1").await;
    assert_eq!(refused.status, 429);
    // THEN its line counts a 4xx and a refusal on requests, and nothing read
    let lines = lines_of(&h, "get-product");
    let line = &lines[1];
    assert_eq!(line["statusClass"], "4xx");
    assert_eq!(line["ClientErrors"], 1.0);
    assert_eq!(line["LimitedOnRequests"], 1.0);
    assert_eq!(line["LimitedOnCapacity"], 0.0);
    assert_eq!(line["ReadCapacityUnits"], 0.0);

    // GIVEN a tenant whose product read DynamoDB throttles once (the SDK retries it)
    // (its record read and cached first, so that the refused GetItem is the product's)
    let u = onboarded_on_shards(&h, "emfthrottle", 4).await;
    h.clock.advance_seconds(1);
    let warm = h.tenant(&u).admitted().get_product("p-1").await;
    assert_eq!(warm.status, 404);
    h.faults.refuse_once_with_throttling("GetItem");
    // WHEN it reads
    let r = h.tenant(&u).admitted().get_product("p-1").await;
    // THEN the line counts the throttle
    let lines = lines_of(&h, "get-product");
    let line = lines
        .iter()
        .rfind(|l| l["tenant_id"] == u.as_str())
        .unwrap();
    assert_eq!(line["status"], r.status);
    assert!(line["Throttles"].as_f64().unwrap() >= 1.0, "{line}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_request_log_line_and_its_emf_line_share_their_keys_with_cold_start_and_trace_id() {
    // GIVEN logs captured in the production format, and a tenant
    let (logs, _guard) = integration::CapturedLogs::install();
    let (h, t) = Harness::with_tenant("keys", 4).await;
    // WHEN the container's first invocation, traced, writes a product
    let invocation = Invocation {
        request_id: "req-keys-1".into(),
        xray_trace_id: Some("Root=1-6745a0b1-3c5f1e2d4a6b8c0d1e2f3a4b".into()),
        cold_start: true,
        function_arn: Some("arn:aws:lambda:us-east-1:123456789012:function:put-product".into()),
        correlation_id: Some("Bq3hZjH2oAMEbXw=".into()),
    };
    let req = h.tenant(&t).request(
        "put-product",
        &params(&[("productId", "p-keys")]),
        Some(json!({"n": 1})),
    );
    let response = Box::pin(respond_admitted(
        &h.app,
        "put-product",
        invocation,
        req,
        |req| Box::pin(integration::dispatch(&h.app, "put-product", req)),
    ))
    .await;
    assert_eq!(response.status(), 201);

    // THEN its EMF line and its log summary line carry the same keys with the same values
    let emf = lines_of(&h, "put-product")
        .into_iter()
        .find(|l| l["function_request_id"] == "req-keys-1")
        .expect("the request's EMF line");
    let text = logs.text();
    let log = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("every log line is JSON"))
        .find(|l| l["message"] == "request" && l["function_request_id"] == "req-keys-1")
        .expect("the request's log line");
    for key in [
        "service",
        "function_name",
        "function_request_id",
        "xray_trace_id",
        "cold_start",
        "tenant_id",
    ] {
        assert!(
            !emf[key].is_null() || key == "function_name",
            "EMF {key}: {emf}"
        );
        assert!(log.get(key).is_some(), "log {key}: {log}");
    }
    for key in [
        "service",
        "function_request_id",
        "xray_trace_id",
        "cold_start",
        "tenant_id",
        "function_arn",
        "correlation_id",
    ] {
        assert_eq!(emf[key], log[key], "{key}: {emf} / {log}");
    }
    // AND Powertools' other keys: the function's ARN and memory, and the sampling rate
    assert_eq!(
        log["function_arn"],
        "arn:aws:lambda:us-east-1:123456789012:function:put-product"
    );
    assert_eq!(log["correlation_id"], "Bq3hZjH2oAMEbXw=");
    for key in ["function_memory_size", "sampling_rate"] {
        assert!(log.get(key).is_some(), "log {key}: {log}");
    }
    assert_eq!(log["cold_start"], true);
    assert_eq!(log["tenant_id"], t.as_str());
    assert_eq!(
        log["xray_trace_id"],
        "Root=1-6745a0b1-3c5f1e2d4a6b8c0d1e2f3a4b"
    );
    for key in ["level", "message", "timestamp"] {
        assert!(log[key].is_string(), "log {key}: {log}");
    }
    // AND the cold start was counted once, under service and function name, as Powertools does
    let cold: Vec<Value> = h
        .app
        .metrics
        .lines()
        .into_iter()
        .filter(|l| l.get("ColdStart").is_some())
        .collect();
    assert_eq!(cold.len(), 1, "{cold:?}");
    assert_emf(&cold[0]);
    assert_eq!(
        cold[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
        json!([["service", "function_name"]])
    );
    assert_eq!(cold[0]["function_request_id"], "req-keys-1");
}

#[tokio::test]
async fn an_access_log_line_joins_its_functions_lines_by_the_correlation_id() {
    // GIVEN logs captured in the production format, and a tenant's request as API Gateway hands it
    // over (its requestContext.requestId)
    let (logs, _guard) = integration::CapturedLogs::install();
    let (h, t) = Harness::with_tenant("join", 1).await;
    let req = h.tenant(&t).request(
        "put-product",
        &params(&[("productId", "p-join")]),
        Some(json!({"n": 1})),
    );
    let invocation = Invocation::of(&req);
    let correlation = invocation
        .correlation_id
        .clone()
        .expect("requestContext.requestId");
    // WHEN the function serves it, and API Gateway writes its access log line with the template's
    // format
    let response = Box::pin(respond_admitted(
        &h.app,
        "put-product",
        invocation,
        req,
        |req| Box::pin(integration::dispatch(&h.app, "put-product", req)),
    ))
    .await;
    assert_eq!(response.status(), 201);
    let template: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap(),
    )
    .unwrap();
    // (the claim the access log names is the one Cognito's trigger adds to the tenant's token)
    let claim = format!(
        "$context.authorizer.claims.{}",
        shared::isolation::claims::ACCESS_LOG_TENANT_CLAIM
    );
    let format = template["Resources"]["HttpApi"]["Properties"]["AccessLogSettings"]["Format"]
        .as_str()
        .unwrap()
        .replace("$context.requestId", &correlation)
        .replace(&claim, t.as_str())
        .replace("$context.status", "201");
    let access: Value = serde_json::from_str(&format).expect("the access log format is JSON");
    // THEN the access line names the tenant
    assert_eq!(access["tenant"], t.as_str(), "{format}");
    // AND its requestId finds the function's lines, which name the same tenant
    let text = logs.text();
    let joined: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["correlation_id"] == access["requestId"])
        .collect();
    assert!(!joined.is_empty(), "no function line of {access}: {text}");
    assert!(
        joined.iter().all(|l| l["tenant_id"] == t.as_str()),
        "{joined:?}"
    );
    assert!(joined.iter().any(|l| l["message"] == "request"));
}
