#!/usr/bin/env bash
# Every function binary, end to end as a process answering a Lambda invocation: `cargo lambda watch`
# emulates the Runtime API, and `cargo lambda invoke` sends the function its events/<bin>.json.
# Expects the local stack's environment (scripts/test.sh starts it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
source "$ROOT/scripts/stack.sh"
cd "$ROOT"
: "${AWS_ENDPOINT_URL_DYNAMODB:?start the local stack first (scripts/test.sh does)}"

# Expected status per function for its sample event, run in this order on an empty table: tenant
# acme is onboarded first (sharded routes need its record); the product and employee the events name
# are created, read, listed, then deleted; the session the events name does not exist, except the
# one create-session makes for cust-42 (so its children list is 404 too).
EXPECTED=(
  "onboard-tenant 201"
  "get-tenant 200"
  "put-product 201"
  "get-product 200"
  "query-tenant-products 200"
  "delete-product 204"
  "put-department 201"
  "put-employee 201"
  "get-employee 200"
  "get-department 200"
  "list-employees 200"
  "list-departments 200"
  "list-department-employees 200"
  "delete-employee 204"
  "put-user 201"
  "get-user 200"
  "find-user-by-email 200"
  "create-order 201"
  "get-order 200"
  "list-tenant-orders 200"
  "create-transfer-code 201"
  "redeem-transfer-code 404"
  "put-integration-token 200"
  "get-integration-token 200"
  "get-usage 200"
  "create-session 201"
  "get-session-by-session-id 404"
  "expire-session 404"
  "get-child-sessions-by-session-id 404"
  "get-session-by-child-session-id 404"
  "get-last-login-time-by-customer-id 200"
  "get-session-id-by-customer-id 404"
  "get-sessions-by-customer-id 200"
)

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

# Every binary must have an expectation, and every expectation a binary and an event.
bins=$(ls functions/*/src/bin/*.rs | xargs -n1 basename | sed 's/\.rs$//' | sort)
listed=$(printf '%s\n' "${EXPECTED[@]}" | cut -d' ' -f1 | sort)
[ "$bins" = "$listed" ] || die "scripts/e2e.sh EXPECTED does not list exactly the binaries: $(echo $bins)"

failed=0
for line in "${EXPECTED[@]}"; do
  read -r bin want <<<"$line"
  [ -f "events/$bin.json" ] || die "events/$bin.json is missing"
  out=$(cargo lambda invoke "$bin" -P "$port" --data-file "events/$bin.json" 2>&1) || true
  got=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["statusCode"])' "$out" 2>/dev/null || echo "no-response")
  if [ "$got" = "$want" ]; then
    log "e2e $bin: $got"
  else
    log "e2e $bin: expected $want, got $got: $out"
    failed=$((failed + 1))
  fi
done
passed=$(( ${#EXPECTED[@]} - failed ))
echo "e2e: $passed passed, $failed failed"
[ "$failed" = 0 ]
