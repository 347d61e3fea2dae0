//! `pooltable`: developer commands.
//!
//! - `pooltable gen [--check]`: write every file routes.yaml derives (README, "Add an access
//!   pattern"); `--check` only says which differ, and fails if any does.
//! - `pooltable new route <bin> <METHOD> <path> --entity KIND [--operator] [--crate CRATE]`: a
//!   new route's handler, test and routes.yaml line, then `gen` (README, "Add an access pattern").
//! - `pooltable tenants onboard|get|suspend|resume|offboard|export|usage <tenantId> …`: an
//!   operator's commands over the typed client (`devtools::operator_cli`), with `POOLTABLE_API_URL`
//!   and `POOLTABLE_TOKEN` from the environment; exit 0 done, 2 bad command line, 3 refused, 4
//!   unavailable.
//! - `pooltable login --client-id ID --username NAME [--region R] [--token access|id]`: an
//!   operator's token from Cognito (`devtools::login`), for `POOLTABLE_TOKEN`.
//! - `pooltable create-table <name>`: create the table from template.yaml (admin credentials).
//! - `pooltable dev-token <tenant> [--operator]`: print an unsigned development JWT (an operator's
//!   carries the `pooltable/admin` scope).
//! - `pooltable backfill-catalog --table NAME`: give items written before the tenant catalog index
//!   existed their catalog entry (admin credentials; run once after deploying, before offboarding
//!   or exporting).
//! - `pooltable import --table NAME FILE…`: load tenant export pages (NDJSON from
//!   `GET /tenants/{tenantId}/export`) into a table (admin credentials); nothing is written unless
//!   every line parses.
//! - `pooltable plan (--csv FILE | --zipf N --total-rcu R --total-wcu W) [--skew 1.1] [--item-kb 1]
//!   [--headroom 1.5] [--list-fraction 0.02] [--list-cache-ms 0] [--list-ms 20] [--list-pages 5]
//!   [--out onboarding.csv]`: recommend shard counts.
//! - `pooltable plan --usage (table:NAME --tenants a,b,… | FILE.csv) [--from D] [--to D]
//!   [--peak-factor 10] [--headroom 1.5]`: recommend shard counts and tiers from measured usage,
//!   read from the table with the operator's credentials or from a usage export.

use std::collections::HashMap;
use std::time::Instant;

use devtools::plan::{self, PlanSettings, PARTITION_RCU, PARTITION_WCU};
use devtools::{create_table, default_template_path, table_from_template};

const USAGE: &str = "usage: pooltable gen [--check] | tenants <command> <tenantId> [...] | \
login --client-id ID --username NAME [--region R] [--token access|id] | \
new route <bin> <METHOD> <path> --entity KIND [--operator] [--crate CRATE] | create-table <name> | dev-token <tenant> [--operator] | \
import --table NAME FILE... | backfill-catalog --table NAME | \
plan (--csv FILE | --zipf N --total-rcu R --total-wcu W) [--skew S] [--item-kb K] [--headroom H] [--list-fraction F] [--list-cache-ms MS] [--list-ms MS] [--list-pages P] [--out FILE] | \
plan --usage (table:NAME --tenants a,b,... | FILE.csv) [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--peak-factor F] [--headroom H]";

fn flags(args: &[String]) -> Result<HashMap<String, String>, String> {
    let mut out = HashMap::new();
    let mut it = args.iter();
    while let Some(k) = it.next() {
        let key = k
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument {k}"))?;
        let v = it.next().ok_or_else(|| format!("--{key} needs a value"))?;
        out.insert(key.to_owned(), v.clone());
    }
    Ok(out)
}

fn num(f: &HashMap<String, String>, key: &str, default: Option<f64>) -> Result<f64, String> {
    match f.get(key) {
        Some(v) => v.parse().map_err(|_| format!("--{key} must be a number")),
        None => default.ok_or_else(|| format!("--{key} is required")),
    }
}

/// `plan --usage`: recommendations from measured usage.
async fn run_usage_plan(f: &HashMap<String, String>, source: &str) -> Result<(), String> {
    use devtools::usage_plan::{self, UsageSettings};
    use shared::identity::clock::Clock;
    let now = shared::identity::clock::SystemClock.now_millis();
    let to = f
        .get("to")
        .cloned()
        .unwrap_or_else(|| shared::store::quota::usage::utc_date(now));
    let from = f
        .get("from")
        .cloned()
        .unwrap_or_else(|| shared::store::quota::usage::utc_date(now - 29 * 86_400_000));
    let usage = match source.strip_prefix("table:") {
        Some(table) => {
            let tenants = f
                .get("tenants")
                .ok_or("--tenants a,b,... is required with table:NAME")?
                .split(',')
                .map(|t| {
                    shared::identity::ids::TenantId::parse(t.trim())
                        .map_err(|e| format!("tenant {t:?}: {e}"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let sdk = shared::service::app::load_sdk_config().await;
            let client = aws_sdk_dynamodb::Client::new(&sdk);
            usage_plan::read_from_table(&client, table, &tenants, &from, &to).await?
        }
        None => usage_plan::parse_csv(
            &std::fs::read_to_string(source).map_err(|e| format!("{source}: {e}"))?,
        )?,
    };
    let mut settings = UsageSettings::default();
    settings.peak_factor = num(f, "peak-factor", Some(settings.peak_factor))?;
    settings.plan.headroom = num(f, "headroom", Some(settings.plan.headroom))?;
    let recs: Vec<_> = usage
        .iter()
        .map(|u| usage_plan::recommend(u, &settings))
        .collect();
    println!(
        "usage {from} to {to}, peak = busiest day's mean × {}",
        settings.peak_factor
    );
    print!("{}", usage_plan::report(&recs));
    Ok(())
}

/// `import`: every file is parsed before anything is written.
async fn run_import(table: &str, files: &[String]) -> Result<(), String> {
    let mut items = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
        items.extend(devtools::import::parse_export(&text).map_err(|e| format!("{file}: {e}"))?);
    }
    let sdk = shared::service::app::load_sdk_config().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let written = devtools::import::import(&client, table, items).await?;
    println!("imported {written} items into {table}");
    Ok(())
}

fn run_plan(args: &[String]) -> Result<(), String> {
    let f = flags(args)?;
    let started = Instant::now();
    let settings = PlanSettings {
        headroom: num(&f, "headroom", Some(1.5))?,
        list_fraction: num(&f, "list-fraction", Some(0.02))?,
        list_cache_ms: num(&f, "list-cache-ms", Some(0.0))?,
        list_ms: num(&f, "list-ms", Some(20.0))?,
        list_pages: num(&f, "list-pages", Some(5.0))?,
        ..PlanSettings::default()
    };
    if settings.list_cache_ms > 0.0 && (settings.list_ms <= 0.0 || settings.list_pages < 1.0) {
        return Err("--list-ms must be above 0 and --list-pages at least 1 (a list always costs a read of its page)".into());
    }
    let loads = match (f.get("csv"), f.get("zipf")) {
        (Some(path), None) => {
            plan::parse_csv(&std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?)?
        }
        (None, Some(n)) => plan::zipf(
            n.parse()
                .map_err(|_| "--zipf takes a tenant count".to_string())?,
            num(&f, "total-rcu", None)?,
            num(&f, "total-wcu", None)?,
            num(&f, "skew", Some(1.1))?,
            num(&f, "item-kb", Some(1.0))?,
        ),
        _ => return Err("give either --csv FILE or --zipf N".into()),
    };
    let plans: Vec<_> = loads
        .iter()
        .map(|l| plan::plan_tenant(l, &settings))
        .collect();
    let planned = started.elapsed();
    println!("{}", plan::report(&plans));

    // Self-check: the heaviest sharded tenants, keys assigned with the real shard function.
    let mut sharded: Vec<usize> = (0..plans.len())
        .filter(|i| plans[*i].shards > 1 && !plans[*i].over_capacity)
        .collect();
    sharded.sort_by(|a, b| {
        plans[*b]
            .unsharded_peak
            .1
            .total_cmp(&plans[*a].unsharded_peak.1)
    });
    sharded.truncate(1000);
    let (mut worst_r, mut worst_w) = (0.0f64, 0.0f64);
    for i in &sharded {
        let (r, w) = plan::simulate(&loads[*i], &plans[*i], &settings, 10_000);
        worst_r = worst_r.max(r);
        worst_w = worst_w.max(w);
    }
    let over = plans.iter().filter(|p| p.over_capacity).count();
    println!(
        "simulation: {} sharded tenants, 10,000 synthetic keys each: busiest partition {worst_r:.0} RCU (limit {PARTITION_RCU}), {worst_w:.0} WCU (limit {PARTITION_WCU}): {}",
        sharded.len(),
        if worst_r <= PARTITION_RCU && worst_w <= PARTITION_WCU { "no partition over its limit" } else { "OVER THE LIMIT" }
    );
    if settings.list_cache_ms > 0.0 {
        println!(
            "list cache: {} ms for premium tenants (9+ shards): {:.0}% of their list pages reach DynamoDB ({} pages a list container, {:.0} ms a list); no extra writes; about {:.0} KB of pages a container",
            settings.list_cache_ms,
            100.0 * settings.list_read_fraction(plan::PREMIUM_SHARDS),
            settings.list_pages,
            settings.list_ms,
            settings.list_pages * settings.page_items * num(&f, "item-kb", Some(1.0))?,
        );
    }
    if over > 0 {
        println!("{over} tenants need more than sharding can give:");
        for (load, plan) in loads
            .iter()
            .zip(&plans)
            .filter(|(_, p)| p.over_capacity)
            .take(20)
        {
            println!("  {}: {}", plan.tenant_id, plan::why_over(load, &settings));
        }
        if over > 20 {
            println!("  … and {} more", over - 20);
        }
    }
    let out = f.get("out").map(String::as_str).unwrap_or("onboarding.csv");
    std::fs::write(out, plan::onboarding_csv(&plans)).map_err(|e| format!("{out}: {e}"))?;
    println!(
        "planned {} tenants in {:.2?} (total {:.2?}); onboarding input written to {out}",
        plans.len(),
        planned,
        started.elapsed()
    );
    Ok(())
}

/// The repository the command runs in: the nearest directory up from the current one that holds
/// routes.yaml (so a copy of the repository is served by the same binary), else the one this binary
/// was built from.
fn repo_root() -> std::path::PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|dir| {
            dir.ancestors()
                .find(|d| d.join("routes.yaml").is_file())
                .map(std::path::Path::to_path_buf)
        })
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        // Help and the version on stdout, exit 0; every other command's own `--help` too.
        Some("--help" | "-h" | "help") => println!("{USAGE}"),
        Some("--version" | "-V") => println!("pooltable {}", env!("CARGO_PKG_VERSION")),
        Some(command)
            if command != "tenants" && args.iter().any(|a| a == "--help" || a == "-h") =>
        {
            println!("{USAGE}")
        }
        Some("login") => match devtools::login::run(&args[1..]).await {
            Ok(token) => println!("{token}"),
            Err(failure) => {
                eprintln!("pooltable login: {}", failure.message);
                std::process::exit(failure.exit as i32);
            }
        },
        Some("tenants") => match devtools::operator_cli::run(&args[1..]).await {
            Ok(answer) if answer.is_empty() => {}
            Ok(answer) => println!("{answer}"),
            Err(failure) => {
                eprintln!("pooltable tenants: {}", failure.message);
                std::process::exit(failure.exit as i32);
            }
        },
        Some("create-table") if args.len() == 2 => {
            // No stream locally: nothing reads it there, and it slows DynamoDB Local's writes.
            let def = table_from_template(&default_template_path())?.without_stream();
            let sdk = shared::service::app::load_sdk_config().await;
            let client = aws_sdk_dynamodb::Client::new(&sdk);
            create_table(&client, &args[1], &def).await?;
            println!("created table {} from template.yaml", args[1]);
        }
        Some("new") if args.get(1).map(String::as_str) == Some("route") => {
            let new = devtools::scaffold::NewRoute::parse(&args[2..]);
            let written = new.and_then(|n| {
                let written = devtools::scaffold::new_route(&repo_root(), &n)?;
                Ok((n, written))
            });
            match written {
                Ok((new, written)) => {
                    for path in written {
                        println!("wrote {}", path.display());
                    }
                    for step in devtools::scaffold::next_steps(&new) {
                        println!("next: {step}");
                    }
                }
                Err(e) => {
                    eprintln!("pooltable new route: {e}");
                    std::process::exit(2);
                }
            }
        }
        Some("gen") if args.len() == 1 => {
            for path in devtools::generate::write(&repo_root())? {
                println!("wrote {}", path.display());
            }
            for path in devtools::generate::orphans(&repo_root())? {
                eprintln!(
                    "{} belongs to no function of routes.yaml: delete it, or declare its function",
                    path.display()
                );
            }
            let draft = devtools::routes::RouteTable::load_draft(&repo_root())?;
            for (bin, todo) in draft.unfilled() {
                eprintln!("routes.yaml: {bin}: {todo} (until then `gen --check` and every test reading routes.yaml refuse it)");
            }
        }
        Some("gen") if args.len() == 2 && args[1] == "--check" => {
            // A table refused (an entry still TODO) is said as a sentence, naming the route.
            let stale = devtools::generate::stale(&repo_root()).unwrap_or_else(|e| {
                eprintln!("pooltable gen --check: {e}");
                std::process::exit(1)
            });
            if !stale.is_empty() {
                for path in &stale {
                    eprintln!(
                        "{} is not what routes.yaml makes it (or belongs to no function of it)",
                        path.display()
                    );
                }
                eprintln!(
                    "run `cargo run -p devtools --bin pooltable -- gen` and commit the result"
                );
                std::process::exit(1);
            }
        }
        Some("dev-token") if args.len() == 2 => {
            println!("{}", shared::isolation::claims::dev_jwt(&args[1], false))
        }
        Some("dev-token") if args.len() == 3 && args[2] == "--operator" => {
            println!("{}", shared::isolation::claims::dev_jwt(&args[1], true))
        }
        Some("backfill-catalog") if args.len() == 3 && args[1] == "--table" => {
            let sdk = shared::service::app::load_sdk_config().await;
            let client = aws_sdk_dynamodb::Client::new(&sdk);
            match devtools::backfill::backfill(&client, &args[2]).await {
                Ok(done) => println!(
                    "scanned {} items; gave {} their catalog entry",
                    done.scanned, done.enlisted
                ),
                Err(e) => {
                    eprintln!("pooltable backfill-catalog: {e}");
                    std::process::exit(1);
                }
            }
        }
        Some("import") if args.len() >= 4 && args[1] == "--table" => {
            if let Err(e) = run_import(&args[2], &args[3..]).await {
                eprintln!("pooltable import: {e}");
                std::process::exit(1);
            }
        }
        Some("plan") if args.iter().any(|a| a == "--usage") => {
            let planned = match flags(&args[1..]) {
                Ok(f) => match f.get("usage").cloned() {
                    Some(source) => run_usage_plan(&f, &source).await,
                    None => Err("--usage needs a source".into()),
                },
                Err(e) => Err(e),
            };
            if let Err(e) = planned {
                eprintln!("pooltable plan: {e}\n{USAGE}");
                std::process::exit(2);
            }
        }
        Some("plan") => {
            if let Err(e) = run_plan(&args[1..]) {
                eprintln!("pooltable plan: {e}\n{USAGE}");
                std::process::exit(2);
            }
        }
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    }
    Ok(())
}
