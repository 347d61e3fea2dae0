#!/usr/bin/env bash
# The benchmark (issue: overhead floor, warm handlers, runtime, cold start, scatter-gather vs a Python
# boto3 baseline, STS caching, size, memory). Starts its own DynamoDB Local and moto, builds release
# binaries, runs `bench`, and writes target/bench/results.json and target/bench/latency.svg.
# Figure 7's bootstrap sizes come from `cargo lambda build --release --arm64` of every function, which
# this script runs first (about 25 minutes from a clean clone on 2 cores; seconds when fresh).
#   BENCH_ITERATIONS=300 ./scripts/bench.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
source "$ROOT/scripts/stack.sh"
cd "$ROOT"
ensure_dynamodb_local
ensure_py_tools
build_bootstraps
log "building release binaries (bench, get-product, query-tenant-products)"
cargo build --release -p bench -p products --bin bench --bin get-product --bin query-tenant-products
trap stop_stack EXIT
start_stack
export BENCH_PYTHON="$TOOLS/venv/bin/python"  # has boto3 (moto's dependency)
"$ROOT/target/release/bench"
