//! The shard planner: how many write shards each tenant needs.
//!
//! For a tenant with peak `r` reads/s and `w` writes/s of items averaging `s` KB:
//! - a point read costs `ceil(s / 4) × 0.5` RCU (eventually consistent), a write `ceil(s)` WCU;
//! - with N shards, point reads and writes spread over N partitions (the shard is a hash of the id),
//!   but a list reads *every* shard: one page costs N Queries, and since any shard may hold the whole
//!   page, each asks for up to a page (`shared::store::scatter`), so every partition carries
//!   `lists/s × RCU(min(page, items/N) × s)` whatever N is. Lists do not get cheaper with more shards.
//!
//! The planner picks the smallest N (1 to 100) that keeps every partition under DynamoDB's per-partition
//! limits (3,000 RCU and 1,000 WCU per second) divided by a headroom factor, then checks itself by
//! assigning synthetic keys with the real shard function and measuring the busiest partition.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use shared::identity::shard::{shard_for, MAX_SHARDS};

pub const PARTITION_RCU: f64 = 3000.0;
pub const PARTITION_WCU: f64 = 1000.0;

#[derive(Debug, Clone, PartialEq)]
pub struct TenantLoad {
    pub tenant_id: String,
    pub reads_per_sec: f64,
    pub writes_per_sec: f64,
    pub items: u64,
    pub avg_item_kb: f64,
}

#[derive(Debug, Clone, Copy)]
pub struct PlanSettings {
    /// Divide the partition limits by this (1.5 = plan for 2/3 of the limit).
    pub headroom: f64,
    /// Fraction of reads that are list pages (scatter-gather) rather than point reads.
    pub list_fraction: f64,
    /// Items per list page.
    pub page_items: f64,
}

impl Default for PlanSettings {
    fn default() -> Self {
        Self {
            headroom: 1.5,
            list_fraction: 0.02,
            page_items: 25.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TenantPlan {
    pub tenant_id: String,
    pub shards: u32,
    /// Busiest partition (RCU, WCU) if the tenant had one partition.
    pub unsharded_peak: (f64, f64),
    /// Busiest partition (RCU, WCU) with `shards` shards, in the model (even spread).
    pub sharded_peak: (f64, f64),
    /// The tenant needs more than 100 shards' worth: lists or writes beyond what sharding fixes.
    pub over_capacity: bool,
}

impl TenantPlan {
    pub fn tier(&self) -> &'static str {
        match self.shards {
            1 => "basic",
            2..=8 => "standard",
            _ => "premium",
        }
    }
}

fn read_units(kb: f64) -> f64 {
    (kb / 4.0).ceil().max(1.0) * 0.5
}

fn write_units(kb: f64) -> f64 {
    kb.ceil().max(1.0)
}

/// Per-partition (RCU, WCU) for `load` over `n` shards, spread evenly.
pub fn partition_load(load: &TenantLoad, n: u32, st: &PlanSettings) -> (f64, f64) {
    let n = f64::from(n);
    let point_reads = load.reads_per_sec * (1.0 - st.list_fraction);
    let lists = load.reads_per_sec * st.list_fraction;
    // Each shard's Query returns up to a page (fewer when the shard holds fewer items).
    let per_shard_items = st.page_items.min((load.items as f64 / n).max(1.0));
    let per_shard_list_rcu = read_units(per_shard_items * load.avg_item_kb);
    let rcu = point_reads * read_units(load.avg_item_kb) / n + lists * per_shard_list_rcu;
    let wcu = load.writes_per_sec * write_units(load.avg_item_kb) / n;
    (rcu, wcu)
}

pub fn plan_tenant(load: &TenantLoad, st: &PlanSettings) -> TenantPlan {
    let (rcu_cap, wcu_cap) = (PARTITION_RCU / st.headroom, PARTITION_WCU / st.headroom);
    let fits = |n| {
        let (r, w) = partition_load(load, n, st);
        r <= rcu_cap && w <= wcu_cap
    };
    let shards = (1..=MAX_SHARDS).find(|n| fits(*n));
    let n = shards.unwrap_or(MAX_SHARDS);
    TenantPlan {
        tenant_id: load.tenant_id.clone(),
        shards: n,
        unsharded_peak: partition_load(load, 1, st),
        sharded_peak: partition_load(load, n, st),
        over_capacity: shards.is_none(),
    }
}

/// Assigns `keys` synthetic ids with the real shard function and returns the busiest partition's
/// (RCU, WCU): the check that hashing, not just the even-spread model, stays under the limits.
pub fn simulate(load: &TenantLoad, plan: &TenantPlan, st: &PlanSettings, keys: u32) -> (f64, f64) {
    let n = plan.shards;
    let mut counts = vec![0u32; n as usize];
    for k in 0..keys {
        counts[shard_for(&format!("{}-item-{k}", load.tenant_id), n) as usize] += 1;
    }
    let busiest = f64::from(counts.iter().copied().max().unwrap_or(0)) / f64::from(keys.max(1));
    let point_reads = load.reads_per_sec * (1.0 - st.list_fraction);
    let lists = load.reads_per_sec * st.list_fraction;
    let shard_items = st.page_items.min((load.items as f64 * busiest).max(1.0));
    let list_rcu = lists * read_units(shard_items * load.avg_item_kb);
    let rcu = point_reads * read_units(load.avg_item_kb) * busiest + list_rcu;
    let wcu = load.writes_per_sec * write_units(load.avg_item_kb) * busiest;
    (rcu, wcu)
}

/// `tenantId,readsPerSec,writesPerSec,items,avgItemKB`, with a header line.
pub fn parse_csv(text: &str) -> Result<Vec<TenantLoad>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let num = |i: usize| -> Result<f64, String> {
            f.get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    format!(
                        "line {}: field {} is not a non-negative number",
                        n + 1,
                        i + 1
                    )
                })
        };
        let tenant_id = f.first().copied().unwrap_or_default();
        shared::identity::ids::TenantId::parse(tenant_id)
            .map_err(|e| format!("line {}: tenantId {e}", n + 1))?;
        out.push(TenantLoad {
            tenant_id: tenant_id.to_owned(),
            reads_per_sec: num(1)?,
            writes_per_sec: num(2)?,
            items: num(3)? as u64,
            avg_item_kb: num(4)?.max(0.001),
        });
    }
    Ok(out)
}

/// `count` tenants whose loads follow Zipf(`skew`) over the totals (tenant 1 is the biggest).
pub fn zipf(
    count: u32,
    total_rcu: f64,
    total_wcu: f64,
    skew: f64,
    avg_item_kb: f64,
) -> Vec<TenantLoad> {
    let harmonic: f64 = (1..=count).map(|k| 1.0 / f64::from(k).powf(skew)).sum();
    (1..=count)
        .map(|k| {
            let share = 1.0 / f64::from(k).powf(skew) / harmonic;
            TenantLoad {
                tenant_id: format!("t{k:07}"),
                reads_per_sec: total_rcu * share / read_units(avg_item_kb),
                writes_per_sec: total_wcu * share / write_units(avg_item_kb),
                items: (1_000_000.0 * share).ceil() as u64,
                avg_item_kb,
            }
        })
        .collect()
}

/// The report: per tier, the tenants, the recommended shard counts and the peak partition load with
/// and without sharding.
pub fn report(plans: &[TenantPlan]) -> String {
    #[derive(Default)]
    struct Tier {
        tenants: usize,
        min_shards: u32,
        max_shards: u32,
        worst_unsharded: (f64, f64),
        worst_sharded: (f64, f64),
        over: usize,
    }
    let mut tiers: BTreeMap<&str, Tier> = BTreeMap::new();
    for p in plans {
        let t = tiers.entry(p.tier()).or_insert(Tier {
            min_shards: u32::MAX,
            ..Tier::default()
        });
        t.tenants += 1;
        t.min_shards = t.min_shards.min(p.shards);
        t.max_shards = t.max_shards.max(p.shards);
        t.worst_unsharded.0 = t.worst_unsharded.0.max(p.unsharded_peak.0);
        t.worst_unsharded.1 = t.worst_unsharded.1.max(p.unsharded_peak.1);
        t.worst_sharded.0 = t.worst_sharded.0.max(p.sharded_peak.0);
        t.worst_sharded.1 = t.worst_sharded.1.max(p.sharded_peak.1);
        t.over += usize::from(p.over_capacity);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<9} {:>9} {:>8} {:>24} {:>24} {:>6}",
        "tier", "tenants", "shards", "peak/partition unsharded", "peak/partition sharded", "over"
    );
    for (name, t) in tiers {
        let _ = writeln!(
            out,
            "{:<9} {:>9} {:>8} {:>11.0} RCU {:>6.0} WCU {:>11.0} RCU {:>6.0} WCU {:>6}",
            name,
            t.tenants,
            if t.min_shards == t.max_shards {
                t.min_shards.to_string()
            } else {
                format!("{}-{}", t.min_shards, t.max_shards)
            },
            t.worst_unsharded.0,
            t.worst_unsharded.1,
            t.worst_sharded.0,
            t.worst_sharded.1,
            t.over
        );
    }
    out
}

/// Onboarding input: `tenantId,tier,shardCount` (what `POST /tenants` takes).
pub fn onboarding_csv(plans: &[TenantPlan]) -> String {
    let mut out = String::from("tenantId,tier,shardCount\n");
    for p in plans {
        let _ = writeln!(out, "{},{},{}", p.tenant_id, p.tier(), p.shards);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(id: &str, r: f64, w: f64, kb: f64) -> TenantLoad {
        TenantLoad {
            tenant_id: id.into(),
            reads_per_sec: r,
            writes_per_sec: w,
            items: 1000,
            avg_item_kb: kb,
        }
    }

    #[test]
    fn a_known_profile_gives_the_expected_shard_counts() {
        let st = PlanSettings::default();
        let csv = "tenantId,readsPerSec,writesPerSec,items,avgItemKB\nsmall,100,10,1000,1\nwriter,500,2500,100000,1\nreader,9000,100,100000,2\nbig-items,100,600,1000,3\n";
        let plans: Vec<_> = parse_csv(csv)
            .unwrap()
            .iter()
            .map(|l| plan_tenant(l, &st))
            .collect();
        let shards: Vec<_> = plans
            .iter()
            .map(|p| (p.tenant_id.as_str(), p.shards))
            .collect();
        // small: one partition is plenty. writer: 2,500 WCU / (1,000 / 1.5) → 4 shards.
        // reader: 8,820 point reads × 0.5 RCU = 4,410 RCU over N, plus 180 lists/s × 6.5 RCU (a
        // 25-item page of 2 KB items from every shard) = 1,170 on each: (2,000 - 1,170) × N ≥ 4,410 → 6.
        // big-items: 600 writes × 3 WCU = 1,800 WCU → 3 shards.
        assert_eq!(
            shards,
            [("small", 1), ("writer", 4), ("reader", 6), ("big-items", 3)]
        );
        assert_eq!(plans[1].tier(), "standard");
        assert_eq!(plans[0].tier(), "basic");
        assert!(plans.iter().all(|p| !p.over_capacity));
    }

    #[test]
    fn lists_alone_can_exceed_what_sharding_fixes() {
        // 2,000 lists/s put at least 3.5 RCU each (a 25-item page of 1 KB items) on every shard.
        let p = plan_tenant(
            &load("lister", 100_000.0, 0.0, 1.0),
            &PlanSettings::default(),
        );
        assert!(p.over_capacity);
        assert_eq!(p.shards, MAX_SHARDS);
    }

    #[test]
    fn the_simulation_keeps_every_partition_under_its_limit() {
        let st = PlanSettings::default();
        for l in [
            load("w", 0.0, 20_000.0, 1.0),
            load("r", 10_000.0, 3_000.0, 4.0),
            load("m", 5_000.0, 1_500.0, 0.5),
        ] {
            let plan = plan_tenant(&l, &st);
            assert!(!plan.over_capacity);
            let (rcu, wcu) = simulate(&l, &plan, &st, 10_000);
            assert!(
                rcu <= PARTITION_RCU && wcu <= PARTITION_WCU,
                "{}: {rcu} RCU {wcu} WCU over {} shards",
                l.tenant_id,
                plan.shards
            );
        }
    }

    #[test]
    fn zipf_shares_sum_to_the_totals_and_the_head_is_biggest() {
        let loads = zipf(1000, 100_000.0, 20_000.0, 1.1, 1.0);
        let total_w: f64 = loads.iter().map(|l| l.writes_per_sec).sum();
        assert!((total_w - 20_000.0).abs() < 1e-6);
        assert!(loads[0].writes_per_sec > loads[1].writes_per_sec);
    }

    #[test]
    fn csv_errors_name_the_line() {
        assert!(parse_csv("h\nbad#id,1,1,1,1\n")
            .unwrap_err()
            .contains("line 2"));
        assert!(parse_csv("h\nok,x,1,1,1\n").unwrap_err().contains("line 2"));
    }
}
