//! `pooltable new route <bin> <METHOD> <path> --entity KIND [--operator] [--crate CRATE]`: a new
//! route on a declared entity kind, served. It writes the files a route always has — its handler,
//! its test (GIVEN / WHEN / THEN, a module of tests/tests/all) and its entry in routes.yaml — and runs
//! `pooltable gen`, which writes everything derived: the bin, the template's function, the REST API
//! path, openapi.yaml's operation skeleton, events/<bin>.json, the expected status, the watch
//! router, README's row, the tests' dispatch and their client's method.
//!
//! The entity is one of `shared::identity::entities::ENTITIES` (`--entity department`), and the
//! route names it by its id, its only path parameter (`{departmentId}`); a GET without one lists
//! them. The handler goes the way the kind's own routes go, through the same shared functions: its
//! key is `shared::identity::keys::sharded_entity_key` of the kind's declaration, it reads and
//! writes through the tenant's shard layout (`shared::store::tenancy::layout`: one key, or two while
//! the tenant is re-sharded) and lists by scatter-gather (`shared::store::scatter`):
//! - `GET …/{id}…`: `shared::service::sharded::get_by_id` (one GetItem), answering the item's
//!   attributes (`stored_view`);
//! - `GET /…` (no parameter): `shared::service::sharded::list_page` over the kind's shards;
//! - `PUT`, `POST` or `PATCH …/{id}…` `{field: value, …}`: `shared::service::sharded::set_fields`
//!   sets the body's fields on the item (a consistent read, then `layout::put_along` on condition
//!   that nothing wrote it since);
//! - `DELETE …/{id}…`: the item's delete with its tombstone (`layout::delete_along`), as
//!   `delete-product` does.
//!
//! A route that writes gets `lost_success: {write: TODO}` and `transaction: TODO` in routes.yaml
//! (with what the scaffolded handler does, in a comment): a human decides them, and until they do
//! `pooltable gen --check` and every test reading routes.yaml refuse the table, naming the route.
//! The write-sharded kinds (product, employee, department) are the ones it scaffolds; a kind in
//! partitions named by an id (sessions, users, orders…) is refused, with why.

use shared::identity::keys::TENANT_SEGMENT;
use std::path::{Path, PathBuf};

use shared::identity::entities::{EntityKind, Home, ENTITIES};
use thiserror::Error;

use crate::generate::{self, GenerateError};
use crate::routes::{path_params, RouteTable};

#[derive(Debug, Error)]
pub enum ScaffoldError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Routes(#[from] crate::DeclarationError),
    #[error(transparent)]
    Generate(#[from] GenerateError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

const USAGE: &str =
    "usage: pooltable new route <bin> <METHOD> <path> --entity KIND [--operator] [--crate CRATE]";

/// What the route does with its entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `GET …/{id}…`: one item.
    Get,
    /// `GET /…`, no path parameter: a page of them.
    List,
    /// `PUT`, `POST` or `PATCH …/{id}…`: sets fields of one item.
    Set,
    /// `DELETE …/{id}…`.
    Delete,
}

impl Shape {
    pub fn writes(self) -> bool {
        matches!(self, Shape::Set | Shape::Delete)
    }
}

/// What `pooltable new route` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRoute {
    pub bin: String,
    pub method: String,
    pub path: String,
    pub operator: bool,
    /// The declared entity kind the route reads or writes.
    pub entity: EntityKind,
    pub shape: Shape,
    /// The crate under functions/: by default the one serving the route whose path shares the
    /// most leading segments with this one.
    pub krate: Option<String>,
}

/// An entity kind's name on the command line: its stored kind in lowercase (`department`).
fn entity_name(e: &EntityKind) -> String {
    e.stored_as.to_ascii_lowercase()
}

/// The declared, write-sharded entity kind `name`, or why not.
pub fn entity(name: &str) -> Result<EntityKind, ScaffoldError> {
    let wanted = name.to_ascii_lowercase().replace('-', "_");
    let names = |keep: fn(&EntityKind) -> bool| {
        ENTITIES
            .iter()
            .filter(|e| keep(e))
            .map(entity_name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let e = ENTITIES
        .into_iter()
        .find(|e| entity_name(e) == wanted)
        .ok_or_else(|| {
            ScaffoldError::Usage(format!(
                "--entity {name} is not a declared entity kind; the kinds are {} \
                 (shared/src/identity/entities.rs: a new kind is declared there first)",
                names(|_| true)
            ))
        })?;
    if !e.resharded() {
        return Err(ScaffoldError::Usage(format!(
            "--entity {name}: pooltable new route scaffolds routes on the write-sharded kinds ({}), \
             whose keys, re-sharding layout and paging the shared layers hold; {name} lives in \
             partitions named by an id, which its crate's own keys and store address: write its \
             route by hand, after that crate's routes (docs/add-a-route.md)",
            names(EntityKind::resharded)
        )));
    }
    Ok(e)
}

/// The path parameter naming an entity of `e`: `productId`, `departmentId`.
pub fn id_param(e: &EntityKind) -> String {
    let mut words = e.stored_as.split('_').map(str::to_ascii_lowercase);
    let mut name = words.next().unwrap_or_default();
    for w in words {
        let mut c = w.chars();
        if let Some(first) = c.next() {
            name.push(first.to_ascii_uppercase());
            name.push_str(c.as_str());
        }
    }
    name.push_str("Id");
    name
}

impl NewRoute {
    /// From the arguments after `new route`.
    pub fn parse(args: &[String]) -> Result<Self, ScaffoldError> {
        let usage = || ScaffoldError::Usage(USAGE.into());
        let [bin, method, path, rest @ ..] = args else {
            return Err(usage());
        };
        let (mut operator, mut entity_arg, mut krate) = (false, None, None);
        let mut it = rest.iter();
        while let Some(flag) = it.next() {
            match flag.as_str() {
                "--operator" => operator = true,
                "--entity" => entity_arg = Some(it.next().ok_or_else(usage)?.clone()),
                "--crate" => krate = Some(it.next().ok_or_else(usage)?.clone()),
                _ => return Err(usage()),
            }
        }
        let Some(entity_arg) = entity_arg else {
            let kinds: Vec<String> = ENTITIES
                .iter()
                .filter(|e| e.resharded())
                .map(entity_name)
                .collect();
            return Err(ScaffoldError::Usage(format!(
                "--entity is required: the declared entity kind the route reads or writes ({}); {USAGE}",
                kinds.join(", ")
            )));
        };
        let entity = entity(&entity_arg)?;
        let method = method.to_ascii_uppercase();
        let id = id_param(&entity);
        let params = path_params(path);
        let shape = match (method.as_str(), params.as_slice()) {
            ("GET", []) => Shape::List,
            ("GET", [p]) if *p == id => Shape::Get,
            ("PUT" | "POST" | "PATCH", [p]) if *p == id => Shape::Set,
            ("DELETE", [p]) if *p == id => Shape::Delete,
            ("GET" | "PUT" | "POST" | "PATCH" | "DELETE", _) => {
                return Err(ScaffoldError::Usage(format!(
                    "{method} {path}: a route on a {entity_arg} names it by {{{id}}}, its only path \
                     parameter (a GET with no parameter lists them); a route of other parameters \
                     is written by hand (docs/add-a-route.md)"
                )))
            }
            _ => {
                return Err(ScaffoldError::Usage(format!(
                    "{method} is not one of GET, PUT, POST, PATCH, DELETE"
                )))
            }
        };
        Ok(NewRoute {
            bin: bin.clone(),
            method,
            path: path.clone(),
            operator,
            entity,
            shape,
            krate,
        })
    }

    fn id(&self) -> String {
        id_param(&self.entity)
    }

    fn name(&self) -> String {
        entity_name(&self.entity)
    }

    /// The entity's partition space (`HR`) and kind (`DEPARTMENT`), as `shared::identity::keys::kind`
    /// names them.
    fn space_and_kind(&self) -> (&'static str, &'static str) {
        match self.entity.home {
            Home::Fixed(space) => (space, self.entity.kind),
            Home::ById => (self.entity.kind, self.entity.kind),
        }
    }

    /// The field a scaffolded write's sample sets: the path's last literal segment (`head`), in
    /// camelCase.
    fn sample_field(&self) -> String {
        let last = self
            .path
            .rsplit('/')
            .find(|s| !s.is_empty() && !s.starts_with('{'))
            .unwrap_or("note");
        let mut words = last.split(['-', '_']);
        let mut field = words.next().unwrap_or("note").to_ascii_lowercase();
        for w in words {
            let mut c = w.chars();
            if let Some(first) = c.next() {
                field.push(first.to_ascii_uppercase());
                field.push_str(&c.as_str().to_ascii_lowercase());
            }
        }
        field
    }
}

/// What to do after `pooltable new route`, beyond the files it wrote.
pub fn next_steps(new: &NewRoute) -> Vec<String> {
    let module = new.bin.replace('-', "_");
    let mut steps = vec![
        format!(
            "tests/tests/all/request_counts.rs: add the common case of {} (what must be in place, and the request); the test fails naming it until then",
            new.bin
        ),
    ];
    if new.shape.writes() {
        steps.push(format!(
            "routes.yaml: {}: fill lost_success and transaction (TODO); `gen --check` and every test reading routes.yaml refuse the table until then",
            new.bin
        ));
        steps.push(format!(
            "tests/src/fixtures.rs: arrange what {} needs in place (a {} to write); lost_success.rs and transactions.rs run it with that",
            new.bin,
            new.name()
        ));
    }
    steps.push(format!(
        "edit functions/<crate>/src/{module}.rs and tests/tests/all/{module}.rs for what the route is for, and its doc in routes.yaml"
    ));
    steps
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ScaffoldError + '_ {
    move |source| ScaffoldError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The routes of the entity's own id path (`/departments/{departmentId}`) the scaffolded test goes
/// through: its PUT (required: it puts the entity in place) and its GET.
struct EntityRoutes {
    put: String,
    get: Option<String>,
    sample_id: String,
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

fn route_entry(new: &NewRoute, krate: &str, sample_id: &str) -> String {
    let (space, kind) = new.space_and_kind();
    let (id, name) = (new.id(), new.name());
    let status = if new.shape == Shape::Delete { 204 } else { 200 };
    let mut s = format!(
        "- bin: {bin}\n  crate: {krate}\n  route: {method} {path}\n  caller: {caller}\n  status: {status}\n  sample:\n",
        bin = new.bin,
        method = new.method,
        path = new.path,
        caller = if new.operator { "operator" } else { "tenant" },
    );
    match new.shape {
        Shape::List => s.push_str("    query: {limit: '25'}\n"),
        _ => s.push_str(&format!("    path: {{{id}: {sample_id}}}\n")),
    }
    if new.shape == Shape::Set {
        s.push_str(&format!(
            "    body: '{{\"{}\": \"sample-1\"}}'\n",
            new.sample_field()
        ));
    }
    let as_scaffolded = match new.shape {
        Shape::Set => Some(("{write: TransactWriteItems}", "none that tests/tests/all/transactions.rs counts (its transaction is layout::put_along's, as put-product's): delete the line")),
        Shape::Delete => Some(("{write: TransactWriteItems, again: 404}", "none that tests/tests/all/transactions.rs counts (its transaction is layout::delete_along's, as delete-product's): delete the line")),
        Shape::Get | Shape::List => None,
    };
    if let Some((lost, transaction)) = as_scaffolded {
        s.push_str(&format!(
            "  # TODO (pooltable new route): decide what a retry of a lost answer does (lost_success) and the\n  \
             # route's transaction (transaction), for the handler as it now is; until both are filled,\n  \
             # `pooltable gen --check` and every test that reads routes.yaml refuse the table, naming this route.\n  \
             # As scaffolded: lost_success {lost}; transaction {transaction}.\n  \
             lost_success: {{write: TODO}}\n  transaction: TODO\n"
        ));
    }
    let (about, keys, requests) = match new.shape {
        Shape::Get => (
            String::new(),
            format!("GetItem `PK = {TENANT_SEGMENT}t#{space}#<shard>`, `SK = {TENANT_SEGMENT}t#{kind}#<{id}>` (both shards at once while re-sharded)"),
            "{GetItem: 1, note: 're-sharding: 2 GetItem at once'}".to_owned(),
        ),
        Shape::List => (
            String::new(),
            format!("per {space} shard: `begins_with(SK, {TENANT_SEGMENT}t#{kind}#)`, concurrently, Limit ≈ 2 × limit / N"),
            "{Query: 1 per shard, note: 'per page (+1 per shard that runs dry)'}".to_owned(),
        ),
        Shape::Set => (
            format!("`{{{}, …}}` ", new.sample_field()),
            format!("consistent GetItem of the {name}, then TransactWriteItems: Put of its attributes with the body''s fields, on condition that its `updatedAtMs` is the one read (while re-sharded on its new shard, with a Delete of the old copy)"),
            "{GetItem: 1, TransactWriteItems: 1, note: '404: the GetItem only; re-sharding: consistent GetItems of both keys, then the transaction'}".to_owned(),
        ),
        Shape::Delete => (
            String::new(),
            format!("TransactWriteItems: Delete `attribute_exists(PK)` + Put tombstone `{TENANT_SEGMENT}t#DELETED#{kind}#<{id}>`; when nothing is there (404): ConditionCheck absent + Put tombstone"),
            "{TransactWriteItems: 1, note: '404: 2 TransactWriteItems'}".to_owned(),
        ),
    };
    s.push_str(&format!(
        "  doc:\n    about: '{about}(scaffolded by pooltable new route --entity {name}: say what it does)'\n    index: table\n    keys: '{keys}'\n    requests: {requests}\n",
    ));
    s
}

/// Fills a template's `@NAME@` placeholders.
fn fill(template: &str, new: &NewRoute, extra: &[(&str, &str)]) -> String {
    let (space, kind) = new.space_and_kind();
    let operator = if new.operator {
        "    let caller = app.caller(&req)?;\n    app.require_operator(&caller).await?;\n"
    } else {
        ""
    };
    let require = if new.operator {
        "    app.require_operator(&caller).await?;\n"
    } else {
        ""
    };
    let module = new.bin.replace('-', "_");
    let mut text = template.to_owned();
    // Twice: a block filled in on the first pass has placeholders of its own.
    for (from, to) in [
        ("@BIN@", new.bin.as_str()),
        ("@MODULE@", module.as_str()),
        ("@METHOD@", new.method.as_str()),
        ("@PATH@", new.path.as_str()),
        ("@NAME@", new.name().as_str()),
        ("@ID@", new.id().as_str()),
        ("@SPACE@", space),
        ("@KIND@", kind),
        ("@FIELD@", new.sample_field().as_str()),
        ("@OPERATOR@\n", operator),
        ("@REQUIRE@\n", require),
    ]
    .iter()
    .chain(extra)
    .cycle()
    .take(2 * (11 + extra.len()))
    {
        text = text.replace(from, to);
    }
    text
}

fn handler_source(new: &NewRoute) -> String {
    let template = match new.shape {
        Shape::Get => GET_HANDLER,
        Shape::List => LIST_HANDLER,
        Shape::Set => SET_HANDLER,
        Shape::Delete => DELETE_HANDLER,
    };
    fill(template, new, &[])
}

fn test_source(new: &NewRoute, routes: &EntityRoutes) -> String {
    let test = match new.shape {
        Shape::Get => GET_TEST,
        Shape::List => LIST_TEST,
        Shape::Set => SET_TEST,
        Shape::Delete => DELETE_TEST,
    };
    let client = if new.operator {
        "h.caller(&Auth::Operator(tenant.clone()))"
    } else {
        "h.caller(&a.auth)"
    };
    let own_get = match &routes.get {
        Some(get) => format!(
            "    // AND the kind's own GET still reads it\n    let own = h.caller(&a.auth).{}(id).await;\n    assert_eq!(own.status, 200, \"{get}: {{}}\", own.body);\n",
            get.replace('-', "_")
        ),
        None => String::new(),
    };
    let put_module = routes.put.replace('-', "_");
    fill(
        TEST_FILE,
        new,
        &[
            ("@ABOUT@", test.about),
            ("@TEST@", test.test),
            ("@WHEN@", test.when),
            ("@PUT_MODULE@", put_module.as_str()),
            ("@PUT@", routes.put.as_str()),
            ("@CLIENT@", client),
            ("@OWN_GET@\n", own_get.as_str()),
            ("@COMMON@", TEST_COMMON),
            ("@USES@", TEST_USES),
            ("@GIVEN@\n", TEST_GIVEN),
        ],
    )
}

const GET_HANDLER: &str = r#"//! `@BIN@`: `@METHOD@ @PATH@` → 200 with the @NAME@'s stored attributes, or 404. One GetItem on
//! the @NAME@'s computed shard (both shards at once while the tenant is re-sharded), through the
//! read the kind's own GET goes through (`shared::service::sharded::get_by_id`).
//!
//! Scaffolded by `pooltable new route --entity @NAME@`: it answers the whole @NAME@. Answer what the
//! route is for, and say so in its routes.yaml `doc`.

use lambda_http::{Body, Request, Response};
use shared::identity::keys::{kind, sharded_entity_key};
use shared::service::sharded::{get_by_id, stored_view};
use shared::{ApiError, App};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
@OPERATOR@
    let key = |t: &_, id: &_, shards| sharded_entity_key(t, kind::@SPACE@, kind::@KIND@, id, shards);
    get_by_id(app, &req, "@ID@", key, stored_view, "No such @NAME@.").await
}
"#;

const LIST_HANDLER: &str = r#"//! `@BIN@`: `GET @PATH@?limit=&cursor=&order=` → `{items, nextCursor}`: the tenant's @NAME@s in id
//! order, gathered from all its @SPACE@ shards at once (both layouts while it is re-sharded), through
//! the listing the kind's own list goes through (`shared::service::sharded::list_page`).
//!
//! Scaffolded by `pooltable new route --entity @NAME@`: it answers each @NAME@ whole. Answer what the
//! route is for, and say so in its routes.yaml `doc`.

use lambda_http::{Body, Request, Response};
use shared::identity::entities;
use shared::service::sharded::{list_page, stored_view};
use shared::store::scatter::{Fanout, ShardedList};
use shared::{ApiError, App};

/// The @NAME@s of the tenant's @SPACE@ shards; the cursors are this route's.
pub const LIST: ShardedList = ShardedList::new(entities::@KIND@, "@BIN@");

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
@OPERATOR@
    list_page(app, &req, LIST, stored_view, Fanout::Parallel).await
}
"#;

const SET_HANDLER: &str = r#"//! `@BIN@`: `@METHOD@ @PATH@` `{field: value, …}` → 200 with the @NAME@, the body's fields set on
//! it, or 404. A consistent read of the @NAME@ wherever the tenant's layout has it, then its write
//! through the layout on condition that nothing wrote it since (`shared::service::sharded::set_fields`:
//! while the tenant is re-sharded the write lands on the new shard, where reads find it).
//!
//! Scaffolded by `pooltable new route --entity @NAME@`: it sets any field but the keys and the
//! bookkeeping, and the kind's own PUT replaces the whole @NAME@, these fields with it. Check the body
//! for what the route is for, and decide its `lost_success` and `transaction` in routes.yaml.

use lambda_http::{Body, Request, Response};
use shared::identity::keys::{kind, sharded_entity_key};
use shared::service::sharded::set_fields;
use shared::{ApiError, App};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
@OPERATOR@
    let key = |t: &_, id: &_, shards| sharded_entity_key(t, kind::@SPACE@, kind::@KIND@, id, shards);
    set_fields(app, &req, "@ID@", key, "No such @NAME@.").await
}
"#;

const DELETE_HANDLER: &str = r#"//! `@BIN@`: `DELETE @PATH@` → 204 or 404. One transaction: the @NAME@'s conditional Delete and its
//! tombstone, so an import accepted before the delete never brings it back (on both shards while
//! the tenant is re-sharded: `shared::store::tenancy::layout::delete_along`), as `delete-product`.
//!
//! Scaffolded by `pooltable new route --entity @NAME@`: it deletes the @NAME@ item only. Delete what
//! hangs on it too, and decide its `lost_success` and `transaction` in routes.yaml.

use lambda_http::{Body, Request, Response};
use shared::identity::keys::{kind, sharded_entity_key};
use shared::service::http::{no_content, path_entity_id};
use shared::store::imports::Tombstone;
use shared::store::tenancy::layout::{self, Keys};
use shared::{ApiError, App};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
@REQUIRE@
    let t = &caller.tenant;
    let id = path_entity_id(&req, "@ID@")?;
    let db = app.db(t).await?;
    let layout = app.directory.layout(&db).await?;
    let keys = Keys::of(layout, |n| sharded_entity_key(t, kind::@SPACE@, kind::@KIND@, &id, n));
    let gone = Tombstone::of(&db, kind::@KIND@, &id).put(app.clock.now_millis())?;
    let deleted = layout::delete_along(&db, layout, &keys, vec![gone]).await?;
    app.read_cache.forget(t, &keys.write);
    if !deleted {
        return Err(ApiError::NotFound("No such @NAME@.".into()));
    }
    Ok(no_content())
}
"#;

/// What every scaffolded test shares: the @NAME@ as the shared read finds it, a call checked
/// against the requests routes.yaml declares, and a re-sharding stepped to its end.
const TEST_COMMON: &str = r#"const BIN: &str = "@BIN@";

/// The @NAME@ `id` as the shared read finds it (wherever the tenant's layout has it), as JSON.
async fn stored(h: &Harness, tenant: &str, id: &str) -> Option<Value> {
    let t = TenantId::parse(tenant).expect("a tenant id");
    let id = EntityId::parse(id).expect("an id");
    let db = h.app.db(&t).await.expect("the tenant's client");
    let layout = h.app.directory.layout(&db).await.expect("its layout");
    let keys = Keys::of(layout, |n| sharded_entity_key(&t, kind::@SPACE@, kind::@KIND@, &id, n));
    let item = layout::get(&db, layout, &keys).await.expect("the read");
    item.map(|i| stored_view(i).expect("its view"))
}

/// The route's answer to `call`, which must be `status`, after it sent the DynamoDB requests
/// routes.yaml declares (4 shards): counted from when `call` is awaited, so it may be made before.
async fn as_declared(h: &Harness, status: u16, call: impl Future<Output = Resp>) -> Resp {
    h.requests.reset();
    let r = call.await;
    let declared = route_table()
        .function(BIN)
        .and_then(|f| f.doc.as_ref())
        .map(|d| d.requests.expected(4))
        .unwrap_or_default();
    let sent: BTreeMap<String, u32> = h
        .requests
        .by_operation()
        .into_iter()
        .map(|(op, n)| (op, n as u32))
        .collect();
    assert_eq!(r.status, status, "{}", r.body);
    assert_eq!(sent, declared, "{BIN}: sent, and declared in routes.yaml");
    r
}

/// A re-sharding of a tenant from 4 shards to 16, one phase at a time: started, writes moved, each
/// step of its moves, ended.
struct Resharding<'a> {
    h: &'a Harness,
    tenant: &'a str,
    phase: u32,
    ended: bool,
}

impl<'a> Resharding<'a> {
    fn of(h: &'a Harness, tenant: &'a str) -> Self {
        Self { h, tenant, phase: 0, ended: false }
    }

    /// The next phase reached, `None` once it has ended.
    async fn next(&mut self) -> Option<String> {
        if self.ended {
            return None;
        }
        self.phase += 1;
        let step = || self.h.operator().update_tenant(self.tenant, json!({"shardCount": 16}));
        match self.phase {
            1 => {
                let r = step().await;
                assert_eq!(r.status, 202, "{}", r.body);
                Some("started".into())
            }
            2 => {
                self.h.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS + 1);
                Some("writes moved".into())
            }
            n if n > 22 => panic!("the re-sharding of {} did not end in 20 steps", self.tenant),
            n => {
                if n == 3 {
                    self.h.clock.advance_seconds(MOVES_DELAY_SECONDS);
                }
                let r = step().await;
                if r.status == 200 {
                    // ended; and every container's cached record now shows it
                    self.h.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS + 1);
                    self.ended = true;
                    return Some("ended".into());
                }
                assert_eq!(r.status, 202, "{}", r.body);
                Some(format!("step {}", n - 2))
            }
        }
    }
}"#;

const TEST_USES: &str = r#"use std::collections::BTreeMap;
use std::future::Future;

use integration::fixtures::arrange;
use integration::routes::route_table;
use integration::{Auth, Harness, Resp};
use serde_json::{json, Value};
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{kind, sharded_entity_key};
use shared::service::sharded::stored_view;
use shared::store::lifecycle::resharding::{MOVES_DELAY_SECONDS, WRITES_MOVE_DELAY_SECONDS};
use shared::store::tenancy::layout::{self, Keys};
"#;

/// A scaffolded test's GIVEN: a @NAME@ put through its kind's own PUT, in a fresh tenant of 4 shards,
/// and the route's caller (`me`).
const TEST_GIVEN: &str = r#"    // GIVEN a @NAME@ put through @PUT@, in a tenant of 4 shards
    let h = Harness::new().await;
    let a = arrange(&h, "@PUT@").await;
    let id = a.params["@ID@"].as_str();
    let put = h.caller(&a.auth).@PUT_MODULE@(id, a.body.clone()).await;
    assert!(put.status < 300, "GIVEN @PUT@: {} {}", put.status, put.body);
    let Auth::Tenant(tenant) = &a.auth else {
        panic!("@PUT@ is a tenant's route")
    };
    let me = @CLIENT@;
"#;

/// A scaffolded test file: its shape's [`TestTemplate`] (`@ABOUT@`, `@TEST@`, `@WHEN@`) and what
/// every scaffolded test shares.
const TEST_FILE: &str = r#"//! `@BIN@`: `@METHOD@ @PATH@` (scaffolded by `pooltable new route --entity @NAME@`): @ABOUT@

@USES@
@COMMON@

#[tokio::test]
async fn @MODULE@_@TEST@() {
@GIVEN@
@WHEN@}
"#;

/// One shape's test, filled into [`TEST_FILE`].
struct TestTemplate {
    /// The module doc after the route: what the test checks.
    about: &'static str,
    /// The test's name after the route's module.
    test: &'static str,
    /// The test's body after its GIVEN.
    when: &'static str,
}

const GET_TEST: TestTemplate = TestTemplate {
    about: r#"it reads the
//! @NAME@ where `@PUT@` wrote it, in the requests routes.yaml declares, before, during and after a
//! re-sharding of its tenant."#,
    test: "reads_the_@NAME@_where_it_was_written_through_a_resharding",
    when: r#"    // WHEN the route reads it
    let r = as_declared(&h, 200, me.@MODULE@(id)).await;
    // THEN 200 with the @NAME@ the shared read finds, in the DynamoDB requests routes.yaml declares
    assert_eq!(Some(&r.body), stored(&h, tenant, id).await.as_ref());
    // AND while the tenant is re-sharded to 16 shards, at every phase, it reads the same @NAME@
    let mut resharding = Resharding::of(&h, tenant);
    while let Some(phase) = resharding.next().await {
        let again = me.@MODULE@(id).await;
        assert_eq!(again.status, 200, "{phase}: {}", again.body);
        assert_eq!(again.body, r.body, "{phase}");
    }
    // AND a @NAME@ nothing wrote is 404
    let none = me.@MODULE@("never-written").await;
    assert_eq!(none.status, 404, "{}", none.body);
"#,
};

const LIST_TEST: TestTemplate = TestTemplate {
    about: r#"it lists the
//! @NAME@ `@PUT@` wrote, once, in the requests routes.yaml declares, before, during and after a
//! re-sharding of its tenant."#,
    test: "lists_the_@NAME@_once_through_a_resharding",
    when: r#"    let want = json!([stored(&h, tenant, id).await.expect("the @NAME@")]);
    let me = me.query(&[("limit", "25")]);
    // WHEN the route lists the tenant's @NAME@s
    let r = as_declared(&h, 200, me.@MODULE@()).await;
    // THEN 200 with it, once, in the DynamoDB requests routes.yaml declares
    assert_eq!(r.body["items"], want, "{}", r.body);
    // AND while the tenant is re-sharded to 16 shards, at every phase, it lists it once
    let mut resharding = Resharding::of(&h, tenant);
    while let Some(phase) = resharding.next().await {
        let again = me.@MODULE@().await;
        assert_eq!(again.status, 200, "{phase}: {}", again.body);
        assert_eq!(again.body["items"], want, "{phase}: {}", again.body);
    }
"#,
};

const SET_TEST: TestTemplate = TestTemplate {
    about: r#"it sets a field
//! on the @NAME@ `@PUT@` wrote, in the requests routes.yaml declares, and every write lands where the
//! reads find it, before, during and after a re-sharding of its tenant."#,
    test: "writes_where_reads_find_it_through_a_resharding",
    when: r#"    // WHEN the route sets a field on it
    let r = as_declared(&h, 200, me.@MODULE@(id, json!({"@FIELD@": "v0"}))).await;
    // THEN 200 with the @NAME@ as the shared read finds it, the field set, in the DynamoDB requests
    // routes.yaml declares
    assert_eq!(r.body["@FIELD@"], "v0", "{}", r.body);
    assert_eq!(Some(&r.body), stored(&h, tenant, id).await.as_ref());
@OWN_GET@
    // AND while the tenant is re-sharded to 16 shards, a write at every phase lands where reads find it
    let mut resharding = Resharding::of(&h, tenant);
    let mut n = 0;
    while let Some(phase) = resharding.next().await {
        n += 1;
        let value = format!("v{n}");
        let w = me.@MODULE@(id, json!({"@FIELD@": value})).await;
        assert_eq!(w.status, 200, "{phase}: {}", w.body);
        let found = stored(&h, tenant, id).await.expect("the @NAME@");
        assert_eq!(found["@FIELD@"], value.as_str(), "{phase}: {found}");
        assert_eq!(found, w.body, "{phase}");
    }
    // AND a @NAME@ nothing wrote is 404, and stays unwritten
    let none = me.@MODULE@("never-written", json!({"@FIELD@": "x"})).await;
    assert_eq!(none.status, 404, "{}", none.body);
    assert_eq!(stored(&h, tenant, "never-written").await, None);
"#,
};

const DELETE_TEST: TestTemplate = TestTemplate {
    about: r#"it deletes the
//! @NAME@ `@PUT@` wrote, wherever it is, in the requests routes.yaml declares, before, during and
//! after a re-sharding of its tenant."#,
    test: "deletes_the_@NAME@_wherever_it_is_through_a_resharding",
    when: r#"    // WHEN the route deletes it
    as_declared(&h, 204, me.@MODULE@(id)).await;
    // THEN 204, and the shared read finds nothing, in the DynamoDB requests routes.yaml declares
    assert_eq!(stored(&h, tenant, id).await, None);
    // AND a second delete is 404
    let again = me.@MODULE@(id).await;
    assert_eq!(again.status, 404, "{}", again.body);
    // AND while the tenant is re-sharded to 16 shards, a @NAME@ put at every phase is deleted
    let mut resharding = Resharding::of(&h, tenant);
    while let Some(phase) = resharding.next().await {
        let put = h.caller(&a.auth).@PUT_MODULE@(id, a.body.clone()).await;
        assert!(put.status < 300, "{phase}: @PUT@ {} {}", put.status, put.body);
        assert!(stored(&h, tenant, id).await.is_some(), "{phase}");
        let d = me.@MODULE@(id).await;
        assert_eq!(d.status, 204, "{phase}: {}", d.body);
        assert_eq!(stored(&h, tenant, id).await, None, "{phase}");
    }
"#,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn parse(s: &str) -> Result<NewRoute, String> {
        NewRoute::parse(&args(s)).map_err(|e| e.to_string())
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
    fn the_entity_is_a_declared_kind_or_the_route_is_refused() {
        // no --entity: refused, naming the kinds it takes
        let e = parse("get-department-head GET /departments/{departmentId}/head").unwrap_err();
        assert!(
            e.contains("--entity is required") && e.contains("department"),
            "{e}"
        );
        // a kind nobody declared
        let e = parse("x GET /reviews/{reviewId} --entity review").unwrap_err();
        assert!(
            e.contains("not a declared entity kind") && e.contains("entities.rs"),
            "{e}"
        );
        // a declared kind in partitions named by an id
        let e = parse("x GET /sessions/{sessionId}/x --entity session").unwrap_err();
        assert!(
            e.contains("write-sharded kinds (product, employee, department)"),
            "{e}"
        );
        let n =
            parse("get-department-head get /departments/{departmentId}/head --entity Department")
                .unwrap();
        assert_eq!(n.entity, shared::identity::entities::DEPARTMENT);
        assert_eq!((n.method.as_str(), n.shape), ("GET", Shape::Get));
        assert_eq!(n.space_and_kind(), ("HR", "DEPARTMENT"));
        assert_eq!(n.id(), "departmentId");
    }

    #[test]
    fn the_shape_follows_from_the_method_and_the_id_parameter() {
        for (line, shape) in [
            ("x GET /products --entity product", Shape::List),
            (
                "x GET /products/{productId}/label --entity product",
                Shape::Get,
            ),
            (
                "x PUT /products/{productId}/label --entity product",
                Shape::Set,
            ),
            (
                "x POST /employees/{employeeId}/badge --entity employee",
                Shape::Set,
            ),
            (
                "x DELETE /products/{productId}/label --entity product",
                Shape::Delete,
            ),
        ] {
            assert_eq!(parse(line).unwrap().shape, shape, "{line}");
        }
        for line in [
            "x PUT /products --entity product",
            "x GET /products/{sku} --entity product",
            "x GET /departments/{departmentId}/employees/{employeeId} --entity employee",
        ] {
            let e = parse(line).unwrap_err();
            assert!(e.contains("its only path parameter"), "{line}: {e}");
        }
        assert!(parse("x TRACE /products --entity product").is_err());
        assert!(parse("x GET").is_err());
        assert!(parse("x GET /products --entity product --crate").is_err());
    }

    #[test]
    fn a_write_entry_is_a_draft_the_table_refuses_until_filled() {
        let n =
            parse("put-department-head PUT /departments/{departmentId}/head --entity department")
                .unwrap();
        let entry = route_entry(&n, "hr", "eng");
        // GIVEN the scaffolded entry: the generator takes it as a draft
        let draft = RouteTable::parse_draft(&entry).unwrap();
        let r = draft.routes().next().unwrap();
        assert_eq!(
            (r.method, r.path),
            ("PUT", "/departments/{departmentId}/head")
        );
        assert_eq!(
            r.function.sample.body.as_deref(),
            Some(r#"{"head": "sample-1"}"#)
        );
        let requests = &r.function.doc.as_ref().unwrap().requests;
        assert_eq!(
            requests.expected(4),
            [("GetItem".into(), 1), ("TransactWriteItems".into(), 1)].into()
        );
        // WHEN it is loaded as the tests load it, THEN refused, naming the route and both TODOs
        let e = RouteTable::parse(&entry).unwrap_err().to_string();
        assert!(
            e.contains("put-department-head") && e.contains("lost_success is TODO"),
            "{e}"
        );
        assert_eq!(draft.unfilled().len(), 2);
        // AND once a human fills them (here: what the scaffolded handler does), it is accepted
        let filled = entry
            .replace(
                "lost_success: {write: TODO}",
                "lost_success: {write: TransactWriteItems}",
            )
            .replace("  transaction: TODO\n", "");
        assert!(RouteTable::parse(&filled).is_ok(), "{filled}");
    }

    #[test]
    fn a_read_entry_declares_its_requests_and_needs_no_todo() {
        for (line, shards4) in [
            (
                "get-department-head GET /departments/{departmentId}/head --entity department",
                vec![("GetItem", 1)],
            ),
            (
                "list-products-again GET /products-again --entity product",
                vec![("Query", 4)],
            ),
            (
                "delete-product-label DELETE /products/{productId}/label --entity product",
                vec![("TransactWriteItems", 1)],
            ),
        ] {
            let n = parse(line).unwrap();
            let entry = route_entry(&n, "hr", "eng");
            let table = RouteTable::parse_draft(&entry).unwrap();
            let f = &table.functions[0];
            let want = shards4
                .into_iter()
                .map(|(op, k)| (op.to_owned(), k))
                .collect();
            assert_eq!(f.doc.as_ref().unwrap().requests.expected(4), want, "{line}");
            assert_eq!(table.unfilled().is_empty(), !n.shape.writes(), "{line}");
        }
    }

    #[test]
    fn the_handler_goes_through_the_shared_keys_layout_and_paging() {
        for (line, calls) in [
            (
                "x GET /departments/{departmentId}/head --entity department",
                "get_by_id(",
            ),
            ("x GET /employees-again --entity employee", "list_page("),
            (
                "x PUT /departments/{departmentId}/head --entity department",
                "set_fields(",
            ),
            (
                "x DELETE /products/{productId}/label --entity product",
                "layout::delete_along(",
            ),
        ] {
            let n = parse(line).unwrap();
            let code = handler_source(&n);
            assert!(code.contains(calls), "{line}: {code}");
            assert!(
                !code.contains("format!") && !code.contains(TENANT_SEGMENT),
                "{line}: {code}"
            );
            assert!(
                !code.contains("unwrap") && !code.contains('@'),
                "{line}: {code}"
            );
            let routes = EntityRoutes {
                put: "put-x".into(),
                get: Some("get-x".into()),
                sample_id: "eng".into(),
            };
            let test = test_source(&n, &routes);
            assert!(
                !test.contains('@') && !test.contains(TENANT_SEGMENT),
                "{line}: {test}"
            );
            assert!(test.contains("Resharding::of"), "{line}");
        }
    }
}
