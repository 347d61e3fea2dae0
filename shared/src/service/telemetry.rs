//! Logs in the shape Powertools for AWS Lambda gives them, so that what CloudWatch users know reads
//! pooltable's lines too: one JSON object a line with `level`, `message`, `timestamp`, `service`,
//! `cold_start`, `function_name`, `function_arn`, `function_memory_size`, `function_request_id`,
//! `xray_trace_id`, `sampling_rate`, `correlation_id` (API Gateway's request id, which the API's
//! access log carries as `requestId`) and `tenant_id`, the keys the request's EMF line carries
//! (`service::metrics`).
//!
//! The invocation's keys live on one span, [`Invocation::span`], opened around each request: every
//! line logged inside it, by any layer, carries them. `AWS_LAMBDA_LOG_LEVEL` and
//! `AWS_LAMBDA_LOG_FORMAT` (what Lambda sets from a function's `LoggingConfig`) are obeyed as
//! Lambda's own runtimes obey them, then Powertools' `POWERTOOLS_LOG_LEVEL`; `RUST_LOG` wins over
//! all. `POWERTOOLS_LOGGER_SAMPLE_RATE` (0 to 1) logs that share of invocations at DEBUG, chosen by
//! their request id (release bootstraps compile DEBUG events out: it shows in debug builds only).

use std::fmt::Debug;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use lambda_http::request::RequestContext;
use lambda_http::{Request, RequestExt};
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{span, Event, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// Whether this container has served an invocation yet: its first is the cold start.
static WARM: AtomicBool = AtomicBool::new(false);

/// The name of the span holding an invocation's keys.
pub const INVOCATION_SPAN: &str = "invocation";

/// What identifies one invocation in its logs and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    /// Lambda's request id (`function_request_id`).
    pub request_id: String,
    /// The X-Ray trace header's root, when tracing is on.
    pub xray_trace_id: Option<String>,
    /// The container's first invocation.
    pub cold_start: bool,
    /// The invoked function's ARN (`function_arn`), as Lambda gives it.
    pub function_arn: Option<String>,
    /// API Gateway's request id (`correlation_id`): the access log line's `requestId`.
    pub correlation_id: Option<String>,
}

impl Invocation {
    /// The invocation `req` arrived in; the container's first is its cold start.
    pub fn of(req: &Request) -> Self {
        let context = req.lambda_context_ref();
        let correlation_id = match req.request_context_ref() {
            Some(RequestContext::ApiGatewayV2(c)) => c.request_id.clone(),
            Some(RequestContext::ApiGatewayV1(c)) => c.request_id.clone(),
            _ => None,
        };
        Self {
            request_id: context.map(|c| c.request_id.clone()).unwrap_or_default(),
            xray_trace_id: context.and_then(|c| trace_root(c.xray_trace_id.as_deref())),
            cold_start: !WARM.swap(true, Ordering::Relaxed),
            function_arn: context.and_then(|c| non_empty(&c.invoked_function_arn)),
            correlation_id,
        }
    }

    /// The invocation of a function not behind the API (a queue's, a stream's, a schedule's).
    pub fn of_context(context: &lambda_http::lambda_runtime::Context) -> Self {
        Self {
            request_id: context.request_id.clone(),
            xray_trace_id: trace_root(context.xray_trace_id.as_deref()),
            cold_start: !WARM.swap(true, Ordering::Relaxed),
            function_arn: non_empty(&context.invoked_function_arn),
            correlation_id: None,
        }
    }

    /// The span every line of this invocation is logged in. `tenant_id` is recorded once a tenant
    /// verifies.
    pub fn span(&self) -> tracing::Span {
        tracing::info_span!(
            INVOCATION_SPAN,
            function_request_id = %self.request_id,
            xray_trace_id = self.xray_trace_id.as_deref(),
            cold_start = self.cold_start,
            function_arn = self.function_arn.as_deref(),
            correlation_id = self.correlation_id.as_deref(),
            sampled = sampled(&self.request_id, sampling_rate()),
            tenant_id = tracing::field::Empty,
        )
    }
}

fn non_empty(value: &str) -> Option<String> {
    Some(value.to_owned()).filter(|v| !v.is_empty())
}

/// `POWERTOOLS_LOGGER_SAMPLE_RATE`: the share of invocations (0 to 1) logged at DEBUG; 0 when
/// unset or not a number in that range.
pub fn sampling_rate() -> f64 {
    env_value("POWERTOOLS_LOGGER_SAMPLE_RATE")
        .and_then(|r| r.parse::<f64>().ok())
        .filter(|r| (0.0..=1.0).contains(r))
        .unwrap_or(0.0)
}

/// Whether the invocation of `request_id` is among the `rate` logged at DEBUG: by its id hashed,
/// so every line of one invocation agrees.
fn sampled(request_id: &str, rate: f64) -> bool {
    let bucket = crate::identity::shard::fnv1a64(request_id.as_bytes()) % 10_000;
    (bucket as f64) < rate * 10_000.0
}

/// The trace id of an X-Ray trace header (`Root=1-…;Parent=…;Sampled=1` → `1-…`), as Powertools
/// logs it: what X-Ray and CloudWatch search by.
fn trace_root(header: Option<&str>) -> Option<String> {
    let header = header?;
    let root = header
        .split(';')
        .find_map(|part| part.trim().strip_prefix("Root="))
        .unwrap_or(header);
    Some(root.to_owned()).filter(|r| !r.is_empty())
}

/// A test's or a tool's invocation: a request id, no trace, warm.
impl From<&str> for Invocation {
    fn from(request_id: &str) -> Self {
        Self {
            request_id: request_id.to_owned(),
            ..Self::default()
        }
    }
}

impl From<String> for Invocation {
    fn from(request_id: String) -> Self {
        Self {
            request_id,
            ..Self::default()
        }
    }
}

/// The `service` of every log line and metric: `POWERTOOLS_SERVICE_NAME`, else `pooltable`.
pub fn service_name() -> String {
    env_value("POWERTOOLS_SERVICE_NAME").unwrap_or_else(|| "pooltable".to_owned())
}

/// The function's name, as Lambda gives it (`AWS_LAMBDA_FUNCTION_NAME`); none outside Lambda.
pub fn function_name() -> Option<String> {
    env_value("AWS_LAMBDA_FUNCTION_NAME")
}

fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The log filter: `RUST_LOG` when set (`info`, `warn,shared=debug`: a default level and per-target
/// levels; a function's own override), else `AWS_LAMBDA_LOG_LEVEL` (what Lambda sets from a
/// function's `ApplicationLogLevel`), else `info`. It is `Targets`, not `EnvFilter`, because `EnvFilter` links a regex engine into every
/// bootstrap for span-field filters nobody uses in a Lambda function.
pub fn log_filter() -> Targets {
    // Lambda's and Powertools' levels are TRACE, DEBUG, INFO, WARN, ERROR and FATAL (Powertools
    // also CRITICAL); tracing has neither of the last two.
    let level = |name| {
        env_value(name).map(|level| match level.to_ascii_lowercase().as_str() {
            "fatal" | "critical" => "error".to_owned(),
            other => other.to_owned(),
        })
    };
    env_value("RUST_LOG")
        .or(level("AWS_LAMBDA_LOG_LEVEL"))
        .or(level("POWERTOOLS_LOG_LEVEL"))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(tracing::Level::INFO))
}

/// The filter every line passes first: [`log_filter`], lowered to DEBUG when some invocations are
/// sampled (the JSON layer then drops what the invocation's own level would not log).
fn global_filter() -> Targets {
    match sampling_rate() > 0.0 {
        true => Targets::new().with_default(tracing::Level::DEBUG),
        false => log_filter(),
    }
}

/// Whether Lambda asks for plain text (`AWS_LAMBDA_LOG_FORMAT=Text`); JSON otherwise.
fn text_format() -> bool {
    env_value("AWS_LAMBDA_LOG_FORMAT").is_some_and(|f| f.eq_ignore_ascii_case("text"))
}

/// The subscriber every function logs through, writing to `writer` (stdout in Lambda; a buffer
/// in the log tests): Powertools-shaped JSON lines, or text lines when Lambda asks for text.
pub fn subscriber<W>(writer: W) -> impl Subscriber + Send + Sync
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let (json, text) = match text_format() {
        false => (Some(PowertoolsJson::new(writer)), None),
        true => (
            None,
            Some(
                tracing_subscriber::fmt::layer()
                    .with_target(false)
                    .with_ansi(false)
                    .with_writer(writer),
            ),
        ),
    };
    let text = text.map(|layer| layer.with_filter(log_filter()));
    tracing_subscriber::registry()
        .with(json)
        .with(text)
        .with(global_filter())
}

/// The JSON layer: each event as one object of the Powertools keys, the invocation's span fields
/// and the event's own fields.
pub struct PowertoolsJson<W> {
    writer: W,
    service: String,
    function_name: Option<String>,
    /// `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`, in MB.
    function_memory_size: Option<u64>,
    sampling_rate: f64,
    /// What an invocation that is not sampled logs.
    level: Targets,
}

impl<W> PowertoolsJson<W> {
    pub fn new(writer: W) -> Self {
        Self {
            writer,
            service: service_name(),
            function_name: function_name(),
            function_memory_size: env_value("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
                .and_then(|m| m.parse().ok()),
            sampling_rate: sampling_rate(),
            level: log_filter(),
        }
    }
}

/// A span's or an event's fields, as JSON values.
#[derive(Default)]
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0
            .insert(field.name().to_owned(), format!("{value:?}").into());
    }
}

impl<S, W> Layer<S> for PowertoolsJson<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'a> MakeWriter<'a> + 'static,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(fields) = span.extensions_mut().get_mut::<Fields>() {
                values.record(fields);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let invocation = ctx.event_scope(event).and_then(|scope| {
            scope
                .from_root()
                .find(|span| span.name() == INVOCATION_SPAN)
                .and_then(|span| span.extensions().get::<Fields>().map(|f| f.0.clone()))
        });
        let sampled = invocation
            .as_ref()
            .is_some_and(|fields| fields.get("sampled") == Some(&Value::Bool(true)));
        if !sampled
            && !self
                .level
                .would_enable(event.metadata().target(), event.metadata().level())
        {
            return;
        }
        // The event's own fields first: the keys below are written over any of the same name, so
        // no field can change a line's level, time, service or tenant.
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut line = fields.0;
        line.insert("level".into(), event.metadata().level().as_str().into());
        let mut timestamp = String::new();
        let _ = SystemTime.format_time(&mut Writer::new(&mut timestamp));
        line.insert("timestamp".into(), timestamp.into());
        line.insert("service".into(), self.service.as_str().into());
        line.insert("function_name".into(), self.function_name.as_deref().into());
        line.insert(
            "function_memory_size".into(),
            self.function_memory_size.into(),
        );
        line.insert("sampling_rate".into(), self.sampling_rate.into());
        // Only the invocation's keys: the runtime's own span (`requestId`, `xrayTraceId`) would name
        // them a second time, in other words.
        if let Some(mut fields) = invocation {
            fields.remove("sampled");
            line.extend(fields);
        }
        let Ok(mut bytes) = serde_json::to_vec(&line) else {
            return;
        };
        bytes.push(b'\n');
        let _ = self.writer.make_writer().write_all(&bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    #[test]
    fn a_line_in_an_invocation_carries_the_powertools_keys_and_its_tenant() {
        // GIVEN the JSON layer and an invocation with a trace id, on its cold start
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::registry().with(PowertoolsJson::new(buffer.clone()));
        let invocation = Invocation {
            request_id: "req-7".into(),
            xray_trace_id: Some("Root=1-5759e988-bd862e3fe1be46a994272793".into()),
            cold_start: true,
            ..Invocation::default()
        };
        // WHEN a line is logged before and after its tenant verifies
        tracing::subscriber::with_default(subscriber, || {
            // (inside another span, as lambda_runtime runs every invocation: its fields stay out)
            let runtime = tracing::info_span!("Lambda runtime invoke", requestId = "req-7");
            let _runtime = runtime.enter();
            let span = invocation.span();
            let _entered = span.enter();
            tracing::info!(route = "GET /products", "before");
            span.record("tenant_id", "acme");
            tracing::warn!(status = 200u16, "after");
        });
        // THEN both carry the invocation's keys; the later one its tenant
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        for line in &lines {
            for key in ["level", "message", "timestamp", "service", "function_name"] {
                assert!(line.get(key).is_some(), "{key} missing: {line}");
            }
            assert_eq!(line["function_request_id"], "req-7");
            assert_eq!(
                line["xray_trace_id"],
                "Root=1-5759e988-bd862e3fe1be46a994272793"
            );
            assert_eq!(line["cold_start"], true);
        }
        assert_eq!(
            (&lines[0]["level"], &lines[0]["message"]),
            (&json("INFO"), &json("before"))
        );
        assert!(lines[0].get("tenant_id").is_none());
        assert!(lines[0].get("requestId").is_none(), "{}", lines[0]);
        assert_eq!(lines[1]["tenant_id"], "acme");
        assert_eq!(
            (&lines[1]["level"], &lines[1]["status"]),
            (&json("WARN"), &json(200))
        );
    }

    #[test]
    fn the_trace_id_is_the_headers_root() {
        assert_eq!(
            trace_root(Some(
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
            ))
            .as_deref(),
            Some("1-5759e988-bd862e3fe1be46a994272793")
        );
        assert_eq!(trace_root(None), None);
    }

    #[test]
    fn a_field_cannot_write_over_a_reserved_key() {
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::registry().with(PowertoolsJson::new(buffer.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let span = Invocation::from("req-8").span();
            let _entered = span.enter();
            span.record("tenant_id", "acme");
            tracing::error!(
                level = "DEBUG",
                tenant_id = "globex",
                service = "x",
                "spoof"
            );
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let line: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(
            (&line["level"], &line["tenant_id"], &line["message"]),
            (&json("ERROR"), &json("acme"), &json("spoof"))
        );
        assert_ne!(line["service"], "x");
    }

    fn json(v: impl Into<Value>) -> Value {
        v.into()
    }
}
