#!/usr/bin/env bash
# The demo data and curl examples both local servers share: scripts/dev.sh (cargo lambda watch) and
# scripts/sam-local.sh start-api (SAM's API emulator). Sourced after scripts/tools.sh; the functions
# behind BASE must accept the unsigned development JWT (POOLTABLE_DEV_UNSIGNED_JWT=1).

DEMO_TENANTS=(acme globex)
declare -A DEMO_SHARDS=([acme]=16 [globex]=4)
# acme in the pool, globex in its own table (<pool>-tenant-globex): both servers serve both placements.
declare -A DEMO_PLACEMENT=([acme]=pool [globex]=own)
declare -A DEMO_TOKENS DEMO_SESSIONS
DEMO_OPERATOR=""

demo_api() { # base method path token [body]
  curl -s --fail-with-body -X "$2" "$1$3" -H "authorization: Bearer $4" \
    -H 'content-type: application/json' ${5:+-d "$5"}
}
demo_json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1],""))' "$1"; }

# Onboards acme (16 shards, in the pool) and globex (4, in its own table), each with 3 products, a department with one employee,
# a session for alice and one for bob, and a child session under bob's. $2 names the log to read on
# failure.
seed_demo_tenants() { # base logfile
  local base=$1 logfile=$2 tenant sku customer sid child pooltable="$ROOT/target/debug/pooltable"
  fail() { die "seeding $tenant failed; see $logfile"; }
  DEMO_OPERATOR=$("$pooltable" dev-token platform --operator)
  for tenant in "${DEMO_TENANTS[@]}"; do
    DEMO_TOKENS[$tenant]=$("$pooltable" dev-token "$tenant")
    log "seeding tenant $tenant"
    demo_api "$base" POST /tenants "$DEMO_OPERATOR" \
      "{\"tenantId\":\"$tenant\",\"tier\":\"premium\",\"shardCount\":${DEMO_SHARDS[$tenant]},\"placement\":\"${DEMO_PLACEMENT[$tenant]}\"}" \
      >/dev/null || fail
    printf '  onboarded with %s shards, placement %s\n' "${DEMO_SHARDS[$tenant]}" "${DEMO_PLACEMENT[$tenant]}" >&2
    for sku in 1001 1002 1003; do
      demo_api "$base" PUT "/products/sku-$sku" "${DEMO_TOKENS[$tenant]}" \
        "{\"name\":\"$tenant product $sku\",\"price\":$sku}" >/dev/null || fail
    done
    printf '  3 products\n' >&2
    demo_api "$base" PUT /departments/eng "${DEMO_TOKENS[$tenant]}" '{"name":"Engineering"}' >/dev/null || fail
    demo_api "$base" PUT /employees/emp-1 "${DEMO_TOKENS[$tenant]}" \
      '{"name":"Ada Lovelace","departmentId":"eng"}' >/dev/null || fail
    printf '  department eng with employee emp-1\n' >&2
    for customer in alice bob; do
      sid=$(demo_api "$base" POST /sessions "${DEMO_TOKENS[$tenant]}" \
        "{\"customerId\":\"$customer\",\"state\":\"demo\"}" | demo_json_field sessionId)
      [ -n "$sid" ] || fail
      printf '  session %s for %s\n' "$sid" "$customer" >&2
      DEMO_SESSIONS[$tenant]=$sid
    done
    child=$(demo_api "$base" POST /sessions "${DEMO_TOKENS[$tenant]}" \
      "{\"customerId\":\"bob\",\"parentSessionId\":\"${DEMO_SESSIONS[$tenant]}\"}" | demo_json_field sessionId)
    [ -n "$child" ] || fail
    printf '  child session %s under %s\n' "$child" "${DEMO_SESSIONS[$tenant]}" >&2
  done
}

# The examples printed for a tenant, one request per line: method, path, body (may be empty).
demo_examples() { # tenant
  printf '%s\n' "GET /products" "GET /products/sku-1001" "GET /departments/eng/employees" \
    "GET /customers/bob/sessions" "GET /sessions/${DEMO_SESSIONS[$1]}" \
    "POST /sessions {\"customerId\":\"carol\"}"
}

print_demo_usage() { # base
  local base=$1 tenant T method path body
  cat <<MSG

Operator token (scope pooltable/admin), for POST /tenants:
export TOKEN_OPERATOR='$DEMO_OPERATOR'

MSG
  for tenant in "${DEMO_TENANTS[@]}"; do
    T="TOKEN_${tenant^^}"
    printf '# tenant %s\nexport %s=%s\n' "$tenant" "$T" "'${DEMO_TOKENS[$tenant]}'"
    while read -r method path body; do
      if [ "$method" = GET ]; then
        printf 'curl -s %s%s -H "authorization: Bearer $%s"\n' "$base" "$path" "$T"
      else
        printf "curl -s -X %s %s%s -H \"authorization: Bearer \$%s\" -d '%s'\n" "$method" "$base" "$path" "$T" "$body"
      fi
    done < <(demo_examples "$tenant")
    echo
  done
}

# Runs every printed example for both tenants and checks it: each answers 2xx, each tenant's product
# listing holds only its own products, and a tenant asking for the other's session gets 404.
check_demo_examples() { # base
  local base=$1 tenant other method path body status out failed=0
  for tenant in "${DEMO_TENANTS[@]}"; do
    while read -r method path body; do
      out=$(curl -s -w '\n%{http_code}' -X "$method" "$base$path" \
        -H "authorization: Bearer ${DEMO_TOKENS[$tenant]}" ${body:+-d "$body"})
      status=${out##*$'\n'}
      if [[ "$status" == 2?? ]]; then
        log "example as $tenant: $method $path: $status"
      else
        log "example as $tenant: $method $path: expected 2xx, got $status: ${out%$'\n'*}"
        failed=$((failed + 1))
      fi
      if [ "$path" = /products ] && ! grep -q "\"$tenant product 1001\"" <<<"$out"; then
        log "example as $tenant: GET /products does not list $tenant's own products"
        failed=$((failed + 1))
      fi
      for other in "${DEMO_TENANTS[@]}"; do
        if [ "$other" != "$tenant" ] && grep -q "\"$other product" <<<"$out"; then
          log "example as $tenant: $method $path shows $other's data"
          failed=$((failed + 1))
        fi
      done
    done < <(demo_examples "$tenant")
    for other in "${DEMO_TENANTS[@]}"; do
      [ "$other" != "$tenant" ] || continue
      status=$(curl -s -o /dev/null -w '%{http_code}' "$base/sessions/${DEMO_SESSIONS[$other]}" \
        -H "authorization: Bearer ${DEMO_TOKENS[$tenant]}")
      if [ "$status" = 404 ]; then
        log "example as $tenant: $other's session: 404"
      else
        log "example as $tenant: $other's session: expected 404, got $status"
        failed=$((failed + 1))
      fi
    done
  done
  [ "$failed" = 0 ] || die "$failed example checks failed"
}

# The demo tenants' placements, read from the tables themselves: a tenant placed `own` has its items
# in <table>-tenant-<id> and, in <table>, only its record; a pooled one has no table of its own.
check_demo_placements() { # table
  local pairs=() t
  for t in "${DEMO_TENANTS[@]}"; do pairs+=("$t=${DEMO_PLACEMENT[$t]}"); done
  "$TOOLS/venv/bin/python" - "$1" "${pairs[@]}" <<'PY'
import sys, boto3
table, placements = sys.argv[1], dict(a.split("=") for a in sys.argv[2:])
ddb = boto3.client("dynamodb")
def scan(name):
    out, start = [], None
    while True:
        page = ddb.scan(TableName=name, **({"ExclusiveStartKey": start} if start else {}))
        out += page["Items"]
        start = page.get("LastEvaluatedKey")
        if not start:
            return out
def keys(name):
    return [i["PK"]["S"] for i in scan(name)]
tables = ddb.list_tables()["TableNames"]
pool = keys(table)
# Every function runs with a key per tenant: each demo tenant's products are sealed at rest.
for name in [table] + [t for t in tables if t.startswith(f"{table}-tenant-")]:
    plain = [i["PK"]["S"] for i in scan(name) if i.get("kind", {}).get("S") == "PRODUCT" and "sealed" not in i]
    assert not plain, f"{name}: products stored plain: {plain[:3]}"
for tenant, placement in placements.items():
    prefix, own = f"TENANT#{tenant}#", f"{table}-tenant-{tenant}"
    in_pool = [k for k in pool if k.startswith(prefix)]
    if placement == "own":
        in_own = keys(own) if own in tables else []
        assert in_own and all(k.startswith(prefix) for k in in_own), f"{tenant}: {own} holds {len(in_own)} items"
        assert in_pool == [f"{prefix}TENANT"], f"{tenant}: the pool holds {in_pool[:5]}"
        print(f"{tenant}: {len(in_own)} items in {own}, its record in {table}")
    else:
        assert own not in tables and len(in_pool) > 1, f"{tenant}: pooled, but {own} exists or the pool is empty"
        print(f"{tenant}: {len(in_pool)} items in {table}")
PY
}
