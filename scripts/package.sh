#!/usr/bin/env bash
# `sam build` every function (rust-cargolambda, arm64, provided.al2023) and report each bootstrap's size.
# Offline: cargo-lambda cross-compiles with zig from its virtualenv, which must come first on PATH
# (cargo-lambda finds zig through `python3 -m ziglang`; SAM's own virtualenv would hide it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
cd "$ROOT"
export SAM_CLI_TELEMETRY=0
ensure_py_tools   # puts .tools/venv (cargo-lambda + ziglang) first on PATH
ensure_sam
rustup target list --installed | grep -q aarch64-unknown-linux-gnu \
  || rustup target add aarch64-unknown-linux-gnu
python3 -m ziglang version >/dev/null || die "zig is not reachable through python3 -m ziglang"

log "sam build (release, arm64; the first build compiles the SDK in release: several minutes)"
"$SAM" build --region "${AWS_REGION:-us-east-1}" "$@"

printf '\n%-40s %12s\n' "function" "bootstrap"
total=0
for f in .aws-sam/build/*/bootstrap; do
  size=$(stat -c %s "$f")
  total=$((total + size))
  printf '%-40s %9.2f MB\n' "$(basename "$(dirname "$f")")" "$(echo "$size / 1048576" | bc -l)"
done
count=$(ls .aws-sam/build/*/bootstrap | wc -l)
expected=$(grep -c 'Type: AWS::Serverless::Function' template.yaml)
printf '%d bootstraps (template has %d functions)\n' "$count" "$expected"
[ "$count" = "$expected" ] || die "some functions have no bootstrap"
