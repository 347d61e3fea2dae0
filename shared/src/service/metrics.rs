//! CloudWatch metrics in the Embedded Metric Format (EMF): one JSON line on stdout per request (and
//! per lifecycle or import event), which CloudWatch Logs turns into metrics with no API call, the
//! convention of Powertools for AWS Lambda.
//!
//! Dimensions are what the alarms and the dashboard read, nothing more: every metric is published
//! under `service` alone, and `ColdStart` under `service, function_name` (as Powertools publishes
//! it). Route, tier, status class, tenant, request and trace ids are properties, never dimensions:
//! Logs Insights groups by any of them without the cost of a metric series each (README prices the
//! series). A request's line carries the keys its log lines carry (`service::telemetry`), so the
//! two join on `function_request_id`.
//!
//! Where the lines go is the container's [`MetricsSink`]: stdout in a Lambda function, nowhere in a
//! process that is not one (tests and the benchmark), unless `POOLTABLE_METRICS` says otherwise.
//! The `service` dimension is `POWERTOOLS_SERVICE_NAME` (the template sets `pooltable-<stage>`, so
//! stages in one account do not mix), else `pooltable`; the namespace is
//! `POWERTOOLS_METRICS_NAMESPACE`, else `pooltable`.

use std::sync::Mutex;

use serde_json::{json, Map, Value};

use crate::service::telemetry::{self, Invocation};

/// The CloudWatch namespace when `POWERTOOLS_METRICS_NAMESPACE` is not set.
pub const DEFAULT_NAMESPACE: &str = "pooltable";

/// The dimension set every metric is published under: the rollup the alarms and dashboard read.
const ROLLUP: &[&str] = &["service"];
/// `ColdStart`'s, as Powertools publishes it.
const PER_FUNCTION: &[&str] = &["service", "function_name"];

/// Who publishes: the `service` dimension, the namespace, and the function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publisher {
    pub service: String,
    pub namespace: String,
    pub function_name: Option<String>,
}

impl Publisher {
    /// From `POWERTOOLS_SERVICE_NAME`, `POWERTOOLS_METRICS_NAMESPACE` and
    /// `AWS_LAMBDA_FUNCTION_NAME`.
    pub fn from_env() -> Self {
        Self {
            service: telemetry::service_name(),
            namespace: std::env::var("POWERTOOLS_METRICS_NAMESPACE")
                .ok()
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned()),
            function_name: telemetry::function_name(),
        }
    }
}

/// An EMF metric unit (the subset pooltable uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Self::Count => "Count",
            Self::Milliseconds => "Milliseconds",
        }
    }
}

/// Which quota a 429 was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Requests,
    CapacityUnits,
}

/// What one request did, as its metrics line reports it.
#[derive(Debug, Clone)]
pub struct RequestMetrics<'a> {
    /// The function (binary) that served it: bounded, unlike the path.
    pub route: &'a str,
    /// The tenant's tier, or `none` when no tenant verified.
    pub tier: &'a str,
    pub status: u16,
    pub latency_ms: f64,
    pub read_units: f64,
    pub write_units: f64,
    pub throttles: u32,
    pub refusal: Option<Refusal>,
    /// A property, not a dimension.
    pub tenant: Option<&'a str>,
    /// Its request id, trace id and cold start: properties.
    pub invocation: &'a Invocation,
}

/// `2xx`, `4xx`, `5xx`… of `status`.
pub fn status_class(status: u16) -> String {
    format!("{}xx", status / 100)
}

/// The EMF line of one request, by `publisher`.
pub fn request_line(m: &RequestMetrics<'_>, publisher: &Publisher, timestamp_ms: u64) -> Value {
    let count = |yes: bool| if yes { 1.0 } else { 0.0 };
    let values: [(&str, Unit, f64); 9] = [
        ("Requests", Unit::Count, 1.0),
        ("Latency", Unit::Milliseconds, m.latency_ms),
        (
            "ClientErrors",
            Unit::Count,
            count((400..500).contains(&m.status)),
        ),
        ("ServerErrors", Unit::Count, count(m.status >= 500)),
        (
            "LimitedOnRequests",
            Unit::Count,
            count(m.refusal == Some(Refusal::Requests)),
        ),
        (
            "LimitedOnCapacity",
            Unit::Count,
            count(m.refusal == Some(Refusal::CapacityUnits)),
        ),
        ("ReadCapacityUnits", Unit::Count, m.read_units),
        ("WriteCapacityUnits", Unit::Count, m.write_units),
        ("Throttles", Unit::Count, f64::from(m.throttles)),
    ];
    let mut properties = Map::new();
    properties.insert("route".into(), m.route.into());
    properties.insert("tier".into(), m.tier.into());
    properties.insert("statusClass".into(), status_class(m.status).into());
    properties.insert("status".into(), m.status.into());
    invocation_keys(&mut properties, m.invocation, publisher);
    if let Some(tenant) = m.tenant {
        properties.insert("tenant_id".into(), tenant.into());
    }
    line(publisher, timestamp_ms, &[ROLLUP], &values, properties)
}

/// The `ColdStart` line of a container's first invocation, as Powertools writes it.
pub fn cold_start_line(invocation: &Invocation, publisher: &Publisher, timestamp_ms: u64) -> Value {
    let mut properties = Map::new();
    invocation_keys(&mut properties, invocation, publisher);
    let values = [("ColdStart", Unit::Count, 1.0)];
    line(
        publisher,
        timestamp_ms,
        &[PER_FUNCTION],
        &values,
        properties,
    )
}

/// The keys a request's log lines carry too (`service::telemetry`).
fn invocation_keys(
    properties: &mut Map<String, Value>,
    invocation: &Invocation,
    publisher: &Publisher,
) {
    properties.insert(
        "function_name".into(),
        // A dimension of `ColdStart`, so never empty: outside Lambda, the service stands in.
        publisher
            .function_name
            .as_deref()
            .unwrap_or(&publisher.service)
            .into(),
    );
    properties.insert(
        "function_request_id".into(),
        invocation.request_id.as_str().into(),
    );
    properties.insert(
        "xray_trace_id".into(),
        invocation.xray_trace_id.as_deref().into(),
    );
    properties.insert("cold_start".into(), invocation.cold_start.into());
    properties.insert(
        "function_arn".into(),
        invocation.function_arn.as_deref().into(),
    );
    properties.insert(
        "correlation_id".into(),
        invocation.correlation_id.as_deref().into(),
    );
}

/// The EMF line of an event outside a request (a limiter that failed open, a dropped import
/// message, a lifecycle run): `values` under the rollup dimension, `properties` beside them.
pub fn event_line(
    publisher: &Publisher,
    timestamp_ms: u64,
    values: &[(&str, f64)],
    properties: &[(&str, &str)],
) -> Value {
    let values: Vec<(&str, Unit, f64)> =
        values.iter().map(|(n, v)| (*n, Unit::Count, *v)).collect();
    let properties = properties
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
        .collect();
    line(publisher, timestamp_ms, &[ROLLUP], &values, properties)
}

fn line(
    publisher: &Publisher,
    timestamp_ms: u64,
    dimension_sets: &[&[&str]],
    values: &[(&str, Unit, f64)],
    mut properties: Map<String, Value>,
) -> Value {
    let metrics: Vec<Value> = values
        .iter()
        .map(|(name, unit, _)| json!({"Name": name, "Unit": unit.as_str()}))
        .collect();
    properties.insert("service".into(), publisher.service.as_str().into());
    for (name, _, value) in values {
        properties.insert((*name).to_owned(), json!(value));
    }
    properties.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": publisher.namespace,
                "Dimensions": dimension_sets,
                "Metrics": metrics,
            }],
        }),
    );
    Value::Object(properties)
}

/// Where a container's metrics lines go, and who publishes them.
#[derive(Debug)]
pub struct MetricsSink {
    pub publisher: Publisher,
    target: Target,
}

#[derive(Debug)]
enum Target {
    /// Standard output, which Lambda sends to CloudWatch Logs, which extracts the metrics.
    Stdout,
    /// Nowhere.
    Off,
    /// Kept in memory (tests read them).
    Memory(Mutex<Vec<Value>>),
}

impl MetricsSink {
    /// `POOLTABLE_METRICS=emf` or `off`; unset, EMF exactly when running as a Lambda function,
    /// unless Powertools' `POWERTOOLS_METRICS_DISABLED` is `true`.
    pub fn from_env() -> Self {
        let disabled = std::env::var("POWERTOOLS_METRICS_DISABLED")
            .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let target = match std::env::var("POOLTABLE_METRICS").as_deref() {
            Ok("emf") => Target::Stdout,
            Ok("off") => Target::Off,
            _ if disabled => Target::Off,
            _ if std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some() => Target::Stdout,
            _ => Target::Off,
        };
        Self {
            publisher: Publisher::from_env(),
            target,
        }
    }

    /// Lines kept in memory, for tests ([`Self::lines`]).
    pub fn memory() -> Self {
        Self {
            publisher: Publisher::from_env(),
            target: Target::Memory(Mutex::new(Vec::new())),
        }
    }

    /// The `ColdStart` line, on a container's first invocation (nothing on the others).
    pub fn note_invocation(&self, invocation: &Invocation, timestamp_ms: u64) {
        if invocation.cold_start {
            self.emit(cold_start_line(invocation, &self.publisher, timestamp_ms));
        }
    }

    pub fn emit(&self, line: Value) {
        match &self.target {
            Target::Stdout => println!("{line}"),
            Target::Off => {}
            Target::Memory(lines) => lines.lock().unwrap_or_else(|p| p.into_inner()).push(line),
        }
    }

    /// The lines kept so far (in memory only).
    pub fn lines(&self) -> Vec<Value> {
        match &self.target {
            Target::Memory(lines) => lines.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publisher() -> Publisher {
        Publisher {
            service: "pooltable-dev".into(),
            namespace: "acme-data".into(),
            function_name: Some("pooltable-dev-get-product".into()),
        }
    }

    #[test]
    fn golden_request_line() {
        let invocation = Invocation {
            request_id: "r-1".into(),
            xray_trace_id: Some("Root=1-5759e988-bd862e3fe1be46a994272793".into()),
            cold_start: false,
            ..Invocation::default()
        };
        let line = request_line(
            &RequestMetrics {
                route: "get-product",
                tier: "standard",
                status: 200,
                latency_ms: 4.5,
                read_units: 0.5,
                write_units: 0.0,
                throttles: 0,
                refusal: None,
                tenant: Some("acme"),
                invocation: &invocation,
            },
            &publisher(),
            1_764_000_000_000,
        );
        assert_eq!(
            line["_aws"],
            json!({
                "Timestamp": 1_764_000_000_000u64,
                "CloudWatchMetrics": [{
                    "Namespace": "acme-data",
                    "Dimensions": [["service"]],
                    "Metrics": [
                        {"Name": "Requests", "Unit": "Count"},
                        {"Name": "Latency", "Unit": "Milliseconds"},
                        {"Name": "ClientErrors", "Unit": "Count"},
                        {"Name": "ServerErrors", "Unit": "Count"},
                        {"Name": "LimitedOnRequests", "Unit": "Count"},
                        {"Name": "LimitedOnCapacity", "Unit": "Count"},
                        {"Name": "ReadCapacityUnits", "Unit": "Count"},
                        {"Name": "WriteCapacityUnits", "Unit": "Count"},
                        {"Name": "Throttles", "Unit": "Count"},
                    ],
                }],
            })
        );
        assert_eq!(line["service"], "pooltable-dev");
        assert_eq!(line["statusClass"], "2xx");
        assert_eq!(line["tenant_id"], "acme");
        assert_eq!(line["function_request_id"], "r-1");
        assert_eq!(line["function_name"], "pooltable-dev-get-product");
        assert_eq!(
            line["xray_trace_id"],
            "Root=1-5759e988-bd862e3fe1be46a994272793"
        );
        assert_eq!(line["cold_start"], false);
        assert_eq!(line["ReadCapacityUnits"], 0.5);
        assert_eq!(line["Requests"], 1.0);
    }

    #[test]
    fn golden_cold_start_line() {
        let invocation = Invocation {
            request_id: "r-0".into(),
            xray_trace_id: None,
            cold_start: true,
            ..Invocation::default()
        };
        let line = cold_start_line(&invocation, &publisher(), 1_764_000_000_000);
        assert_eq!(
            line["_aws"]["CloudWatchMetrics"][0],
            json!({
                "Namespace": "acme-data",
                "Dimensions": [["service", "function_name"]],
                "Metrics": [{"Name": "ColdStart", "Unit": "Count"}],
            })
        );
        assert_eq!(
            (
                &line["ColdStart"],
                &line["cold_start"],
                &line["function_request_id"]
            ),
            (&json!(1.0), &json!(true), &json!("r-0"))
        );
    }
}
