#!/usr/bin/env bash
# Starts and stops the local AWS stack: DynamoDB Local (-inMemory -sharedDb), moto's STS server and a
# second moto for SQS, Secrets Manager, EventBridge and KMS, each on a free port. Sourced after
# scripts/tools.sh. `-sharedDb` matters: every tenant's STS credentials carry a different access
# key, and without it DynamoDB Local keeps one database per key.
# moto listens on 127.0.0.1 unless STACK_HOST says otherwise (scripts/sam-local.sh sets 0.0.0.0: its
# function containers reach moto through the Docker bridge); DynamoDB Local listens on every interface.

STACK_PIDS=()
STACK_LOGS="${STACK_LOGS:-$ROOT/target/stack-logs}"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_for() { # name url seconds
  local name=$1 url=$2 deadline=$((SECONDS + $3))
  until curl -s -o /dev/null "$url"; do
    [ $SECONDS -lt $deadline ] || die "$name did not answer at $url within $3 s (log: $STACK_LOGS)"
    sleep 0.2
  done
}

stop_stack() {
  local pid
  for pid in "${STACK_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${STACK_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  STACK_PIDS=()
}

# After a failure, says whether the stack was still up and, if a server had died, what it last
# logged and what the kernel said (an OOM kill shows there): a CI run that lost DynamoDB Local
# part-way once failed every later test with "connection refused" and nothing else to go on.
report_stack() {
  local pid alive=()
  for pid in "${STACK_PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then alive+=("$pid"); fi
  done
  [ ${#STACK_PIDS[@]} -gt 0 ] || return 0
  if [ ${#alive[@]} -eq ${#STACK_PIDS[@]} ]; then
    log "the local stack was still up (pids ${STACK_PIDS[*]})"
    return 0
  fi
  log "a local stack server had exited (up: ${alive[*]:-none} of ${STACK_PIDS[*]}); its logs' last lines:"
  local file
  for file in "$STACK_LOGS"/dynamodb.log "$STACK_LOGS"/moto-sts.log "$STACK_LOGS"/moto.log "$STACK_LOGS"/hs_err_pid*.log; do
    [ -f "$file" ] || continue
    log "--- $file"
    tail -n 20 "$file" >&2
  done
  log "--- memory now"
  free -m >&2 || true
  log "--- the kernel's last words on processes killed or out of memory"
  dmesg 2>/dev/null | grep -iE "out of memory|oom|killed process" | tail -n 10 >&2 || true
}

start_stack() {
  mkdir -p "$STACK_LOGS"
  local ddb_port sts_port services_port jar_dir
  ddb_port=$(free_port)
  sts_port=$(free_port)
  services_port=$(free_port)
  while [ "$services_port" = "$sts_port" ] || [ "$services_port" = "$ddb_port" ]; do services_port=$(free_port); done
  jar_dir=$(dirname "$DYNAMODB_JAR")
  # Started from the log directory: DynamoDB Local writes dynamodb-local-metadata.json into its
  # working directory, which must not be the checkout (no test run may change the tree).
  (cd "$STACK_LOGS" && exec java -Djava.library.path="$jar_dir/DynamoDBLocal_lib" -jar "$DYNAMODB_JAR" \
    -inMemory -sharedDb -disableTelemetry -port "$ddb_port" >"$STACK_LOGS/dynamodb.log" 2>&1) &
  STACK_PIDS+=($!)
  # Two moto servers: STS alone on one, SQS, Secrets Manager, EventBridge and KMS on the other.
  # moto keeps every object it ever made (every SQS message of the run included) and its
  # /moto-api/data.json, which the tests read for STS's recorded session policies, serialises them
  # all: on one server that answer grew to 40 MB and seconds of moto's single interpreter by the end
  # of a run, stalling the AssumeRole and SQS calls of the tests beside it. STS on its own keeps it
  # small and keeps the lanes' SQS traffic from slowing credential vending.
  # Each runs under an address-space limit: a request that makes it grow without bound fails with
  # MemoryError (a 500 to that request, naming the test), instead of moto taking the machine's
  # memory until the kernel kills the stack (seen once in CI: moto at 24 GB, DynamoDB Local gone).
  # moto idles at about 160 MB of address space, and its threads and arenas reserve a few GB at most.
  (ulimit -v "${MOTO_MAX_KB:-8388608}" && exec "$TOOLS/venv/bin/moto_server" -H "${STACK_HOST:-127.0.0.1}" \
    -p "$sts_port" >"$STACK_LOGS/moto-sts.log" 2>&1) &
  STACK_PIDS+=($!)
  (ulimit -v "${MOTO_MAX_KB:-8388608}" && exec "$TOOLS/venv/bin/moto_server" -H "${STACK_HOST:-127.0.0.1}" \
    -p "$services_port" >"$STACK_LOGS/moto.log" 2>&1) &
  STACK_PIDS+=($!)

  # Static, fake credentials for the functions' own identity; tenants get theirs from moto's STS.
  export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=us-east-1
  export AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
  export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$ddb_port"
  export AWS_ENDPOINT_URL_STS="http://127.0.0.1:$sts_port"
  # The other moto serves SQS: the import queue and the lanes' queue.
  export AWS_ENDPOINT_URL_SQS="http://127.0.0.1:$services_port"
  unset AWS_PROFILE AWS_SESSION_TOKEN
  # ... and Secrets Manager: the signing keys; and EventBridge: the lifecycle event bus.
  export AWS_ENDPOINT_URL_SECRETS_MANAGER="http://127.0.0.1:$services_port"
  export AWS_ENDPOINT_URL_EVENTBRIDGE="http://127.0.0.1:$services_port"
  # moto's KMS: the platform key that wraps each tenant's key (tenant_keys_for).
  export AWS_ENDPOINT_URL_KMS="http://127.0.0.1:$services_port"
  # Pagination cursors and import messages are signed (HMAC-SHA-256); a local run generates its own
  # key. Functions read it from a secret on moto's Secrets Manager (SIGNING_KEYS_SECRET_ARN), as in
  # AWS, where the template's secret holds it; scripts that sign test events read
  # CURSOR_SIGNING_KEY, which holds the same key.
  CURSOR_SIGNING_KEY="${CURSOR_SIGNING_KEY:-$(python3 -c 'import secrets; print(secrets.token_hex(32))')}"
  export CURSOR_SIGNING_KEY

  wait_for "moto STS" "$AWS_ENDPOINT_URL_STS/moto-api/" 30
  wait_for "moto SQS, Secrets Manager, EventBridge and KMS" "$AWS_ENDPOINT_URL_SQS/moto-api/" 30
  wait_for "DynamoDB Local" "$AWS_ENDPOINT_URL_DYNAMODB" 60
  SIGNING_KEYS_SECRET_ARN=$(signing_keys_secret "pooltable-local-signing-keys-$$")
  export SIGNING_KEYS_SECRET_ARN
  # The bus publish-lifecycle-events puts on (template.yaml's LifecycleEventBus).
  EVENT_BUS_NAME="pooltable-local-lifecycle-$$"
  "$TOOLS/venv/bin/python" -c 'import boto3, os, sys; boto3.client("events", endpoint_url=os.environ["AWS_ENDPOINT_URL_EVENTBRIDGE"]).create_event_bus(Name=sys.argv[1])' "$EVENT_BUS_NAME"
  export EVENT_BUS_NAME
  # The SaaS Builder Toolkit control plane's bus control-plane-events answers on (the template's
  # ControlPlaneBusArn): a second bus, as in AWS, where the control plane owns it.
  CONTROL_PLANE_EVENT_BUS="pooltable-local-control-plane-$$"
  "$TOOLS/venv/bin/python" -c 'import boto3, os, sys; boto3.client("events", endpoint_url=os.environ["AWS_ENDPOINT_URL_EVENTBRIDGE"]).create_event_bus(Name=sys.argv[1])' "$CONTROL_PLANE_EVENT_BUS"
  export CONTROL_PLANE_EVENT_BUS
  # The operators' tenant, which no control plane request may suspend or offboard (the template
  # demands one with ControlPlane=sbt; control-plane-events does not start without it).
  export CONTROL_PLANE_PROTECTED_TENANTS="${CONTROL_PLANE_PROTECTED_TENANTS:-platform}"
  # The role an operator path's sessions assume (moto evaluates no IAM; the name shows in its log).
  export TENANT_OPERATOR_ROLE_ARN="arn:aws:iam::123456789012:role/pooltable-local-tenant-operator"
  log "DynamoDB Local on $AWS_ENDPOINT_URL_DYNAMODB, moto STS on $AWS_ENDPOINT_URL_STS, moto SQS, Secrets Manager, EventBridge and KMS on $AWS_ENDPOINT_URL_SQS"
}

# A key per tenant for the functions on table TABLE (shared::store::keys): the key table TABLE-keys
# (template.yaml's TenantKeysTable) and a platform KMS key on moto, exported as TENANT_KEYS_TABLE and
# TENANT_KEY_ID.
tenant_keys_for() {
  "$ROOT/target/debug/pooltable" create-table "$1-keys" --keys >/dev/null
  TENANT_KEYS_TABLE="$1-keys"
  TENANT_KEY_ID=$("$TOOLS/venv/bin/python" -c 'import boto3, os, sys; print(boto3.client("kms", endpoint_url=os.environ["AWS_ENDPOINT_URL_KMS"]).create_key(Description=sys.argv[1])["KeyMetadata"]["Arn"])' "pooltable tenant keys of $1")
  export TENANT_KEYS_TABLE TENANT_KEY_ID
}

# Creates the signing keys' secret NAME on the local Secrets Manager (moto), holding this run's
# CURSOR_SIGNING_KEY as the current key, and prints its ARN.
signing_keys_secret() {
  "$TOOLS/venv/bin/python" - "$1" <<'PY'
import json, os, sys
import boto3
client = boto3.client("secretsmanager", endpoint_url=os.environ["AWS_ENDPOINT_URL_SECRETS_MANAGER"])
keys = {"current": os.environ["CURSOR_SIGNING_KEY"], "previous": "", "next": ""}
print(client.create_secret(Name=sys.argv[1], SecretString=json.dumps(keys))["ARN"])
PY
}
