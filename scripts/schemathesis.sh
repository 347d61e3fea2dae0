#!/usr/bin/env bash
# Property-based API test: schemathesis (PyPI, in .tools/venv-schemathesis) fuzzes every route of
# openapi.yaml against the local API started by scripts/dev.sh, as the seeded tenant `acme`, and fails
# on any 5xx or any response that breaks the schema (status, content type, body). It calls through
# scripts/apigw_edge.py, which hands non-UTF-8 bodies to the functions base64-encoded, as API Gateway
# does (watch answers those with its own 500 before any function runs). One worker: watch runs one
# invocation per function at a time, and hypothesis's lambda introspection is not thread-safe on 3.11.
#   ./scripts/schemathesis.sh              # default: 25 examples per operation
#   MAX_EXAMPLES=200 ./scripts/schemathesis.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
source "$ROOT/scripts/stack.sh"
cd "$ROOT"

if [ ! -x "$TOOLS/venv-schemathesis/bin/schemathesis" ]; then
  log "installing schemathesis into .tools/venv-schemathesis"
  python3 -m venv "$TOOLS/venv-schemathesis"
  "$TOOLS/venv-schemathesis/bin/pip" install --quiet --disable-pip-version-check schemathesis \
    || die "pip install schemathesis failed"
fi

port=$(free_port)
mkdir -p "$STACK_LOGS"
PORT=$port setsid "$ROOT/scripts/dev.sh" >"$STACK_LOGS/schemathesis-dev.log" 2>&1 &
dev_pid=$!
trap 'kill -TERM "$dev_pid" 2>/dev/null; wait "$dev_pid" 2>/dev/null || true' EXIT
log "starting the local API on port $port (log: $STACK_LOGS/schemathesis-dev.log)"
deadline=$((SECONDS + 900))
until grep -q "pooltable is running" "$STACK_LOGS/schemathesis-dev.log" 2>/dev/null; do
  kill -0 "$dev_pid" 2>/dev/null || die "scripts/dev.sh stopped; see $STACK_LOGS/schemathesis-dev.log"
  [ $SECONDS -lt $deadline ] || die "the local API did not come up"
  sleep 1
done
token=$("$ROOT/target/debug/pooltable" dev-token acme)
edge_port=$(free_port)
python3 "$ROOT/scripts/apigw_edge.py" "$edge_port" "$port" &
edge_pid=$!
trap 'kill "$edge_pid" 2>/dev/null; kill -TERM "$dev_pid" 2>/dev/null; wait "$dev_pid" 2>/dev/null || true' EXIT
until curl -s -o /dev/null "http://127.0.0.1:$edge_port/usage"; do sleep 0.2; done

"$TOOLS/venv-schemathesis/bin/schemathesis" run openapi.yaml \
  --url "http://127.0.0.1:$edge_port" \
  --header "Authorization: Bearer $token" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
  --max-examples "${MAX_EXAMPLES:-25}" \
  --workers 1 \
  --seed "${SEED:-42}" \
  --suppress-health-check all \
  --request-timeout 30 \
  --generation-codec utf-8
