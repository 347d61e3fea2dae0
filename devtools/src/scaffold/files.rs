//! Writing a scaffolded route: its crate and the entity's own routes found in the table, its three
//! hand-written files (handler, test, routes.yaml entry) and the test's module declared, then the
//! generator run, or everything put back as it was.

use std::path::{Path, PathBuf};

use super::entry::route_entry;
use super::handler::handler_source;
use super::test_file::{test_source, EntityRoutes};
use super::{NewRoute, ScaffoldError};
use crate::generate;
use crate::routes::RouteTable;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ScaffoldError + '_ {
    move |source| ScaffoldError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn entity_routes(table: &RouteTable, new: &NewRoute) -> Result<EntityRoutes, ScaffoldError> {
    let id = new.id();
    let own = |method: &str| {
        table.routes().find(|r| {
            r.method == method
                && r.path.ends_with(&format!("/{{{id}}}"))
                && r.params() == [id.as_str()]
        })
    };
    let put = own("PUT").ok_or_else(|| {
        ScaffoldError::Usage(format!(
            "no route puts a {} (PUT /…/{{{id}}}): the scaffolded test puts one in place through it",
            new.name()
        ))
    })?;
    let sample_id = put
        .function
        .sample
        .path
        .iter()
        .find(|(k, _)| k.as_str() == Some(id.as_str()))
        .and_then(|(_, v)| v.as_str())
        .unwrap_or("sample-1")
        .to_owned();
    Ok(EntityRoutes {
        put: put.function.bin.clone(),
        get: own("GET").map(|r| r.function.bin.clone()),
        sample_id,
    })
}

/// Writes the route's three hand-written files and runs the generator; returns every file written.
pub fn new_route(root: &Path, new: &NewRoute) -> Result<Vec<PathBuf>, ScaffoldError> {
    // A draft: another scaffolded route may still wait for its TODOs.
    let table = RouteTable::load_draft(root)?;
    let krate = match &new.krate {
        Some(k) => k.clone(),
        None => nearest_crate(&table, &new.path).ok_or_else(|| {
            ScaffoldError::Usage(format!(
                "no route shares a path segment with {}: name its crate with --crate",
                new.path
            ))
        })?,
    };
    check_crate(root, &krate)?;
    let routes = entity_routes(&table, new)?;
    let entry = route_entry(new, &krate, &routes.sample_id);
    // The table refuses a bad bin, method, path or a route served twice before anything is written.
    let mut text =
        std::fs::read_to_string(root.join("routes.yaml")).map_err(io(Path::new("routes.yaml")))?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&entry);
    RouteTable::parse_draft(&text)?;

    let module = new.bin.replace('-', "_");
    let handler = PathBuf::from(format!("functions/{krate}/src/{module}.rs"));
    // The integration tests are one binary: the new file is a module of tests/tests/all/main.rs.
    let test = PathBuf::from(format!("tests/tests/all/{module}.rs"));
    let test_main = PathBuf::from("tests/tests/all/main.rs");
    let main_before = std::fs::read_to_string(root.join(&test_main)).map_err(io(&test_main))?;
    let main_text = with_module(&main_before, &module);
    for path in [&handler, &test] {
        if root.join(path).exists() {
            return Err(ScaffoldError::Usage(format!(
                "{} exists already",
                path.display()
            )));
        }
    }
    let handler_text = generate::rustfmt(root, &handler_source(new))?;
    let test_text = generate::rustfmt(root, &test_source(new, &routes))?;
    let routes_yaml = root.join("routes.yaml");
    let before = std::fs::read_to_string(&routes_yaml).map_err(io(Path::new("routes.yaml")))?;
    let written = std::fs::write(root.join(&handler), handler_text)
        .map_err(io(&handler))
        .and_then(|()| std::fs::write(root.join(&test), test_text).map_err(io(&test)))
        .and_then(|()| std::fs::write(root.join(&test_main), &main_text).map_err(io(&test_main)))
        .and_then(|()| std::fs::write(&routes_yaml, &text).map_err(io(Path::new("routes.yaml"))))
        .and_then(|()| Ok(generate::write(root)?));
    match written {
        Ok(generated) => {
            let mut all = vec![handler, test, test_main, PathBuf::from("routes.yaml")];
            all.extend(generated);
            Ok(all)
        }
        Err(e) => {
            // Nothing half-written: the four files go back to what they were. (The generator
            // writes only once everything it writes is known, so it left nothing to undo.)
            let _ = std::fs::remove_file(root.join(&handler));
            let _ = std::fs::remove_file(root.join(&test));
            let _ = std::fs::write(root.join(&test_main), main_before);
            let _ = std::fs::write(&routes_yaml, before);
            Err(e)
        }
    }
}

/// tests/tests/all/main.rs with `mod <module>;` among its modules, in order.
pub(super) fn with_module(main: &str, module: &str) -> String {
    let line = format!("mod {module};");
    let mut lines: Vec<&str> = main.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("mod ") && *l > line.as_str())
        .or_else(|| {
            lines
                .iter()
                .rposition(|l| l.starts_with("mod "))
                .map(|i| i + 1)
        })
        .unwrap_or(lines.len());
    lines.insert(at, &line);
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// A crate the generator can add a route to: a workspace member the tests depend on, whose
/// manifest and lib.rs hold the generated parts.
fn check_crate(root: &Path, krate: &str) -> Result<(), ScaffoldError> {
    let refuse = |why: &str| Err(ScaffoldError::Usage(format!("functions/{krate}: {why}")));
    let read = |rel: &str| std::fs::read_to_string(root.join(rel)).unwrap_or_default();
    let manifest = read(&format!("functions/{krate}/Cargo.toml"));
    if manifest.is_empty() {
        return refuse("not a crate");
    }
    if !read("Cargo.toml").contains(&format!("\"functions/{krate}\"")) {
        return refuse("not a member of the workspace (Cargo.toml's members)");
    }
    if !read("tests/Cargo.toml").contains(&format!("\n{krate} = {{ path")) {
        return refuse("not a dependency of tests/Cargo.toml (its dispatch calls the handler)");
    }
    let lib = read(&format!("functions/{krate}/src/lib.rs"));
    if !manifest.contains("@generated begin") || !lib.contains("@generated begin") {
        return refuse("its Cargo.toml and src/lib.rs need the @generated marker lines (see functions/products)");
    }
    Ok(())
}

/// The crate of the route whose path shares the most leading segments with `path` (at least one).
fn nearest_crate(table: &RouteTable, path: &str) -> Option<String> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    table
        .routes()
        .map(|r| {
            let shared = r
                .path
                .split('/')
                .filter(|s| !s.is_empty())
                .zip(&segments)
                .take_while(|(a, b)| a == *b)
                .count();
            (shared, r.function.krate.clone())
        })
        .filter(|(shared, _)| *shared > 0)
        .max_by_key(|(shared, _)| *shared)
        .map(|(_, krate)| krate)
}
