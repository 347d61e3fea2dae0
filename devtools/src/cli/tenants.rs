//! `pooltable tenants …`: an operator's commands on one tenant, over the typed client
//! (`pooltable-client`).
//!
//! `--wait` calls again while the operation runs (202), after the `Retry-After` the API gives,
//! showing its progress on stderr, until it has ended (200).

use pooltable_client::{types, Client, Error};
use serde_json::{json, Value};

use super::progress::Progress;
use super::{api_client, json_of, render, retry_after, ride_out, Exit, Failure, Output};

mod commands;
pub use commands::{CustomLimits, Lanes, RestoreSource, Tenants, Wait};

/// Runs one command; what to print on stdout.
pub async fn run(command: Tenants, output: Output) -> Result<String, Failure> {
    let (client, base) = api_client()?;
    let answer = match command {
        onboarding @ Tenants::Onboard { .. } => {
            let body = onboarding_body(onboarding)?;
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
        Tenants::Tier {
            tenant,
            tier,
            limits,
        } => update(&client, &tenant, tier_body(tier, limits)).await?,
        Tenants::Encrypt { tenant, wait } => {
            let body = json!({ "keyed": true });
            operate(
                &client,
                "encrypt",
                &tenant,
                body,
                Lanes { lanes: None },
                wait,
            )
            .await?
        }
        Tenants::RotateKey { tenant } => {
            update(&client, &tenant, json!({ "rotateKey": true })).await?
        }
        Tenants::Reshard {
            tenant,
            shards,
            lanes,
            wait,
        } => {
            let body = json!({ "shardCount": shards });
            operate(&client, "reshard", &tenant, body, lanes, wait).await?
        }
        Tenants::Move {
            tenant,
            placement,
            lanes,
            wait,
        } => {
            let body = json!({ "placement": placement });
            operate(&client, "move", &tenant, body, lanes, wait).await?
        }
        Tenants::Restore {
            tenant,
            source,
            dry_run,
            again,
            lanes,
            wait,
        } => {
            let body = restore_body(&source, dry_run, again);
            let aborting = source.from_table.is_none() && source.point_in_time.is_none();
            restore(&client, &tenant, body, aborting, lanes, wait).await?
        }
        Tenants::Offboard {
            tenant,
            lanes,
            wait,
        } => {
            let call = || {
                let call = client.offboard_tenant().tenant_id(tenant.as_str());
                lanes.on(call, |c, n| c.lanes(n)).send()
            };
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
/// The request an `onboard` command sends.
fn onboarding_body(command: Tenants) -> Result<types::OnboardTenant, Failure> {
    let Tenants::Onboard {
        tenant,
        tier,
        limits,
        shards,
        placement,
        kms_key_arn,
    } = command
    else {
        return Err(Failure::usage("not an onboarding"));
    };
    // (an option left out is null here, and left out of the request by its type)
    let tier = limits.tier_or_default(tier);
    let body = limits.on(
        json!({"tenantId": tenant, "tier": tier, "shardCount": shards,
        "placement": placement, "kmsKeyArn": kms_key_arn}),
    );
    typed(body, "a tenant to onboard")
}

/// The change a `tier` command asks: the tier, with tier custom's limits when given.
fn tier_body(tier: String, limits: CustomLimits) -> Value {
    limits.on(json!({ "tier": tier }))
}

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

/// A re-sharding, a move or a keying: the PATCH that starts it (in `lanes`), and asks on while it
/// runs.
async fn operate(
    client: &Client,
    verb: &str,
    tenant: &str,
    body: Value,
    lanes: Lanes,
    wait: Wait,
) -> Result<Value, Failure> {
    let body: types::UpdateTenant = typed(body, "a change")?;
    let call = || {
        let call = client.update_tenant().tenant_id(tenant).body(body.clone());
        lanes.on(call, |c, n| c.lanes(n)).send()
    };
    until_done(&format!("{verb} {tenant}"), wait.wait, call, |_, _| None).await
}

/// A restore (or its abort): the POST that starts it (in `lanes`), and asks on while it runs; with
/// `wait`, exit 3 when it ended abandoned.
async fn restore(
    client: &Client,
    tenant: &str,
    body: Value,
    aborting: bool,
    lanes: Lanes,
    wait: Wait,
) -> Result<Value, Failure> {
    let body: types::RestoreTenant = typed(body, "a restore")?;
    let call = || {
        let call = client.restore_tenant().tenant_id(tenant);
        lanes.on(call.body(body.clone()), |c, n| c.lanes(n)).send()
    };
    let judged = |first: Option<&Value>, last: &Value| match aborting {
        true => None,
        false => restore_ended_short(first, last),
    };
    until_done(&format!("restore {tenant}"), wait.wait, call, judged).await
}

/// The body of a `restore`: its source, dry run and again, or the abort alone.
fn restore_body(source: &RestoreSource, dry_run: bool, again: bool) -> Value {
    let from = match (&source.from_table, &source.point_in_time) {
        (Some(table), _) => json!({ "table": table }),
        (None, Some(at)) => json!({ "pointInTime": at }),
        (None, None) => return json!({ "abort": true }),
    };
    let mut body = json!({ "from": from, "dryRun": dry_run });
    if again {
        body["again"] = true.into();
    }
    body
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
