#!/usr/bin/env bash
# pooltable under `sam local`, offline, against the local stack (DynamoDB Local + moto).
#
#   scripts/sam-local.sh invoke   `sam local invoke` runs every function once with its events/<bin>.json;
#                                 each must answer its documented status (scripts/expected.sh)
#   scripts/sam-local.sh api      `sam local start-api` on http://localhost:${PORT:-3000}, two seeded
#                                 tenants, the curl examples printed; Ctrl-C stops everything
#   scripts/sam-local.sh check    both, non-interactively: invoke, then start-api runs the curl
#                                 examples for both tenants and checks them (scripts/test.sh runs this)
#
# What it prepares, idempotently (as root; it fails with a clear message where it cannot):
# - a Docker engine: Debian's docker.io, dockerd started here (and stopped at exit) unless one answers;
# - the base image SAM runs functions on, public.ecr.aws/lambda/provided:al2023-<arch>: pulled when a
#   registry is reachable, otherwise a stand-in built from Debian's libc6, libgcc-s1 and busybox-static
#   (what a Rust bootstrap and SAM's own image build need), loaded with `docker load`;
# - the bootstraps: SAM_LOCAL_ARCH=host (the default) runs the machine's own architecture with the
#   shared debug build, so no second compile of the SDK; SAM_LOCAL_ARCH=arm64 prepares the deployed
#   architecture's release bootstraps (cargo lambda build --release --arm64, about 25 minutes cold),
#   under qemu-user-static through binfmt_misc when the machine is not arm64 (not working yet under
#   `sam local invoke` on x86_64: see README.md);
# - target/sam-local/template-<arch>.yaml: template.yaml with each function's CodeUri pointed at its
#   bootstrap and the architecture set. It also declares POOLTABLE_DEV_UNSIGNED_JWT (off), because
#   `sam local --env-vars` sets only variables the template declares; the env file turns it on for
#   start-api, where SAM does not evaluate the HTTP API's JWT authorizer. template.yaml never names it.
# Functions reach the stack through a network of the script's own (docker network create, with a
# subnet and gateway chosen here and passed to SAM as --docker-network), never through the default
# bridge, whose gateway Docker leaves unset on an engine's first start on a machine. The template's
# LocalDynamoDbEndpoint and LocalStsEndpoint parameters (empty, so absent, in a deployment) name that
# gateway, set with --parameter-overrides. What the script creates (the network, and the engine when
# none answered) it removes when it ends.
#
# An engine the script starts itself keeps its state under target/sam-local/docker, so a machine's own
# Docker state is never touched, and every such start is a first start, as on a new machine: the
# leftover docker0 link (when no dockerd runs) and the engine's network store are removed before it.
# The test command therefore checks the first-start case on every run where no engine was running.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
source "$ROOT/scripts/stack.sh"
source "$ROOT/scripts/expected.sh"
source "$ROOT/scripts/demo.sh"
cd "$ROOT"
export SAM_CLI_TELEMETRY=0
# ip, dockerd and iptables live in the sbin folders, which `env -i` or a user's PATH may leave out.
export PATH="$PATH:/usr/sbin:/sbin"

MODE="${1:-}"
case "$MODE" in
  invoke | api | check) ;;
  *) die "usage: scripts/sam-local.sh invoke|api|check" ;;
esac
WORK="$ROOT/target/sam-local"
STACK_LOGS="$ROOT/target/stack-logs"
mkdir -p "$WORK" "$STACK_LOGS"

case "$(uname -m)" in
  x86_64) HOST_ARCH=x86_64 ;;
  aarch64 | arm64) HOST_ARCH=arm64 ;;
  *) die "unsupported machine architecture $(uname -m)" ;;
esac
case "${SAM_LOCAL_ARCH:-host}" in
  host) ARCH=$HOST_ARCH ;;
  arm64 | x86_64) ARCH=$SAM_LOCAL_ARCH ;;
  *) die "SAM_LOCAL_ARCH must be host, arm64 or x86_64" ;;
esac
declare -A DEBIAN_ARCH=([x86_64]=amd64 [arm64]=arm64)
BASE_IMAGE="public.ecr.aws/lambda/provided:al2023-$ARCH"

DOCKERD_PID=""
API_PID=""
NETWORK=""
cleanup() {
  trap - INT TERM HUP EXIT
  trap '' PIPE
  if [ -n "$API_PID" ]; then
    kill -- -"$API_PID" 2>/dev/null || true
    wait "$API_PID" 2>/dev/null || true
  fi
  # SAM removes its containers as it stops; any it could not are removed here.
  if docker info >/dev/null 2>&1; then
    docker ps -aq --filter "ancestor=public.ecr.aws/lambda/provided:rapid-$ARCH" | xargs -r docker rm -f >/dev/null 2>&1 || true
    if [ -n "$NETWORK" ]; then
      docker ps -aq --filter "network=$NETWORK" | xargs -r docker rm -f >/dev/null 2>&1 || true
      docker network rm "$NETWORK" >/dev/null 2>&1 || log "could not remove the Docker network $NETWORK"
    fi
  fi
  stop_stack
  if [ -n "$DOCKERD_PID" ]; then
    kill "$DOCKERD_PID" 2>/dev/null || true
    wait "$DOCKERD_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

need_root() { # what
  [ "$(id -u)" = 0 ] || die "sam local needs $1, and preparing it needs root; run as root, or prepare it yourself (see README.md, 'sam local')"
}

APT_UPDATED=0
apt_install() { # packages...
  need_root "the Debian packages $*"
  command -v apt-get >/dev/null || die "sam local needs $*, and this machine has no apt-get to install them"
  log "installing $* (Debian packages)"
  if [ "$APT_UPDATED" = 0 ]; then
    retry "$STACK_LOGS/apt-update.log" "apt-get update" apt-get update -qq
    APT_UPDATED=1
  fi
  retry "$STACK_LOGS/apt.log" "apt-get install $*" \
    env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

DOCKER_DATA="$WORK/docker"
ensure_docker_engine() {
  command -v docker >/dev/null || apt_install docker.io
  docker info >/dev/null 2>&1 && return 0
  need_root "a Docker engine"
  command -v dockerd >/dev/null || apt_install docker.io
  require ip "Docker's bridge networks (Debian's iproute2)"
  require pgrep "finding a dockerd that does not answer (Debian's procps)"
  if pgrep -x dockerd >/dev/null 2>&1; then
    die "a dockerd runs but does not answer on ${DOCKER_HOST:-the default socket}; stop it or set DOCKER_HOST"
  fi
  # A first start, as on a new machine (issue: the default bridge then has no gateway). Nothing runs
  # on docker0 without a dockerd, and the network store is this script's own engine's.
  if ip link show docker0 >/dev/null 2>&1; then
    ip link delete docker0 || die "cannot delete the leftover docker0 link (a first start needs none)"
  fi
  rm -f "$DOCKER_DATA/network/files/local-kv.db"
  mkdir -p "$DOCKER_DATA"
  log "starting dockerd, state under $DOCKER_DATA (log: $STACK_LOGS/dockerd.log)"
  "$(command -v dockerd)" --data-root "$DOCKER_DATA" \
    >"$STACK_LOGS/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  local deadline=$((SECONDS + 60))
  until docker info >/dev/null 2>&1; do
    kill -0 "$DOCKERD_PID" 2>/dev/null \
      || die "dockerd stopped: this machine cannot run a container engine (see $STACK_LOGS/dockerd.log)"
    [ $SECONDS -lt $deadline ] || die "dockerd did not answer within 60 s (see $STACK_LOGS/dockerd.log)"
    sleep 0.5
  done
}

# The network the function containers join (SAM's --docker-network): a bridge with a /24 chosen here
# that overlaps no route, address or Docker network of this machine, and its .1 as the gateway, which
# is the host's address on that bridge. Networks left by an earlier run that was killed are removed.
ensure_network() {
  local name stale subnet gateway
  for name in $(docker network ls -q --filter label=pooltable.sam-local); do
    stale=$(docker network inspect -f '{{index .Labels "pooltable.sam-local"}}' "$name")
    kill -0 "$stale" 2>/dev/null || docker network rm "$name" >/dev/null 2>&1 || true
  done
  subnet=$( { ip -4 -o route show; ip -4 -o addr show;
              docker network ls -q | xargs -r docker network inspect -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}'; } |
    python3 -c '
import ipaddress, re, sys
used = [ipaddress.ip_network(m, strict=False) for m in re.findall(r"\b\d+\.\d+\.\d+\.\d+/\d+\b", sys.stdin.read())]
for third in range(200, 256):
    candidate = ipaddress.ip_network(f"172.29.{third}.0/24")
    if not any(candidate.overlaps(u) for u in used if u.prefixlen > 0):
        print(candidate); break
') || true
  [ -n "$subnet" ] || die "no free /24 in 172.29.200.0-172.29.255.0 for the sam local network (every one overlaps a route or a Docker network)"
  gateway="${subnet%.0/24}.1"
  NETWORK="pooltable-sam-$$"
  docker network create --driver bridge --subnet "$subnet" --gateway "$gateway" \
    --label "pooltable.sam-local=$$" "$NETWORK" >/dev/null \
    || die "docker network create $NETWORK ($subnet) failed"
  [ "$(docker network inspect -f '{{(index .IPAM.Config 0).Gateway}}' "$NETWORK")" = "$gateway" ] \
    || die "the Docker network $NETWORK did not take the gateway $gateway"
  local deadline=$((SECONDS + 10))
  until ip -4 -o addr show | grep -q " $gateway/"; do
    [ $SECONDS -lt $deadline ] || die "no interface of this machine holds $gateway, the gateway of $NETWORK"
    sleep 0.2
  done
  NETWORK_GATEWAY=$gateway
  log "Docker network $NETWORK: $subnet, the stack at $gateway"
}

# arm64 containers on an x86_64 machine: qemu-user-static registered through binfmt_misc (with the
# F flag, so images need no copy of qemu).
ensure_emulation() {
  [ "$ARCH" != "$HOST_ARCH" ] || return 0
  [ "$ARCH" = arm64 ] || die "emulating $ARCH on $HOST_ARCH is not supported here"
  [ -x /usr/bin/qemu-aarch64-static ] && command -v update-binfmts >/dev/null \
    || apt_install qemu-user-static binfmt-support
  if ! grep -qs enabled /proc/sys/fs/binfmt_misc/qemu-aarch64; then
    need_root "arm64 emulation (binfmt_misc)"
    mountpoint -q /proc/sys/fs/binfmt_misc \
      || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc \
      || die "cannot mount binfmt_misc: this kernel cannot run arm64 containers"
    update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
    grep -qs enabled /proc/sys/fs/binfmt_misc/qemu-aarch64 \
      || die "qemu-aarch64 is not registered with binfmt_misc: this machine cannot run arm64 containers"
  fi
}

ensure_base_image() {
  docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 && return 0
  log "pulling $BASE_IMAGE"
  if timeout 120 docker pull --platform "linux/${DEBIAN_ARCH[$ARCH]}" "$BASE_IMAGE" >"$STACK_LOGS/docker-pull.log" 2>&1; then
    return 0
  fi
  log "cannot pull it (no registry reachable): building a stand-in from Debian's ${DEBIAN_ARCH[$ARCH]} packages"
  build_standin_image
}

# A one-layer image: libc6, libgcc-s1 (a Rust bootstrap's only shared libraries), busybox-static
# (the shell, mv and chmod SAM's Dockerfile runs), the system's CA bundle, /var/task and /var/runtime.
# Written as a `docker load` tarball, because `docker import --platform` ignores the platform on
# this engine and an arm64 stand-in would load as amd64.
build_standin_image() {
  local deb=${DEBIAN_ARCH[$ARCH]} dir="$WORK/standin-$ARCH"
  rm -rf "$dir" && mkdir -p "$dir/debs" "$dir/rootfs"
  if [ "$deb" != "$(dpkg --print-architecture)" ] && ! dpkg --print-foreign-architectures | grep -qx "$deb"; then
    need_root "Debian's $deb packages"
    dpkg --add-architecture "$deb"
    APT_UPDATED=0
  fi
  local packages=("libc6:$deb" "libgcc-s1:$deb" "busybox-static:$deb")
  if ! (cd "$dir/debs" && apt-get download "${packages[@]}" >/dev/null 2>&1); then
    need_root "Debian's package lists"
    retry "$STACK_LOGS/apt-update.log" "apt-get update" apt-get update -qq
    APT_UPDATED=1
    retry "$STACK_LOGS/apt-download.log" "apt-get download ${packages[*]}" \
      bash -c 'cd "$1" && shift && apt-get download "$@"' _ "$dir/debs" "${packages[@]}"
  fi
  local f applet
  for f in "$dir"/debs/*.deb; do dpkg-deb -x "$f" "$dir/rootfs"; done
  mkdir -p "$dir/rootfs"/{bin,tmp,var/task,var/runtime,etc/ssl/certs}
  chmod 1777 "$dir/rootfs/tmp"
  [ -x "$dir/rootfs/bin/busybox" ] || die "busybox-static did not provide /bin/busybox"
  for applet in sh mv chmod cp rm ls cat mkdir; do ln -sf busybox "$dir/rootfs/bin/$applet"; done
  [ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$dir/rootfs/etc/ssl/certs/"
  tar --numeric-owner --owner=0 --group=0 -C "$dir/rootfs" -cf "$dir/layer.tar" .
  python3 - "$dir" "$BASE_IMAGE" "$deb" <<'PY'
import hashlib, json, os, sys
folder, tag, arch = sys.argv[1:]
digest = hashlib.sha256(open(os.path.join(folder, "layer.tar"), "rb").read()).hexdigest()
config = {
    "architecture": arch,
    "os": "linux",
    "config": {
        "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "LAMBDA_TASK_ROOT=/var/task", "LAMBDA_RUNTIME_DIR=/var/runtime"],
        "WorkingDir": "/var/task",
    },
    "rootfs": {"type": "layers", "diff_ids": [f"sha256:{digest}"]},
    "history": [{"created_by": "pooltable scripts/sam-local.sh: stand-in for the provided.al2023 base image"}],
}
with open(os.path.join(folder, "config.json"), "w") as f:
    json.dump(config, f)
with open(os.path.join(folder, "manifest.json"), "w") as f:
    json.dump([{"Config": "config.json", "RepoTags": [tag], "Layers": ["layer.tar"]}], f)
PY
  tar -C "$dir" -cf "$dir/image.tar" manifest.json config.json layer.tar
  docker load -i "$dir/image.tar" >/dev/null || die "docker load of the stand-in image failed"
  [ "$(docker image inspect -f '{{.Architecture}}' "$BASE_IMAGE")" = "$deb" ] \
    || die "the stand-in image did not load as $deb"
  log "stand-in $BASE_IMAGE loaded ($(du -m "$dir/layer.tar" | cut -f1) MB)"
}

# Each function's bootstrap in its own folder, which the derived template names as its CodeUri.
CODE="$WORK/code-$ARCH"
prepare_bootstraps() {
  local line bin source_dir
  if [ "$ARCH" = "$HOST_ARCH" ]; then
    log "building the workspace's debug binaries (the same build the tests use)"
    cargo build -q --workspace --bins
    source_dir="$ROOT/target/debug/%s"
  else
    build_bootstraps
    source_dir="$ROOT/target/lambda/%s/bootstrap"
  fi
  rm -rf "$CODE"
  for line in "${EXPECTED[@]}"; do
    bin=${line%% *}
    mkdir -p "$CODE/$bin"
    # A hard link: the container mounts the folder, so a symlink out of it would dangle there.
    # shellcheck disable=SC2059
    ln "$(printf "$source_dir" "$bin")" "$CODE/$bin/bootstrap" 2>/dev/null \
      || cp "$(printf "$source_dir" "$bin")" "$CODE/$bin/bootstrap"
  done
}

TEMPLATE="$WORK/template-$ARCH.yaml"
TEMPLATE_PER_TENANT="$WORK/template-$ARCH-per-tenant.yaml"
FUNCTIONS="$WORK/functions.tsv"  # bin <TAB> logical id
derive_template() { # tenancy (pooled | per-tenant) target
  python3 - "$ROOT/template.yaml" "$2" "$FUNCTIONS" "$CODE" "$ARCH" "$1" <<'PY'
import re, sys
source, target, functions, code, arch, tenancy = sys.argv[1:]
lines = open(source).read().splitlines()
expected = sum(1 for l in lines if l.strip() == "Type: AWS::Serverless::Function")
out, mapping, logical, binary = [], [], None, None
for line in lines:
    resource = re.match(r"^  ([A-Za-z0-9]+):\s*$", line)
    if resource:
        logical, binary = resource.group(1), None
    m = re.match(r"^\s+Binary:\s*(\S+)\s*$", line)
    if m:
        binary = m.group(1)
    m = re.match(r"^(\s+)CodeUri:\s*\S+\s*$", line)
    if m:
        if not binary:
            sys.exit(f"{logical}: CodeUri without a Binary before it")
        mapping.append((binary, logical))
        line = f"{m.group(1)}CodeUri: {code}/{binary}"
    # Debug binaries under SAM's emulator on a busy two-core runner start slower than a release
    # build in Lambda: a call that takes a deployed function's 5 s would be a timeout here, not an
    # answer. Deployed timeouts are the template's own (and its tests'); here they are at least 60 s.
    m = re.match(r"^(\s+)Timeout:\s*(\d+)\s*$", line)
    if m and int(m.group(2)) < 60:
        line = f"{m.group(1)}Timeout: 60"
    if line.strip() == "Architectures: [arm64]":
        line = line.replace("[arm64]", f"[{arch}]")
    # The TenantIsolation parameter, resolved here: SAM CLI takes any TenancyConfig, even one an
    # !If leaves out, as tenant isolation mode.
    if line.strip().startswith("TenancyConfig:"):
        if tenancy == "per-tenant" and "!If" in line:
            out.append(line.split("TenancyConfig:")[0] + "TenancyConfig: {TenantIsolationMode: PER_TENANT}")
        continue
    out.append(line)
    if line.strip() == "POWERTOOLS_METRICS_NAMESPACE: !Ref MetricsNamespace":
        # Declared (off) so that `sam local --env-vars` may turn it on; see scripts/sam-local.sh.
        out.append(line[: len(line) - len(line.lstrip())] + 'POOLTABLE_DEV_UNSIGNED_JWT: "0"')
if len(mapping) != expected:
    sys.exit(f"pointed {len(mapping)} CodeUris at bootstraps, but template.yaml has {expected} functions")
if not any("POOLTABLE_DEV_UNSIGNED_JWT" in l for l in out):
    sys.exit("template.yaml's Globals have no POWERTOOLS_METRICS_NAMESPACE line to declare the dev-auth variable after")
open(target, "w").write("\n".join(out) + "\n")
open(functions, "w").write("".join(f"{b}\t{l}\n" for b, l in mapping))
PY
}

# The env file and the arguments every `sam local` call shares. The endpoint parameters make the
# template declare AWS_ENDPOINT_URL_*; the env file then gives every declared variable its value,
# because SAM lets a variable of the same name in its own shell environment win over the template
# (and this shell's endpoints say 127.0.0.1, which inside a container is the container).
prepare_sam_args() { # env_file table dev_auth
  local bridge=$NETWORK_GATEWAY ddb sts sqs queue
  ddb="http://$bridge:${AWS_ENDPOINT_URL_DYNAMODB##*:}"
  sts="http://$bridge:${AWS_ENDPOINT_URL_STS##*:}"
  # The stack's second moto (scripts/stack.sh): SQS, Secrets Manager, EventBridge and KMS.
  sqs="http://$bridge:${AWS_ENDPOINT_URL_SQS##*:}"
  # Made through the bridge address, so the queue URL moto answers is one a container can reach.
  queue=$(AWS_ENDPOINT_URL_SQS="$sqs" "$TOOLS/venv/bin/python" "$ROOT/scripts/import_queue.py" create "$2-imports")
  # A key per tenant, as deployed: the key table beside the table and a platform key on moto's KMS
  # (TENANT_KEYS_TABLE, TENANT_KEY_ID), which the containers reach through the bridge.
  tenant_keys_for "$2"
  python3 - "$1" "$2" "$3" "$ddb" "$sts" "$sqs" "$queue" <<'PY'
import json, os, sys
path, table, dev_auth, ddb, sts, sqs, queue = sys.argv[1:]
json.dump({"Parameters": {
    "TABLE_NAME": table,
    "TENANT_ROLE_ARN": "arn:aws:iam::123456789012:role/pooltable-local-tenant-access",
    "TENANT_OPERATOR_ROLE_ARN": os.environ["TENANT_OPERATOR_ROLE_ARN"],
    # The stack's secret on moto's Secrets Manager (scripts/stack.sh), read through the bridge.
    "SIGNING_KEYS_SECRET_ARN": os.environ["SIGNING_KEYS_SECRET_ARN"],
    "AWS_ENDPOINT_URL_SECRETS_MANAGER": sqs,
    # The stack's lifecycle event bus on moto's EventBridge (scripts/stack.sh).
    "EVENT_BUS_NAME": os.environ["EVENT_BUS_NAME"],
    "CONTROL_PLANE_EVENT_BUS": os.environ["CONTROL_PLANE_EVENT_BUS"],
    "CONTROL_PLANE_PROTECTED_TENANTS": os.environ["CONTROL_PLANE_PROTECTED_TENANTS"],
    "AWS_ENDPOINT_URL_EVENTBRIDGE": sqs,
    "SESSION_TTL_SECONDS": "3600",
    "TENANT_CREDENTIALS_SECONDS": "3600",
    "AWS_ENDPOINT_URL_DYNAMODB": ddb,
    "AWS_ENDPOINT_URL_STS": sts,
    "AWS_ENDPOINT_URL_SQS": sqs,
    "IMPORT_QUEUE_URL": queue,
    "POOLTABLE_DEV_UNSIGNED_JWT": dev_auth,
    "TENANT_KEYS_TABLE": os.environ["TENANT_KEYS_TABLE"],
    "TENANT_KEY_ID": os.environ["TENANT_KEY_ID"],
    "AWS_ENDPOINT_URL_KMS": sqs,
}}, open(path, "w"), indent=2)
PY
  SAM_ARGS=(--skip-pull-image --env-vars "$1" --region us-east-1 --docker-network "$NETWORK"
    --parameter-overrides "Stage=local LocalDynamoDbEndpoint=$ddb LocalStsEndpoint=$sts LocalSqsEndpoint=$sqs LocalSecretsManagerEndpoint=$sqs LocalEventBridgeEndpoint=$sqs LocalKmsEndpoint=$sqs")
}

invoke_all() {
  local table="pooltable-sam-$$" env_file="$WORK/env-invoke.json" line bin want logical out failed=0 log_file="$STACK_LOGS/sam-invoke.log"
  "$ROOT/target/debug/pooltable" create-table "$table" >/dev/null
  prepare_sam_args "$env_file" "$table" 0   # the sample events carry real authorizer claims
  : >"$log_file"
  # SAM builds its emulator image (the base image plus AWS's runtime interface emulator) on the
  # first invoke; a read that changes nothing goes first, so that build is not inside a timed call.
  "$SAM" local invoke GetTenantFunction -e events/get-tenant.json --template "$TEMPLATE" "${SAM_ARGS[@]}" >>"$log_file" 2>&1 || true
  for line in "${EXPECTED[@]}"; do
    read -r bin want <<<"$line"
    logical=$(awk -v b="$bin" '$1 == b { print $2 }' "$FUNCTIONS")
    [ -n "$logical" ] || die "template.yaml has no function for $bin"
    out=$("$SAM" local invoke "$logical" -e "$(event_file "$bin" "$WORK" "$table")" --template "$TEMPLATE" "${SAM_ARGS[@]}" 2>"$WORK/invoke.err") || true
    cat "$WORK/invoke.err" >>"$log_file"
    if ! expect_status "sam local invoke $logical" "$want" "$out" "log: $log_file"; then
      failed=$((failed + 1))
      # CI keeps only what is printed: the call's own log, so a failure there can be read.
      tail -n 25 "$WORK/invoke.err" | sed 's/^/    | /'
    fi
  done
  echo "sam local invoke: $(( ${#EXPECTED[@]} - failed )) passed, $failed failed"
  [ "$failed" = 0 ]
  invoke_per_tenant
}

# Tenant isolation mode (TenantIsolation=per-tenant) through SAM's emulator, which runs a function
# with a TenancyConfig only for a tenant id and passes it to the runtime as the Lambda service does:
# tenant acme's sample request in acme's environment is served; in globex's, it is refused (403).
invoke_per_tenant() {
  local tenant want out failed=0 log_file="$STACK_LOGS/sam-invoke.log"
  for case in "acme 200" "globex 403"; do
    read -r tenant want <<<"$case"
    out=$("$SAM" local invoke GetSessionsByCustomerIdFunction -e events/get-sessions-by-customer-id.json \
      --tenant-id "$tenant" --template "$TEMPLATE_PER_TENANT" "${SAM_ARGS[@]}" 2>>"$log_file") || true
    expect_status "sam local invoke --tenant-id $tenant (tenant isolation mode), acme's request" \
      "$want" "$out" "log: $log_file" || failed=$((failed + 1))
  done
  [ "$failed" = 0 ]
}

start_api() { # port
  local port=$1 table="pooltable-local" env_file="$WORK/env-api.json" log_file="$STACK_LOGS/sam-api.log"
  curl -s -o /dev/null "http://127.0.0.1:$port/" && die "port $port is busy; set PORT=another"
  "$ROOT/target/debug/pooltable" create-table "$table" >/dev/null
  prepare_sam_args "$env_file" "$table" 1
  # LAZY: a function's container starts on its first request and then stays warm.
  setsid "$SAM" local start-api --template "$TEMPLATE" "${SAM_ARGS[@]}" --host 127.0.0.1 --port "$port" \
    --warm-containers LAZY >"$log_file" 2>&1 &
  API_PID=$!
  wait_for "sam local start-api" "http://127.0.0.1:$port/" 120
  log "sam local start-api on http://localhost:$port (log: $log_file)"
  seed_demo_tenants "http://127.0.0.1:$port" "$log_file"
}

require cargo "the Rust toolchain"
require curl "health checks and the demo requests"
ensure_dynamodb_local
ensure_py_tools
ensure_sam
ensure_docker_engine
ensure_network
ensure_emulation
ensure_base_image
check_expectations_cover_binaries
prepare_bootstraps
derive_template pooled "$TEMPLATE"
derive_template per-tenant "$TEMPLATE_PER_TENANT"
STACK_HOST=0.0.0.0 start_stack

case "$MODE" in
  invoke) invoke_all ;;
  check)
    invoke_all
    port=$(free_port)
    start_api "$port"
    check_demo_examples "http://127.0.0.1:$port"
    check_demo_placements pooltable-local || die "sam local: the demo tenants' placements do not hold"
    log "sam local: every function answered its documented status; start-api served both tenants' examples (acme pooled, globex in its own table)" ;;
  api)
    PORT="${PORT:-3000}"
    start_api "$PORT"
    cat <<MSG

pooltable is running under sam local start-api on http://localhost:$PORT  (Ctrl-C stops everything)
MSG
    print_demo_usage "localhost:$PORT"
    printf '# one function by hand, beside the API (its sample event carries tenant acme'"'"'s claims):\n'
    printf '%q ' "$SAM" local invoke GetTenantFunction -e events/get-tenant.json --template "$TEMPLATE" "${SAM_ARGS[@]}"
    printf '\n'
    wait "$API_PID" ;;
esac
