#!/usr/bin/env bash
# The scaffold, end to end: in a scratch copy of the repository, `pooltable new route` adds a route
# (its handler, its test and its routes.yaml line; the rest generated), and the copy then builds it,
# lints its template, and serves it through cargo lambda watch: onboard the sample tenant, then the
# new route's sample event answers 200; the test the scaffold wrote passes. The copy builds into this checkout's target/, so only the
# workspace's own crates compile again (at the copy's path), never the SDK. Expects the local
# stack's environment and the build settings scripts/test.sh exports.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
source "$ROOT/scripts/stack.sh"
source "$ROOT/scripts/expected.sh"
: "${AWS_ENDPOINT_URL_DYNAMODB:?start the local stack first (scripts/test.sh does)}"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/pooltable-scaffold.XXXXXX")
watch_pid=
cleanup() {
  [ -z "$watch_pid" ] || { kill -- -"$watch_pid" 2>/dev/null; wait "$watch_pid" 2>/dev/null || true; }
  rm -rf "$scratch"
}
trap cleanup EXIT
# The repository as committed or being changed, without what is built or installed.
tar -C "$ROOT" --exclude=./target --exclude=./.tools --exclude=./.git -cf - . | tar -C "$scratch" -xf -
ln -s "$ROOT/.tools" "$scratch/.tools"  # the tools, installed once (the processed-template test runs cfn-lint's Python)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
cd "$scratch"

bin=list-product-reviews
cargo run -q -p devtools --bin pooltable -- new route "$bin" GET '/products/{productId}/reviews' --entity REVIEW

# Present everywhere a route is: the template, openapi.yaml, events and the expected statuses.
grep -q "Binary: $bin\$" template.yaml || die "scaffold: template.yaml has no function for $bin"
grep -q "operationId: $bin\$" openapi.yaml || die "scaffold: openapi.yaml has no operation $bin"
[ -f "events/$bin.json" ] || die "scaffold: events/$bin.json is missing"
grep -q "\"$bin 200\"" scripts/expected.sh || die "scaffold: scripts/expected.sh does not expect $bin"
cargo run -q -p devtools --bin pooltable -- gen --check
cargo fmt --all --check
"$TOOLS/venv/bin/cfn-lint" template.yaml

cargo build -q -p products --bin "$bin" -p tenants --bin onboard-tenant
table="pooltable-scaffold-$$"
cargo run -q -p devtools --bin pooltable -- create-table "$table" >/dev/null
port=$(free_port)
export TABLE_NAME="$table" TENANT_ROLE_ARN="arn:aws:iam::123456789012:role/pooltable-local-tenant-access"
unset POOLTABLE_DEV_UNSIGNED_JWT
mkdir -p "$STACK_LOGS"
setsid cargo lambda watch -P "$port" --ignore-changes >"$STACK_LOGS/scaffold-watch.log" 2>&1 &
watch_pid=$!
wait_for "cargo lambda watch (scaffold)" "http://127.0.0.1:$port/" 60
onboarding=$(printf '%s\n' "${EXPECTED[@]}" | grep '^onboard-tenant ')
for step in "$onboarding" "$bin 200"; do
  read -r fn want <<<"$step"
  out=$(cargo lambda invoke "$fn" -P "$port" --data-file "events/$fn.json" 2>&1) || true
  expect_status "scaffold $fn" "$want" "$out" "$STACK_LOGS/scaffold-watch.log" || die "scaffold: $fn did not answer $want"
done
# And the test it wrote passes, as do the checks of what it generated (every derived file current,
# the processed template's existing resources unchanged, the events, the template's isolation).
# (The integration tests are one binary, `all`: a file is a module, chosen by its path; `events::`
# would also match `lifecycle_events::`, which needs no running here.)
if ! out=$(cargo test -q -p integration --test all -- "${bin//-/_}::" generated:: events:: \
    --skip lifecycle_events:: 2>&1); then
  printf '%s\n' "$out" | tail -n 40
  die "scaffold: the copy's tests failed"
fi
printf '%s\n' "$out" | grep -E '^test result' 
log "scaffold: $bin added by pooltable new route, built, served 200 through cargo lambda watch, its test passed"
