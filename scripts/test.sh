#!/usr/bin/env bash
# Runs every test: formatting, clippy, unit and integration tests (against DynamoDB Local and moto,
# started here), each function binary end to end as a Lambda process (through cargo lambda watch, and
# through `sam local invoke` and `start-api` in Docker: scripts/sam-local.sh), the template linters, the
# scaffold (scripts/scaffold-check.sh), and the contract check (scripts/schemathesis.sh: openapi.yaml
# against the running API, two passes).
# Installs what it needs into .tools/ first. CI runs exactly this (.ci/run).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
source "$ROOT/scripts/stack.sh"
cd "$ROOT"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}" SAM_CLI_TELEMETRY=0

require cargo "the Rust toolchain"
require curl "health checks of the local stack"
# A full run needs about 30 GB under target/ from a cold start; say what the disk has, so that a run
# that stops on a full disk says so.
log "free space for target/: $(df -h --output=avail "$ROOT" 2>/dev/null | tail -n 1 | tr -d ' ')"
ensure_dynamodb_local
ensure_cognito_local
ensure_py_tools
ensure_sam
ensure_checkov

# Each step says how long it took, so that a run's time reads step by step (docs/tests.md).
step() {
  local name=$1 started=$SECONDS
  log "== $name"
  shift
  "$@"
  log "== $name: $((SECONDS - started)) s"
}

# Runs a test command, keeping its output; when it fails, each failed test's own output (libtest's
# "---- <test> stdout ----" sections: its panic message) is printed again as the run's last lines, so
# a report that keeps only the beginning and the end of the log still says why.
with_failures_last() {
  local out="$STACK_LOGS/cargo-test.log" status=0
  mkdir -p "$STACK_LOGS"
  "$@" 2>&1 | tee "$out" || status=$?
  if [ "$status" -ne 0 ]; then
    log "--- why the failed tests failed (their output again, from $out):"
    awk '/^---- .* stdout ----$/ { show = 1 } /^failures:$/ { show = 0 } show' "$out" | head -n 300 >&2
  fi
  return "$status"
}

step "cargo fmt --check" cargo fmt --all --check
# The template in both deployment modes: as written (TenantIsolation=pooled, Alarms=disabled,
# UserPool=none, no custom domain, the AWS-owned table key), and with the tenant isolation mode, the
# alarms, the user pool, a custom domain and a customer-managed table key as its defaults,
# so that checkov, which resolves conditions from the defaults, also sees the resources only those
# create (the REST API and its invoke permissions; the alarms, their topic and the dashboard; the
# Cognito user pool, its app clients and the trigger's permission).
mkdir -p target/lint
python3 - template.yaml target/lint/template-per-tenant.yaml <<'PY'
import sys
text = open(sys.argv[1]).read()
for old, new in [
    ("    AllowedValues: [pooled, per-tenant]\n    Default: pooled", "    AllowedValues: [pooled, per-tenant]\n    Default: per-tenant"),
    ('  CognitoUserPoolArn:\n    Type: String\n    Default: ""',
     '  CognitoUserPoolArn:\n    Type: String\n    Default: "arn:aws:cognito-idp:us-east-1:123456789012:userpool/us-east-1_EXAMPLE"'),
    ("    AllowedValues: [enabled, disabled]\n    Default: disabled", "    AllowedValues: [enabled, disabled]\n    Default: enabled"),
    ("    AllowedValues: [create, none]\n    Default: none", "    AllowedValues: [create, none]\n    Default: create"),
    ('  AlarmEmail:\n    Type: String\n    Default: ""', '  AlarmEmail:\n    Type: String\n    Default: "ops@example.com"'),
    ('ApiDomainName: {Type: String, Default: ""', 'ApiDomainName: {Type: String, Default: "api.example.com"'),
    ('TableKmsKeyArn: {Type: String, Default: ""',
     'TableKmsKeyArn: {Type: String, Default: "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"'),
    ('ApiCertificateArn: {Type: String, Default: ""',
     'ApiCertificateArn: {Type: String, Default: "arn:aws:acm:us-east-1:123456789012:certificate/example"'),
]:
    assert text.count(old) == 1, f"template.yaml no longer holds {old!r}"
    text = text.replace(old, new)
open(sys.argv[2], "w").write(text)
PY
for template in template.yaml target/lint/template-per-tenant.yaml; do
  step "template lint: cfn-lint ($template)" cfn-lint "$template"
  step "template lint: sam validate --lint ($template)" "$SAM" validate --lint --region us-east-1 -t "$template" >/dev/null
  step "template lint: checkov ($template; skips are justified in template metadata)" \
    "$CHECKOV" -f "$template" --framework cloudformation --skip-download --compact --quiet
done

trap 'status=$?; [ $status -eq 0 ] || report_stack; stop_stack; exit $status' EXIT
start_stack
# One debug build serves clippy, the tests and the end-to-end run: clippy-driver is the compiler
# for the workspace's own crates (exactly what `cargo clippy` does, but producing real artifacts),
# so the AWS SDK is compiled once, not once for clippy and again for the tests. Exported, so every
# later cargo call (the audit, cargo lambda watch) reuses the same artifacts. Every cargo call of the
# run selects the whole workspace (`--workspace`, or a `--bin` with no `-p`): cargo unifies features
# over the packages a call selects, so a `-p` would build the SDK again with another feature set.
CLIPPY_DRIVER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)" \
  || die "clippy-driver not found: rustup component add clippy"
export RUSTC_WORKSPACE_WRAPPER="$CLIPPY_DRIVER"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
export LOAD_OPS="${LOAD_OPS:-2000}"
# Test threads get the 8 MiB stack a Lambda function's main thread has (Rust's default for a
# spawned thread is 2 MiB): an operator's restore, served through the runtime's admission as in
# production, nests deeper than that in a debug build.
export RUST_MIN_STACK="${RUST_MIN_STACK:-8388608}"
# Every binary, in one build: the import tests run the consumer as a Lambda process
# (tests/src/import_queue.rs), the Cognito test the pre token generation trigger and `pooltable
# login` (tests/tests/all/cognito.rs), and the end-to-end run, the scaffold and the contract check
# serve every function through cargo lambda watch, which would otherwise build them one at a time on
# their first calls (about 115 s of the end-to-end run; here they link side by side).
step "every binary (the functions, the import consumer, the Cognito trigger, the CLI)" \
  cargo build --workspace --bins
# Three tests at a time on the two cores: most integration tests wait on DynamoDB Local, moto and
# the test clock in turn rather than compute, and three took 409 s where two took 488 s
# (docs/tests.md). A usage drain has a 2 s budget (`usage::DRAIN_TIMEOUT`), so a loaded DynamoDB
# Local no longer times out the flushes the tests read usage after.
step "cargo test (unit + integration), linted by clippy -D warnings" \
  with_failures_last cargo test --workspace --no-fail-fast -- --test-threads 3
step "table audit: every key the suite wrote is under exactly one tenant" \
  cargo test --workspace --test all -- --ignored table_audit::
step "each function as a Lambda process" "$ROOT/scripts/e2e.sh"
step "the scaffold: pooltable new route in a scratch copy, built and served through watch" \
  "$ROOT/scripts/scaffold-check.sh"
step "the documented build: sam build of one function as deployed (arm64), SAM's debug mode" \
  sam_build_one GetProductFunction
stop_stack  # the next two steps start their own stacks
step "sam local: every function through SAM's runtime emulator, and start-api for two tenants" \
  "$ROOT/scripts/sam-local.sh" check
step "contract: schemathesis against every route, as a tenant and as the operator" \
  "$ROOT/scripts/schemathesis.sh"
log "all checks passed"
