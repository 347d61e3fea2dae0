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
            source, dry_run, ..
        }) => restore_body(&source, dry_run),
        other => panic!("{other:?}"),
    };
    assert_eq!(body("restore acme --abort"), json!({"abort": true}));
    assert_eq!(
        body("restore acme --from-table p-restore-x --dry-run --wait")["from"]["table"],
        "p-restore-x"
    );
    for bad in [
        "restore acme",
        "restore acme --abort --from-table x",
        "restore acme --from-table x --point-in-time y",
        "restore acme --abort --dry-run",
    ] {
        assert_eq!(
            parse(bad).unwrap_err().exit_code(),
            Exit::Usage as i32,
            "{bad}"
        );
    }
}
