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

mod entry;
mod files;
mod handler;
mod test_file;

use shared::identity::entities::{EntityKind, Home, ENTITIES};
use thiserror::Error;

use crate::generate::GenerateError;
use crate::routes::path_params;

pub use files::new_route;

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

#[cfg(test)]
mod tests;
