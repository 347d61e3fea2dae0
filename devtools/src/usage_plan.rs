//! `pooltable plan --usage`: shard counts and tiers recommended from tenants' measured usage.
//!
//! The usage is what the runtime meters per tenant, route and day (`shared::store::quota::usage`): calls,
//! capacity units, throttled attempts and calls refused by the tier quota. It is read from the table
//! with the operator's own credentials (the same 8 Queries per tenant as `GET /tenants/{id}/usage`),
//! or from a CSV export. Daily counters give averages, so a tenant's peak second is estimated as its
//! busiest day's mean rate times a peak factor (default 10; measure yours and pass it).
//!
//! For each tenant:
//! - **shards**: the shard planner ([`crate::plan::plan_tenant`]) on that peak, with the day's
//!   capacity units as the load (1 KB items: a read is 0.5 RCU, a write 1 WCU);
//! - **tier**: the smallest named tier whose requests and capacity units per second hold the peak
//!   with the headroom, or custom limits when even premium does not;
//! - **notes**: throttled attempts (a partition ran hot: more shards, or a hot key), and quota
//!   refusals (the tier is too small, or the tenant bursts).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use shared::identity::ids::TenantId;
use shared::store::client::scoped::TenantDb;
use shared::store::quota::usage::RouteUsage;
use shared::store::tenancy::tenants::{Limits, Tier};

use crate::plan::{plan_tenant, PlanSettings, TenantLoad};

/// One tenant's usage over the days read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantUsage {
    pub tenant_id: String,
    /// Per day (`YYYY-MM-DD`), summed over routes.
    pub days: BTreeMap<String, RouteUsage>,
}

impl TenantUsage {
    /// The day with the most calls.
    pub fn busiest_day(&self) -> RouteUsage {
        self.days
            .values()
            .copied()
            .max_by_key(|u| (u.calls, u.read_milli_units + u.write_milli_units))
            .unwrap_or_default()
    }

    fn total(&self, f: impl Fn(&RouteUsage) -> u64) -> u64 {
        self.days.values().map(f).sum()
    }
}

/// Reads `tenants`' usage from `table` with `client`'s (the operator's) credentials.
pub async fn read_from_table(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    tenants: &[TenantId],
    from: &str,
    to: &str,
) -> Result<Vec<TenantUsage>, String> {
    let mut out = Vec::new();
    for tenant in tenants {
        let db = TenantDb::on_client(client.clone(), tenant.clone(), table);
        let days = shared::store::quota::usage::read(&db, from, to)
            .await
            .map_err(|e| format!("reading the usage of {tenant}: {e}"))?;
        out.push(TenantUsage {
            tenant_id: tenant.to_string(),
            days: days
                .into_iter()
                .map(|(day, routes)| (day, sum(routes.values())))
                .collect(),
        });
    }
    Ok(out)
}

fn sum<'a>(usages: impl Iterator<Item = &'a RouteUsage>) -> RouteUsage {
    usages.fold(RouteUsage::default(), |a, u| RouteUsage {
        calls: a.calls + u.calls,
        read_milli_units: a.read_milli_units + u.read_milli_units,
        write_milli_units: a.write_milli_units + u.write_milli_units,
        throttles: a.throttles + u.throttles,
        limited: a.limited + u.limited,
    })
}

/// The CSV header [`parse_csv`] reads: one line per tenant, day and route, units as decimals.
pub const CSV_HEADER: &str = "tenantId,date,route,calls,readUnits,writeUnits,throttles,limited";

/// Parses a usage export ([`CSV_HEADER`]).
pub fn parse_csv(text: &str) -> Result<Vec<TenantUsage>, String> {
    let mut lines = text.lines();
    match lines.next().map(str::trim) {
        Some(CSV_HEADER) => {}
        other => {
            return Err(format!(
                "the first line must be {CSV_HEADER}, not {other:?}"
            ))
        }
    }
    let mut tenants: BTreeMap<String, TenantUsage> = BTreeMap::new();
    for (n, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = n + 2;
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 8 {
            return Err(format!("line {at}: {} fields, 8 expected", f.len()));
        }
        TenantId::parse(f[0]).map_err(|e| format!("line {at}: tenantId {e}"))?;
        let count = |i: usize| -> Result<u64, String> {
            f[i].parse::<u64>()
                .map_err(|_| format!("line {at}: field {} is not a whole number", i + 1))
        };
        let milli = |i: usize| -> Result<u64, String> {
            f[i].parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .map(|v| (v * 1000.0).round() as u64)
                .ok_or_else(|| format!("line {at}: field {} is not a non-negative number", i + 1))
        };
        let usage = RouteUsage {
            calls: count(3)?,
            read_milli_units: milli(4)?,
            write_milli_units: milli(5)?,
            throttles: count(6)?,
            limited: count(7)?,
        };
        let tenant = tenants
            .entry(f[0].to_owned())
            .or_insert_with(|| TenantUsage {
                tenant_id: f[0].to_owned(),
                ..TenantUsage::default()
            });
        let day = tenant.days.entry(f[1].to_owned()).or_default();
        *day = sum([*day, usage].iter());
    }
    Ok(tenants.into_values().collect())
}

#[derive(Debug, Clone, Copy)]
pub struct UsageSettings {
    /// The peak second's rate over the busiest day's mean.
    pub peak_factor: f64,
    pub plan: PlanSettings,
}

impl Default for UsageSettings {
    fn default() -> Self {
        Self {
            peak_factor: 10.0,
            plan: PlanSettings::default(),
        }
    }
}

/// What the planner recommends for one tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct Recommendation {
    pub tenant_id: String,
    /// Estimated peak requests and capacity units per second.
    pub peak_requests: f64,
    pub peak_units: f64,
    pub shards: u32,
    pub tier: Tier,
    /// Set for [`Tier::Custom`].
    pub limits: Option<Limits>,
    pub throttles: u64,
    pub limited: u64,
}

const SECONDS_PER_DAY: f64 = 86_400.0;

pub fn recommend(usage: &TenantUsage, st: &UsageSettings) -> Recommendation {
    let day = usage.busiest_day();
    let per_peak_second = |daily: f64| daily / SECONDS_PER_DAY * st.peak_factor;
    // Refused calls were demand too: the tier must hold them.
    let peak_requests = per_peak_second((day.calls + day.limited) as f64);
    let rcu = per_peak_second(day.read_milli_units as f64 / 1000.0);
    let wcu = per_peak_second(day.write_milli_units as f64 / 1000.0);
    let load = TenantLoad {
        tenant_id: usage.tenant_id.clone(),
        reads_per_sec: rcu / 0.5,
        writes_per_sec: wcu,
        items: 1_000_000,
        avg_item_kb: 1.0,
    };
    let shards = plan_tenant(&load, &st.plan).shards;
    let peak_units = rcu + wcu;
    let headroom = st.plan.headroom;
    let fits = |l: &Limits| {
        peak_requests * headroom <= f64::from(l.requests_per_second)
            && peak_units * headroom <= f64::from(l.capacity_units_per_second)
    };
    let named = [Tier::Basic, Tier::Standard, Tier::Premium]
        .into_iter()
        .find(|t| t.limits().is_some_and(|l| fits(&l)));
    let (tier, limits) = match named {
        Some(t) => (t, None),
        None => (
            Tier::Custom,
            Some(Limits {
                requests_per_second: (peak_requests * headroom).ceil().max(1.0) as u32,
                capacity_units_per_second: (peak_units * headroom).ceil().max(1.0) as u32,
            }),
        ),
    };
    Recommendation {
        tenant_id: usage.tenant_id.clone(),
        peak_requests,
        peak_units,
        shards,
        tier,
        limits,
        throttles: usage.total(|u| u.throttles),
        limited: usage.total(|u| u.limited),
    }
}

/// The report, one line per tenant, and what to do about throttling and refusals.
pub fn report(recs: &[Recommendation]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:>10} {:>10} {:>7} {:>9} {:>10} {:>8}  notes",
        "tenant", "peak req/s", "peak CU/s", "shards", "tier", "throttles", "limited"
    );
    for r in recs {
        let tier = match r.limits {
            Some(l) => format!(
                "custom {}/{}",
                l.requests_per_second, l.capacity_units_per_second
            ),
            None => format!("{:?}", r.tier).to_lowercase(),
        };
        let mut notes = Vec::new();
        if r.throttles > 0 {
            notes.push("throttled: a partition ran hot (more shards, or look for a hot key)");
        }
        if r.limited > 0 {
            notes.push("refused by its quota: the tier is too small for its bursts");
        }
        let _ = writeln!(
            out,
            "{:<24} {:>10.1} {:>10.1} {:>7} {:>9} {:>10} {:>8}  {}",
            r.tenant_id,
            r.peak_requests,
            r.peak_units,
            r.shards,
            tier,
            r.throttles,
            r.limited,
            notes.join("; ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_export_parses_and_sums_routes_per_day() {
        let csv = format!(
            "{CSV_HEADER}\nacme,2026-11-20,get-product,100,50,0,0,0\n\
             acme,2026-11-20,put-product,10,0,20.5,1,2\nglobex,2026-11-21,get-product,3,1.5,0,0,0\n"
        );
        let usage = parse_csv(&csv).unwrap();
        assert_eq!(usage.len(), 2);
        let day = usage[0].days["2026-11-20"];
        assert_eq!(day.calls, 110);
        assert_eq!(day.write_milli_units, 20_500);
        assert_eq!((day.throttles, day.limited), (1, 2));
        assert!(parse_csv("tenantId,x\n").is_err());
        assert!(parse_csv(&format!("{CSV_HEADER}\na#b,2026-11-20,r,1,0,0,0,0\n")).is_err());
        assert!(parse_csv(&format!("{CSV_HEADER}\nacme,2026-11-20,r,-1,0,0,0,0\n")).is_err());
    }

    #[test]
    fn a_quiet_tenant_is_basic_on_one_shard_and_a_busy_one_gets_premium_and_shards() {
        let usage =
            |id: &str, calls: u64, read_units: u64, write_units: u64, limited: u64| TenantUsage {
                tenant_id: id.into(),
                days: [(
                    "2026-11-20".to_owned(),
                    RouteUsage {
                        calls,
                        read_milli_units: read_units * 1000,
                        write_milli_units: write_units * 1000,
                        throttles: 0,
                        limited,
                    },
                )]
                .into(),
            };
        let st = UsageSettings::default();
        // 8,640 calls a day: 0.1/s mean, 1/s at the peak
        let quiet = recommend(&usage("quiet", 8_640, 4_320, 0, 0), &st);
        assert_eq!((quiet.tier, quiet.shards), (Tier::Basic, 1));
        assert!((quiet.peak_requests - 1.0).abs() < 1e-9);
        // 4.32 M calls a day, 50/s mean, 500/s at the peak; 1,000 WCU/s at the peak
        let busy = recommend(&usage("busy", 4_320_000, 0, 8_640_000, 0), &st);
        assert_eq!(busy.tier, Tier::Premium, "{busy:?}");
        assert!(busy.shards >= 2, "{busy:?}");
        // refused calls count as demand: a basic-sized tenant that was refused moves up
        let refused = recommend(&usage("refused", 8_640, 0, 0, 200_000), &st);
        assert_eq!(refused.tier, Tier::Standard, "{refused:?}");
        assert!(report(&[quiet, busy, refused]).contains("refused by its quota"));
    }
}
