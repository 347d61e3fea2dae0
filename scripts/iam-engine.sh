#!/usr/bin/env bash
# Isolation judged by an IAM engine we did not write (issue #42 item 5): builds fakecloud (crates.io,
# AGPL, a separate server, never linked) into .tools/fakecloud once, starts it in strict IAM mode, and
# runs tests/tests/all/iam_engine.rs against it: every cross-tenant request of the matrix, sent with
# a tenant's STS credentials and no guard, must be refused by IAM alone, in both placements.
# Not part of ./scripts/test.sh: fakecloud's first build is too long for CI's budget (README).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
source "$ROOT/scripts/stack.sh"
cd "$ROOT"
FAKECLOUD_VERSION=0.51.0
bin="$TOOLS/fakecloud/bin/fakecloud"
if [ ! -x "$bin" ]; then
  log "building fakecloud $FAKECLOUD_VERSION into .tools/fakecloud (once; long on 2 cores)"
  started=$(date +%s)
  cargo install --locked --quiet "fakecloud@$FAKECLOUD_VERSION" --root "$TOOLS/fakecloud"
  log "fakecloud built in $(( $(date +%s) - started )) s"
fi
port=$(free_port)
mkdir -p "$STACK_LOGS"
FAKECLOUD_IAM=strict "$bin" --addr "127.0.0.1:$port" >"$STACK_LOGS/fakecloud.log" 2>&1 &
engine_pid=$!
trap 'kill $engine_pid 2>/dev/null || true' EXIT
wait_for "fakecloud" "http://127.0.0.1:$port/" 60
export FAKECLOUD_ENDPOINT="http://127.0.0.1:$port"
# One at a time: both tests make the pool in the same fakecloud.
cargo test --workspace --test all -- --ignored iam_engine:: --nocapture --test-threads 1
log "IAM alone refused every cross-tenant request of the matrix, and held each narrowed session of the platform's partition to its keys (fakecloud $FAKECLOUD_VERSION, strict)"
