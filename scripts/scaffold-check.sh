#!/usr/bin/env bash
# The scaffold, end to end: in a scratch copy of the repository, `pooltable new route` adds a read
# route and a write route on an existing entity (departments): each one's handler, test and
# routes.yaml entry, the rest generated. Then, in the copy:
# - it refuses a route without --entity, or on a kind it does not scaffold;
# - the write route's fault-test entries are TODO, and `pooltable gen --check` (as every test that
#   reads routes.yaml) refuses the table, naming the route, until they are filled as a human would;
# - both routes build, lint, and serve through cargo lambda watch: the write's sample sets a field on
#   the sample department, and the read's sample answers it;
# - the tests the scaffold wrote pass: each route's data is where the shared reads find it, in the
#   DynamoDB requests its routes.yaml entry declares, before, during and after a re-sharding;
# - tests/tests/all/request_counts.rs fails naming both routes until it has their common case, and
#   lost_success.rs needs the write route's arrangement (tests/src/fixtures.rs): the check adds
#   both as a human would (docs/add-a-route.md), and then they pass, with the transactions check.
# The copy builds into this checkout's target/, so only the workspace's own crates compile again (at
# the copy's path), never the SDK. Expects the local stack's environment and the build settings
# scripts/test.sh exports.
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
pooltable() { cargo run -q --bin pooltable -- "$@"; }
# Runs the copy's integration tests (one binary, `all`) whose names start with the given modules or
# paths; prints the end of their output when they fail.
tests_pass() {
  local out
  if ! out=$(cargo test -q --workspace --test all -- "$@" 2>&1); then
    printf '%s\n' "$out" | tail -n 40
    return 1
  fi
  printf '%s\n' "$out" | grep -E '^test result'
}

read_bin=get-department-head
write_bin=put-department-head

# Refused: a route with no entity, and a kind the scaffold does not know the keys of.
if out=$(pooltable new route get-x GET '/departments/{departmentId}/x' 2>&1); then
  die "scaffold: a route without --entity was scaffolded"
fi
grep -q -- "--entity is required" <<<"$out" || die "scaffold: no --entity, but not said: $out"
if out=$(pooltable new route get-x GET '/sessions/{sessionId}/x' --entity session 2>&1); then
  die "scaffold: a route on sessions was scaffolded"
fi
grep -q "write-sharded kinds" <<<"$out" || die "scaffold: --entity session refused without why: $out"

pooltable new route "$read_bin" GET '/departments/{departmentId}/head' --entity department
pooltable new route "$write_bin" PUT '/departments/{departmentId}/head' --entity department

# The write route's fault-test entries wait for a human: the table is refused, naming the route.
if out=$(pooltable gen --check 2>&1); then
  die "scaffold: gen --check accepted the write route's TODO entries"
fi
grep -q "$write_bin: lost_success is TODO" <<<"$out" || die "scaffold: gen --check did not name the TODO: $out"
log "scaffold: gen --check refuses the table until $write_bin's lost_success and transaction are filled"
# Filled as its handler does them (routes.yaml's comment above them says so): the effect is its
# TransactWriteItems, and it sends no transaction tests/tests/all/transactions.rs counts.
sed -i -e 's/^  lost_success: {write: TODO}$/  lost_success: {write: TransactWriteItems}/' -e '/^  transaction: TODO$/d' routes.yaml
pooltable gen >/dev/null

# Present everywhere a route is: the template, openapi.yaml, events and the expected statuses.
for bin in "$read_bin" "$write_bin"; do
  grep -q "Binary: $bin\$" template.yaml || die "scaffold: template.yaml has no function for $bin"
  grep -q "operationId: $bin\$" openapi.yaml || die "scaffold: openapi.yaml has no operation $bin"
  [ -f "events/$bin.json" ] || die "scaffold: events/$bin.json is missing"
  grep -q "\"$bin 200\"" scripts/expected.sh || die "scaffold: scripts/expected.sh does not expect $bin"
done
pooltable gen --check
cargo fmt --all --check
"$TOOLS/venv/bin/cfn-lint" template.yaml

# Served: the write's sample sets `head` on the sample department, and the read's sample answers it.
cargo build -q --workspace --bin "$read_bin" --bin "$write_bin" --bin put-department --bin onboard-tenant
table="pooltable-scaffold-$$"
pooltable create-table "$table" >/dev/null
port=$(free_port)
export TABLE_NAME="$table" TENANT_ROLE_ARN="arn:aws:iam::123456789012:role/pooltable-local-tenant-access"
unset POOLTABLE_DEV_UNSIGNED_JWT
mkdir -p "$STACK_LOGS"
setsid cargo lambda watch -P "$port" --ignore-changes >"$STACK_LOGS/scaffold-watch.log" 2>&1 &
watch_pid=$!
wait_for "cargo lambda watch (scaffold)" "http://127.0.0.1:$port/" 60
source scripts/expected.sh  # the copy's: it expects the new routes' statuses too
expected() { printf '%s\n' "${EXPECTED[@]}" | grep "^$1 "; }
for step in "$(expected onboard-tenant)" "$(expected put-department)" "$(expected "$write_bin")" "$(expected "$read_bin")"; do
  read -r fn want <<<"$step"
  out=$(timeout 600 cargo lambda invoke "$fn" -P "$port" --data-file "events/$fn.json" 2>&1) || true
  expect_status "scaffold $fn" "$want" "$out" "$STACK_LOGS/scaffold-watch.log" || die "scaffold: $fn did not answer $want"
done
grep -q 'head.*sample-1' <<<"$out" || die "scaffold: $read_bin does not answer what $write_bin set: $out"

# The tests it wrote pass, as do the checks of what it generated (every derived file current, the
# processed template's existing resources unchanged, the events, the template's isolation).
tests_pass "${read_bin//-/_}::" "${write_bin//-/_}::" generated:: events:: \
  || die "scaffold: the copy's tests failed"

# request_counts.rs names the routes it has no common case for; a human adds them (what must be in
# place, and the request), as does the write's arrangement for the fault tests.
if out=$(cargo test -q --workspace --test all -- request_counts:: 2>&1); then
  die "scaffold: request_counts passed with no case for the new routes"
fi
grep -q "no common case in tests/tests/all/request_counts.rs for \[\"$read_bin\", \"$write_bin\"\]" <<<"$out" \
  || { printf '%s\n' "$out" | tail -n 20; die "scaffold: request_counts did not name the new routes"; }
python3 - <<'PY'
import pathlib
counts = pathlib.Path("tests/tests/all/request_counts.rs")
text = counts.read_text()
anchor = "            _ => return None,\n"
assert text.count(anchor) == 1, "request_counts.rs: its common cases end elsewhere now"
text = text.replace(anchor, '''            "get-department-head" => {
                self.department("d-head").await;
                Case::new(me).at(&[("departmentId", "d-head")])
            }
            "put-department-head" => {
                self.department("d-head").await;
                Case::new(me)
                    .at(&[("departmentId", "d-head")])
                    .body(json!({"head": "e-1"}))
            }
''' + anchor)
counts.write_text(text)
fixtures = pathlib.Path("tests/src/fixtures.rs")
text = fixtures.read_text()
anchor = "        // A route that needs nothing in place: its sample request"
assert text.count(anchor) == 1, "fixtures.rs: its arrangements end elsewhere now"
text = text.replace(anchor, '''        "put-department-head" => {
            department().await;
            (params(&[("departmentId", "eng")]), Some(json!({"head": "e-1"})))
        }
''' + anchor)
fixtures.write_text(text)
PY
cargo fmt --all
tests_pass request_counts:: lost_success:: || die "scaffold: the fault and request-count tests failed"
tests_pass transactions::every_transactional_route_has_a_case \
  || die "scaffold: the transactions check failed"
log "scaffold: $read_bin and $write_bin added by pooltable new route; $write_bin refused until filled; both served through cargo lambda watch, their tests (through a re-sharding) and the request-count and lost-success tests passed"
