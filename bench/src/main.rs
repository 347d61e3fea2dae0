//! `scripts/bench.sh` (or, with the local stack's environment, `cargo run -p bench --release`): every
//! figure of the benchmark in one run, each with its baseline measured in the same run. Prints a
//! table, writes `target/bench/results.json` and `target/bench/latency.svg`.

use std::time::Duration;

use integration::Harness;
use serde_json::json;
use shared::service::app::load_sdk_config;

mod apps;
mod attack;
mod big_tenants;
mod cache;
mod costs;
mod fixtures;
mod idempotent;
mod lanes;
mod latency;
mod moving;
mod neighbour;
mod output;
mod proxy;
mod queue;
mod report;
mod requests;
mod restore;
mod runtime;
mod scatter;
mod sealed;
mod sizes;
mod sts;

use apps::{production_app, production_app_with_budget, DynamoDbAt, Target};
use report::Report;

/// What the figures run against.
struct Bench {
    h: Harness,
    sdk: aws_types::SdkConfig,
    /// `sdk` with DynamoDB reached through the latency model.
    proxied: aws_types::SdkConfig,
    plain: Target,
    through_proxy: Target,
    /// Samples a latency figure takes (`BENCH_ITERATIONS`).
    iterations: usize,
}

#[tokio::main]
async fn main() {
    let iterations = env_or("BENCH_ITERATIONS", 300);
    let one_way_ms: u64 = env_or("BENCH_PROXY_DELAY_MS", 4);
    let h = Harness::new().await;
    let sdk = load_sdk_config().await;
    let dynamodb_url = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .expect("AWS_ENDPOINT_URL_DYNAMODB: run the benchmark through scripts/bench.sh");
    // Kept to the end of the run: dropping it stops the latency model.
    let latency = proxy::LatencyProxy::start(
        proxy::socket_of(&dynamodb_url),
        Duration::from_millis(one_way_ms),
    )
    .await;
    let proxied = sdk
        .to_builder()
        .service_config(DynamoDbAt(latency.url.clone()))
        .build();
    let mut report = Report::start();
    let plain = Target::new("", &sdk, &h.table, dynamodb_url);
    let through_proxy = Target::new(" [latency model]", &proxied, &h.table, latency.url.clone());
    report.fact(
        "latency model: delay added each way",
        json!(format!("{one_way_ms} ms")),
        "figures marked [latency model] run through it; BENCH_PROXY_DELAY_MS",
    );
    let bench = Bench {
        h,
        sdk,
        proxied,
        plain,
        through_proxy,
        iterations,
    };
    // BENCH_ONLY=cache, =queue, =restore, =attack, =walk, =hotlist, =move, =lanes or =lifecycle
    // runs figure 10, 11, 13, 12, 8L, 14, 15, 16 or 17-19 alone (none needs another's fixture);
    // BENCH_ONLY=latency runs figures 1-5, plain and through the latency model.
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    overhead_figures(&bench, &only, &mut report).await;
    load_figures(&bench, &only, &mut report).await;
    lifecycle_figures(&bench, &only, &mut report).await;
    if selected(&only, "sealed") {
        let Bench {
            h,
            sdk,
            proxied,
            iterations,
            ..
        } = &bench;
        sealed::sealed_figure(h, sdk, proxied, *iterations, &mut report).await;
    }
    if selected(&only, "attack") {
        let new_app = || production_app(&bench.proxied, &bench.h.table);
        attack::attack_figure(&bench.h, new_app, &bench.through_proxy.app, &mut report).await;
    }
    output::write_outputs(&report);
}

/// The environment variable `name` parsed, or `default` when it is unset or does not parse.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether figure `name` runs: `BENCH_ONLY` (`only`) is empty (every figure) or names it.
fn selected(only: &str, name: &str) -> bool {
    only.is_empty() || only == name
}

/// Figures 1–9 when every figure runs; figures 1–5 alone, plain and through the latency model,
/// with `BENCH_ONLY=latency`.
async fn overhead_figures(bench: &Bench, only: &str, report: &mut Report) {
    let Bench {
        h,
        sdk,
        plain,
        through_proxy,
        iterations,
        ..
    } = bench;
    if only.is_empty() {
        all_but_cache(h, sdk, plain, through_proxy, *iterations, report).await;
    }
    if only == "latency" {
        let fixture = fixtures::fixture(h, sdk).await;
        latency::latency_figures(h, plain, &fixture, *iterations, report).await;
        latency::latency_figures(h, through_proxy, &fixture, *iterations, report).await;
    }
}

/// Figures 1–9: the overhead (plain and through the latency model), what reads cost, STS and
/// sizes.
async fn all_but_cache(
    h: &Harness,
    sdk: &aws_types::SdkConfig,
    plain: &Target,
    through_proxy: &Target,
    iterations: usize,
    report: &mut Report,
) {
    let fixture = fixtures::fixture(h, sdk).await;

    let python_cold = latency::latency_figures(h, plain, &fixture, iterations, report).await;
    latency::latency_figures(h, through_proxy, &fixture, iterations, report).await;
    if let Some(py) = python_cold {
        report.fact(
            "4. cold start: Python baseline (imports + first request)",
            json!(format!("{py:.1} ms")),
            &format!(
                "Rust is {:.1}% of it (target <= 10%)",
                report.median("4. cold start: query-tenant-products, spawn to first answer") / py
                    * 100.0
            ),
        );
    }
    costs::walk_and_page_costs(h, plain, &fixture, report).await;
    costs::list_route_costs(h, plain, report).await;
    sts::sts_figures(h, sdk, &fixture, report).await;
    sizes::bootstrap_sizes(report);
}

/// Figures 10, 11, 8L and 14: a tenant's load (reads, a burst of writes, walks and hot lists),
/// through the latency model.
async fn load_figures(bench: &Bench, only: &str, report: &mut Report) {
    let Bench {
        h,
        proxied,
        through_proxy,
        ..
    } = bench;
    if selected(only, "cache") {
        cache::cache_figure(h, through_proxy, report).await;
    }
    if selected(only, "queue") {
        queue::queue_figure(h, through_proxy, report).await;
    }
    if selected(only, "walk") {
        let one_at_a_time = production_app_with_budget(proxied, &h.table, 1);
        big_tenants::walk_figure(
            h,
            &through_proxy.app,
            &one_at_a_time,
            &through_proxy.raw,
            report,
        )
        .await;
    }
    if selected(only, "hotlist") {
        big_tenants::hot_list_figure(h, proxied, &through_proxy.app, report).await;
    }
}

/// Figures 13, 15, 16 and 17–19: a tenant restored, moved and re-sharded while it or a neighbour
/// is served, through the latency model; 19d alone with `BENCH_ONLY=rawmoves`.
async fn lifecycle_figures(bench: &Bench, only: &str, report: &mut Report) {
    let Bench {
        h,
        proxied,
        through_proxy,
        ..
    } = bench;
    let app = &through_proxy.app;
    if selected(only, "restore") {
        restore::restore_figure(h, app, app, "13", "", report).await;
    }
    if selected(only, "move") {
        moving::move_figure(h, app, app, None, "15", "", report).await;
    }
    if selected(only, "lanes") {
        lanes::lanes_figure(h, app, &through_proxy.raw, report).await;
    }
    // BENCH_ONLY=lifecycle: figures 17-19, a move, a restore and a re-sharding at each lane count.
    if selected(only, "lifecycle") {
        let in_lanes = |lanes| apps::production_app_with_lanes(proxied, &h.table, lanes);
        for lanes in lanes::LANES {
            let label = format!(" in {lanes} lanes");
            let lanes_app = in_lanes(lanes);
            moving::move_figure(h, app, &lanes_app, Some(lanes), "17", &label, report).await;
            restore::restore_figure(h, app, &lanes_app, "18", &label, report).await;
        }
        lanes::resharding_figure(h, app, &through_proxy.raw, in_lanes, report).await;
    }
    // BENCH_ONLY=rawmoves: figure 19d alone (DynamoDB Local's ceiling for relocations).
    if only == "rawmoves" {
        lanes::raw_relocations_figure(h, &through_proxy.raw, report).await;
    }
}
