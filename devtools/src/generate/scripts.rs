//! The route lists the workspace's own tooling reads: the dev watcher's router (Cargo.toml), the
//! status each sample answers on the end-to-end runs (scripts/expected.sh) and the routes the
//! contract check's tenant pass leaves out (scripts/schemathesis.sh).

use std::fmt::Write as _;

use crate::routes::{Caller, RouteTable};

pub(super) fn watch_router(table: &RouteTable) -> String {
    let mut paths: Vec<(&str, Vec<String>)> = Vec::new();
    for r in table.routes() {
        let entry = format!(
            "{{ method = \"{}\", function = \"{}\" }}",
            r.method, r.function.bin
        );
        match paths.iter_mut().find(|(p, _)| *p == r.path) {
            Some((_, methods)) => methods.push(entry),
            None => paths.push((r.path, vec![entry])),
        }
    }
    paths
        .into_iter()
        .map(|(path, methods)| format!("\"{path}\" = [{}]\n", methods.join(", ")))
        .collect()
}

/// The routes only an operator may call, which the contract check's tenant pass leaves out.
pub(super) fn operator_routes(table: &RouteTable) -> String {
    let bins: Vec<&str> = table
        .routes()
        .filter(|r| r.function.caller == Caller::Operator)
        .map(|r| r.function.bin.as_str())
        .collect();
    format!("OPERATOR_ROUTES=({})\n", bins.join(" "))
}

pub(super) fn expected(table: &RouteTable) -> String {
    let mut s = String::from("EXPECTED=(\n");
    for f in &table.functions {
        let _ = writeln!(s, "  \"{} {}\"", f.bin, f.expectation());
    }
    s.push_str(")\n");
    s
}
