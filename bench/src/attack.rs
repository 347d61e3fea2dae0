//! Figure 12: neighbours under a capacity attack. One basic tenant (25 requests/s, 50 capacity
//! units/s) sends expensive requests, whole pages of 24 KB products and 48 KB puts, from 8 containers
//! (8 `App`s, each its own limiter) at about 20× its capacity quota; a premium neighbour's GetItem
//! is timed before and during. The figure reports the noisy tenant's consumed units against its
//! quota (target: at most 1.2 × the quota over the run, plus the limiter's stated bound: per
//! container, a largest request for each route first seen and one on the last of the bucket) and
//! the neighbour's p50 and p99 (target: p99 at most 1.5× its value with no attack).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use integration::{unique, Auth, Harness};
use serde_json::json;
use shared::store::tenancy::tenants::Tier;
use shared::App;

use crate::fixtures::seed_products_with;
use crate::report::{stat, Report};
use crate::{neighbour, requests};

const CONTAINERS: usize = 8;
const OVERLOAD: f64 = 20.0;
const PRODUCTS: usize = 48;
const PRODUCT_KB: usize = 24;
const PUT_KB: usize = 48;

/// One expensive request of the noisy tenant, served as the runtime serves it (quota first): the
/// `n`th of a container is a whole page, every fourth a large put. Answers (status, ms).
async fn expensive(app: &App, auth: &Auth, n: usize) -> (u16, f64) {
    let (ms, status) = if n % 4 == 3 {
        let blob = json!({"blob": "y".repeat(PUT_KB * 1024)});
        requests::put_product_admitted(app, auth, &format!("put-{n}"), blob).await
    } else {
        requests::list_products_admitted(app, auth, PRODUCTS).await
    };
    (status, ms)
}

/// Figure 12: the noisy tenant's attack from [`CONTAINERS`] containers for `BENCH_ATTACK_SECONDS`
/// (60 by default), its premium neighbour's GetItem timed before and beside it.
pub async fn attack_figure(
    h: &Harness,
    new_app: impl Fn() -> App,
    neighbour_app: &App,
    report: &mut Report,
) {
    let seconds: u64 = crate::env_or("BENCH_ATTACK_SECONDS", 60);
    let (noisy, neighbour) = (unique("noisy"), unique("neighbour"));
    let basic = Tier::Basic.limits().expect("the basic tier has limits");
    let quota_units = f64::from(basic.capacity_units_per_second);
    seed_attack(h, &noisy, &neighbour).await;
    let (noisy_auth, neighbour_auth) = (Auth::Tenant(noisy.clone()), Auth::Tenant(neighbour));

    let before = neighbour::alone(neighbour_app, &neighbour_auth).await;
    let probe = new_app();
    let pace = pace_from_probe(h, &probe, &noisy_auth, &noisy, quota_units).await;

    // The attack, with the neighbour's reads beside it.
    let apps: Vec<App> = (0..CONTAINERS).map(|_| new_app()).collect();
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let attackers = apps
        .iter()
        .map(|app| attack_from(app, &noisy_auth, pace.interval, until));
    let neighbour_loop =
        neighbour::beside(neighbour_app, &neighbour_auth, || Instant::now() >= until);
    let (statuses, (during, refused)) =
        tokio::join!(futures::future::join_all(attackers), neighbour_loop);
    assert_eq!(refused, 0, "the neighbour was refused");
    let elapsed = started.elapsed().as_secs_f64();
    let all: Vec<&App> = apps.iter().collect();
    let used = integration::units_used(h, &all, &noisy, None).await - pace.baseline_used;
    let attack = Attack {
        statuses,
        used,
        elapsed,
    };
    report_attack(&pace, quota_units, attack, before, during, report);
}

/// The noisy basic tenant's [`PRODUCTS`] products of [`PRODUCT_KB`] KB, and its premium
/// neighbour's one product, on 4 shards each.
async fn seed_attack(h: &Harness, noisy: &str, neighbour: &str) {
    integration::onboard_tier(h, noisy, 4, Tier::Basic.as_str()).await;
    integration::onboard_tier(h, neighbour, 4, Tier::Premium.as_str()).await;
    let blob = |kb: usize| {
        move |_| {
            AttributeValue::M(HashMap::from([(
                "blob".into(),
                AttributeValue::S("x".repeat(kb * 1024)),
            )]))
        }
    };
    seed_products_with(h, noisy, 4, PRODUCTS, blob(PRODUCT_KB)).await;
    seed_products_with(h, neighbour, 4, 1, blob(1)).await;
}

/// The attack's pace, from one page's cost.
struct Pace {
    /// The units one expensive page costs.
    page_units: f64,
    /// Between one container's requests: the containers together offer [`OVERLOAD`] × the quota.
    interval: Duration,
    /// The noisy tenant's units used before the attack.
    baseline_used: f64,
}

/// One page's cost, measured on a container of its own (`probe`, not counted in the attack's
/// window), sets the pace: the containers together offer [`OVERLOAD`] × the quota.
async fn pace_from_probe(
    h: &Harness,
    probe: &App,
    noisy_auth: &Auth,
    noisy: &str,
    quota_units: f64,
) -> Pace {
    let (status, _) = expensive(probe, noisy_auth, 0).await;
    assert_eq!(status, 200);
    let page_units = integration::units_used(h, &[probe], noisy, None)
        .await
        .max(1.0);
    let interval =
        Duration::from_secs_f64(CONTAINERS as f64 * page_units / (OVERLOAD * quota_units));
    // Let the probe's debt be repaid before the attack starts.
    tokio::time::sleep(Duration::from_secs_f64(page_units / quota_units + 2.0)).await;
    let baseline_used = integration::units_used(h, &[probe], noisy, None).await;
    Pace {
        page_units,
        interval,
        baseline_used,
    }
}

/// One container's expensive requests, one every `interval`, until `until`: how many were answered
/// with each status.
async fn attack_from(
    app: &App,
    auth: &Auth,
    interval: Duration,
    until: Instant,
) -> HashMap<u16, usize> {
    let mut statuses: HashMap<u16, usize> = HashMap::new();
    let mut n = 0;
    let mut next = Instant::now();
    while Instant::now() < until {
        let (status, _) = Box::pin(expensive(app, auth, n)).await;
        *statuses.entry(status).or_default() += 1;
        n += 1;
        next += interval;
        tokio::time::sleep_until(next.into()).await;
    }
    statuses
}

/// What the attack did: each container's answers by status, the units it used, over its seconds.
struct Attack {
    statuses: Vec<HashMap<u16, usize>>,
    used: f64,
    elapsed: f64,
}

/// Adds figure 12: the neighbour's GetItem before and during the attack, and the noisy tenant's
/// units against its quota.
fn report_attack(
    pace: &Pace,
    quota_units: f64,
    attack: Attack,
    before: Vec<f64>,
    during: Vec<f64>,
    report: &mut Report,
) {
    let Attack {
        statuses,
        used,
        elapsed,
    } = attack;
    let page_units = pace.page_units;
    let mut totals: HashMap<u16, usize> = HashMap::new();
    for s in statuses {
        for (k, v) in s {
            *totals.entry(k).or_default() += v;
        }
    }
    let offered = totals.values().sum::<usize>();
    let quota = quota_units * elapsed;
    // The stated bound, beyond the quota of T + 1 seconds: per container, one largest request (a
    // whole page, or a large put with its GSI1 copy) for each route it sees first (its cost is
    // unknown, so neither estimated nor shrunk) and one admitted on the last of the bucket.
    const ROUTES: f64 = 2.0;
    let largest = page_units.max((PUT_KB as f64 + 1.0) * 2.0);
    let allowed = 1.2 * quota + quota_units + CONTAINERS as f64 * (ROUTES + 1.0) * largest;
    let (before, during) = (stat(before), stat(during));
    report.add(
        "12a. neighbour GetItem, no attack [quota path]",
        &before,
        String::new(),
    );
    report.add(
        "12b. neighbour GetItem, during a capacity attack",
        &during,
        format!(
            "p99 {:.2}× the no-attack p99 (target <= 1.5×)",
            during.p99 / before.p99
        ),
    );
    report.fact(
        "12c. noisy tenant's consumed units vs its quota",
        json!(format!("{used:.0} of {quota:.0} CU")),
        &format!(
            "{:.2}× its quota over {elapsed:.0} s (target <= 1.2× plus 3 largest requests of \
             {largest:.0} CU per container: <= {allowed:.0} CU); {offered} requests from \
             {CONTAINERS} containers (a page {page_units:.0} CU; offered ~{OVERLOAD}× the quota); \
             answers {totals:?}",
            used / quota
        ),
    );
}
