//! `pooltable tenants …`: an operator's commands on one tenant, over the typed client
//! (`pooltable-client`).
//!
//! `--wait` calls again while the operation runs (202), after the `Retry-After` the API gives,
//! showing its progress on stderr, until it has ended (200).

use clap::{Args, Subcommand};
use pooltable_client::{types, Client, Error};
use serde_json::{json, Value};

use super::progress::Progress;
use super::{api_client, json_of, render, retry_after, ride_out, Exit, Failure, Output};

#[derive(Debug, Subcommand)]
pub enum Tenants {
    /// Onboard a tenant: its record, its limits, and (placement own) its own table.
    Onboard {
        tenant: String,
        /// basic, standard or premium.
        #[arg(long, default_value = "standard")]
        tier: String,
        /// Product and HR shards (4 when left out, whatever the tier).
        #[arg(long)]
        shards: Option<u32>,
        #[arg(long, value_parser = ["pool", "own"])]
        placement: Option<String>,
    },
    /// The tenant's record, with any operation in progress.
    Get { tenant: String },
    /// Refuse every tenant route until resumed.
    Suspend { tenant: String },
    /// Serve a suspended tenant again.
    Resume { tenant: String },
    /// Change the tenant's tier, and so its limits.
    Tier {
        tenant: String,
        /// basic, standard or premium.
        tier: String,
    },
    /// Seal the items of a tenant onboarded without a key under a key of its own, online.
    Encrypt {
        tenant: String,
        #[command(flatten)]
        wait: Wait,
    },
    /// Make the next version of the tenant's key: it seals from `newestSealsFrom`; nothing sealed is
    /// rewritten.
    RotateKey { tenant: String },
    /// Re-shard the tenant's products and HR items, online.
    Reshard {
        tenant: String,
        shards: u32,
        #[command(flatten)]
        wait: Wait,
    },
    /// Move the tenant between the pool and its own table, online.
    Move {
        tenant: String,
        #[arg(value_parser = ["own", "pool"])]
        placement: String,
        #[command(flatten)]
        wait: Wait,
    },
    /// Restore the tenant's items from a restored copy of the table or a point in time, or abort
    /// the restore that runs.
    Restore {
        tenant: String,
        #[command(flatten)]
        source: RestoreSource,
        /// Count what the restore would put and delete; change nothing.
        #[arg(long, conflicts_with = "abort")]
        dry_run: bool,
        #[command(flatten)]
        wait: Wait,
    },
    /// Offboard the tenant: every item deleted, its report kept.
    Offboard {
        tenant: String,
        #[command(flatten)]
        wait: Wait,
    },
    /// Every export page, as NDJSON on stdout; a failed page names the cursor to resume from.
    Export {
        tenant: String,
        /// Resume from this page's cursor.
        #[arg(long)]
        cursor: Option<String>,
        /// Items a page (1 to 1,000; the API's default when left out).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000))]
        limit: Option<u64>,
    },
    /// Erase one of the tenant's users and every item of its own, for good: no restore brings it
    /// back. Prints what was deleted (the same report on a retry).
    EraseUser { tenant: String, user: String },
    /// Calls and capacity units per route and day.
    Usage {
        tenant: String,
        /// The first day (default: 29 days ago).
        #[arg(long)]
        from: Option<chrono::NaiveDate>,
        /// The last day (default: today).
        #[arg(long)]
        to: Option<chrono::NaiveDate>,
    },
}

/// `--wait`.
#[derive(Debug, Clone, Copy, Args)]
pub struct Wait {
    /// Follow the operation until it has ended, after each Retry-After the API gives.
    #[arg(long)]
    wait: bool,
}

/// Where a restore reads from, or its abort.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct RestoreSource {
    /// A restored copy of the table (`<table>-restore-…`).
    #[arg(long)]
    from_table: Option<String>,
    /// A point in time (RFC 3339) within the table's recovery window.
    #[arg(long)]
    point_in_time: Option<String>,
    /// Abort the restore that runs: it ends abandoned, with the counts of what it did.
    #[arg(long)]
    abort: bool,
}

/// Runs one command; what to print on stdout.
pub async fn run(command: Tenants, output: Output) -> Result<String, Failure> {
    let (client, base) = api_client()?;
    let answer = match command {
        Tenants::Onboard {
            tenant,
            tier,
            shards,
            placement,
        } => {
            let mut body = json!({"tenantId": tenant, "tier": tier});
            if let Some(shards) = shards {
                body["shardCount"] = shards.into();
            }
            if let Some(placement) = placement {
                body["placement"] = placement.into();
            }
            let body: types::OnboardTenant = typed(body, "a tenant to onboard")?;
            json_of(&*client.onboard_tenant().body(body).send().await?)
        }
        Tenants::Get { tenant } => json_of(
            &*client
                .get_tenant()
                .tenant_id(tenant.as_str())
                .send()
                .await?,
        ),
        Tenants::Suspend { tenant } => {
            update(&client, &tenant, json!({ "status": "suspended" })).await?
        }
        Tenants::Resume { tenant } => {
            update(&client, &tenant, json!({ "status": "active" })).await?
        }
        Tenants::Tier { tenant, tier } => update(&client, &tenant, json!({ "tier": tier })).await?,
        Tenants::Encrypt { tenant, wait } => {
            operate(&client, "encrypt", &tenant, json!({ "keyed": true }), wait).await?
        }
        Tenants::RotateKey { tenant } => {
            update(&client, &tenant, json!({ "rotateKey": true })).await?
        }
        Tenants::Reshard {
            tenant,
            shards,
            wait,
        } => {
            let body = json!({ "shardCount": shards });
            operate(&client, "reshard", &tenant, body, wait).await?
        }
        Tenants::Move {
            tenant,
            placement,
            wait,
        } => {
            let body = json!({ "placement": placement });
            operate(&client, "move", &tenant, body, wait).await?
        }
        Tenants::Restore {
            tenant,
            source,
            dry_run,
            wait,
        } => {
            let body: types::RestoreTenant = typed(restore_body(&source, dry_run), "a restore")?;
            let call = || {
                client
                    .restore_tenant()
                    .tenant_id(tenant.as_str())
                    .body(body.clone())
                    .send()
            };
            let aborting = source.from_table.is_none() && source.point_in_time.is_none();
            let judged = |first: Option<&Value>, last: &Value| match aborting {
                true => None,
                false => restore_ended_short(first, last),
            };
            until_done(&format!("restore {tenant}"), wait.wait, call, judged).await?
        }
        Tenants::Offboard { tenant, wait } => {
            let call = || client.offboard_tenant().tenant_id(tenant.as_str()).send();
            until_done(&format!("offboard {tenant}"), wait.wait, call, |_, _| None).await?
        }
        Tenants::EraseUser { tenant, user } => {
            let call = client.erase_tenant_user().tenant_id(tenant.as_str());
            json_of(&*call.user_id(user.as_str()).send().await?)
        }
        Tenants::Usage { tenant, from, to } => usage(&client, &tenant, from, to).await?,
        Tenants::Export {
            tenant,
            cursor,
            limit,
        } => return export(&client, &base, &tenant, cursor, limit).await,
    };
    Ok(render(&answer, output))
}

/// The tenant's usage from `from` (29 days ago) to `to` (today).
async fn usage(
    client: &Client,
    tenant: &str,
    from: Option<chrono::NaiveDate>,
    to: Option<chrono::NaiveDate>,
) -> Result<Value, Failure> {
    let today = chrono::Utc::now().date_naive();
    let usage = client
        .get_tenant_usage()
        .tenant_id(tenant)
        .from(from.unwrap_or(today - chrono::Days::new(29)))
        .to(to.unwrap_or(today))
        .send()
        .await?;
    Ok(json_of(&*usage))
}

/// `body` as the client's request type `T`.
fn typed<T: serde::de::DeserializeOwned>(body: Value, what: &str) -> Result<T, Failure> {
    serde_json::from_value(body).map_err(|e| Failure::usage(format!("not {what}: {e}")))
}

/// A change of `tenant`'s record (`PATCH /tenants/{tenantId}` with `body`): the record changed.
async fn update(client: &Client, tenant: &str, body: Value) -> Result<Value, Failure> {
    let body: types::UpdateTenant = typed(body, "a change")?;
    let changed = client
        .update_tenant()
        .tenant_id(tenant)
        .body(body)
        .send()
        .await?;
    Ok(json_of(&*changed))
}

/// A re-sharding or a move: the PATCH that starts it, and asks on while it runs.
async fn operate(
    client: &Client,
    verb: &str,
    tenant: &str,
    body: Value,
    wait: Wait,
) -> Result<Value, Failure> {
    let body: types::UpdateTenant = typed(body, "a change")?;
    let call = || {
        client
            .update_tenant()
            .tenant_id(tenant)
            .body(body.clone())
            .send()
    };
    until_done(&format!("{verb} {tenant}"), wait.wait, call, |_, _| None).await
}

/// The body of a `restore`: its source and dry run, or the abort alone.
fn restore_body(source: &RestoreSource, dry_run: bool) -> Value {
    match (&source.from_table, &source.point_in_time) {
        (Some(table), _) => json!({ "from": { "table": table }, "dryRun": dry_run }),
        (None, Some(at)) => json!({ "from": { "pointInTime": at }, "dryRun": dry_run }),
        (None, None) => json!({ "abort": true }),
    }
}

/// Calls `call` until the operation has ended (200), after each 202's `Retry-After` (1 to 60 s),
/// showing its progress on stderr; without `wait`, once. The last answer's JSON; with `wait`, exit
/// 3 when `judged` (given the first answer while it ran, and the last) says why it ended without
/// doing what was asked. An answer that says the API is unavailable (429, 5xx, none) is asked
/// again while waiting ([`ride_out`]).
async fn until_done<T, F, Fut>(
    what: &str,
    wait: bool,
    mut call: F,
    judged: impl Fn(Option<&Value>, &Value) -> Option<String>,
) -> Result<Value, Failure>
where
    T: serde::Serialize,
    F: FnMut() -> Fut,
    Fut: std::future::Future<
        Output = Result<pooltable_client::ResponseValue<T>, Error<types::Problem>>,
    >,
{
    let progress = Progress::new(what);
    let (mut first, mut unavailable) = (None, 0);
    loop {
        let Some(answer) = ride_out(wait, &mut unavailable, &progress, call().await).await? else {
            continue;
        };
        let running = answer.status() == reqwest::StatusCode::ACCEPTED;
        let again = retry_after(answer.headers());
        let body = json_of(&*answer);
        if !running || !wait {
            if wait {
                progress.say(None, &format!("ended: {}", state(&body)));
            }
            progress.finish();
            return match judged(first.as_ref(), &body).filter(|_| wait) {
                Some(why) => Err(Failure::new(Exit::Refused, format!("{why}: {body}"))),
                None => Ok(body),
            };
        }
        first.get_or_insert_with(|| body.clone());
        progress.say(
            None,
            &format!("running: {}; again in {again} s", state(&body)),
        );
        tokio::time::sleep(std::time::Duration::from_secs(again)).await;
    }
}

/// Why the restore `first` answered running (its `restore`) ended without restoring, by `last`'s
/// `lastRestore` of the same request: abandoned (its source changed, or it could not be read).
fn restore_ended_short(first: Option<&Value>, last: &Value) -> Option<String> {
    let started = first?.get("restore")?.get("requestedAt")?;
    let ended = last.get("lastRestore")?;
    (ended.get("requestedAt") == Some(started) && ended["phase"] == "abandoned").then(|| {
        let reason = ended["reason"].as_str().unwrap_or("no reason given");
        format!("the restore ended abandoned ({reason})")
    })
}

/// Where a running operation stands, from the record it answers.
fn state(body: &Value) -> String {
    [
        "migration",
        "move",
        "restore",
        "offboarding",
        "keying",
        "lastRestore",
    ]
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
    limit: Option<u64>,
) -> Result<String, Failure> {
    use std::io::Write;
    let progress = Progress::new(format!("export {tenant}"));
    let mut out = std::io::stdout().lock();
    let written = |e: std::io::Error| Failure::unavailable(format!("stdout: {e}"));
    let (mut pages, mut lines) = (0u64, 0u64);
    let ended = loop {
        let mut call = client.export_tenant().tenant_id(tenant);
        if let Some(c) = &cursor {
            call = call.cursor(c.as_str());
        }
        if let Some(limit) = limit.and_then(std::num::NonZeroU64::new) {
            call = call.limit(limit);
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
        let page = match call.send().await {
            Ok(page) => page,
            Err(e) => break Err(resume(e.into())),
        };
        let next = next_cursor(base, page.headers());
        // A page is held whole before it is written: a page cut short by the connection is asked
        // again from its cursor, never half-written.
        let mut body = page.into_inner().into_inner();
        let mut text = Vec::new();
        use futures::StreamExt;
        let mut cut = None;
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(chunk) => text.extend_from_slice(&chunk),
                Err(e) => {
                    cut = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = cut {
            break Err(resume(Failure::unavailable(e.to_string())));
        }
        out.write_all(&text).map_err(written)?;
        pages += 1;
        lines += text.iter().filter(|b| **b == b'\n').count() as u64;
        let after = match &next {
            Some(next) => format!("; the next page: --cursor {next}"),
            None => "; the last page".into(),
        };
        progress.say(None, &format!("page {pages}, {lines} items{after}"));
        match next {
            Some(next) if Some(&next) == cursor.as_ref() => {
                break Err(Failure::unavailable(
                    "the export's next page is the page just read; stopped",
                ))
            }
            Some(next) => cursor = Some(next),
            None => break out.flush().map_err(written).map(|()| String::new()),
        }
    };
    progress.finish();
    ended
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

#[cfg(test)]
mod tests;
