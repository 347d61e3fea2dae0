//! `pooltable tenants …`: an operator's commands, over the typed client (`pooltable-client`).
//!
//! ```text
//! pooltable tenants onboard <tenantId> [--tier basic|standard|premium] [--shards N] [--placement pool|own]
//! pooltable tenants get|suspend|resume <tenantId>
//! pooltable tenants tier <tenantId> <basic|standard|premium>
//! pooltable tenants reshard <tenantId> <shards> [--wait]
//! pooltable tenants move <tenantId> <own|pool> [--wait]
//! pooltable tenants restore <tenantId> (--from-table NAME | --point-in-time RFC3339) [--dry-run] [--wait]
//! pooltable tenants restore <tenantId> --abort
//! pooltable tenants offboard <tenantId> [--wait]
//! pooltable tenants export <tenantId> [--cursor C]   every page, NDJSON on stdout; a failed page names its cursor
//! pooltable tenants usage <tenantId> [--from YYYY-MM-DD] [--to YYYY-MM-DD]
//! ```
//!
//! `POOLTABLE_API_URL` (default `http://localhost:9000`) and `POOLTABLE_TOKEN` (an operator's JWT:
//! scope `pooltable/admin`) come from the environment. The answer's JSON goes to stdout; a refusal's
//! problem to stderr. `--wait` calls again while the operation runs (202), after the `Retry-After`
//! the API gives, printing its progress on stderr, until it has ended (200). `--help` prints the
//! usage (exit 0). Exit status: 0 done (without `--wait`, an operation that runs on counts: its
//! progress is printed), 2 a bad command line, 3 refused by the API (4xx but 429: the request is
//! wrong, or the tenant is not in a state for it), 4 unavailable (429, 5xx, or no answer: retry).

use std::collections::HashMap;

use pooltable_client::{connect, types, Client, Error};
use serde_json::{json, Value};

/// The usage lines.
pub const USAGE: &str = "pooltable tenants onboard <tenantId> [--tier T] [--shards N] [--placement pool|own]
pooltable tenants get|suspend|resume <tenantId>
pooltable tenants export <tenantId> [--cursor C]
pooltable tenants tier <tenantId> <basic|standard|premium>
pooltable tenants reshard <tenantId> <shards> [--wait]
pooltable tenants move <tenantId> <own|pool> [--wait]
pooltable tenants restore <tenantId> (--from-table NAME | --point-in-time RFC3339) [--dry-run] [--wait]
pooltable tenants restore <tenantId> --abort
pooltable tenants offboard <tenantId> [--wait]
pooltable tenants usage <tenantId> [--from YYYY-MM-DD] [--to YYYY-MM-DD]
every command but export: [--output json|table]
environment: POOLTABLE_API_URL (default http://localhost:9000), POOLTABLE_TOKEN (an operator's JWT)
exit: 0 done, 2 bad command line, 3 refused, 4 unavailable (retry)";

/// The flags that take no value.
const SWITCHES: [&str; 3] = ["wait", "dry-run", "abort"];

/// How a command ended, as its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Done = 0,
    Usage = 2,
    Refused = 3,
    Unavailable = 4,
}

/// A failed command: its exit status and what to say on stderr.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Self {
        Self {
            exit: Exit::Usage,
            message: format!("{}\nusage: {USAGE}", message.into()),
        }
    }
}

/// What the API answered when it refused, or that it did not answer.
impl From<Error<types::Problem>> for Failure {
    fn from(e: Error<types::Problem>) -> Self {
        match e {
            Error::ErrorResponse(problem) => {
                let status = problem.status().as_u16();
                let detail = serde_json::to_value(&*problem).unwrap_or(Value::Null);
                let message = format!(
                    "{status}: {}",
                    detail["detail"]
                        .as_str()
                        .or(detail["title"].as_str())
                        .unwrap_or("refused")
                );
                let exit = match status {
                    429 | 500.. => Exit::Unavailable,
                    _ => Exit::Refused,
                };
                Self { exit, message }
            }
            Error::InvalidRequest(message) => Failure::usage(message),
            other => Self {
                exit: Exit::Unavailable,
                message: other.to_string(),
            },
        }
    }
}

/// Runs `tenants <args>`; what to print on stdout.
pub async fn run(args: &[String]) -> Result<String, Failure> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(USAGE.to_owned());
    }
    let (verb, tenant, flags, operand) = parse(args)?;
    let base =
        std::env::var("POOLTABLE_API_URL").unwrap_or_else(|_| "http://localhost:9000".into());
    let token = std::env::var("POOLTABLE_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Failure::usage("POOLTABLE_TOKEN (an operator's JWT) is not set"))?;
    let client = connect(base.trim_end_matches('/'), &token).map_err(|e| match e {
        pooltable_client::ConnectError::Token => Failure::usage(format!("POOLTABLE_TOKEN: {e}")),
        pooltable_client::ConnectError::Http(_) => Failure {
            exit: Exit::Unavailable,
            message: e.to_string(),
        },
    })?;
    let tenant = tenant.as_str();
    let answer = match verb.as_str() {
        "onboard" => {
            let mut body = json!({"tenantId": tenant, "tier": flags.get("tier").map_or("standard", String::as_str)});
            if let Some(shards) = flags.get("shards") {
                let shards: u32 = shards
                    .parse()
                    .map_err(|_| Failure::usage("--shards must be a whole number"))?;
                body["shardCount"] = shards.into();
            }
            if let Some(placement) = flags.get("placement") {
                body["placement"] = placement.as_str().into();
            }
            let body: types::OnboardTenant = serde_json::from_value(body)
                .map_err(|e| Failure::usage(format!("not a tenant to onboard: {e}")))?;
            json_of(&*client.onboard_tenant().body(body).send().await?)
        }
        "get" => json_of(&*client.get_tenant().tenant_id(tenant).send().await?),
        "suspend" => update(&client, tenant, json!({ "status": "suspended" })).await?,
        "resume" => update(&client, tenant, json!({ "status": "active" })).await?,
        "tier" => {
            let tier = operand
                .ok_or_else(|| Failure::usage("tier needs the tier: basic, standard or premium"))?;
            update(&client, tenant, json!({ "tier": tier })).await?
        }
        "reshard" | "move" => {
            let body = match (verb.as_str(), operand) {
                ("reshard", Some(n)) => json!({ "shardCount": n
                    .parse::<u32>()
                    .map_err(|_| Failure::usage("reshard needs the shard count, a whole number"))? }),
                ("move", Some(p)) if p == "own" || p == "pool" => json!({ "placement": p }),
                _ => return Err(Failure::usage(format!("{verb} needs its target"))),
            };
            let body: types::UpdateTenant =
                serde_json::from_value(body).map_err(|e| Failure::usage(e.to_string()))?;
            let call = || {
                client
                    .update_tenant()
                    .tenant_id(tenant)
                    .body(body.clone())
                    .send()
            };
            until_done(&verb, flags.contains_key("wait"), call).await?
        }
        "restore" => {
            let body = restore_body(&flags)?;
            let call = || {
                client
                    .restore_tenant()
                    .tenant_id(tenant)
                    .body(body.clone())
                    .send()
            };
            until_done("restore", flags.contains_key("wait"), call).await?
        }
        "offboard" => {
            let call = || client.offboard_tenant().tenant_id(tenant).send();
            until_done("offboard", flags.contains_key("wait"), call).await?
        }
        "usage" => {
            let today = chrono::Utc::now().date_naive();
            let date = |name: &str, default| match flags.get(name) {
                Some(d) => d
                    .parse::<chrono::NaiveDate>()
                    .map_err(|_| Failure::usage(format!("--{name} must be YYYY-MM-DD"))),
                None => Ok(default),
            };
            let from = date("from", today - chrono::Days::new(29))?;
            let to = date("to", today)?;
            let usage = client
                .get_tenant_usage()
                .tenant_id(tenant)
                .from(from)
                .to(to)
                .send()
                .await?;
            json_of(&*usage)
        }
        "export" => return export(&client, &base, tenant, flags.get("cursor").cloned()).await,
        other => return Err(Failure::usage(format!("unknown command {other:?}"))),
    };
    render(&answer, flags.get("output").map(String::as_str))
}

/// `answer` as `--output` asks: `json` (the default: the API's JSON, one line) or `table` (a field
/// a line, its name padded, objects and lists as compact JSON).
fn render(answer: &Value, output: Option<&str>) -> Result<String, Failure> {
    match output {
        None | Some("json") => Ok(answer.to_string()),
        Some("table") => {
            let Some(fields) = answer.as_object() else {
                return Ok(answer.to_string());
            };
            let width = fields.keys().map(String::len).max().unwrap_or(0);
            Ok(fields
                .iter()
                .map(|(name, value)| match value {
                    Value::String(text) => format!("{name:<width$}  {text}"),
                    other => format!("{name:<width$}  {other}"),
                })
                .collect::<Vec<_>>()
                .join("\n"))
        }
        Some(other) => Err(Failure::usage(format!(
            "--output is json or table, not {other}"
        ))),
    }
}

/// A change of `tenant`'s record (`PATCH /tenants/{tenantId}` with `body`): the record changed.
async fn update(client: &Client, tenant: &str, body: Value) -> Result<Value, Failure> {
    let body: types::UpdateTenant =
        serde_json::from_value(body).map_err(|e| Failure::usage(format!("not a change: {e}")))?;
    let changed = client
        .update_tenant()
        .tenant_id(tenant)
        .body(body)
        .send()
        .await?;
    Ok(json_of(&*changed))
}

/// A command line: its verb, its tenant, its flags (a switch's value is empty) and the operand
/// after the tenant id, if any (`tier <t> premium`, `reshard <t> 8`, `move <t> own`).
type Parsed = (String, String, HashMap<String, String>, Option<String>);

/// `<verb> <tenantId> [operand] [--flag value | --switch]…`.
fn parse(args: &[String]) -> Result<Parsed, Failure> {
    let [verb, tenant, rest @ ..] = args else {
        return Err(Failure::usage("a command and a tenant id are required"));
    };
    let (operand, rest) = match rest.split_first() {
        Some((first, rest)) if !first.starts_with("--") => (Some(first.clone()), rest),
        _ => (None, rest),
    };
    let mut flags = HashMap::new();
    let mut it = rest.iter();
    while let Some(flag) = it.next() {
        let name = flag
            .strip_prefix("--")
            .ok_or_else(|| Failure::usage(format!("unexpected argument {flag}")))?;
        let value = match SWITCHES.contains(&name) {
            true => String::new(),
            false => it
                .next()
                .ok_or_else(|| Failure::usage(format!("--{name} needs a value")))?
                .clone(),
        };
        flags.insert(name.to_owned(), value);
    }
    Ok((verb.clone(), tenant.clone(), flags, operand))
}

/// The body of a `restore`: its source and dry run, or the abort alone.
fn restore_body(flags: &HashMap<String, String>) -> Result<types::RestoreTenant, Failure> {
    let body = match (
        flags.get("from-table"),
        flags.get("point-in-time"),
        flags.contains_key("abort"),
    ) {
        (None, None, true) => json!({ "abort": true }),
        (Some(table), None, false) => {
            json!({ "from": { "table": table }, "dryRun": flags.contains_key("dry-run") })
        }
        (None, Some(at), false) => {
            json!({ "from": { "pointInTime": at }, "dryRun": flags.contains_key("dry-run") })
        }
        _ => {
            return Err(Failure::usage(
                "restore takes --from-table NAME or --point-in-time RFC3339, or --abort alone",
            ))
        }
    };
    serde_json::from_value(body).map_err(|e| Failure::usage(format!("not a restore: {e}")))
}

/// Calls `call` until the operation has ended (200), after each 202's `Retry-After` (1 to 60 s),
/// printing its progress on stderr; without `wait`, once. The last answer's JSON.
async fn until_done<T, F, Fut>(what: &str, wait: bool, mut call: F) -> Result<Value, Failure>
where
    T: serde::Serialize,
    F: FnMut() -> Fut,
    Fut: std::future::Future<
        Output = Result<pooltable_client::ResponseValue<T>, Error<types::Problem>>,
    >,
{
    loop {
        let answer = call().await?;
        let running = answer.status() == reqwest::StatusCode::ACCEPTED;
        let retry_after = answer
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(1)
            .clamp(1, 60);
        let body = json_of(&*answer);
        if !running || !wait {
            return Ok(body);
        }
        eprintln!(
            "{what}: running: {}; again in {retry_after} s",
            progress(&body)
        );
        tokio::time::sleep(std::time::Duration::from_secs(retry_after)).await;
    }
}

/// One line of a running operation's progress, from the record it answers.
fn progress(body: &Value) -> String {
    ["migration", "move", "restore", "offboarding"]
        .iter()
        .find_map(|field| {
            let state = body.get(*field).filter(|v| !v.is_null())?;
            Some(format!("{field} {state}"))
        })
        .unwrap_or_else(|| format!("status {}", body["status"]))
}

/// Every export page of `tenant` from `cursor` (the first page without one), followed by its
/// `Link: <…>; rel="next"`, written to stdout as it arrives (a tenant can be larger than memory);
/// nothing is left to print after. Each page's count goes to stderr; a page that fails names the
/// cursor to resume from (`--cursor`), so what was written stays and nothing is written twice.
async fn export(
    client: &Client,
    base: &str,
    tenant: &str,
    mut cursor: Option<String>,
) -> Result<String, Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = |e: std::io::Error| Failure {
        exit: Exit::Unavailable,
        message: format!("stdout: {e}"),
    };
    let (mut pages, mut lines) = (0u64, 0u64);
    loop {
        let mut call = client.export_tenant().tenant_id(tenant);
        if let Some(c) = &cursor {
            call = call.cursor(c.as_str());
        }
        let resume = |mut failure: Failure| {
            if let Some(c) = &cursor {
                failure.message = format!(
                    "{}\nresume with: pooltable tenants export {tenant} --cursor {c}",
                    failure.message
                );
            }
            failure
        };
        let page = call.send().await.map_err(|e| resume(e.into()))?;
        let next = next_cursor(base, page.headers());
        // A page is held whole before it is written: a page cut short by the connection is asked
        // again from its cursor, never half-written.
        let mut body = page.into_inner().into_inner();
        let mut text = Vec::new();
        use futures::StreamExt;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| {
                resume(Failure {
                    exit: Exit::Unavailable,
                    message: e.to_string(),
                })
            })?;
            text.extend_from_slice(&chunk);
        }
        out.write_all(&text).map_err(written)?;
        pages += 1;
        lines += text.iter().filter(|b| **b == b'\n').count() as u64;
        eprintln!("export {tenant}: page {pages}, {lines} items");
        match next {
            Some(next) if Some(&next) == cursor.as_ref() => {
                return Err(Failure {
                    exit: Exit::Unavailable,
                    message: "the export's next page is the page just read; stopped".into(),
                })
            }
            Some(next) => cursor = Some(next),
            None => {
                out.flush().map_err(written)?;
                return Ok(String::new());
            }
        }
    }
}

/// The `cursor` of a `Link: <url>; rel="next"` header, relative to `base` or absolute.
fn next_cursor(base: &str, headers: &reqwest::header::HeaderMap) -> Option<String> {
    let link = headers.get(reqwest::header::LINK)?.to_str().ok()?;
    let target = link
        .split(',')
        .find(|part| part.contains("rel=\"next\""))?
        .split(';')
        .next()?
        .trim()
        .trim_start_matches('<')
        .trim_end_matches('>');
    let url = reqwest::Url::parse(base).ok()?.join(target).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == "cursor")
        .map(|(_, v)| v.into_owned())
}

fn json_of(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_pages_cursor_is_read_from_a_relative_or_absolute_link() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::LINK,
            "</tenants/acme/export?limit=10&cursor=abc%2Bdef>; rel=\"next\""
                .parse()
                .unwrap(),
        );
        assert_eq!(
            next_cursor("http://localhost:9000", &headers).as_deref(),
            Some("abc+def")
        );
        assert_eq!(
            next_cursor("http://localhost:9000", &Default::default()),
            None
        );
    }

    #[test]
    fn a_command_line_without_a_tenant_is_a_usage_error() {
        let failure = parse(&["get".to_owned()]).unwrap_err();
        assert_eq!(failure.exit, Exit::Usage);
        let failure = parse(&["get".into(), "acme".into(), "--tier".into()]).unwrap_err();
        assert!(failure.message.contains("--tier needs a value"));
    }

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn an_operand_and_switches_are_read_beside_valued_flags() {
        let (verb, tenant, flags, operand) = parse(&args("reshard acme 8 --wait")).unwrap();
        assert_eq!((verb.as_str(), tenant.as_str()), ("reshard", "acme"));
        assert_eq!(operand.as_deref(), Some("8"));
        assert!(flags.contains_key("wait"));
        let (_, _, flags, operand) = parse(&args(
            "restore acme --from-table t-restore-x --dry-run --wait",
        ))
        .unwrap();
        assert_eq!(operand, None);
        assert_eq!(flags["from-table"], "t-restore-x");
        assert!(flags.contains_key("dry-run") && flags.contains_key("wait"));
    }

    #[test]
    fn an_answer_is_json_or_a_table_of_its_fields() {
        let answer = json!({"tenantId": "acme", "shardCount": 4, "limits": {"rps": 10}});
        assert_eq!(render(&answer, None).unwrap(), answer.to_string());
        assert_eq!(
            render(&answer, Some("table")).unwrap(),
            "limits      {\"rps\":10}\nshardCount  4\ntenantId    acme"
        );
        assert_eq!(render(&answer, Some("yaml")).unwrap_err().exit, Exit::Usage);
    }

    #[test]
    fn a_restore_is_a_source_or_an_abort_alone() {
        let flags = |line: &str| parse(&args(line)).unwrap().2;
        let body = |line: &str| serde_json::to_value(restore_body(&flags(line)).unwrap()).unwrap();
        assert_eq!(body("restore acme --abort"), json!({"abort": true}));
        assert_eq!(
            body("restore acme --from-table p-restore-x --dry-run")["from"]["table"],
            "p-restore-x"
        );
        for bad in [
            "restore acme",
            "restore acme --abort --from-table x",
            "restore acme --from-table x --point-in-time y",
        ] {
            assert_eq!(
                restore_body(&flags(bad)).unwrap_err().exit,
                Exit::Usage,
                "{bad}"
            );
        }
    }
}
