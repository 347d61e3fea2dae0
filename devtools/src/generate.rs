//! `pooltable gen`: every file, or part of a file, that names a route, written from `routes.yaml`.
//! A part of a hand-written file lies between two marker lines holding `@generated begin` and
//! `@generated end`; a whole generated file says so in its first line. `pooltable gen --check`
//! (and `tests/tests/generated.rs`) fails when any of them differs from what this writes.

mod crates;
mod docs;
mod events;
mod harness;
mod log_groups;
mod openapi;
pub mod openapi30;
mod roles;
mod scripts;
mod template;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::routes::{Function, RouteTable};

#[derive(Debug, Error)]
pub enum GenerateError {
    #[error(transparent)]
    Routes(#[from] crate::DeclarationError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Shape { path: String, message: String },
}

/// A file as `pooltable gen` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// Relative to the repository's root.
    pub path: PathBuf,
    pub contents: String,
}

const BEGIN: &str = "@generated begin";
const END: &str = "@generated end";

fn read(root: &Path, rel: &str) -> Result<String, GenerateError> {
    std::fs::read_to_string(root.join(rel)).map_err(|source| GenerateError::Io {
        path: rel.to_owned(),
        source,
    })
}

/// Every generated file of the repository at `root`, from its routes.yaml (refused while an entry is
/// `TODO`: [`RouteTable::load`]).
pub fn generate(root: &Path) -> Result<Vec<Generated>, GenerateError> {
    generate_from(root, &RouteTable::load(root)?)
}

fn generate_from(root: &Path, table: &RouteTable) -> Result<Vec<Generated>, GenerateError> {
    let mut out = repository_files(root, table)?;
    out.extend(route_files(root, table)?);
    out.extend(crate_files(root, table)?);
    Ok(out)
}

/// The files, or parts of files, outside the functions' crates that list the routes, or are made
/// from what does.
fn repository_files(root: &Path, table: &RouteTable) -> Result<Vec<Generated>, GenerateError> {
    let mut out = vec![
        Generated {
            path: "template.yaml".into(),
            contents: template::template(table, &read(root, "template.in.yaml")?)?,
        },
        spliced(root, "Cargo.toml", &scripts::watch_router(table))?,
        spliced(root, "scripts/expected.sh", &scripts::expected(table))?,
        spliced(root, "README.md", &docs::readme_table(table))?,
        spliced(root, "docs/key-scheme.md", &docs::key_table())?,
        spliced(root, "ARCHITECTURE.md", &docs::key_table())?,
    ];
    out.extend(openapi::openapi_files(root, table)?);
    out.extend([
        spliced(
            root,
            "scripts/schemathesis.sh",
            &scripts::operator_routes(table),
        )?,
        spliced(
            root,
            "tests/src/dispatch.rs",
            &harness::dispatch_rows(table),
        )?,
        spliced(root, "tests/src/client.rs", &harness::client_rows(table))?,
    ]);
    Ok(out)
}

/// Each route's sample event and bin.
fn route_files(root: &Path, table: &RouteTable) -> Result<Vec<Generated>, GenerateError> {
    let mut out = Vec::new();
    for r in table.routes() {
        out.push(Generated {
            path: format!("events/{}.json", r.function.bin).into(),
            contents: events::event(&r),
        });
        out.push(Generated {
            path: format!(
                "functions/{}/src/bin/{}.rs",
                r.function.krate, r.function.bin
            )
            .into(),
            contents: rustfmt(root, &crates::bin_main(r.function))?,
        });
    }
    Ok(out)
}

/// The generated parts of each function crate's manifest (its bins) and lib.rs (its handlers'
/// modules), crate by crate in name order.
fn crate_files(root: &Path, table: &RouteTable) -> Result<Vec<Generated>, GenerateError> {
    let mut by_crate: BTreeMap<&str, Vec<&Function>> = BTreeMap::new();
    for f in &table.functions {
        by_crate.entry(f.krate.as_str()).or_default().push(f);
    }
    let mut out = Vec::new();
    for (krate, functions) in by_crate {
        let manifest = format!("functions/{krate}/Cargo.toml");
        out.push(spliced(root, &manifest, &crates::bins(&functions))?);
        let lib = format!("functions/{krate}/src/lib.rs");
        out.push(spliced(root, &lib, &crates::modules(&functions))?);
    }
    Ok(out)
}

/// The file `rel` of the repository with its generated part replaced by `body` ([`splice`]).
fn spliced(root: &Path, rel: &str, body: &str) -> Result<Generated, GenerateError> {
    Ok(Generated {
        path: rel.into(),
        contents: splice(rel, &read(root, rel)?, body)?,
    })
}

/// The generated files that differ from what is on disk (or are missing), and the [`orphans`].
pub fn stale(root: &Path) -> Result<Vec<PathBuf>, GenerateError> {
    stale_from(root, &RouteTable::load(root)?)
}

fn stale_from(root: &Path, table: &RouteTable) -> Result<Vec<PathBuf>, GenerateError> {
    let mut stale: Vec<PathBuf> = generate_from(root, table)?
        .into_iter()
        .filter(|g| {
            std::fs::read_to_string(root.join(&g.path)).ok().as_deref() != Some(&g.contents)
        })
        .map(|g| g.path)
        .collect();
    stale.extend(orphans_from(root, table));
    Ok(stale)
}

/// The events and bins of functions routes.yaml no longer (or never) declares: a route removed or
/// renamed leaves them behind. `pooltable gen` never deletes a file; it names them.
pub fn orphans(root: &Path) -> Result<Vec<PathBuf>, GenerateError> {
    Ok(orphans_from(root, &RouteTable::load_draft(root)?))
}

fn orphans_from(root: &Path, table: &RouteTable) -> Vec<PathBuf> {
    let declared = |bin: &str| table.function(bin).is_some();
    let stems = |dir: &Path, suffix: &str| -> Vec<String> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let name = e.ok()?.file_name().to_string_lossy().into_owned();
                name.strip_suffix(suffix).map(str::to_owned)
            })
            .collect()
    };
    let mut orphans: Vec<PathBuf> = stems(&root.join("events"), ".json")
        .into_iter()
        .filter(|bin| !declared(bin))
        .map(|bin| format!("events/{bin}.json").into())
        .collect();
    for krate in stems(&root.join("functions"), "") {
        let dir = format!("functions/{krate}/src/bin");
        orphans.extend(
            stems(&root.join(&dir), ".rs")
                .into_iter()
                .filter(|bin| !declared(bin))
                .map(|bin| format!("{dir}/{bin}.rs").into()),
        );
    }
    orphans.sort();
    orphans
}

/// Writes every generated file; returns those it changed. It writes from a draft (an entry of
/// routes.yaml may still be `TODO`: [`RouteTable::unfilled`]), so a scaffolded route builds and
/// serves while `gen --check` and the tests still refuse it.
pub fn write(root: &Path) -> Result<Vec<PathBuf>, GenerateError> {
    let table = RouteTable::load_draft(root)?;
    let orphans = orphans_from(root, &table);
    let changed: Vec<PathBuf> = stale_from(root, &table)?
        .into_iter()
        .filter(|p| !orphans.contains(p))
        .collect();
    for g in generate_from(root, &table)? {
        if changed.contains(&g.path) {
            let path = root.join(&g.path);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|source| GenerateError::Io {
                    path: g.path.display().to_string(),
                    source,
                })?;
            }
            std::fs::write(&path, &g.contents).map_err(|source| GenerateError::Io {
                path: g.path.display().to_string(),
                source,
            })?;
        }
    }
    Ok(changed)
}

/// Rust code as `cargo fmt` leaves it, so that formatting the workspace never makes a generated
/// file stale.
pub(crate) fn rustfmt(root: &Path, code: &str) -> Result<String, GenerateError> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let failed = |message: String| GenerateError::Shape {
        path: "rustfmt".into(),
        message,
    };
    // Run in the repository, so its rustfmt.toml (and no one's home configuration) applies.
    let mut child = Command::new("rustfmt")
        .current_dir(root)
        .args(["--edition", "2021", "--emit", "stdout"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            failed(format!(
                "cannot run rustfmt (rustup component add rustfmt): {e}"
            ))
        })?;
    child
        .stdin
        .take()
        .ok_or_else(|| failed("no stdin".into()))?
        .write_all(code.as_bytes())
        .map_err(|e| failed(e.to_string()))?;
    let out = child
        .wait_with_output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    String::from_utf8(out.stdout).map_err(|e| failed(e.to_string()))
}

/// `text` with the lines between its `@generated begin` and `@generated end` marker lines replaced
/// by `body` (which ends with a newline, or is empty).
fn splice(path: &str, text: &str, body: &str) -> Result<String, GenerateError> {
    let shape = |message: &str| GenerateError::Shape {
        path: path.to_owned(),
        message: message.to_owned(),
    };
    let begin = text
        .find(BEGIN)
        .ok_or_else(|| shape("no `@generated begin` marker line"))?;
    let body_start = begin
        + text[begin..]
            .find('\n')
            .ok_or_else(|| shape("nothing after the begin marker"))?
        + 1;
    let end_marker = text[body_start..]
        .find(END)
        .ok_or_else(|| shape("no `@generated end` marker line"))?
        + body_start;
    let end_line = text[..end_marker].rfind('\n').map_or(0, |i| i + 1);
    if text[end_marker..].contains(BEGIN) {
        return Err(shape("more than one generated part"));
    }
    Ok(format!(
        "{}{body}{}",
        &text[..body_start],
        &text[end_line..]
    ))
}

/// Replaces the line holding `marker` (a `# @generate <name>` comment) with `body`.
fn replace_marker(
    path: &str,
    text: &str,
    marker: &str,
    body: &str,
) -> Result<String, GenerateError> {
    let at = text.find(marker).ok_or_else(|| GenerateError::Shape {
        path: path.to_owned(),
        message: format!("no `{marker}` line"),
    })?;
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i + 1);
    Ok(format!(
        "{}{body}{}",
        &text[..line_start],
        &text[line_end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_replaces_only_between_the_markers() {
        let text = "a\n# @generated begin\nold\n# @generated end\nb\n";
        assert_eq!(
            splice("f", text, "new\n").unwrap(),
            "a\n# @generated begin\nnew\n# @generated end\nb\n"
        );
        assert!(splice("f", "a\n", "x\n").is_err());
    }
}
