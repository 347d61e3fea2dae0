//! `routes.yaml`, the route table: every function of pooltable, declared once (its header says what
//! each field means). [`crate::generate`] derives everything else that names a route from it.

use std::path::Path;

use crate::DeclarationError;
use serde::Deserialize;

mod check;
mod reach;
mod requests;

pub use reach::{pascal_case, PlatformSessions, Reach};
pub use requests::{Count, Requests, OPERATIONS};

const ROUTES: &str = "routes.yaml";

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Caller {
    /// A tenant, on its own data (in tenant isolation mode, in its own execution environments).
    #[default]
    Tenant,
    /// An operator only: the `pooltable/admin` scope, at the gateway and in the function.
    Operator,
    /// A tenant or an operator (e.g. a tenant record: its own, or any for an operator).
    Any,
}

impl Caller {
    /// Whether the function stays pooled in tenant isolation mode: it serves other tenants than
    /// the one Lambda would isolate it for.
    pub fn pooled(self) -> bool {
        self != Caller::Tenant
    }
}

/// A sample request: `events/<bin>.json`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    #[serde(default)]
    pub path: serde_yaml::Mapping,
    #[serde(default)]
    pub query: serde_yaml::Mapping,
    #[serde(default)]
    pub headers: serde_yaml::Mapping,
    pub body: Option<String>,
    /// The status the sample answers on the end-to-end runs, when not the route's success status.
    pub expect: Option<u16>,
}

/// README's row for a function.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Doc {
    pub query: Option<String>,
    pub about: Option<String>,
    pub index: String,
    pub keys: String,
    pub requests: Requests,
}

/// What a mutating route answers when its write's success is lost and the SDK retries
/// (`tests/tests/lost_success.rs`): the write that makes its effect, and what a second, separate
/// request answers once the effect is done.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LostSuccess {
    /// The DynamoDB operation of the effect: PutItem, UpdateItem, DeleteItem or TransactWriteItems.
    pub write: String,
    /// The second request's status when not a success (404: the thing is gone; 409: one only).
    pub again: Option<u16>,
    /// The first request's status when not the route's (a route that answers 202 until it is done).
    pub status: Option<u16>,
}

/// How a route's transaction maps DynamoDB's cancellations (`tests/tests/transactions.rs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transaction {
    /// How many actions it sends.
    pub actions: usize,
    /// The action whose failed condition the route answers itself, and with what (a 4xx).
    pub condition: usize,
    pub condition_status: u16,
    /// Whether it sends a transaction only with an `Idempotency-Key`.
    #[serde(default)]
    pub keyed: bool,
    /// Written `transaction: TODO` (by `pooltable new route`): not yet decided, and the table is
    /// refused until it is ([`RouteTable::unfilled`]).
    #[serde(skip)]
    pub todo: bool,
}

/// What `pooltable new route` writes where a human decides: `lost_success: {write: TODO}` and
/// `transaction: TODO`. The generator writes everything else around it, but [`RouteTable::load`] (and
/// so `pooltable gen --check` and every test reading routes.yaml) refuses the table, naming the route,
/// until each is filled.
pub const TODO: &str = "TODO";

/// `transaction:` is a [`Transaction`], or [`TODO`].
fn transaction_or_todo<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Transaction>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Entry {
        Todo(String),
        Filled(Transaction),
    }
    match Option::<Entry>::deserialize(d)? {
        None => Ok(None),
        Some(Entry::Filled(t)) => Ok(Some(t)),
        Some(Entry::Todo(s)) if s == TODO => Ok(Some(Transaction {
            todo: true,
            ..Transaction::default()
        })),
        Some(Entry::Todo(s)) => Err(serde::de::Error::custom(format!(
            "transaction: {s:?} is neither {{actions, condition, condition_status, keyed?}} nor {TODO}"
        ))),
    }
}

/// One function: a route, or a function behind another event source (`trigger`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Function {
    pub bin: String,
    #[serde(rename = "crate")]
    pub krate: String,
    pub route: Option<String>,
    #[serde(default)]
    pub caller: Caller,
    #[serde(default)]
    pub idempotent: bool,
    pub status: Option<u16>,
    #[serde(default)]
    pub sample: Sample,
    pub doc: Option<Doc>,
    /// Extra properties of the function resource, as YAML text.
    pub template: Option<String>,
    /// A type the handler takes besides the app (`<Type>::from_env()` in `main`).
    pub state: Option<String>,
    pub trigger: Option<String>,
    pub expect: Option<String>,
    /// Every route that changes data has one.
    pub lost_success: Option<LostSuccess>,
    /// Every route that sends a transaction has one.
    #[serde(default, deserialize_with = "transaction_or_todo")]
    pub transaction: Option<Transaction>,
    /// What its role holds besides what every route's does ([`Reach`]; [`Function::reaches`]).
    #[serde(default)]
    pub reaches: Vec<Reach>,
    /// Its sessions of the platform's partition, when it takes tenant sessions (`usage` unless named).
    pub platform: Option<PlatformSessions>,
}

/// A function behind the API.
#[derive(Debug, Clone, Copy)]
pub struct Route<'a> {
    pub function: &'a Function,
    pub method: &'a str,
    pub path: &'a str,
}

impl Route<'_> {
    /// The path parameters, in order.
    pub fn params(&self) -> Vec<&str> {
        path_params(self.path)
    }

    /// The status its sample answers on the end-to-end runs.
    pub fn sample_status(&self) -> u16 {
        self.function
            .sample
            .expect
            .unwrap_or_else(|| self.function.success_status())
    }
}

impl Function {
    /// `(METHOD, /path)` when the function is behind the API.
    pub fn route(&self) -> Option<Route<'_>> {
        let (method, path) = self.route.as_deref()?.split_once(' ')?;
        Some(Route {
            function: self,
            method,
            path,
        })
    }

    pub fn success_status(&self) -> u16 {
        self.status.unwrap_or(200)
    }

    /// The Rust module of the handler: the bin in snake_case.
    pub fn module(&self) -> String {
        self.bin.replace('-', "_")
    }

    /// The template's logical id: `get-product` → `GetProductFunction`.
    pub fn resource(&self) -> String {
        format!("{}Function", pascal_case(&self.bin))
    }

    /// Its role's logical id, which `pooltable gen` writes: `get-product` → `GetProductRole`.
    pub fn role(&self) -> String {
        format!("{}Role", pascal_case(&self.bin))
    }

    /// Everything its role reaches: what it declares, and for a route what every route does.
    pub fn reaches(&self) -> std::collections::BTreeSet<Reach> {
        reach::with_route_defaults(&self.reaches, self.route.is_some())
    }

    /// Whether it is a read-only route: every DynamoDB request it declares is a read (GetItem,
    /// Query). Its `main` starts it on read-only sessions (`runtime::start_read_only`).
    pub fn reads_only(&self) -> bool {
        self.route.is_some()
            && self.doc.as_ref().is_some_and(|d| {
                d.requests
                    .operations
                    .iter()
                    .all(|(op, _)| READS.contains(&op.as_str()))
            })
    }

    /// Its sessions of the platform's partition; `None` when it takes no tenant sessions.
    pub fn platform_sessions(&self) -> Option<PlatformSessions> {
        self.reaches()
            .contains(&Reach::TenantSessions)
            .then(|| self.platform.unwrap_or_default())
    }

    /// What the end-to-end runs expect from its sample: a status, or (not behind the API) what they
    /// read from its answer.
    pub fn expectation(&self) -> String {
        match (self.route(), &self.expect) {
            (Some(r), _) => r.sample_status().to_string(),
            (None, Some(e)) => e.clone(),
            (None, None) => String::new(),
        }
    }
}

/// The path parameters of a route template, in order.
pub fn path_params(path: &str) -> Vec<&str> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        .collect()
}

/// The route table.
#[derive(Debug, Clone)]
pub struct RouteTable {
    pub functions: Vec<Function>,
}

/// The DynamoDB operations a read-only route sends ([`Function::reads_only`]).
const READS: [&str; 2] = ["GetItem", "Query"];
/// The DynamoDB operations a route's effect can be made by.
const WRITES: [&str; 4] = ["PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"];

/// `root`'s routes.yaml, as text.
fn read(root: &Path) -> Result<String, DeclarationError> {
    std::fs::read_to_string(root.join(ROUTES)).map_err(|e| DeclarationError::Io(ROUTES, e))
}

/// Entry `bin` of routes.yaml is wrong: `message` says how.
fn invalid_entry(bin: &str, message: String) -> DeclarationError {
    DeclarationError::Invalid(ROUTES, format!("{bin}: {message}"))
}

impl RouteTable {
    /// routes.yaml, refused while an entry is [`TODO`].
    pub fn load(root: &Path) -> Result<Self, DeclarationError> {
        Self::parse(&read(root)?)
    }

    /// routes.yaml as a draft: an entry may still be [`TODO`] (what `pooltable gen` writes from).
    pub fn load_draft(root: &Path) -> Result<Self, DeclarationError> {
        Self::parse_draft(&read(root)?)
    }

    /// A route table, refused while an entry is [`TODO`].
    pub fn parse(text: &str) -> Result<Self, DeclarationError> {
        let table = Self::parse_draft(text)?;
        match table.unfilled().into_iter().next() {
            Some((bin, message)) => Err(invalid_entry(&bin, message)),
            None => Ok(table),
        }
    }

    /// A route table whose entries may still be [`TODO`].
    pub fn parse_draft(text: &str) -> Result<Self, DeclarationError> {
        let functions: Vec<Function> =
            serde_yaml::from_str(text).map_err(|e| DeclarationError::Yaml(ROUTES, e))?;
        let table = Self { functions };
        table.check()?;
        Ok(table)
    }

    /// Every entry still [`TODO`]: the route, and what to decide.
    pub fn unfilled(&self) -> Vec<(String, String)> {
        let mut todo = Vec::new();
        for f in &self.functions {
            if f.lost_success.as_ref().is_some_and(|l| l.write == TODO) {
                todo.push((
                    f.bin.clone(),
                    format!(
                        "lost_success is TODO: fill in the write that makes the route's effect ({}) and what a second request answers (tests/tests/all/lost_success.rs; routes.yaml's header)",
                        WRITES.join(", ")
                    ),
                ));
            }
            if f.transaction.as_ref().is_some_and(|t| t.todo) {
                todo.push((
                    f.bin.clone(),
                    "transaction is TODO: say how the route's transaction maps cancellations ({actions, condition, condition_status}; tests/tests/all/transactions.rs), or delete the line when it sends none".into(),
                ));
            }
        }
        todo
    }

    pub fn routes(&self) -> impl Iterator<Item = Route<'_>> {
        self.functions.iter().filter_map(Function::route)
    }

    pub fn function(&self, bin: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.bin == bin)
    }
}

#[cfg(test)]
mod tests;
