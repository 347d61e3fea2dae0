//! The shard planner: how many write shards each tenant needs.
//!
//! For a tenant with peak `r` reads/s and `w` writes/s of items averaging `s` KB:
//! - a point read costs `ceil(s / 4) × 0.5` RCU (eventually consistent), a write `ceil(s)` WCU;
//! - with N shards, point reads and writes spread over N partitions (the shard is a hash of the id),
//!   but a list page reads *every* shard: one Query each, for about twice its fair share of the page
//!   (`shared::store::scatter::first_round_want`), and a Query costs at least 0.5 RCU. So every
//!   partition carries `lists/s × RCU(first round × s)` whatever N is: lists do not get cheaper with
//!   more shards, and for the biggest tenants they alone overload every partition.
//! - with the list-page cache (`LIST_CACHE_MS`, for the tiers it serves: here the premium tenants,
//!   9 shards and more), one container reads a page at most once per staleness bound. Every route is
//!   its own function, so the list function's containers serve lists only, each about
//!   `1000 / list_ms` a second; if each reads `list_pages` distinct pages within a bound, a page
//!   reaches DynamoDB for a fraction `min(1, list_pages × list_ms / staleness_ms)` of requests. The
//!   cache adds no writes (no write amplification) and holds about `list_pages` pages a container.
//!
//! The planner picks the smallest N (1 to 100, in the pool) that keeps every partition under
//! DynamoDB's per-partition limits (3,000 RCU and 1,000 WCU per second) divided by a headroom factor,
//! then checks itself by assigning synthetic keys with the real shard function and measuring the
//! busiest partition. A tenant no pool N carries is placed in its own table, where it may have up to
//! 256 shards (`MAX_OWN_TABLE_SHARDS`); one that not even those carry is flagged with the reason:
//! which load is over on each of 256 partitions.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use shared::identity::shard::{shard_for, MAX_OWN_TABLE_SHARDS, MAX_SHARDS};
use shared::store::scatter::first_round_want;

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
    /// The list-page cache's staleness bound for premium tenants (9+ shards), in ms; 0: off.
    pub list_cache_ms: f64,
    /// How long a list request runs in its container, in ms (the container serves about
    /// `1000 / list_ms` lists a second).
    pub list_ms: f64,
    /// Distinct list pages one container reads within a staleness bound (filters, page sizes and
    /// cursors that several requests share count once).
    pub list_pages: f64,
}

impl Default for PlanSettings {
    fn default() -> Self {
        Self {
            headroom: 1.5,
            list_fraction: 0.02,
            page_items: 25.0,
            list_cache_ms: 0.0,
            list_ms: 20.0,
            list_pages: 5.0,
        }
    }
}

impl PlanSettings {
    /// The fraction of a tenant's list requests that reach DynamoDB with `n` shards: 1 without the
    /// cache (off, or not a premium tenant), else one read per distinct page per container per bound.
    pub fn list_read_fraction(&self, n: u32) -> f64 {
        if self.list_cache_ms <= 0.0 || n < PREMIUM_SHARDS {
            return 1.0;
        }
        (self.list_pages * self.list_ms / self.list_cache_ms).min(1.0)
    }

    /// The items one shard's Query reads for a list page when the shard holds `shard_items`, of
    /// `n` shards: the first round's ask, or all it holds.
    fn list_items_per_shard(&self, shard_items: f64, n: u32) -> f64 {
        let page = self.page_items.max(1.0) as u32;
        let first_round = f64::from(first_round_want(page, n as usize));
        first_round.min(shard_items.max(1.0))
    }
}

/// The fewest shards the tier the cache serves (premium) starts at.
pub const PREMIUM_SHARDS: u32 = 9;

#[derive(Debug, Clone, PartialEq)]
pub struct TenantPlan {
    pub tenant_id: String,
    pub shards: u32,
    /// Busiest partition (RCU, WCU) if the tenant had one partition.
    pub unsharded_peak: (f64, f64),
    /// Busiest partition (RCU, WCU) with `shards` shards, in the model (even spread).
    pub sharded_peak: (f64, f64),
    /// It needs more shards than the pool gives a tenant (100): it goes in its own table.
    pub own_table: bool,
    /// It needs more than 256 shards' worth: lists or writes beyond what sharding fixes.
    pub over_capacity: bool,
}

/// The per-partition load of a tenant, by source, in capacity units a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartitionLoad {
    pub point_rcu: f64,
    pub list_rcu: f64,
    /// List Queries each partition gets a second.
    pub list_queries: f64,
    pub wcu: f64,
}

impl PartitionLoad {
    pub fn rcu(&self) -> f64 {
        self.point_rcu + self.list_rcu
    }
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
    let l = partition_load_by_source(load, n, st);
    (l.rcu(), l.wcu)
}

/// [`partition_load`], by source.
pub fn partition_load_by_source(load: &TenantLoad, n: u32, st: &PlanSettings) -> PartitionLoad {
    let shards = f64::from(n);
    let point_reads = load.reads_per_sec * (1.0 - st.list_fraction);
    let list_queries = load.reads_per_sec * st.list_fraction * st.list_read_fraction(n);
    let per_shard_items = st.list_items_per_shard(load.items as f64 / shards, n);
    PartitionLoad {
        point_rcu: point_reads * read_units(load.avg_item_kb) / shards,
        list_rcu: list_queries * read_units(per_shard_items * load.avg_item_kb),
        list_queries,
        wcu: load.writes_per_sec * write_units(load.avg_item_kb) / shards,
    }
}

/// Why no shard count carries `load`: each load over its share of the partition budget at the most
/// shards a tenant can have (256, in its own table), in words.
pub fn why_over(load: &TenantLoad, st: &PlanSettings) -> String {
    const MAX_SHARDS: u32 = MAX_OWN_TABLE_SHARDS;
    let (rcu_cap, wcu_cap) = (PARTITION_RCU / st.headroom, PARTITION_WCU / st.headroom);
    let at = partition_load_by_source(load, MAX_SHARDS, st);
    let mut reasons = Vec::new();
    if at.point_rcu > rcu_cap {
        reasons.push(format!(
            "point reads alone put {:.0} RCU on each of {MAX_SHARDS} partitions (budget {rcu_cap:.0}): it needs {} shards; give it its own table, or cache its point reads (READ_CACHE_MS)",
            at.point_rcu,
            (at.point_rcu * f64::from(MAX_SHARDS) / rcu_cap).ceil()
        ));
    }
    if at.rcu() > rcu_cap && at.point_rcu <= rcu_cap {
        reasons.push(format!(
            "{:.0} list Queries a second reach every partition ({:.0} RCU) beside {:.0} RCU of point reads (budget {rcu_cap:.0})",
            at.list_queries, at.list_rcu, at.point_rcu
        ));
    }
    if at.wcu > wcu_cap {
        reasons.push(format!(
            "writes put {:.0} WCU on each of {MAX_SHARDS} partitions (budget {wcu_cap:.0})",
            at.wcu
        ));
    }
    reasons.join("; ")
}

pub fn plan_tenant(load: &TenantLoad, st: &PlanSettings) -> TenantPlan {
    let (rcu_cap, wcu_cap) = (PARTITION_RCU / st.headroom, PARTITION_WCU / st.headroom);
    let fits = |n| {
        let (r, w) = partition_load(load, n, st);
        r <= rcu_cap && w <= wcu_cap
    };
    // The pool's counts first; past them, the tenant's own table's.
    let shards = (1..=MAX_OWN_TABLE_SHARDS).find(|n| fits(*n));
    let n = shards.unwrap_or(MAX_OWN_TABLE_SHARDS);
    TenantPlan {
        tenant_id: load.tenant_id.clone(),
        shards: n,
        unsharded_peak: partition_load(load, 1, st),
        sharded_peak: partition_load(load, n, st),
        own_table: n > MAX_SHARDS,
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
    let even = partition_load_by_source(load, n, st);
    // The busiest partition holds `busiest` of the items: its share of point reads and writes, and
    // its Query of each list page reads what it holds of the first round.
    let spread = busiest * f64::from(n);
    let shard_items = st.list_items_per_shard(load.items as f64 * busiest, n);
    let list_rcu = even.list_queries * read_units(shard_items * load.avg_item_kb);
    (even.point_rcu * spread + list_rcu, even.wcu * spread)
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
        own: usize,
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
        t.own += usize::from(p.own_table);
        t.over += usize::from(p.over_capacity);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<9} {:>9} {:>8} {:>24} {:>24} {:>5} {:>6}",
        "tier",
        "tenants",
        "shards",
        "peak/partition unsharded",
        "peak/partition sharded",
        "own",
        "over"
    );
    for (name, t) in tiers {
        let _ = writeln!(
            out,
            "{:<9} {:>9} {:>8} {:>11.0} RCU {:>6.0} WCU {:>11.0} RCU {:>6.0} WCU {:>5} {:>6}",
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
            t.own,
            t.over
        );
    }
    out
}

/// Onboarding input: `tenantId,tier,shardCount,placement` (what `POST /tenants` takes).
pub fn onboarding_csv(plans: &[TenantPlan]) -> String {
    let mut out = String::from("tenantId,tier,shardCount,placement\n");
    for p in plans {
        let placement = if p.own_table { "own" } else { "pool" };
        let _ = writeln!(out, "{},{},{},{placement}", p.tenant_id, p.tier(), p.shards);
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
        // reader: 8,820 point reads × 0.5 RCU = 4,410 RCU over N, plus 180 lists/s each reading a
        // first round of 2 × ceil(25 / N) + 2 items of 2 KB from every shard: at 4 shards 16 items,
        // 4 RCU, 720 on each: 1,102 + 720 ≤ 2,000 (at 3: 1,470 + 900 > 2,000) → 4.
        // big-items: 600 writes × 3 WCU = 1,800 WCU → 3 shards.
        assert_eq!(
            shards,
            [("small", 1), ("writer", 4), ("reader", 4), ("big-items", 3)]
        );
        assert_eq!(plans[1].tier(), "standard");
        assert_eq!(plans[0].tier(), "basic");
        assert!(plans.iter().all(|p| !p.over_capacity));
    }

    #[test]
    fn lists_alone_can_exceed_what_sharding_fixes_and_the_list_cache_carries_them() {
        // GIVEN 5,000 lists/s: at least 0.5 RCU each (a Query's least) on every shard
        let lister = load("lister", 250_000.0, 0.0, 1.0);
        // WHEN planned without the list cache
        let p = plan_tenant(&lister, &PlanSettings::default());
        // THEN no shard count carries it, and the reason says the lists
        assert!(p.over_capacity);
        assert_eq!(p.shards, MAX_OWN_TABLE_SHARDS);
        assert!(why_over(&lister, &PlanSettings::default()).contains("list Queries"));
        // WHEN planned with a 1 s list cache (5 pages a container, 20 ms a list: 10% reach DynamoDB)
        let cached = PlanSettings {
            list_cache_ms: 1000.0,
            ..PlanSettings::default()
        };
        assert!((cached.list_read_fraction(PREMIUM_SHARDS) - 0.1).abs() < 1e-9);
        assert_eq!(cached.list_read_fraction(PREMIUM_SHARDS - 1), 1.0);
        let p = plan_tenant(&lister, &cached);
        // THEN a premium shard count carries it
        assert!(!p.over_capacity);
        assert!(p.shards >= PREMIUM_SHARDS);
    }

    #[test]
    fn the_zipf_head_needs_the_list_cache_and_its_biggest_tenant_its_own_table() {
        // GIVEN the README's million Zipf tenants (their head: the rest fit one partition)
        let loads = zipf(1_000_000, 2_000_000.0, 400_000.0, 1.1, 1.0);
        let flagged = |st: &PlanSettings| -> Vec<String> {
            loads[..100]
                .iter()
                .map(|l| plan_tenant(l, st))
                .filter(|p| p.over_capacity)
                .map(|p| p.tenant_id)
                .collect()
        };
        // WHEN planned without and with the list cache
        let off = PlanSettings::default();
        let on = PlanSettings {
            list_cache_ms: 1000.0,
            ..PlanSettings::default()
        };
        // THEN two tenants' lists overload every partition without it (a third is carried by its
        // own table's shards); with it, none is flagged: the biggest, whose point reads alone need
        // more than the pool's 100 shards (122 for them), is planned into its own table with the
        // 162 that its point reads and its lists' Queries need together
        assert_eq!(flagged(&off), ["t0000001", "t0000002"]);
        assert!(why_over(&loads[1], &off).contains("list Queries"));
        assert!(flagged(&on).is_empty());
        let biggest = plan_tenant(&loads[0], &on);
        assert_eq!((biggest.own_table, biggest.shards), (true, 162));
        assert!(loads[1..100].iter().all(|l| !plan_tenant(l, &on).own_table));
        assert!(onboarding_csv(&[biggest]).ends_with("t0000001,premium,162,own\n"));
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
