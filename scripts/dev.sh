#!/usr/bin/env bash
# The whole API locally: DynamoDB Local + moto STS, the table from template.yaml, two seeded demo
# tenants, and every route served by `cargo lambda watch` on http://localhost:${PORT:-9000}.
# Local auth: the functions accept an unsigned development JWT (POOLTABLE_DEV_UNSIGNED_JWT=1, set
# only here). Ctrl-C stops everything.
# Hot reload is on: an edit to the code restarts the functions. Scripted runs (schemathesis.sh, and
# anything else that drives this stack with requests) set POOLTABLE_NO_RELOAD=1, which starts watch
# with --ignore-changes: a restart kills every running function instance, and a request in flight
# then hangs for about 27 s, so no file written during a run (a test tool's cache, a log) may
# restart anything.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
source "$ROOT/scripts/stack.sh"
source "$ROOT/scripts/demo.sh"
cd "$ROOT"
PORT="${PORT:-9000}"

require cargo "the Rust toolchain"
require curl "health checks and the demo seed"
ensure_dynamodb_local
ensure_py_tools

watch_pid=""
poller_pid=""
lane_poller_pid=""
driver_pid=""
cleanup() {
  trap - INT TERM HUP EXIT
  trap '' PIPE  # the terminal may be gone already; stopping must not die writing to it
  if [ -n "$driver_pid" ]; then
    kill "$driver_pid" 2>/dev/null || true
  fi
  if [ -n "$poller_pid" ]; then
    kill "$poller_pid" 2>/dev/null || true
  fi
  if [ -n "$lane_poller_pid" ]; then
    kill "$lane_poller_pid" 2>/dev/null || true
  fi
  if [ -n "$watch_pid" ]; then
    kill -- -"$watch_pid" 2>/dev/null || true
    wait "$watch_pid" 2>/dev/null || true
  fi
  stop_stack
  log "stopped"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

curl -s -o /dev/null "http://127.0.0.1:$PORT/" && die "port $PORT is busy; set PORT=another"
start_stack
log "building (first run compiles the AWS SDK: a few minutes)"
cargo build --workspace --bins
export TABLE_NAME="pooltable-local"
export TENANT_ROLE_ARN="arn:aws:iam::123456789012:role/pooltable-local-tenant-access"
export POOLTABLE_DEV_UNSIGNED_JWT=1
export SESSION_TTL_SECONDS="${SESSION_TTL_SECONDS:-3600}"
"$ROOT/target/debug/pooltable" create-table "$TABLE_NAME" >/dev/null
log "table $TABLE_NAME created from template.yaml"
tenant_keys_for "$TABLE_NAME"
log "key table $TENANT_KEYS_TABLE and the platform key $TENANT_KEY_ID (moto's KMS) made: each tenant's data is sealed under a key of its own"
# What an operator's admin commands need to reach this stack (`pooltable create-table`, `import`,
# `backfill-catalog`, `plan --usage table:…`): `source` it in another shell.
cat >"$STACK_LOGS/stack.env" <<ENV
export AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY AWS_REGION=$AWS_REGION
export AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB TABLE_NAME=$TABLE_NAME
export AWS_ENDPOINT_URL_KMS=$AWS_ENDPOINT_URL_KMS TENANT_KEYS_TABLE=$TENANT_KEYS_TABLE TENANT_KEY_ID=$TENANT_KEY_ID
ENV
# The import queue on moto's SQS; the poller below stands in for the event source mapping.
IMPORT_QUEUE_URL=$("$TOOLS/venv/bin/python" scripts/import_queue.py create pooltable-local-imports)
export IMPORT_QUEUE_URL
# The lane queue (an offboarding's lanes, docs/lifecycle.md "Lanes"), with its own poller below.
LANE_QUEUE_URL=$("$TOOLS/venv/bin/python" scripts/import_queue.py create pooltable-local-lanes)
export LANE_QUEUE_URL

watch_flags=()
if [ "${POOLTABLE_NO_RELOAD:-0}" = 1 ]; then
  watch_flags+=(--ignore-changes)
  reload_note="hot reload off: POOLTABLE_NO_RELOAD=1"
else
  reload_note="hot reload on"
fi
setsid cargo lambda watch -P "$PORT" "${watch_flags[@]}" >"$STACK_LOGS/watch.log" 2>&1 &
watch_pid=$!
wait_for "cargo lambda watch" "http://127.0.0.1:$PORT/" 120
log "API on http://localhost:$PORT, $reload_note (function logs: $STACK_LOGS/watch.log)"
"$TOOLS/venv/bin/python" scripts/import_queue.py poll "$IMPORT_QUEUE_URL" \
  "http://127.0.0.1:$PORT/2015-03-31/functions/import-consumer/invocations" >"$STACK_LOGS/import-poller.log" 2>&1 &
poller_pid=$!
log "import poller: $IMPORT_QUEUE_URL → import-consumer (log: $STACK_LOGS/import-poller.log)"
"$TOOLS/venv/bin/python" scripts/import_queue.py poll "$LANE_QUEUE_URL" \
  "http://127.0.0.1:$PORT/2015-03-31/functions/work-lanes/invocations" >"$STACK_LOGS/lane-poller.log" 2>&1 &
lane_poller_pid=$!
log "lane poller: $LANE_QUEUE_URL → work-lanes (log: $STACK_LOGS/lane-poller.log)"
# The lifecycle driver's schedule (EventBridge, every minute, in AWS): re-shardings and offboardings
# run to their end with no client calling.
( while sleep 60; do
    curl -s -o /dev/null -X POST --data-binary @events/drive-lifecycle.json \
      "http://127.0.0.1:$PORT/2015-03-31/functions/drive-lifecycle/invocations" || true
  done ) >"$STACK_LOGS/lifecycle-driver.log" 2>&1 &
driver_pid=$!
log "lifecycle driver: drive-lifecycle every 60 s"

seed_demo_tenants "http://127.0.0.1:$PORT" "$STACK_LOGS/watch.log"
check_demo_placements "$TABLE_NAME" >&2 || die "the demo tenants' placements do not hold"
cat <<MSG

pooltable is running on http://localhost:$PORT  (Ctrl-C stops everything)
Routes: see README.md (sessions, tenants, products, employees, departments).
MSG
print_demo_usage "localhost:$PORT"
echo "Admin commands (pooltable create-table, import, …) against this stack: source $STACK_LOGS/stack.env"
wait "$watch_pid"
