#!/usr/bin/env bash
# Every function binary, end to end as a process answering a Lambda invocation: `cargo lambda watch`
# emulates the Runtime API, and `cargo lambda invoke` sends the function its events/<bin>.json.
# Expects the local stack's environment (scripts/test.sh starts it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
source "$ROOT/scripts/stack.sh"
source "$ROOT/scripts/expected.sh"
cd "$ROOT"
: "${AWS_ENDPOINT_URL_DYNAMODB:?start the local stack first (scripts/test.sh does)}"

table="pooltable-e2e-$$"
cargo run -q --bin pooltable -- create-table "$table" >/dev/null
tenant_keys_for "$table"  # every function runs with a key per tenant, as deployed
port=$(free_port)
export TABLE_NAME="$table" TENANT_ROLE_ARN="arn:aws:iam::123456789012:role/pooltable-local-tenant-access"
IMPORT_QUEUE_URL=$("$TOOLS/venv/bin/python" scripts/import_queue.py create "$table-imports")
export IMPORT_QUEUE_URL
unset POOLTABLE_DEV_UNSIGNED_JWT  # sample events carry real authorizer claims
mkdir -p "$STACK_LOGS"
# --ignore-changes: a scripted run never restarts a function because a file changed (a restart
# kills the instance answering, and the request then hangs for about 27 s).
setsid cargo lambda watch -P "$port" --ignore-changes >"$STACK_LOGS/e2e-watch.log" 2>&1 &
watch_pid=$!
trap 'kill -- -$watch_pid 2>/dev/null; wait $watch_pid 2>/dev/null || true' EXIT
wait_for "cargo lambda watch" "http://127.0.0.1:$port/" 60

check_expectations_cover_binaries

# One invocation, bounded: a function's first call builds it (seconds), so a call still unanswered
# after INVOKE_SECONDS is a hang of the emulator, not a slow build. It is reported with the end of
# the emulator's log and made once more (the only calls so repeated are ones that never answered).
INVOKE_SECONDS="${INVOKE_SECONDS:-240}"
invoke() {
  local bin=$1 event=$2 out rc
  for attempt in 1 2; do
    rc=0
    out=$(timeout "$INVOKE_SECONDS" cargo lambda invoke "$bin" -P "$port" --data-file "$event" 2>&1) || rc=$?
    [ "$rc" = 124 ] || break
    log "e2e $bin: no answer in ${INVOKE_SECONDS}s (attempt $attempt); the emulator's log ends:" >&2
    tail -n 30 "$STACK_LOGS/e2e-watch.log" | cut -c1-300 >&2
  done
  printf '%s' "$out"
}

failed=0
for line in "${EXPECTED[@]}"; do
  read -r bin want <<<"$line"
  out=$(invoke "$bin" "$(event_file "$bin" "$STACK_LOGS" "$table")")
  expect_status "e2e $bin" "$want" "$out" || failed=$((failed + 1))
done
passed=$(( ${#EXPECTED[@]} - failed ))
echo "e2e: $passed passed, $failed failed"
[ "$failed" = 0 ]

# The queue path as the dev command runs it: the poller delivers create-import's real messages to
# the consumer through cargo lambda watch; the consumer event above already wrote item 0, so its
# redelivery writes nothing, and get-import then counts both items written, once each.
timeout 120 "$TOOLS/venv/bin/python" scripts/import_queue.py poll "$IMPORT_QUEUE_URL" \
  "http://127.0.0.1:$port/2015-03-31/functions/import-consumer/invocations" --until-empty
out=$(invoke get-import events/get-import.json)
written=$(python3 -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(a["body"]); print(b["written"], b["failed"], b["status"])' "$out" 2>/dev/null || echo "no answer: $out")
[ "$written" = "2 0 complete" ] || die "e2e imports: expected 2 written, 0 failed, complete; got $written"
log "e2e imports: the poller delivered the queue to the consumer; 2 written, 0 failed"
