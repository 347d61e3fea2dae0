//! `pooltable tenants …`: an operator's commands, over the typed client (`pooltable-client`).
//!
//! ```text
//! pooltable tenants onboard <tenantId> [--tier basic|standard|premium] [--shards N] [--placement pool|own]
//! pooltable tenants get|suspend|resume|offboard <tenantId>
//! pooltable tenants export <tenantId>            every page, NDJSON on stdout
//! pooltable tenants usage <tenantId> [--from YYYY-MM-DD] [--to YYYY-MM-DD]
//! ```
//!
//! `POOLTABLE_API_URL` (default `http://localhost:9000`) and `POOLTABLE_TOKEN` (an operator's JWT:
//! scope `pooltable/admin`) come from the environment. The answer's JSON goes to stdout; a refusal's
//! problem to stderr. Exit status: 0 done (an offboarding or a move that runs on counts: its
//! progress is printed), 2 a bad command line, 3 refused by the API (4xx but 429: the request is
//! wrong, or the tenant is not in a state for it), 4 unavailable (429, 5xx, or no answer: retry).

use std::collections::HashMap;

use pooltable_client::{connect, types, Client, Error};
use serde_json::{json, Value};

/// The usage line.
pub const USAGE: &str = "pooltable tenants onboard <tenantId> [--tier T] [--shards N] [--placement pool|own] | \
tenants get|suspend|resume|offboard|export <tenantId> | tenants usage <tenantId> [--from YYYY-MM-DD] [--to YYYY-MM-DD]";

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
    let (verb, tenant, flags) = parse(args)?;
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
        "suspend" | "resume" => {
            let status = if verb == "suspend" {
                "suspended"
            } else {
                "active"
            };
            let body: types::UpdateTenant = serde_json::from_value(json!({ "status": status }))
                .map_err(|e| Failure::usage(e.to_string()))?;
            json_of(
                &*client
                    .update_tenant()
                    .tenant_id(tenant)
                    .body(body)
                    .send()
                    .await?,
            )
        }
        "offboard" => json_of(&*client.offboard_tenant().tenant_id(tenant).send().await?),
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
        "export" => return export(&client, &base, tenant).await,
        other => return Err(Failure::usage(format!("unknown command {other:?}"))),
    };
    Ok(answer.to_string())
}

/// `<verb> <tenantId> [--flag value]…`.
fn parse(args: &[String]) -> Result<(String, String, HashMap<String, String>), Failure> {
    let [verb, tenant, rest @ ..] = args else {
        return Err(Failure::usage("a command and a tenant id are required"));
    };
    let mut flags = HashMap::new();
    let mut it = rest.iter();
    while let Some(flag) = it.next() {
        let name = flag
            .strip_prefix("--")
            .ok_or_else(|| Failure::usage(format!("unexpected argument {flag}")))?;
        let value = it
            .next()
            .ok_or_else(|| Failure::usage(format!("--{name} needs a value")))?;
        flags.insert(name.to_owned(), value.clone());
    }
    Ok((verb.clone(), tenant.clone(), flags))
}

/// Every export page of `tenant`, followed by its `Link: <…>; rel="next"`, written to stdout as it
/// arrives (a tenant can be larger than memory); nothing is left to print after.
async fn export(client: &Client, base: &str, tenant: &str) -> Result<String, Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = |e: std::io::Error| Failure {
        exit: Exit::Unavailable,
        message: format!("stdout: {e}"),
    };
    let mut cursor: Option<String> = None;
    loop {
        let mut call = client.export_tenant().tenant_id(tenant);
        if let Some(c) = &cursor {
            call = call.cursor(c.as_str());
        }
        let page = call.send().await?;
        let next = next_cursor(base, page.headers());
        let mut body = page.into_inner().into_inner();
        use futures::StreamExt;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| Failure {
                exit: Exit::Unavailable,
                message: e.to_string(),
            })?;
            out.write_all(&chunk).map_err(written)?;
        }
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
}
