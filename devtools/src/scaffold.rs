//! `pooltable new route <bin> <METHOD> <path> [--operator] [--entity KIND] [--crate CRATE]`: a new
//! route, served. It writes the three hand-written files a route has — its handler, its test
//! (GIVEN / WHEN / THEN) and its line in routes.yaml — and then runs `pooltable gen`, which writes
//! everything derived: the bin, the template's function, the REST API path, openapi.yaml's
//! operation skeleton, events/<bin>.json, the expected status, the watch router, README's row and
//! the tests' dispatch.
//!
//! The handler is a working starting point: one Query of the tenant's partition
//! `TENANT#t#<KIND>#<path parameters…>`, answering 200 `{kind, count}`. Replace it with the route's
//! access pattern, and its `doc` in routes.yaml with what it does. A handler that writes a new kind
//! declares it in `shared::identity::entities::ENTITIES` (its items are then catalogued, exported
//! and offboarded like every id-named kind).

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::generate::{self, GenerateError};
use crate::routes::{path_params, RouteTable, RouteTableError};

#[derive(Debug, Error)]
pub enum ScaffoldError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Routes(#[from] RouteTableError),
    #[error(transparent)]
    Generate(#[from] GenerateError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// What `pooltable new route` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRoute {
    pub bin: String,
    pub method: String,
    pub path: String,
    pub operator: bool,
    /// The partition's kind (`WIDGET`): by default the path's first segment, in capitals.
    pub entity: Option<String>,
    /// The crate under functions/: by default the one serving the route whose path shares the
    /// most leading segments with this one.
    pub krate: Option<String>,
}

impl NewRoute {
    /// From the arguments after `new route`.
    pub fn parse(args: &[String]) -> Result<Self, ScaffoldError> {
        let usage = || {
            ScaffoldError::Usage(
                "usage: pooltable new route <bin> <METHOD> <path> [--operator] [--entity KIND] [--crate CRATE]"
                    .into(),
            )
        };
        let [bin, method, path, rest @ ..] = args else {
            return Err(usage());
        };
        let mut new = NewRoute {
            bin: bin.clone(),
            method: method.to_ascii_uppercase(),
            path: path.clone(),
            operator: false,
            entity: None,
            krate: None,
        };
        if new.method != "GET" {
            return Err(ScaffoldError::Usage(format!(
                "pooltable new route scaffolds read routes (GET), whose handler is a Query; a {} route \
                 decides what it writes and what a retry of its lost answer returns (routes.yaml's \
                 lost_success): write its handler by hand (README, Add an access pattern)",
                new.method
            )));
        }
        let mut it = rest.iter();
        while let Some(flag) = it.next() {
            match flag.as_str() {
                "--operator" => new.operator = true,
                "--entity" => new.entity = Some(it.next().ok_or_else(usage)?.to_ascii_uppercase()),
                "--crate" => new.krate = Some(it.next().ok_or_else(usage)?.clone()),
                _ => return Err(usage()),
            }
        }
        if let Some(kind) = &new.entity {
            if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
                return Err(ScaffoldError::Usage(format!(
                    "--entity {kind}: a kind is letters and _ (it becomes a key segment)"
                )));
            }
        }
        Ok(new)
    }

    fn kind(&self) -> String {
        self.entity.clone().unwrap_or_else(|| {
            self.path
                .split('/')
                .find(|s| !s.is_empty() && !s.starts_with('{'))
                .unwrap_or("ITEMS")
                .to_ascii_uppercase()
                .replace('-', "_")
        })
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ScaffoldError + '_ {
    move |source| ScaffoldError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes the route's three hand-written files and runs the generator; returns every file written.
pub fn new_route(root: &Path, new: &NewRoute) -> Result<Vec<PathBuf>, ScaffoldError> {
    let table = RouteTable::load(root)?;
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
    check_kind(&new.kind())?;
    let entry = route_entry(new, &krate);
    // The table refuses a bad bin, method, path or a route served twice before anything is written.
    let mut text =
        std::fs::read_to_string(root.join("routes.yaml")).map_err(io(Path::new("routes.yaml")))?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&entry);
    RouteTable::parse(&text)?;

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
    let test_text = generate::rustfmt(root, &test_source(new))?;
    let routes = root.join("routes.yaml");
    let before = std::fs::read_to_string(&routes).map_err(io(Path::new("routes.yaml")))?;
    let written = std::fs::write(root.join(&handler), handler_text)
        .map_err(io(&handler))
        .and_then(|()| std::fs::write(root.join(&test), test_text).map_err(io(&test)))
        .and_then(|()| std::fs::write(root.join(&test_main), &main_text).map_err(io(&test_main)))
        .and_then(|()| std::fs::write(&routes, &text).map_err(io(Path::new("routes.yaml"))))
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
            let _ = std::fs::write(&routes, before);
            Err(e)
        }
    }
}

/// tests/tests/all/main.rs with `mod <module>;` among its modules, in order.
fn with_module(main: &str, module: &str) -> String {
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

/// The key segments the route's partition may not use: the fixed partition spaces (whose items
/// the catalog does not list, so export and offboarding would miss them) and the platform's own.
const RESERVED_KINDS: [&str; 8] = [
    "CATALOG",
    "IDEMPOTENCY",
    "DELETED",
    "SEALING",
    "IMPORT",
    "IMPORTS_DUE",
    "OFFBOARDED",
    "DRIVE",
];

fn check_kind(kind: &str) -> Result<(), ScaffoldError> {
    if shared::identity::entities::fixed_space(kind).is_some() || RESERVED_KINDS.contains(&kind) {
        return Err(ScaffoldError::Usage(format!(
            "{kind} is a fixed partition space or the platform's own key segment: name another with --entity"
        )));
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

fn route_entry(new: &NewRoute, krate: &str) -> String {
    let params = path_params(&new.path);
    let mut s = format!(
        "- bin: {bin}\n  crate: {krate}\n  route: {method} {path}\n  caller: {caller}\n  status: 200\n",
        bin = new.bin,
        method = new.method,
        path = new.path,
        caller = if new.operator { "operator" } else { "tenant" },
    );
    if !params.is_empty() {
        let values: Vec<String> = params.iter().map(|p| format!("{p}: sample-1")).collect();
        s.push_str(&format!("  sample:\n    path: {{{}}}\n", values.join(", ")));
    }
    let partition: String = params.iter().map(|p| format!("#<{p}>")).collect();
    s.push_str(&format!(
        "  doc:\n    about: '(scaffolded by pooltable new route: say what it does)'\n    index: table\n    keys: '`PK = TENANT#t#{kind}{partition}`, Limit 25'\n    requests: {{Query: 1}}\n",
        kind = new.kind(),
    ));
    s
}

fn handler_source(new: &NewRoute) -> String {
    let kind = new.kind();
    let params = path_params(&new.path);
    let operator = if new.operator {
        "    app.require_operator(&caller).await?;\n"
    } else {
        ""
    };
    let segments: String = params
        .iter()
        .map(|p| format!("    partition.push('#');\n    partition.push_str(path_entity_id(&req, \"{p}\")?.as_str());\n"))
        .collect();
    let mutable = if params.is_empty() { "" } else { "mut " };
    let import_path_id = if params.is_empty() {
        "use shared::service::http::json_response;"
    } else {
        "use shared::service::http::{json_response, path_entity_id};"
    };
    format!(
        "//! `{bin}`: `{method} {path}` → 200 `{{kind, count}}`.
//!
//! How many items (up to 25) the tenant's partition `TENANT#t#{kind}{partition_doc}` holds.
//!
//! Scaffolded by `pooltable new route`: a working starting point, one Query through the tenant's
//! scoped credentials. Replace it with the route's access pattern, and its `doc` in routes.yaml.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::http::StatusCode;
use lambda_http::{{Body, Request, Response}};
use shared::identity::keys::tenant_prefix;
{import_path_id}
use shared::{{ApiError, App}};

/// The partition's kind: the key segment after the tenant.
const KIND: &str = \"{kind}\";

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {{
    let caller = app.caller(&req)?;
{operator}    let t = &caller.tenant;
    let {mutable}partition = format!(\"{{}}{{KIND}}\", tenant_prefix(t));
{segments}    let db = app.db(t).await?;
    let page = db
        .query()
        .key_condition_expression(\"PK = :pk\")
        .expression_attribute_values(\":pk\", AttributeValue::S(partition))
        .limit(25)
        .send()
        .await
        .map_err(ApiError::from_dynamodb)?;
    Ok(json_response(
        StatusCode::OK,
        &serde_json::json!({{ \"kind\": KIND, \"count\": page.count() }}),
    ))
}}
",
        bin = new.bin,
        method = new.method,
        path = new.path,
        partition_doc = params.iter().map(|p| format!("#<{p}>")).collect::<String>(),
    )
}

fn test_source(new: &NewRoute) -> String {
    let args: Vec<&str> = path_params(&new.path)
        .iter()
        .map(|_| "\"sample-1\"")
        .collect();
    let (caller, client) = if new.operator {
        (
            "an operator of an onboarded tenant",
            "h.caller(&Auth::Operator(t.clone()))",
        )
    } else {
        ("an onboarded tenant", "h.tenant(&t)")
    };
    let uses = if new.operator {
        "use integration::{onboarded, Auth, Harness};"
    } else {
        "use integration::{onboarded, Harness};"
    };
    format!(
        "//! `{bin}`: `{method} {path}` (scaffolded by `pooltable new route`).

{uses}

#[tokio::test]
async fn {module}_answers_an_empty_partition() {{
    // GIVEN {caller}, with nothing stored under the route's partition
    let h = Harness::new().await;
    let t = onboarded(&h, \"scaffold\").await;
    // WHEN it calls the route (the client's method is generated from routes.yaml)
    let r = {client}.{module}({args}).await;
    // THEN it answers 200 with no items counted
    assert_eq!(r.status, 200, \"{{}}\", r.body);
    assert_eq!(r.body[\"count\"], 0, \"{{}}\", r.body);
}}
",
        bin = new.bin,
        method = new.method,
        path = new.path,
        module = new.bin.replace('-', "_"),
        args = args.join(", "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn arguments_parse_with_their_defaults() {
        let n = NewRoute::parse(&args("list-reviews get /products/{productId}/reviews")).unwrap();
        assert_eq!(n.method, "GET");
        assert!(!n.operator);
        assert_eq!(n.kind(), "PRODUCTS");
        let n = NewRoute::parse(&args(
            "x GET /a --operator --entity review --crate products",
        ))
        .unwrap();
        assert!(n.operator);
        assert_eq!(n.kind(), "REVIEW");
        assert_eq!(n.krate.as_deref(), Some("products"));
        assert!(NewRoute::parse(&args("x GET")).is_err());
        // a route that writes is written by hand: its write and its retry are decisions
        assert!(NewRoute::parse(&args("x POST /a"))
            .unwrap_err()
            .to_string()
            .contains("read routes"));
        assert!(NewRoute::parse(&args("x GET /a --entity a#b")).is_err());
    }

    #[test]
    fn a_new_test_module_is_declared_in_order() {
        let main = "//! doc\n\nmod attack_matrix;\nmod users;\n";
        assert_eq!(
            with_module(main, "list_reviews"),
            "//! doc\n\nmod attack_matrix;\nmod list_reviews;\nmod users;\n"
        );
        assert_eq!(
            with_module(main, "zebra"),
            "//! doc\n\nmod attack_matrix;\nmod users;\nmod zebra;\n"
        );
    }

    #[test]
    fn a_fixed_or_platform_kind_is_refused() {
        for kind in [
            "USAGE",
            "RATE",
            "PRODUCT",
            "HR",
            "TENANT",
            "CATALOG",
            "IDEMPOTENCY",
        ] {
            assert!(check_kind(kind).is_err(), "{kind}");
        }
        assert!(check_kind("REVIEW").is_ok());
    }

    #[test]
    fn the_route_entry_is_one_declaration_the_table_accepts() {
        let n = NewRoute::parse(&args(
            "list-reviews GET /products/{productId}/reviews --entity REVIEW",
        ))
        .unwrap();
        let entry = route_entry(&n, "products");
        let table = RouteTable::parse(&entry).unwrap();
        let r = table.routes().next().unwrap();
        assert_eq!((r.method, r.path), ("GET", "/products/{productId}/reviews"));
        assert_eq!(r.function.krate, "products");
        assert!(entry.contains("TENANT#t#REVIEW#<productId>"), "{entry}");
    }
}
