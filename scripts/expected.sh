#!/usr/bin/env bash
# Each function's documented status for its events/<bin>.json, in the order both end-to-end runs
# send them (scripts/e2e.sh through cargo lambda watch, scripts/sam-local.sh through SAM's runtime
# emulator), on an empty table: tenant acme is onboarded first (sharded routes need its record);
# the product and employee the events name are created, read, listed, then deleted; the session the
# events name does not exist, except the one create-session makes for cust-42 (so its children
# list is 404 too); offboard-tenant names tenant globex, never onboarded (404). create-import
# enqueues two products (its Idempotency-Key fixes the import id get-import names); the consumer,
# not behind the API, answers an SQS batch response: "batch:0" is one with no item to retry (its
# event must first be signed with the run's key: sign_consumer_event). The lifecycle driver, on a
# schedule, answers what it left listed: "pending:0" (nothing runs by then). The lifecycle events
# publisher, fed by the table's stream, answers a stream batch response ("batch:0": it put the
# sample's tenantOnboarded event on the local bus, EVENT_BUS_NAME). The Cognito trigger answers
# what it adds to the access token: "token:acme" (the sample user's tenant). The SaaS Builder
# Toolkit's control plane events answer the reply they put on CONTROL_PLANE_EVENT_BUS:
# "reply:activateFailure" (the sample activates globex, never onboarded). Sourced after
# scripts/tools.sh.
# @generated begin: `pooltable gen` writes these lines from routes.yaml
EXPECTED=(
  "onboard-tenant 201"
  "get-tenant 200"
  "update-tenant 200"
  "export-tenant 200"
  "offboard-tenant 404"
  "restore-tenant 404"
  "drive-lifecycle pending:0"
  "work-lanes batch:0"
  "publish-lifecycle-events batch:0"
  "pre-token-generation token:acme"
  "control-plane-events reply:activateFailure"
  "put-product 201"
  "get-product 200"
  "query-tenant-products 200"
  "delete-product 204"
  "put-department 201"
  "put-employee 201"
  "get-employee 200"
  "get-department 200"
  "list-employees 200"
  "list-departments 200"
  "list-department-employees 200"
  "delete-employee 204"
  "put-user 201"
  "get-user 200"
  "find-user-by-email 200"
  "create-order 201"
  "get-order 200"
  "list-tenant-orders 200"
  "create-transfer-code 201"
  "redeem-transfer-code 404"
  "put-integration-token 200"
  "get-integration-token 200"
  "erase-user 200"
  "erase-tenant-user 200"
  "create-import 202"
  "import-consumer batch:0"
  "get-import 200"
  "get-usage 200"
  "get-tenant-usage 200"
  "create-session 201"
  "get-session-by-session-id 404"
  "expire-session 404"
  "get-child-sessions-by-session-id 404"
  "get-session-by-child-session-id 404"
  "get-last-login-time-by-customer-id 200"
  "get-session-id-by-customer-id 404"
  "get-sessions-by-customer-id 200"
)
# @generated end

# Every binary must have an expectation, and every expectation a binary and an event.
check_expectations_cover_binaries() {
  local bins listed line bin
  bins=$(ls "$ROOT"/functions/*/src/bin/*.rs | xargs -n1 basename | sed 's/\.rs$//' | sort)
  listed=$(printf '%s\n' "${EXPECTED[@]}" | cut -d' ' -f1 | sort)
  [ "$bins" = "$listed" ] || die "scripts/expected.sh does not list exactly the binaries: $(echo $bins)"
  for line in "${EXPECTED[@]}"; do
    bin=${line%% *}
    [ -f "$ROOT/events/$bin.json" ] || die "events/$bin.json is missing"
  done
}

# The statusCode of a Lambda proxy response printed as JSON: the whole of $1, or its last JSON line
# (sam local invoke prints the function's logs before the response). For an SQS batch response,
# "batch:<messages to retry>"; for the lifecycle driver's, "pending:<tenants still listed>"; for
# the Cognito trigger's, "token:<the tenant it adds to the access token>"; for the control plane's
# events, "reply:<the reply's name>".
status_code_of() {
  python3 -c '
import json, sys
text = sys.argv[1]
for candidate in [text, *reversed(text.splitlines())]:
    try:
        answer = json.loads(candidate)
        if "batchItemFailures" in answer:
            print("batch:%d" % len(answer["batchItemFailures"])); break
        if "triggerSource" in answer and "response" in answer:
            details = (answer["response"] or {}).get("claimsAndScopeOverrideDetails") or {}
            added = (details.get("accessTokenGeneration") or {}).get("claimsToAddOrOverride") or {}
            print("token:%s" % added.get("custom:tenantId", "-")); break
        if "reply" in answer and "duplicate" in answer:
            print("reply:%s" % (answer["reply"] or "-").removeprefix("sbt_aws_")); break
        if "pending" in answer and "listed" in answer:
            print("pending:%d" % answer["pending"]); break
        print(answer["statusCode"]); break
    except (ValueError, KeyError, TypeError):
        continue
else:
    print("no-response")' "$1"
}

# The event file to send <bin>: its events/<bin>.json, except the import consumer's, which is
# first made what POST /imports would send now for table $3 (issued now, for acme's current record,
# signed with this run's CURSOR_SIGNING_KEY) into $2 (a directory), and the lane worker's, signed
# with that key as a function sends it.
event_file() { # bin dir table
  if [ "$1" = import-consumer ]; then
    "$TOOLS/venv/bin/python" "$ROOT/scripts/import_queue.py" sign-event events/import-consumer.json "$2/import-consumer.json" "$3"
    echo "$2/import-consumer.json"
  elif [ "$1" = work-lanes ]; then
    "$TOOLS/venv/bin/python" "$ROOT/scripts/import_queue.py" sign-lane-event events/work-lanes.json "$2/work-lanes.json"
    echo "$2/work-lanes.json"
  else
    echo "events/$1.json"
  fi
}

# Checks that a Lambda proxy response answered the expected status: logs "<label>: <status>", or the
# mismatch with the whole response (and where to look), and then returns 1.
expect_status() { # label want response [where-to-look]
  local got
  got=$(status_code_of "$3")
  if [ "$got" = "$2" ]; then
    log "$1: $got"
  else
    log "$1: expected $2, got $got: $3${4:+ ($4)}"
    return 1
  fi
}
