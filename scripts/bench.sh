#!/usr/bin/env bash
# The benchmark (issue: overhead floor, warm handlers, runtime, cold start, scatter-gather vs a Python
# boto3 baseline, STS caching, size, memory). Starts its own DynamoDB Local and moto, builds release
# binaries, runs `bench`, and writes target/bench/results.json and target/bench/latency.svg.
# Bootstrap sizes come from target/lambda (run scripts/package.sh first to include them).
#   BENCH_ITERATIONS=300 ./scripts/bench.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
source "$ROOT/scripts/stack.sh"
cd "$ROOT"
ensure_dynamodb_local
ensure_py_tools
log "building release binaries (bench, get-product, query-tenant-products)"
cargo build --release -p bench -p products --bin bench --bin get-product --bin query-tenant-products
trap stop_stack EXIT
start_stack
export BENCH_PYTHON="$TOOLS/venv/bin/python"  # has boto3 (moto's dependency)
"$ROOT/target/release/bench"
