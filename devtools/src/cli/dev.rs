//! The repository's developer commands: `gen`, `new route`, `create-table`, `backfill-catalog`,
//! `import`, and `plan`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, Subcommand};

use super::{Exit, Failure};
use crate::plan::{self, PlanSettings, PARTITION_RCU, PARTITION_WCU};

#[derive(Debug, Subcommand)]
pub enum New {
    /// A new route's handler, test and routes.yaml line, then `gen`.
    Route {
        /// The function's binary name (`get-widget`).
        bin: String,
        /// GET, PUT, POST, PATCH or DELETE.
        method: String,
        /// The route's path (`/widgets/{widgetId}`).
        path: String,
        /// The declared entity kind the route reads or writes (required: left out, the error
        /// lists the kinds the scaffold writes).
        #[arg(long)]
        entity: Option<String>,
        /// Only operators may call it.
        #[arg(long)]
        operator: bool,
        /// The crate it goes into (default: the entity's).
        #[arg(long = "crate")]
        krate: Option<String>,
    },
}

/// The repository the command runs in: the nearest directory up from the current one that holds
/// routes.yaml (so a copy of the repository is served by the same binary), else the one this binary
/// was built from.
fn repo_root() -> PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|dir| {
            dir.ancestors()
                .find(|d| d.join("routes.yaml").is_file())
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

fn input(e: impl std::fmt::Display) -> Failure {
    Failure::usage(e.to_string())
}

/// `gen`: every file routes.yaml derives written; `gen --check`: which differ (exit 1 if any).
pub fn gen(check: bool) -> Result<String, Failure> {
    let root = repo_root();
    if check {
        // A table refused (an entry still TODO) is said as a sentence, naming the route.
        let stale = crate::generate::stale(&root).map_err(input)?;
        if stale.is_empty() {
            return Ok(String::new());
        }
        let mut lines: Vec<String> = stale
            .iter()
            .map(|p| {
                format!(
                    "{} is not what routes.yaml makes it (or belongs to no function of it)",
                    p.display()
                )
            })
            .collect();
        lines.push(
            "run `cargo run -p devtools --bin pooltable -- gen` and commit the result".into(),
        );
        return Err(Failure::new(Exit::Differs, lines.join("\n")));
    }
    let mut wrote = Vec::new();
    for path in crate::generate::write(&root).map_err(input)? {
        wrote.push(format!("wrote {}", path.display()));
    }
    for path in crate::generate::orphans(&root).map_err(input)? {
        eprintln!(
            "{} belongs to no function of routes.yaml: delete it, or declare its function",
            path.display()
        );
    }
    let draft = crate::routes::RouteTable::load_draft(&root).map_err(input)?;
    for (bin, todo) in draft.unfilled() {
        eprintln!("routes.yaml: {bin}: {todo} (until then `gen --check` and every test reading routes.yaml refuse it)");
    }
    Ok(wrote.join("\n"))
}

/// `new route …`.
pub fn new(new: New) -> Result<String, Failure> {
    let New::Route {
        bin,
        method,
        path,
        entity,
        operator,
        krate,
    } = new;
    let mut args = vec![bin, method, path];
    if let Some(entity) = entity {
        args.extend(["--entity".into(), entity]);
    }
    if operator {
        args.push("--operator".into());
    }
    if let Some(krate) = krate {
        args.extend(["--crate".into(), krate]);
    }
    let new = crate::scaffold::NewRoute::parse(&args).map_err(input)?;
    let written = crate::scaffold::new_route(&repo_root(), &new).map_err(input)?;
    let mut lines: Vec<String> = written
        .iter()
        .map(|p| format!("wrote {}", p.display()))
        .collect();
    lines.extend(
        crate::scaffold::next_steps(&new)
            .into_iter()
            .map(|step| format!("next: {step}")),
    );
    Ok(lines.join("\n"))
}

/// An admin client of the table, from the environment.
async fn table_client() -> aws_sdk_dynamodb::Client {
    let sdk = shared::service::app::load_sdk_config().await;
    aws_sdk_dynamodb::Client::new(&sdk)
}

/// A DynamoDB failure: refused when DynamoDB said why (the table exists, a bad request), else
/// unavailable.
fn table_failure(e: aws_sdk_dynamodb::Error) -> Failure {
    use aws_sdk_dynamodb::error::ProvideErrorMetadata;
    let refused = matches!(
        e.code(),
        Some(code) if !code.contains("Throttl") && !code.contains("InternalServer")
            && !code.contains("LimitExceeded") && !code.contains("ProvisionedThroughput")
    );
    Failure::new(
        if refused {
            Exit::Refused
        } else {
            Exit::Unavailable
        },
        e.to_string(),
    )
}

/// `create-table NAME`: the table as template.yaml defines it, without its stream (nothing reads it
/// locally, and it slows DynamoDB Local's writes); with `--keys`, the key table.
pub async fn create_table(name: &str, keys: bool) -> Result<String, Failure> {
    let template = crate::default_template_path();
    let def = match keys {
        true => crate::key_table_from_template(&template),
        false => crate::table_from_template(&template),
    }
    .map_err(input)?
    .without_stream();
    crate::create_table(&table_client().await, name, &def)
        .await
        .map_err(table_failure)?;
    Ok(format!("created table {name} from template.yaml"))
}

pub async fn backfill_catalog(table: &str) -> Result<String, Failure> {
    let done = shared::store::operator::backfill_catalog(&table_client().await, table)
        .await
        .map_err(|e| Failure::unavailable(e.to_string()))?;
    Ok(format!(
        "scanned {} items; gave {} their catalog entry",
        done.scanned, done.enlisted
    ))
}

/// `import`: every file is parsed before anything is written.
pub async fn import(table: &str, files: &[String]) -> Result<String, Failure> {
    let mut items = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|e| input(format!("{file}: {e}")))?;
        items
            .extend(crate::import::parse_export(&text).map_err(|e| input(format!("{file}: {e}")))?);
    }
    let imported = crate::import::import(&table_client().await, table, items)
        .await
        .map_err(Failure::unavailable)?;
    let written = imported.written;
    Ok(match imported.erased {
        0 => format!("imported {written} items into {table}"),
        erased => format!(
            "imported {written} items into {table}; left out {erased} that an erasure reaches"
        ),
    })
}

/// `plan`: shard counts from a load model (`--csv` or `--zipf`), or shard counts and tiers from
/// measured usage (`--usage`).
#[derive(Debug, Args)]
pub struct Plan {
    /// Tenants' loads: a CSV file with a header line, then tenantId,readsPerSec,writesPerSec,items,avgItemKB lines.
    #[arg(long, group = "source")]
    csv: Option<String>,
    /// A Zipf model of this many tenants (with --total-rcu and --total-wcu).
    #[arg(long, group = "source", requires_all = ["total_rcu", "total_wcu"])]
    zipf: Option<u32>,
    /// Measured usage: `table:NAME` (with --tenants) or a usage export (FILE.csv).
    #[arg(long, group = "source")]
    usage: Option<String>,
    #[arg(long)]
    total_rcu: Option<f64>,
    #[arg(long)]
    total_wcu: Option<f64>,
    #[arg(long, default_value_t = 1.1)]
    skew: f64,
    #[arg(long, default_value_t = 1.0)]
    item_kb: f64,
    #[arg(long, default_value_t = 1.5)]
    headroom: f64,
    #[arg(long, default_value_t = 0.02)]
    list_fraction: f64,
    #[arg(long, default_value_t = 0.0)]
    list_cache_ms: f64,
    #[arg(long, default_value_t = 20.0)]
    list_ms: f64,
    #[arg(long, default_value_t = 5.0)]
    list_pages: f64,
    /// Where the onboarding input is written.
    #[arg(long, default_value = "onboarding.csv")]
    out: String,
    /// With --usage table:NAME: the tenants, comma-separated.
    #[arg(long)]
    tenants: Option<String>,
    /// With --usage: the first day (YYYY-MM-DD; default 29 days ago).
    #[arg(long)]
    from: Option<String>,
    /// With --usage: the last day (default today).
    #[arg(long)]
    to: Option<String>,
    /// With --usage: peak = the busiest day's mean × this.
    #[arg(long)]
    peak_factor: Option<f64>,
}

impl Plan {
    pub async fn run(self) -> Result<String, Failure> {
        match &self.usage {
            Some(source) => self.by_usage(source).await,
            None => self.by_model(),
        }
    }

    /// `plan --usage`: recommendations from measured usage.
    async fn by_usage(&self, source: &str) -> Result<String, Failure> {
        use crate::usage_plan::{self, UsageSettings};
        use shared::identity::clock::Clock;
        let now = shared::identity::clock::SystemClock.now_millis();
        let day = shared::store::quota::usage::utc_date;
        let to = self.to.clone().unwrap_or_else(|| day(now));
        let from = self
            .from
            .clone()
            .unwrap_or_else(|| day(now - 29 * 86_400_000));
        let usage = match source.strip_prefix("table:") {
            Some(table) => {
                let tenants = self
                    .tenants
                    .as_deref()
                    .ok_or_else(|| input("--tenants a,b,... is required with table:NAME"))?
                    .split(',')
                    .map(|t| {
                        shared::identity::ids::TenantId::parse(t.trim())
                            .map_err(|e| input(format!("tenant {t:?}: {e}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                usage_plan::read_from_table(&table_client().await, table, &tenants, &from, &to)
                    .await
                    .map_err(Failure::unavailable)?
            }
            None => usage_plan::parse_csv(
                &std::fs::read_to_string(source).map_err(|e| input(format!("{source}: {e}")))?,
            )
            .map_err(input)?,
        };
        let mut settings = UsageSettings::default();
        settings.peak_factor = self.peak_factor.unwrap_or(settings.peak_factor);
        settings.plan.headroom = self.headroom;
        let recs: Vec<_> = usage
            .iter()
            .map(|u| usage_plan::recommend(u, &settings))
            .collect();
        Ok(format!(
            "usage {from} to {to}, peak = busiest day's mean × {}\n{}",
            settings.peak_factor,
            usage_plan::report(&recs).trim_end()
        ))
    }

    /// `plan --csv | --zipf`: shard counts from a load model, checked by simulation.
    fn by_model(&self) -> Result<String, Failure> {
        let started = Instant::now();
        let settings = PlanSettings {
            headroom: self.headroom,
            list_fraction: self.list_fraction,
            list_cache_ms: self.list_cache_ms,
            list_ms: self.list_ms,
            list_pages: self.list_pages,
            ..PlanSettings::default()
        };
        if settings.list_cache_ms > 0.0 && (settings.list_ms <= 0.0 || settings.list_pages < 1.0) {
            return Err(input("--list-ms must be above 0 and --list-pages at least 1 (a list always costs a read of its page)"));
        }
        let loads = match (&self.csv, self.zipf, self.total_rcu, self.total_wcu) {
            (Some(path), ..) => plan::parse_csv(
                &std::fs::read_to_string(path).map_err(|e| input(format!("{path}: {e}")))?,
            )
            .map_err(input)?,
            (None, Some(n), Some(rcu), Some(wcu)) => {
                plan::zipf(n, rcu, wcu, self.skew, self.item_kb)
            }
            _ => return Err(input(
                "give --csv FILE, --zipf N (with --total-rcu and --total-wcu) or --usage SOURCE",
            )),
        };
        let plans: Vec<_> = loads
            .iter()
            .map(|l| plan::plan_tenant(l, &settings))
            .collect();
        let planned = started.elapsed();
        let mut out = vec![plan::report(&plans)];
        out.push(simulation(&loads, &plans, &settings));
        if settings.list_cache_ms > 0.0 {
            out.push(format!(
                "list cache: {} ms for premium tenants (9+ shards): {:.0}% of their list pages reach DynamoDB ({} pages a list container, {:.0} ms a list); no extra writes; about {:.0} KB of pages a container",
                settings.list_cache_ms,
                100.0 * settings.list_read_fraction(plan::PREMIUM_SHARDS),
                settings.list_pages,
                settings.list_ms,
                settings.list_pages * settings.page_items * self.item_kb,
            ));
        }
        let over: Vec<_> = loads
            .iter()
            .zip(&plans)
            .filter(|(_, p)| p.over_capacity)
            .collect();
        if !over.is_empty() {
            out.push(format!(
                "{} tenants need more than sharding can give:",
                over.len()
            ));
            for (load, plan) in over.iter().take(20) {
                out.push(format!(
                    "  {}: {}",
                    plan.tenant_id,
                    plan::why_over(load, &settings)
                ));
            }
            if over.len() > 20 {
                out.push(format!("  … and {} more", over.len() - 20));
            }
        }
        std::fs::write(&self.out, plan::onboarding_csv(&plans))
            .map_err(|e| input(format!("{}: {e}", self.out)))?;
        out.push(format!(
            "planned {} tenants in {:.2?} (total {:.2?}); onboarding input written to {}",
            plans.len(),
            planned,
            started.elapsed(),
            self.out
        ));
        Ok(out.join("\n"))
    }
}

/// Self-check: the heaviest sharded tenants, keys assigned with the real shard function.
fn simulation(
    loads: &[plan::TenantLoad],
    plans: &[plan::TenantPlan],
    settings: &PlanSettings,
) -> String {
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
        let (r, w) = plan::simulate(&loads[*i], &plans[*i], settings, 10_000);
        worst_r = worst_r.max(r);
        worst_w = worst_w.max(w);
    }
    format!(
        "simulation: {} sharded tenants, 10,000 synthetic keys each: busiest partition {worst_r:.0} RCU (limit {PARTITION_RCU}), {worst_w:.0} WCU (limit {PARTITION_WCU}): {}",
        sharded.len(),
        if worst_r <= PARTITION_RCU && worst_w <= PARTITION_WCU { "no partition over its limit" } else { "OVER THE LIMIT" }
    )
}
