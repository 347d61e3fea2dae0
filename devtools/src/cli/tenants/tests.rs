use super::super::{Cli, Exit};
use super::*;
use clap::Parser;

#[test]
fn a_restore_followed_to_its_end_is_judged_by_its_own_report_only() {
    // GIVEN the answer while it ran, and reports of the same restore and of an earlier one
    let first = json!({"restore": {"requestedAt": "2026-12-01T00:00:00Z", "phase": "putting"}});
    let report = |at: &str, phase: &str| json!({"lastRestore": {"requestedAt": at, "phase": phase, "reason": "the source went"}});
    // THEN only its own report, abandoned, is a refusal, naming the reason
    let abandoned = restore_ended_short(Some(&first), &report("2026-12-01T00:00:00Z", "abandoned"));
    assert!(abandoned.is_some_and(|why| why.contains("the source went")));
    let finished = report("2026-12-01T00:00:00Z", "finished");
    assert_eq!(restore_ended_short(Some(&first), &finished), None);
    let earlier = report("2026-11-01T00:00:00Z", "abandoned");
    assert_eq!(restore_ended_short(Some(&first), &earlier), None);
    // AND an answer that never ran (a dry run, or one ended before) judges nothing
    assert_eq!(restore_ended_short(None, &earlier), None);
}

#[test]
fn the_next_pages_cursor_is_read_from_a_relative_or_absolute_link() {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::LINK,
        "</tenants/acme/export?limit=10&cursor=abc%2Bdef>; rel=\"next\""
            .parse()
            .unwrap(),
    );
    assert_eq!(
        next_cursor("http://localhost:9000", &headers).as_deref(),
        Some("abc+def")
    );
    // AND the export's own Link, relative to the page's URL under a stage
    headers.insert(
        reqwest::header::LINK,
        "<export?limit=10&cursor=xyz>; rel=\"next\""
            .parse()
            .unwrap(),
    );
    let page = "https://api.example/dev/tenants/acme/export?limit=10";
    assert_eq!(next_cursor(page, &headers).as_deref(), Some("xyz"));
    assert_eq!(
        next_cursor("http://localhost:9000", &Default::default()),
        None
    );
}

fn parse(line: &str) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(
        ["pooltable", "tenants"]
            .into_iter()
            .chain(line.split_whitespace()),
    )
}

#[test]
fn a_command_line_without_a_tenant_or_a_value_is_a_usage_error() {
    for bad in [
        "get",
        "onboard acme --tier",
        "reshard acme eight",
        "move acme sideways",
    ] {
        assert_eq!(
            parse(bad).unwrap_err().exit_code(),
            Exit::Usage as i32,
            "{bad}"
        );
    }
}

#[test]
fn a_restore_is_a_source_or_an_abort_alone() {
    let body = |line: &str| match parse(line).unwrap().command {
        super::super::Command::Tenants(Tenants::Restore {
            source,
            dry_run,
            again,
            ..
        }) => restore_body(&source, dry_run, again),
        other => panic!("{other:?}"),
    };
    assert_eq!(body("restore acme --abort"), json!({"abort": true}));
    assert_eq!(
        body("restore acme --from-table p-restore-x --dry-run --wait")["from"]["table"],
        "p-restore-x"
    );
    // AND --again asks the last restore's source again (without it: no `again`)
    assert_eq!(
        body("restore acme --from-table p-restore-x --again"),
        json!({"from": {"table": "p-restore-x"}, "dryRun": false, "again": true})
    );
    assert!(body("restore acme --from-table p-restore-x")
        .get("again")
        .is_none());
    for bad in [
        "restore acme",
        "restore acme --abort --from-table x",
        "restore acme --from-table x --point-in-time y",
        "restore acme --abort --dry-run",
        "restore acme --abort --again",
    ] {
        assert_eq!(
            parse(bad).unwrap_err().exit_code(),
            Exit::Usage as i32,
            "{bad}"
        );
    }
}

#[test]
fn lanes_are_asked_of_an_operation_within_1_to_64() {
    // GIVEN each operation that starts lanes, with --lanes
    for line in [
        "reshard acme 8 --lanes 4",
        "move acme own --lanes 4",
        "restore acme --from-table x --lanes 4",
        "offboard acme --lanes 4",
    ] {
        // THEN it is taken
        let lanes = match parse(line).unwrap().command {
            super::super::Command::Tenants(
                Tenants::Reshard { lanes, .. }
                | Tenants::Move { lanes, .. }
                | Tenants::Restore { lanes, .. }
                | Tenants::Offboard { lanes, .. },
            ) => lanes,
            other => panic!("{other:?}"),
        };
        assert_eq!(lanes.lanes, Some(4), "{line}");
    }
    // AND out of range, or on an operation that has none, it is a usage error
    for bad in [
        "reshard acme 8 --lanes 0",
        "offboard acme --lanes 65",
        "encrypt acme --lanes 2",
    ] {
        assert_eq!(
            parse(bad).unwrap_err().exit_code(),
            Exit::Usage as i32,
            "{bad}"
        );
    }
}

#[test]
fn an_onboarding_leaves_out_the_options_not_given() {
    // GIVEN an onboarding's options, two of them not given (null)
    let asked = json!({"tenantId": "acme", "tier": "standard", "shardCount": null,
        "placement": "own", "kmsKeyArn": null});
    // WHEN it is typed as the client's request
    let body: types::OnboardTenant = typed(asked, "a tenant to onboard").unwrap();
    // THEN the request names only those given
    assert_eq!(
        serde_json::to_value(body).unwrap(),
        json!({"tenantId": "acme", "tier": "standard", "placement": "own"})
    );
}

/// The request body `line` (`onboard …` or `tier …`) sends, typed as the client's request.
fn body_of(line: &str) -> Value {
    let Cli {
        command: super::super::Command::Tenants(command),
        ..
    } = parse(line).unwrap()
    else {
        panic!("{line}: not a tenants command");
    };
    match command {
        onboarding @ Tenants::Onboard { .. } => {
            serde_json::to_value(onboarding_body(onboarding).unwrap()).unwrap()
        }
        Tenants::Tier { tier, limits, .. } => {
            let body = tier_body(tier, limits);
            serde_json::to_value(typed::<types::UpdateTenant>(body, "a change").unwrap()).unwrap()
        }
        other => panic!("{line}: {other:?}"),
    }
}

#[test]
fn custom_limits_are_asked_on_an_onboarding_and_a_change_of_tier_both_or_neither() {
    // GIVEN an onboarding with custom limits and no tier: tier custom, with its limits
    let limits = json!({"requestsPerSecond": 50, "capacityUnitsPerSecond": 200});
    assert_eq!(
        body_of("onboard acme --requests-per-second 50 --capacity-units-per-second 200"),
        json!({"tenantId": "acme", "tier": "custom", "limits": limits})
    );
    // AND a named tier without limits, and the default tier, send no limits
    assert_eq!(
        body_of("onboard acme --tier premium"),
        json!({"tenantId": "acme", "tier": "premium"})
    );
    assert_eq!(
        body_of("onboard acme"),
        json!({"tenantId": "acme", "tier": "standard"})
    );
    // AND a change to tier custom carries its limits
    assert_eq!(
        body_of("tier acme custom --requests-per-second 50 --capacity-units-per-second 200"),
        json!({"tier": "custom", "limits": limits})
    );
    // AND one limit without the other, or a limit that is no number, is a usage error
    for bad in [
        "onboard acme --requests-per-second 50",
        "tier acme custom --capacity-units-per-second 200",
        "onboard acme --requests-per-second many --capacity-units-per-second 200",
    ] {
        assert_eq!(
            parse(bad).unwrap_err().exit_code(),
            Exit::Usage as i32,
            "{bad}"
        );
    }
}
