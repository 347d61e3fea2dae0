//! `pooltable imports get <importId> [--wait]`: a bulk import's status (`GET /imports/{importId}`),
//! with the tenant's own token; `--wait` follows it until it is final (`complete` or `failed`),
//! showing items with an outcome against items accepted.

use clap::Subcommand;
use serde_json::Value;

use super::progress::Progress;
use super::{api_client, json_of, render, retry_after, ride_out, Exit, Failure, Output};

#[derive(Debug, Subcommand)]
pub enum Imports {
    /// An import's counts and status.
    Get {
        /// The id `POST /imports` answered.
        import_id: String,
        /// Follow it until it is final (complete or failed).
        #[arg(long)]
        wait: bool,
    },
}

/// The statuses after which an import's counts no longer change.
const FINAL: [&str; 2] = ["complete", "failed"];

pub async fn run(command: Imports, output: Output) -> Result<String, Failure> {
    let Imports::Get { import_id, wait } = command;
    let (client, _) = api_client()?;
    let progress = Progress::new(format!("import {import_id}"));
    let mut unavailable = 0;
    loop {
        let answer = client
            .get_import()
            .import_id(import_id.as_str())
            .send()
            .await;
        let Some(answer) = ride_out(wait, &mut unavailable, &progress, answer).await? else {
            continue;
        };
        let again = retry_after(answer.headers());
        let body = json_of(&*answer);
        let status = body["status"].as_str().unwrap_or_default().to_owned();
        let (done, accepted) = counts(&body);
        progress.say(
            Some((done, accepted)),
            &format!("{status}: {done} of {accepted} items have their outcome"),
        );
        if !wait || FINAL.contains(&status.as_str()) {
            progress.finish();
            // Followed to its end, an import that failed is a refusal (exit 3), so that a script's
            // `--wait && …` does not read it as done.
            if wait && status == "failed" {
                return Err(Failure::new(
                    Exit::Refused,
                    format!("the import failed: {}", render(&body, output)),
                ));
            }
            return Ok(render(&body, output));
        }
        tokio::time::sleep(std::time::Duration::from_secs(again)).await;
    }
}

/// Items with an outcome (written, superseded or failed), and items accepted.
fn counts(body: &Value) -> (u64, u64) {
    let n = |field: &str| body[field].as_u64().unwrap_or(0);
    (n("written") + n("superseded") + n("failed"), n("accepted"))
}
