#!/usr/bin/env bash
# `sam build` every function (rust-cargolambda, arm64, provided.al2023) and report each bootstrap's size.
# Offline: cargo-lambda cross-compiles with zig from its virtualenv, which must come first on PATH
# (cargo-lambda finds zig through `python3 -m ziglang`; SAM's own virtualenv would hide it).
# A cold run compiles the SDK for arm64 and links 48 fat-LTO binaries: about 25 minutes on 2 cores.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
cd "$ROOT"
export SAM_CLI_TELEMETRY=0
ensure_sam
build_bootstraps   # puts .tools/venv (cargo-lambda + ziglang) first on PATH

log "sam build (each function's cargo lambda build is already fresh; SAM copies the bootstraps)"
"$SAM" build --region "${AWS_REGION:-us-east-1}" "$@"

print_bootstrap_sizes "$ROOT/.aws-sam/build"
