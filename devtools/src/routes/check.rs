//! What routes.yaml may not say: each entry is checked in turn, and the first fault found is the
//! table's error, naming the entry's bin.

use std::collections::BTreeSet;

use super::{invalid_entry, Function, Route, RouteTable, TODO, WRITES};
use crate::DeclarationError;

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// `pooltable-prod-` leaves this much of Lambda's 64 characters for the bin.
const MAX_BIN_LEN: usize = 64 - "pooltable-prod-".len();

/// The function properties a route's `template:` may not set: the generator writes them from the
/// route (its caller decides TenancyConfig; its route, Events).
const GENERATED_PROPERTIES: [&str; 6] = [
    "FunctionName",
    "CodeUri",
    "TenancyConfig",
    "Events",
    "Metadata",
    "Role",
];

const RUST_KEYWORDS: [&str; 38] = [
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use",
    "where", "while", "yield",
];

impl RouteTable {
    /// Refuses the table at its first faulty entry, in the order written.
    pub(super) fn check(&self) -> Result<(), DeclarationError> {
        let mut seen_bins = BTreeSet::new();
        let mut seen_routes = BTreeSet::new();
        for f in &self.functions {
            check_function(f, &mut seen_bins, &mut seen_routes)
                .map_err(|message| invalid_entry(&f.bin, message))?;
        }
        Ok(())
    }
}

/// Entry `f`'s first fault, given the bins and routes (method, path) of the entries before it.
fn check_function<'a>(
    f: &'a Function,
    seen_bins: &mut BTreeSet<&'a str>,
    seen_routes: &mut BTreeSet<(&'a str, &'a str)>,
) -> Result<(), String> {
    check_names(f)?;
    if !seen_bins.insert(f.bin.as_str()) {
        return Err("listed twice".into());
    }
    check_platform_sessions(f)?;
    if f.route().is_none() && (f.lost_success.is_some() || f.transaction.is_some()) {
        return Err("lost_success and transaction describe routes, not triggered functions".into());
    }
    match (f.route(), &f.trigger) {
        (Some(r), None) => {
            check_method_and_path(&r)?;
            if !seen_routes.insert((r.method, r.path)) {
                return Err(format!("{} {} is served twice", r.method, r.path));
            }
            check_route_entry(f, &r)
        }
        (None, Some(_)) => check_trigger_entry(f),
        (Some(_), Some(_)) => Err("either route or trigger, not both".into()),
        (None, None) => Err("needs a route (METHOD /path) or a trigger".into()),
    }
}

/// The bin and the crate are names everything made from them can take: a Lambda function's, a Rust
/// module's, a crate's.
fn check_names(f: &Function) -> Result<(), String> {
    if !is_kebab_case(&f.bin) || !f.bin.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(
            "a bin is kebab-case: lowercase words joined by -, starting with a letter".into(),
        );
    }
    if RUST_KEYWORDS.contains(&f.module().as_str()) {
        return Err(format!(
            "{} is a Rust keyword: it names the handler's module",
            f.module()
        ));
    }
    // Lambda function names are at most 64 characters: `pooltable-<stage>-<bin>`.
    if f.bin.len() > MAX_BIN_LEN {
        return Err(format!("a bin is at most {MAX_BIN_LEN} characters"));
    }
    if !is_kebab_case(&f.krate) {
        return Err(format!("crate {:?} is not a crate name", f.krate));
    }
    Ok(())
}

/// Words of lowercase letters and digits, joined by `-`.
fn is_kebab_case(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|w| {
            !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

/// `platform` only on a function that takes tenant sessions, and only there: the template's
/// `PLATFORM_SESSION_ACCESS` is written from it.
fn check_platform_sessions(f: &Function) -> Result<(), String> {
    if f.platform.is_some() && f.platform_sessions().is_none() {
        return Err(
            "platform names sessions of the platform's partition, which a function without tenant-sessions never takes".into(),
        );
    }
    if f.template
        .as_deref()
        .is_some_and(|t| t.contains("PLATFORM_SESSION_ACCESS"))
    {
        return Err(
            "template: sets PLATFORM_SESSION_ACCESS, which the generator writes from `platform`"
                .into(),
        );
    }
    Ok(())
}

/// A method the API serves, on a path of `/segment/{param}/…`.
fn check_method_and_path(r: &Route) -> Result<(), String> {
    if !METHODS.contains(&r.method) {
        return Err(format!("method {} is not one of {METHODS:?}", r.method));
    }
    let segments_ok = r.path.starts_with('/')
        && r.path[1..].split('/').all(|s| {
            let name = s
                .strip_prefix('{')
                .and_then(|s| s.strip_suffix('}'))
                .unwrap_or(s);
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
    if !segments_ok {
        return Err(format!("path {:?} is not /segment/{{param}}/…", r.path));
    }
    Ok(())
}

/// What a route's entry declares besides its route: its sample, its effects, its status, its README
/// row and its extra template properties.
fn check_route_entry(f: &Function, r: &Route) -> Result<(), String> {
    check_sample(f, r)?;
    check_effects(f)?;
    if !matches!(f.success_status(), 200..=299) {
        return Err("status is a success status (2xx)".into());
    }
    if f.doc.is_none() {
        return Err("a route has a doc (its row in README's table)".into());
    }
    check_template_properties(f)
}

/// A route's sample fills exactly its path parameters, and expects a status under `sample`.
fn check_sample(f: &Function, r: &Route) -> Result<(), String> {
    let mut sample: Vec<&str> = f.sample.path.keys().filter_map(|k| k.as_str()).collect();
    let mut params = r.params();
    sample.sort_unstable();
    params.sort_unstable();
    if sample != params {
        return Err(format!(
            "the sample's path parameters {sample:?} are not the route's {params:?}"
        ));
    }
    if f.expect.is_some() {
        return Err("a route's sample has `expect` under sample".into());
    }
    Ok(())
}

/// `lost_success` names a write (or is still [`TODO`]), and a filled `transaction`'s condition is
/// one of its actions, answered with a 4xx.
fn check_effects(f: &Function) -> Result<(), String> {
    if let Some(l) = &f.lost_success {
        if l.write != TODO && !WRITES.contains(&l.write.as_str()) {
            return Err(format!(
                "lost_success.write {:?} is not one of {WRITES:?}",
                l.write
            ));
        }
    }
    if let Some(t) = f.transaction.as_ref().filter(|t| !t.todo) {
        if t.condition >= t.actions || !(400..=499).contains(&t.condition_status) {
            return Err("transaction.condition is one of its actions, and its status a 4xx".into());
        }
    }
    Ok(())
}

/// A route's `template:` sets none of the properties the generator writes from the route.
fn check_template_properties(f: &Function) -> Result<(), String> {
    for line in f.template.as_deref().unwrap_or_default().lines() {
        let key = line.split(':').next().unwrap_or_default();
        if GENERATED_PROPERTIES.contains(&key) {
            return Err(format!(
                "template: sets {key}, which the generator writes from the route"
            ));
        }
    }
    Ok(())
}

/// A triggered function's entry: what the end-to-end runs read from its answer, and no `route` (one
/// that is not METHOD /path lands here).
fn check_trigger_entry(f: &Function) -> Result<(), String> {
    if f.expect.is_none() {
        return Err("a function with a trigger has `expect`".into());
    }
    if f.route.is_some() {
        return Err("route is METHOD /path".into());
    }
    Ok(())
}
