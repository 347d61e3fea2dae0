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
cargo run -q -p devtools --bin pooltable -- create-table "$table" >/dev/null
port=$(free_port)
export TABLE_NAME="$table" TENANT_ROLE_ARN="arn:aws:iam::123456789012:role/pooltable-local-tenant-access"
unset POOLTABLE_DEV_UNSIGNED_JWT  # sample events carry real authorizer claims
mkdir -p "$STACK_LOGS"
# --ignore-changes: a scripted run never restarts a function because a file changed (a restart
# kills the instance answering, and the request then hangs for about 27 s).
setsid cargo lambda watch -P "$port" --ignore-changes >"$STACK_LOGS/e2e-watch.log" 2>&1 &
watch_pid=$!
trap 'kill -- -$watch_pid 2>/dev/null; wait $watch_pid 2>/dev/null || true' EXIT
wait_for "cargo lambda watch" "http://127.0.0.1:$port/" 60

check_expectations_cover_binaries

failed=0
for line in "${EXPECTED[@]}"; do
  read -r bin want <<<"$line"
  out=$(cargo lambda invoke "$bin" -P "$port" --data-file "events/$bin.json" 2>&1) || true
  expect_status "e2e $bin" "$want" "$out" || failed=$((failed + 1))
done
passed=$(( ${#EXPECTED[@]} - failed ))
echo "e2e: $passed passed, $failed failed"
[ "$failed" = 0 ]
