//! The tables of the docs: README's table of functions, and the key table of docs/key-scheme.md
//! and ARCHITECTURE.md.

use std::fmt::Write as _;

use crate::routes::RouteTable;

/// The key table, from the builders themselves (`shared::identity::keys::key_table`): every key's
/// bytes for a sample tenant, so `gen --check` fails when one changes.
pub(super) fn key_table() -> String {
    format!(
        "Every key as the builders write it, for the sample tenant `acme` with {} shards \
         (`shared::identity::keys::key_table`):\n\n{}",
        shared::identity::keys::SAMPLE_SHARDS,
        shared::identity::keys::key_table_markdown()
    )
}

pub(super) fn readme_table(table: &RouteTable) -> String {
    let mut s = String::from(
        "| bin | route | index | key condition | DynamoDB requests |\n|---|---|---|---|---|\n",
    );
    for f in &table.functions {
        let Some(doc) = &f.doc else { continue };
        let mut route = match f.route() {
            Some(r) => format!(
                "`{} {}{}`",
                r.method,
                r.path,
                doc.query.as_deref().unwrap_or_default()
            ),
            None => String::new(),
        };
        if let Some(about) = &doc.about {
            let joiner = if route.is_empty() || about.starts_with(':') {
                ""
            } else {
                " "
            };
            route = format!("{route}{joiner}{about}");
        }
        let _ = writeln!(
            s,
            "| `{}` | {route} | {} | {} | {} |",
            f.bin, doc.index, doc.keys, doc.requests
        );
    }
    s
}
