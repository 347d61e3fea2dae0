//! CloudWatch metrics in the Embedded Metric Format (EMF): one JSON line on stdout per request (and
//! per lifecycle or import event), which CloudWatch Logs turns into metrics with no API call, the
//! convention of Powertools for AWS Lambda.
//!
//! Dimensions are bounded: every metric is published twice, under `service` alone (the rollup
//! alarms and the dashboard read) and under `service, route, tier, statusClass` (about 40 × 5 × 5
//! series). The tenant id is a property, never a dimension, so Logs Insights can group by tenant
//! without the cost of one metric per tenant.
//!
//! Where the lines go is the container's [`MetricsSink`]: stdout in a Lambda function, nowhere in a
//! process that is not one (tests and the benchmark), unless `POOLTABLE_METRICS` says otherwise.
//! The `service` dimension is `POWERTOOLS_SERVICE_NAME` (the template sets `pooltable-<stage>`, so
//! stages in one account do not mix), else `pooltable`.

use std::sync::Mutex;

use serde_json::{json, Map, Value};

/// The CloudWatch namespace of every pooltable metric.
pub const NAMESPACE: &str = "pooltable";
/// The `service` dimension's value when `POWERTOOLS_SERVICE_NAME` is not set.
pub const DEFAULT_SERVICE: &str = "pooltable";

/// The dimension set every metric is also published under: the rollup.
const ROLLUP: &[&str] = &["service"];
/// The request metrics' detailed dimension set.
const PER_ROUTE: &[&str] = &["service", "route", "tier", "statusClass"];

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
    pub request_id: &'a str,
}

/// `2xx`, `4xx`, `5xx`… of `status`.
pub fn status_class(status: u16) -> String {
    format!("{}xx", status / 100)
}

/// The EMF line of one request, for `service`.
pub fn request_line(m: &RequestMetrics<'_>, service: &str, timestamp_ms: u64) -> Value {
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
    properties.insert("requestId".into(), m.request_id.into());
    if let Some(tenant) = m.tenant {
        properties.insert("tenantId".into(), tenant.into());
    }
    line(
        service,
        timestamp_ms,
        &[ROLLUP, PER_ROUTE],
        &values,
        properties,
    )
}

/// The EMF line of an event outside a request (a limiter that failed open, a dropped import
/// message, a lifecycle run): `values` under the rollup dimension, `properties` beside them.
pub fn event_line(
    service: &str,
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
    line(service, timestamp_ms, &[ROLLUP], &values, properties)
}

fn line(
    service: &str,
    timestamp_ms: u64,
    dimension_sets: &[&[&str]],
    values: &[(&str, Unit, f64)],
    mut properties: Map<String, Value>,
) -> Value {
    let metrics: Vec<Value> = values
        .iter()
        .map(|(name, unit, _)| json!({"Name": name, "Unit": unit.as_str()}))
        .collect();
    properties.insert("service".into(), service.into());
    for (name, _, value) in values {
        properties.insert((*name).to_owned(), json!(value));
    }
    properties.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": dimension_sets,
                "Metrics": metrics,
            }],
        }),
    );
    Value::Object(properties)
}

/// Where a container's metrics lines go, and the `service` they are for.
#[derive(Debug)]
pub struct MetricsSink {
    pub service: String,
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
    /// `POOLTABLE_METRICS=emf` or `off`; unset, EMF exactly when running as a Lambda function.
    pub fn from_env() -> Self {
        let target = match std::env::var("POOLTABLE_METRICS").as_deref() {
            Ok("emf") => Target::Stdout,
            Ok("off") => Target::Off,
            _ if std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some() => Target::Stdout,
            _ => Target::Off,
        };
        Self {
            service: service_from_env(),
            target,
        }
    }

    /// Lines kept in memory, for tests ([`Self::lines`]).
    pub fn memory() -> Self {
        Self {
            service: service_from_env(),
            target: Target::Memory(Mutex::new(Vec::new())),
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

fn service_from_env() -> String {
    std::env::var("POWERTOOLS_SERVICE_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_SERVICE.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_request_line() {
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
                request_id: "r-1",
            },
            "pooltable",
            1_764_000_000_000,
        );
        assert_eq!(
            line["_aws"],
            json!({
                "Timestamp": 1_764_000_000_000u64,
                "CloudWatchMetrics": [{
                    "Namespace": "pooltable",
                    "Dimensions": [["service"], ["service", "route", "tier", "statusClass"]],
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
        assert_eq!(line["service"], "pooltable");
        assert_eq!(line["statusClass"], "2xx");
        assert_eq!(line["tenantId"], "acme");
        assert_eq!(line["ReadCapacityUnits"], 0.5);
        assert_eq!(line["Requests"], 1.0);
    }
}
