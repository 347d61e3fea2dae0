#!/usr/bin/env bash
# The benchmark (issue: overhead floor, warm handlers, runtime, cold start, scatter-gather vs a Python
# boto3 baseline, STS caching, size, memory, read caching, the import queue). Starts its own DynamoDB Local and moto, builds release
# binaries, runs `bench`, and writes target/bench/results.json and target/bench/latency.svg.
# Figure 7's bootstrap sizes come from `cargo lambda build --release --arm64` of every function, which
# this script runs first (about 25 minutes from a clean clone on 2 cores; seconds when fresh).
#   BENCH_ITERATIONS=300 ./scripts/bench.sh
#   BENCH_ONLY=cache ./scripts/bench.sh      # figure 10 (read caching) alone
#   BENCH_ONLY=queue ./scripts/bench.sh      # figure 11 (the import queue) alone
#   BENCH_ONLY=attack ./scripts/bench.sh     # figure 12 (neighbours under a capacity attack) alone
#   BENCH_ONLY=latency ./scripts/bench.sh    # figures 1-5 (floors, warm handlers, quotas, cold start) alone
#   BENCH_ONLY=walk ./scripts/bench.sh       # figure 8L (a 16-shard walk, partitions side by side) alone
#   BENCH_ONLY=hotlist ./scripts/bench.sh    # figure 14 (a hot tenant's lists through the list cache) alone
#   BENCH_ONLY=move ./scripts/bench.sh       # figure 15 (a tenant moved into its own table under its own load) alone
#   BENCH_ONLY=lanes ./scripts/bench.sh      # figure 16 (an offboarding in 1, 4, 16 and 64 lanes) alone
#   BENCH_ONLY=lifecycle ./scripts/bench.sh  # figures 17-19 (a move, a restore, a re-sharding in 1, 4, 16 and 64 lanes) alone
#   BENCH_ONLY=sealed ./scripts/bench.sh    # figure 20 (products sealed under a key per tenant, against none) alone
#   BENCH_ONLY=rawmoves ./scripts/bench.sh   # figure 19d (DynamoDB Local's own ceiling for relocation transactions) alone
#   BENCH_ATTACK_SECONDS=60                  # figure 12's attack length
#   BENCH_PACE=2 ./scripts/bench.sh        # figure 3 sends twice as fast (two loops at once), as a machine
#                                          # twice as fast would: every bench tenant has the maximum custom
#                                          # limits, so no figure is refused by a quota it does not measure
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
source "$ROOT/scripts/stack.sh"
cd "$ROOT"
ensure_dynamodb_local
ensure_py_tools
[ -n "${BENCH_ONLY:-}" ] || build_bootstraps  # figure 7's bootstraps
log "building release binaries (bench, get-product, query-tenant-products, import-consumer)"
cargo build --release -p bench -p products -p imports --bin bench --bin get-product --bin query-tenant-products --bin import-consumer
trap stop_stack EXIT
start_stack
# Figure 10 compares read caches; Redis (Debian's redis-server, the local stand-in for ElastiCache/
# Valkey) runs on a free port, without persistence, for the run.
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  command -v apt-get >/dev/null || die "figure 10 needs redis-server, and this machine has no apt-get"
  log "installing redis-server (apt-get)"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo -n"; fi
  retry "$STACK_LOGS/apt-update.log" "apt-get update" $SUDO apt-get update -qq
  retry "$STACK_LOGS/apt.log" "apt-get install redis-server" \
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
fi
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
  >"$STACK_LOGS/redis.log" 2>&1 &
STACK_PIDS+=($!)
export BENCH_REDIS_URL="redis://127.0.0.1:$redis_port"
redis_deadline=$((SECONDS + 30))
until redis-cli -p "$redis_port" ping >/dev/null 2>&1; do
  [ $SECONDS -lt $redis_deadline ] || die "redis-server did not answer on port $redis_port within 30 s (log: $STACK_LOGS/redis.log)"
  sleep 0.1
done
export BENCH_PYTHON="$TOOLS/venv/bin/python"  # has boto3 (moto's dependency)
"$ROOT/target/release/bench"
