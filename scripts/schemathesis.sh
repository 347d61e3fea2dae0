#!/usr/bin/env bash
# The contract check: every route called through the generated client (and the operator CLI), then
# schemathesis (PyPI, pinned, in .tools/venv-schemathesis), which tests every route of
# openapi.yaml against the local API started by scripts/dev.sh, in two passes: as the seeded tenant
# `acme`, then as the operator (scope pooltable/admin, whose own tenant `platform` is onboarded
# first). Each pass runs the examples, coverage, fuzzing and stateful phases (the stateful phase
# follows the spec's links from each create to the reads and deletes of what it created) with a fixed
# seed, and fails on any failure (5xx, undocumented status, wrong content type, body that breaks the
# schema), any error (a timeout included), and any warning (scripts/schemathesis.toml: fail-on), among
# them "mostly rejected generated data", "never reached core logic" and "returned only 401/403".
# The tenant pass leaves out the operator-only routes (onboarding, changing, offboarding, exporting a
# tenant, another tenant's usage: a tenant gets 403 there; this script asserts that once for
# onboarding, and the attack matrix for each); the operator pass covers them.
#
# Before the passes it checks that a request is answered while files in the tree change, and that
# watch restarts nothing: scripted runs start watch with --ignore-changes (POOLTABLE_NO_RELOAD=1),
# since a hot reload kills every function instance and a request in flight then hangs for about 27 s.
#
# Calls go through scripts/apigw_edge.py, which hands non-UTF-8 bodies to the functions
# base64-encoded, as API Gateway does (watch answers those with its own 500 before any function runs).
# One worker: watch runs one invocation per function at a time.
# Nothing is written into the tree: reports, schemathesis' cache and hypothesis' storage go to
# target/schemathesis/.
#   ./scripts/schemathesis.sh                    # both passes, 25 examples per operation, seed 42
#   MAX_EXAMPLES=100 SEED=7 ./scripts/schemathesis.sh
#   PASSES=tenant ./scripts/schemathesis.sh      # one pass only (tenant or operator)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
source "$ROOT/scripts/stack.sh"
cd "$ROOT"
SCHEMATHESIS_VERSION="4.32.5"

if ! "$TOOLS/venv-schemathesis/bin/schemathesis" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
  log "installing schemathesis $SCHEMATHESIS_VERSION into .tools/venv-schemathesis"
  python3 -m venv "$TOOLS/venv-schemathesis"
  retry "$TOOLS/logs/pip-schemathesis.log" "pip install schemathesis" \
    "$TOOLS/venv-schemathesis/bin/pip" install --quiet --disable-pip-version-check \
    "schemathesis==$SCHEMATHESIS_VERSION"
fi

started=$SECONDS
export STACK_LOGS="$ROOT/target/stack-logs/contract"  # its own, beside a test stack's logs
OUT="$ROOT/target/schemathesis"
rm -rf "$OUT"
mkdir -p "$OUT" "$STACK_LOGS"
# Tool caches outside the tracked tree (target/ is ignored from the start), and no bytecode next to
# the hooks module.
export HYPOTHESIS_STORAGE_DIRECTORY="$OUT/hypothesis"
export SCHEMATHESIS_CACHE_DIR="$OUT/cache"
export PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$ROOT/scripts${PYTHONPATH:+:$PYTHONPATH}"
export SCHEMATHESIS_HOOKS=schemathesis_hooks

port=$(free_port)
dev_log="$STACK_LOGS/schemathesis-dev.log"
POOLTABLE_NO_RELOAD=1 PORT=$port setsid "$ROOT/scripts/dev.sh" >"$dev_log" 2>&1 &
dev_pid=$!
edge_pid=""
probe_dir=""
writer_pid=""
walk_pid=""
cleanup() {
  [ -n "$walk_pid" ] && kill "$walk_pid" 2>/dev/null
  [ -n "$writer_pid" ] && kill "$writer_pid" 2>/dev/null && wait "$writer_pid" 2>/dev/null
  [ -n "$probe_dir" ] && rm -rf "$probe_dir"
  [ -n "$edge_pid" ] && kill "$edge_pid" 2>/dev/null
  kill -TERM "$dev_pid" 2>/dev/null
  wait "$dev_pid" 2>/dev/null || true
}
trap cleanup EXIT
log "starting the local API on port $port, hot reload off (log: $dev_log)"
deadline=$((SECONDS + 1200))
until grep -q "pooltable is running" "$dev_log" 2>/dev/null; do
  kill -0 "$dev_pid" 2>/dev/null || die "scripts/dev.sh stopped; see $dev_log"
  [ $SECONDS -lt $deadline ] || die "the local API did not come up"
  sleep 1
done
grep -q "hot reload off" "$dev_log" || die "scripts/dev.sh did not turn hot reload off"
TENANT_TOKEN=$("$ROOT/target/debug/pooltable" dev-token acme)
OPERATOR_TOKEN=$("$ROOT/target/debug/pooltable" dev-token platform --operator)
edge_port=$(free_port)
python3 "$ROOT/scripts/apigw_edge.py" "$edge_port" "$port" &
edge_pid=$!
until curl -s -o /dev/null "http://127.0.0.1:$edge_port/usage"; do sleep 0.2; done
API="http://127.0.0.1:$edge_port"

status_of() { # method path token [body] -> HTTP status; gives up after 10 s (a reload hang is 27 s)
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X "$1" "$API$2" \
    -H "authorization: Bearer $3" -H 'content-type: application/json' ${4:+-d "$4"} || echo "timeout"
}

# A request is answered while files in the tree change. Under hot reload each write below restarts
# every function (measured: 11 restarts in 8 s of this probe), and a request in flight during a
# restart hangs ~27 s. The files are new and not ignored, as .hypothesis/ was when hypothesis created
# it mid-run; they are removed at the end. Requests run back to back for 8 s while a writer changes
# the tree every 0.4 s; each must be answered 200 within 10 s, and watch must start no function anew.
log "== a request is answered while files in the tree change"
watch_log="$STACK_LOGS/watch.log"
got=$(status_of GET /products/sku-1001 "$TENANT_TOKEN")  # warm: get-product is running from here on
[ "$got" = 200 ] || die "GET /products/sku-1001 answered $got before the probe"
starts_before=$(grep -c 'Running `target/debug/' "$watch_log" || true)
kills_before=$(grep -c "ForceStop" "$watch_log" || true)
probe_dir="$ROOT/reload-probe.$$"
mkdir "$probe_dir"
(
  for i in $(seq 1 20); do
    printf 'probe %s\n' "$i" >"$probe_dir/file-$i.txt"
    mkdir -p "$probe_dir/sub-$i" && printf '{}' >"$probe_dir/sub-$i/data.json"
    sleep 0.4
  done
) &
writer_pid=$!
requests=0
end=$((SECONDS + 8))
while [ $SECONDS -lt $end ]; do
  got=$(status_of GET /products/sku-1001 "$TENANT_TOKEN")
  requests=$((requests + 1))
  [ "$got" = 200 ] || die "GET /products/sku-1001 answered $got while files in the tree changed (want 200 within 10 s)"
done
wait "$writer_pid"
writer_pid=""
rm -rf "$probe_dir"
probe_dir=""
starts_after=$(grep -c 'Running `target/debug/' "$watch_log" || true)
kills_after=$(grep -c "ForceStop" "$watch_log" || true)
[ "$starts_after" = "$starts_before" ] && [ "$kills_after" = "$kills_before" ] \
  || die "watch restarted functions while the tree changed: $((starts_after - starts_before)) starts, $((kills_after - kills_before)) kills ($watch_log)"
log "$requests requests answered 200 while 20 files were written in the tree; no function was restarted"

# The operator's own tenant must be onboarded for the tenant-scoped routes to serve it.
got=$(status_of POST /tenants "$TENANT_TOKEN" '{"tenantId":"not-by-a-tenant","tier":"basic"}')
[ "$got" = 403 ] || die "POST /tenants as a tenant answered $got (want 403)"
got=$(status_of POST /tenants "$OPERATOR_TOKEN" '{"tenantId":"platform","tier":"standard","shardCount":4}')
case "$got" in 201 | 409) ;; *) die "onboarding the operator's tenant answered $got" ;; esac
# The contract check is not a quota test: both passes' tenants get the maximum custom limits, so a
# fuzzed run of large writes is never answered 429 for the capacity it spent (schemathesis would
# call the route "rate limited" and fail the pass). tests/tests/all/capacity_quota.rs tests the quota.
max_limits='{"limits":{"requestsPerSecond":100000,"capacityUnitsPerSecond":1000000}}'
for t in platform acme; do
  got=$(status_of PATCH "/tenants/$t" "$OPERATOR_TOKEN" "$max_limits")
  [ "$got" = 200 ] || die "raising tenant $t's limits for the contract check answered $got"
done

# Data for the pass's tenant that reads can find (scripts/schemathesis.toml, [dictionaries]): the
# department `eng`, a user with an order, an integration token, a root session with a child.
seed_for_pass() { # token
  local token=$1 root child dir="$OUT/seeded"
  mkdir -p "$dir"
  seed_call() { # method path body -> response body; dies unless the status is 2xx (or 409: exists)
    local body status
    body=$(curl -s --max-time 10 -w '\n%{http_code}' -X "$1" "$API$2" -H "authorization: Bearer $token" \
      -H 'content-type: application/json' -d "$3") || die "seeding $1 $2: no answer"
    status=${body##*$'\n'}
    case "$status" in 2?? | 409) printf '%s' "${body%$'\n'*}" ;; *) die "seeding $1 $2 answered $status" ;; esac
  }
  seed_call PUT /departments/eng '{"name":"Engineering"}' >/dev/null
  seed_call PUT /users/contract-user '{"name":"Contract User","email":"contract-user@example.com"}' >/dev/null
  seed_call POST /users/contract-user/orders \
    '{"orderId":"contract-order","date":"2026-01-15","amount":1,"items":[{"itemId":"l1","sku":"s","qty":1,"price":1}]}' >/dev/null
  seed_call PUT /integrations/contract-svc/token "{\"token\":\"t\",\"expiresAt\":$(($(date +%s) + 86400))}" >/dev/null
  root=$(seed_call POST /sessions '{"customerId":"contract-customer"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["sessionId"])')
  child=$(seed_call POST /sessions "{\"customerId\":\"contract-customer\",\"parentSessionId\":\"$root\"}" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["sessionId"])')
  printf '"%s"\n' "$child" >"$dir/child-session.dict"
  printf '"contract-user"\n' >"$dir/user.dict"
  printf '"contract-order"\n' >"$dir/order.dict"
  printf '"contract-svc"\n' >"$dir/service.dict"
}

# The spec the passes read: openapi.yaml without onboarding's `kmsKeyArn` (BYOK). A key ARN the
# generators make names no KMS key of the stack, which KMS refuses (400, as it should), so most
# bodies setting it would be rejected for that, and the run would fail as a schema mismatch. BYOK
# is tested in tests/tests/all/tenant_keys.rs, with keys made on moto's KMS.
CONTRACT_SPEC="$OUT/openapi-contract.yaml"
"$TOOLS/venv/bin/python" - openapi.yaml "$CONTRACT_SPEC" <<'PY'
import sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))
for branch in spec["components"]["schemas"]["OnboardTenant"]["oneOf"]:
    branch["properties"].pop("kmsKeyArn", None)
yaml.safe_dump(spec, open(sys.argv[2], "w"), sort_keys=False)
PY

run_pass() { # name token [extra schemathesis args...]
  local name=$1 token=$2 t0=$SECONDS rc=0
  shift 2
  seed_for_pass "$token"
  log "== schemathesis, pass '$name' ($MAX_EXAMPLES examples per operation, seed $SEED)"
  "$TOOLS/venv-schemathesis/bin/schemathesis" --config-file "$ROOT/scripts/schemathesis.toml" \
    run "$CONTRACT_SPEC" \
    --url "$API" \
    --header "Authorization: Bearer $token" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --max-examples "$MAX_EXAMPLES" \
    --workers 1 \
    --seed "$SEED" \
    --suppress-health-check all \
    --request-timeout 15 \
    --generation-codec utf-8 \
    --generation-database none \
    --no-color \
    --report junit --report-dir "$OUT/$name" \
    "$@" 2>&1 | tee "$OUT/$name.log" || rc=$?
  [ "$rc" = 0 ] || die "schemathesis pass '$name' failed (exit $rc; log: $OUT/$name.log)"
  # fail-on in scripts/schemathesis.toml fails the run on a warning; this is the second guard.
  if grep -Eq "mostly rejected|never reach|returned only|Schema validation mismatch|Missing test data|Missing authentication" "$OUT/$name.log"; then
    die "schemathesis pass '$name' reported a warning (log: $OUT/$name.log)"
  fi
  log "pass '$name': clean in $((SECONDS - t0)) s"
}

# Every route through the typed client generated from openapi.yaml (pooltable-client), and the
# operator CLI on it (`pooltable tenants …`), against the same API (tests/tests/all/every_route.rs;
# the test binary is the suite's, built already).
log "== every route through the generated client, and the operator CLI"
# The operator's walks through every operation with `--wait` (tests/tests/all/cli_walk.rs: two
# tenants, side by side) run in the background of the rest: its waits are the operations' real settle delays (about 70 s each),
# not work. It needs the stack's admin environment for `pooltable create-table` and `import`.
# The test binary runs directly, not through cargo, so that it holds no lock of the build while
# the tests below are built and run.
walk_log="$OUT/cli-walk.log"
tests_bin=$(cargo test --workspace --test all --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -n 1)
[ -x "$tests_bin" ] || die "cannot find the integration tests' binary"
( set -a; source "$STACK_LOGS/stack.env"; set +a
  POOLTABLE_API_URL="http://127.0.0.1:$port" exec "$tests_bin" --ignored --test-threads 2 \
    cli_walk:: ) >"$walk_log" 2>&1 &
walk_pid=$!
POOLTABLE_API_URL="http://127.0.0.1:$port" cargo test --workspace --test all -- --ignored every_route:: \
  || die "the generated client's end-to-end test failed"

MAX_EXAMPLES="${MAX_EXAMPLES:-25}"
SEED="${SEED:-42}"
# The routes only an operator may call (routes.yaml, caller: operator): the tenant pass leaves them out.
# @generated begin: `pooltable gen` writes this line from routes.yaml
OPERATOR_ROUTES=(onboard-tenant update-tenant export-tenant offboard-tenant restore-tenant erase-tenant-user get-tenant-usage)
# @generated end
# erase-user and erase-tenant-user are left out of both: they would erase the seeded user, whose order
# the other operations read (they then only meet 404s, which fails the run as "missing test data").
# Their contract is tested in tests/tests/all/erasures.rs, and through the client in every_route.rs.
for pass in ${PASSES:-tenant operator}; do
  case "$pass" in
    tenant) run_pass tenant "$TENANT_TOKEN" --exclude-operation-id erase-user \
      $(printf -- '--exclude-operation-id %s ' "${OPERATOR_ROUTES[@]}") ;;
    # restore-tenant is left out: generated bodies are mostly refused (a source table must be a
    # restored copy named after the pool), which fails the run as a validation mismatch. Its
    # contract is tested in tests/tests/all/restore.rs, and through the client in every_route.rs.
    operator) run_pass operator "$OPERATOR_TOKEN" --exclude-operation-id restore-tenant \
      --exclude-operation-id erase-user --exclude-operation-id erase-tenant-user ;;
    *) die "unknown pass '$pass' (tenant, operator)" ;;
  esac
done
log "waiting for the CLI's walk (log: $walk_log)"
if ! wait "$walk_pid"; then
  cat "$walk_log" >&2
  walk_pid=""
  die "the operator CLI's walk through every operation failed"
fi
walk_pid=""
log "the CLI's walk passed"
log "contract check passed in $((SECONDS - started)) s (stack start included)"
