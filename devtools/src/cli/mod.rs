//! `pooltable`: the command line, on clap. Every command has `--help` and `--version` (exit 0), and
//! every command ends with one of the same exit statuses:
//!
//! | exit | meaning |
//! |------|---------|
//! | 0 | done (an operation that runs on, without `--wait`, counts: its progress is printed) |
//! | 1 | a check found a difference (`gen --check`) |
//! | 2 | a bad command line or input: an unknown flag, a file that does not parse, no token |
//! | 3 | refused: the API (4xx but 429) or the table said no, or what `--wait` followed ended without doing what was asked; asking again will not change it |
//! | 4 | unavailable: 429, 5xx, a timeout or no answer; asking again later may succeed |
//!
//! What a command answers goes to stdout (a record's JSON, or `--output table`); refusals,
//! progress and what was written go to stderr.

mod dev;
mod imports;
mod login;
mod progress;
mod tenants;

use clap::{Parser, Subcommand, ValueEnum};
use pooltable_client::{types, Error};
use serde_json::Value;

/// How a command ended, as its exit status (the table above).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Done = 0,
    Differs = 1,
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
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        Self {
            exit,
            message: message.into(),
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(Exit::Unavailable, message)
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
                Self::new(
                    match status {
                        429 | 500.. => Exit::Unavailable,
                        _ => Exit::Refused,
                    },
                    message,
                )
            }
            Error::InvalidRequest(message) => Failure::usage(message),
            other => Self::unavailable(other.to_string()),
        }
    }
}

/// The exit statuses, as `--help` prints them.
const EXIT_STATUSES: &str = "Exit status: 0 done; 1 a check found a difference (gen --check); \
2 a bad command line or input; 3 refused (asking again will not change it); \
4 unavailable (429, 5xx, no answer: ask again later).";

/// How an answer is printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// The API's JSON, one line.
    #[default]
    Json,
    /// A field a line, its name padded; objects and lists as compact JSON.
    Table,
}

/// pooltable's command line: an operator's tenant operations through the API, a tenant's import
/// status, a Cognito sign-in, and the repository's developer tools.
#[derive(Debug, Parser)]
#[command(name = "pooltable", version, propagate_version = true, after_help = EXIT_STATUSES)]
pub struct Cli {
    /// How an answer that is a record is printed.
    #[arg(long, value_enum, default_value_t, global = true)]
    output: Output,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// An operator's commands on one tenant, through the API (POOLTABLE_API_URL, and
    /// POOLTABLE_TOKEN: an operator's token, scope pooltable/admin).
    #[command(subcommand)]
    Tenants(tenants::Tenants),
    /// A tenant's bulk imports, through the API (POOLTABLE_TOKEN: the tenant's token).
    #[command(subcommand)]
    Imports(imports::Imports),
    /// Print a token from a Cognito user pool, for POOLTABLE_TOKEN.
    Login(login::Login),
    /// Write every file routes.yaml derives.
    Gen {
        /// Only say which files differ; exit 1 if any does.
        #[arg(long)]
        check: bool,
    },
    /// Scaffold a new route: its handler, test and routes.yaml entry, then `gen`.
    #[command(subcommand)]
    New(dev::New),
    /// Create a table from template.yaml (admin credentials; local stacks).
    CreateTable {
        /// The table's name.
        name: String,
        /// Create the key table (template.yaml's `TenantKeysTable`: tenants' wrapped keys) instead.
        #[arg(long)]
        keys: bool,
    },
    /// Print an unsigned development JWT (local stacks with POOLTABLE_DEV_UNSIGNED_JWT=1).
    DevToken {
        tenant: String,
        /// An operator's token: the pooltable/admin scope.
        #[arg(long)]
        operator: bool,
    },
    /// Give items written before the catalog index existed their catalog entry (admin
    /// credentials; once after deploying).
    BackfillCatalog {
        #[arg(long)]
        table: String,
    },
    /// Load tenant export pages (NDJSON from GET /tenants/{id}/export) into a table; nothing is
    /// written unless every line of every file parses.
    Import {
        #[arg(long)]
        table: String,
        #[arg(required = true)]
        files: Vec<String>,
    },
    /// Recommend shard counts and tiers, from a load model or measured usage.
    Plan(dev::Plan),
}

/// Runs a command line; what to print on stdout.
pub async fn run(cli: Cli) -> Result<String, Failure> {
    let output = cli.output;
    match cli.command {
        Command::Tenants(command) => tenants::run(command, output).await,
        Command::Imports(command) => imports::run(command, output).await,
        Command::Login(login) => login.run().await,
        Command::Gen { check } => dev::gen(check),
        Command::New(new) => dev::new(new),
        Command::CreateTable { name, keys } => dev::create_table(&name, keys).await,
        Command::DevToken { tenant, operator } => {
            Ok(shared::isolation::claims::dev_jwt(&tenant, operator))
        }
        Command::BackfillCatalog { table } => dev::backfill_catalog(&table).await,
        Command::Import { table, files } => dev::import(&table, &files).await,
        Command::Plan(plan) => plan.run().await,
    }
}

/// The typed client on `POOLTABLE_API_URL` (default `http://localhost:9000`) with
/// `POOLTABLE_TOKEN`; and that base URL.
fn api_client() -> Result<(pooltable_client::Client, String), Failure> {
    let base =
        std::env::var("POOLTABLE_API_URL").unwrap_or_else(|_| "http://localhost:9000".into());
    let token = std::env::var("POOLTABLE_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Failure::usage("POOLTABLE_TOKEN (a JWT) is not set"))?;
    let client =
        pooltable_client::connect(base.trim_end_matches('/'), &token).map_err(|e| match e {
            pooltable_client::ConnectError::Token => {
                Failure::usage(format!("POOLTABLE_TOKEN: {e}"))
            }
            pooltable_client::ConnectError::Http(_) => Failure::unavailable(e.to_string()),
        })?;
    Ok((client, base))
}

/// `answer` as `--output` asks.
fn render(answer: &Value, output: Output) -> String {
    match (output, answer.as_object()) {
        (Output::Table, Some(fields)) => {
            let width = fields.keys().map(String::len).max().unwrap_or(0);
            fields
                .iter()
                .map(|(name, value)| match value {
                    Value::String(text) => format!("{name:<width$}  {text}"),
                    other => format!("{name:<width$}  {other}"),
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        _ => answer.to_string(),
    }
}

fn json_of(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// How many answers in a row that say the API is unavailable a `--wait` rides out, and how long
/// it waits after each without a `Retry-After`: about two minutes at that, a deploy or a throttled
/// burst.
const UNAVAILABLE_TRIES: u32 = 24;
const UNAVAILABLE_WAIT_SECONDS: u64 = 5;

/// An answer of a call that `--wait` repeats: while waiting, one that says the API is unavailable
/// is ridden out (said on `progress`, then `Ok(None)` after its `Retry-After`, else
/// [`UNAVAILABLE_WAIT_SECONDS`]: ask again), [`UNAVAILABLE_TRIES`] times in a row at the most
/// (`unavailable` counts them); else the answer, or its failure.
async fn ride_out<T>(
    wait: bool,
    unavailable: &mut u32,
    progress: &progress::Progress,
    answer: Result<T, Error<types::Problem>>,
) -> Result<Option<T>, Failure> {
    let after = match &answer {
        Err(Error::ErrorResponse(refused)) => refused
            .headers()
            .contains_key(reqwest::header::RETRY_AFTER)
            .then(|| retry_after(refused.headers())),
        _ => None,
    };
    match answer.map_err(Failure::from) {
        Err(e) if wait && e.exit == Exit::Unavailable && *unavailable < UNAVAILABLE_TRIES => {
            *unavailable += 1;
            let seconds = after.unwrap_or(UNAVAILABLE_WAIT_SECONDS);
            progress.say(None, &format!("{}; again in {seconds} s", e.message));
            tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
            Ok(None)
        }
        Ok(answer) => {
            *unavailable = 0;
            Ok(Some(answer))
        }
        Err(e) => {
            progress.finish();
            Err(e)
        }
    }
}

/// The seconds of a `Retry-After` header (1 to 60; 1 when there is none).
fn retry_after(headers: &reqwest::header::HeaderMap) -> u64 {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1)
        .clamp(1, 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use serde_json::json;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn an_answer_is_json_or_a_table_of_its_fields() {
        let answer = json!({"tenantId": "acme", "shardCount": 4, "limits": {"rps": 10}});
        assert_eq!(render(&answer, Output::Json), answer.to_string());
        assert_eq!(
            render(&answer, Output::Table),
            "limits      {\"rps\":10}\nshardCount  4\ntenantId    acme"
        );
        let bad = Cli::try_parse_from(["pooltable", "tenants", "get", "acme", "--output", "yaml"]);
        assert_eq!(bad.unwrap_err().exit_code(), Exit::Usage as i32);
    }

    #[test]
    fn every_command_has_its_help_and_the_version() {
        let mut lines = vec![vec!["pooltable", "--help"], vec!["pooltable", "--version"]];
        let cli = Cli::command();
        for command in cli.get_subcommands() {
            let name = command.get_name();
            lines.push(vec!["pooltable", name, "--help"]);
            for sub in command.get_subcommands() {
                lines.push(vec!["pooltable", name, sub.get_name(), "--help"]);
                lines.push(vec!["pooltable", name, sub.get_name(), "--version"]);
            }
        }
        for line in lines {
            let asked = Cli::try_parse_from(&line).unwrap_err();
            assert_eq!(asked.exit_code(), 0, "{line:?}");
        }
    }
}
