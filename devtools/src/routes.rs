//! `routes.yaml`, the route table: every function of pooltable, declared once (its header says what
//! each field means). [`crate::generate`] derives everything else that names a route from it.

use std::path::Path;

use crate::DeclarationError;
use serde::Deserialize;

mod reach;

pub use reach::{pascal_case, PlatformSessions, Reach};

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

/// The DynamoDB operations a route can send: what the request meter counts
/// (`shared::store::meter`), and DescribeTable (a restore checks its source table). Scan is not
/// among them: a tenant may never scan.
pub const OPERATIONS: [&str; 10] = [
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "BatchGetItem",
    "BatchWriteItem",
    "TransactGetItems",
    "TransactWriteItems",
    "DescribeTable",
];

/// How many requests of one operation a route's common case sends: `fixed`, plus `per_shard` for
/// each shard of the tenant's layout. Written `2`, `1 per shard` or `2 per shard + 26`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub per_shard: u32,
    pub fixed: u32,
}

impl Count {
    /// The count for a tenant of `shards` shards.
    pub fn for_shards(self, shards: u32) -> u32 {
        self.per_shard * shards + self.fixed
    }

    fn parse(value: &serde_yaml::Value) -> Option<Self> {
        let count = match value {
            serde_yaml::Value::Number(n) => Count {
                per_shard: 0,
                fixed: n.as_u64().and_then(|n| u32::try_from(n).ok())?,
            },
            serde_yaml::Value::String(s) => {
                let (per_shard, fixed) = match s.split_once(" per shard") {
                    Some((k, rest)) => (
                        k,
                        rest.strip_prefix(" + ")
                            .or(rest.is_empty().then_some("0"))?,
                    ),
                    None => ("0", s.as_str()),
                };
                Count {
                    per_shard: per_shard.parse().ok()?,
                    fixed: fixed.parse().ok()?,
                }
            }
            _ => return None,
        };
        (count.for_shards(1) > 0).then_some(count)
    }
}

impl std::fmt::Display for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.per_shard, self.fixed) {
            (0, n) => write!(f, "{n}"),
            (1, 0) => write!(f, "N"),
            (k, 0) => write!(f, "{k}N"),
            (1, n) => write!(f, "N + {n}"),
            (k, n) => write!(f, "{k}N + {n}"),
        }
    }
}

/// `doc.requests`: the DynamoDB requests of a route's common case, by operation, in the order
/// written (`{Query: 1, TransactWriteItems: 1}`; `{Query: 1 per shard}`), and `note`, free text on
/// the other cases (pages, a 404, a re-sharding) and on anything else it sends (SQS, STS), which
/// README shows after the counts. Only DynamoDB requests are counted; `tests/tests/request_counts.rs`
/// checks every route's common case against them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "serde_yaml::Mapping")]
pub struct Requests {
    pub operations: Vec<(String, Count)>,
    pub note: Option<String>,
}

impl Requests {
    /// Operation → count for a tenant of `shards` shards.
    pub fn expected(&self, shards: u32) -> std::collections::BTreeMap<String, u32> {
        self.operations
            .iter()
            .map(|(op, c)| (op.clone(), c.for_shards(shards)))
            .collect()
    }
}

impl std::fmt::Display for Requests {
    /// README's cell: `GetItem`, `Query + TransactWriteItems`, `N × Query`, then `; <note>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ops: Vec<String> = self
            .operations
            .iter()
            .map(|(op, c)| match c {
                Count {
                    per_shard: 0,
                    fixed: 1,
                } => op.clone(),
                c if c.per_shard > 0 && c.fixed > 0 => format!("({c}) × {op}"),
                c => format!("{c} × {op}"),
            })
            .collect();
        let ops = if ops.is_empty() {
            "none".to_owned()
        } else {
            ops.join(" + ")
        };
        match &self.note {
            Some(note) => write!(f, "{ops}; {note}"),
            None => write!(f, "{ops}"),
        }
    }
}

impl TryFrom<serde_yaml::Mapping> for Requests {
    type Error = String;

    fn try_from(map: serde_yaml::Mapping) -> Result<Self, String> {
        let mut requests = Requests::default();
        for (key, value) in map {
            let Some(key) = key.as_str() else {
                return Err(format!(
                    "requests: a key is an operation or `note`, not {key:?}"
                ));
            };
            if key == "note" {
                match value.as_str() {
                    Some(note) => requests.note = Some(note.to_owned()),
                    None => return Err("requests.note is text".into()),
                }
                continue;
            }
            if !OPERATIONS.contains(&key) {
                return Err(format!(
                    "requests: {key:?} is not a DynamoDB operation a route sends (one of {OPERATIONS:?}, or `note`)"
                ));
            }
            let Some(count) = Count::parse(&value) else {
                return Err(format!(
                    "requests.{key}: {value:?} is not a count (a positive integer, `<k> per shard` or `<k> per shard + <n>`)"
                ));
            };
            requests.operations.push((key.to_owned(), count));
        }
        Ok(requests)
    }
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

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];
/// The DynamoDB operations a read-only route sends ([`Function::reads_only`]).
const READS: [&str; 2] = ["GetItem", "Query"];
/// The DynamoDB operations a route's effect can be made by.
const WRITES: [&str; 4] = ["PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"];

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

    fn check(&self) -> Result<(), DeclarationError> {
        let mut seen_bins = std::collections::BTreeSet::new();
        let mut seen_routes = std::collections::BTreeSet::new();
        for f in &self.functions {
            let invalid = |message: String| invalid_entry(&f.bin, message);
            let kebab = |s: &str| {
                !s.is_empty()
                    && s.split('-').all(|w| {
                        !w.is_empty()
                            && w.chars()
                                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                    })
            };
            if !kebab(&f.bin) || !f.bin.starts_with(|c: char| c.is_ascii_lowercase()) {
                return Err(invalid(
                    "a bin is kebab-case: lowercase words joined by -, starting with a letter"
                        .into(),
                ));
            }
            if RUST_KEYWORDS.contains(&f.module().as_str()) {
                return Err(invalid(format!(
                    "{} is a Rust keyword: it names the handler's module",
                    f.module()
                )));
            }
            // Lambda function names are at most 64 characters: `pooltable-<stage>-<bin>`.
            if f.bin.len() > MAX_BIN_LEN {
                return Err(invalid(format!(
                    "a bin is at most {MAX_BIN_LEN} characters"
                )));
            }
            if !kebab(&f.krate) {
                return Err(invalid(format!("crate {:?} is not a crate name", f.krate)));
            }
            if !seen_bins.insert(f.bin.as_str()) {
                return Err(invalid("listed twice".into()));
            }
            if f.platform.is_some() && f.platform_sessions().is_none() {
                return Err(invalid(
                    "platform names sessions of the platform's partition, which a function without tenant-sessions never takes".into(),
                ));
            }
            if f.template
                .as_deref()
                .is_some_and(|t| t.contains("PLATFORM_SESSION_ACCESS"))
            {
                return Err(invalid(
                    "template: sets PLATFORM_SESSION_ACCESS, which the generator writes from `platform`".into(),
                ));
            }
            if f.route().is_none() && (f.lost_success.is_some() || f.transaction.is_some()) {
                return Err(invalid(
                    "lost_success and transaction describe routes, not triggered functions".into(),
                ));
            }
            match (f.route(), &f.trigger) {
                (Some(r), None) => {
                    if !METHODS.contains(&r.method) {
                        return Err(invalid(format!(
                            "method {} is not one of {METHODS:?}",
                            r.method
                        )));
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
                        return Err(invalid(format!(
                            "path {:?} is not /segment/{{param}}/…",
                            r.path
                        )));
                    }
                    if !seen_routes.insert((r.method, r.path)) {
                        return Err(invalid(format!("{} {} is served twice", r.method, r.path)));
                    }
                    let mut sample: Vec<&str> =
                        f.sample.path.keys().filter_map(|k| k.as_str()).collect();
                    let mut params = r.params();
                    sample.sort_unstable();
                    params.sort_unstable();
                    if sample != params {
                        return Err(invalid(format!(
                            "the sample's path parameters {sample:?} are not the route's {params:?}"
                        )));
                    }
                    if f.expect.is_some() {
                        return Err(invalid("a route's sample has `expect` under sample".into()));
                    }
                    if let Some(l) = &f.lost_success {
                        if l.write != TODO && !WRITES.contains(&l.write.as_str()) {
                            return Err(invalid(format!(
                                "lost_success.write {:?} is not one of {WRITES:?}",
                                l.write
                            )));
                        }
                    }
                    if let Some(t) = f.transaction.as_ref().filter(|t| !t.todo) {
                        if t.condition >= t.actions || !(400..=499).contains(&t.condition_status) {
                            return Err(invalid(
                                "transaction.condition is one of its actions, and its status a 4xx"
                                    .into(),
                            ));
                        }
                    }
                    if !matches!(f.success_status(), 200..=299) {
                        return Err(invalid("status is a success status (2xx)".into()));
                    }
                    if f.doc.is_none() {
                        return Err(invalid(
                            "a route has a doc (its row in README's table)".into(),
                        ));
                    }
                    for line in f.template.as_deref().unwrap_or_default().lines() {
                        let key = line.split(':').next().unwrap_or_default();
                        if GENERATED_PROPERTIES.contains(&key) {
                            return Err(invalid(format!(
                                "template: sets {key}, which the generator writes from the route"
                            )));
                        }
                    }
                }
                (None, Some(_)) => {
                    if f.expect.is_none() {
                        return Err(invalid("a function with a trigger has `expect`".into()));
                    }
                    if f.route.is_some() {
                        return Err(invalid("route is METHOD /path".into()));
                    }
                }
                (Some(_), Some(_)) => {
                    return Err(invalid("either route or trigger, not both".into()))
                }
                (None, None) => {
                    return Err(invalid("needs a route (METHOD /path) or a trigger".into()))
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_derive_from_the_bin() {
        let t = RouteTable::parse(
            "- {bin: get-product, crate: products, route: 'GET /products/{productId}', sample: {path: {productId: p}}, doc: {index: table, keys: k, requests: {GetItem: 1}}}",
        )
        .unwrap();
        let f = &t.functions[0];
        assert_eq!(f.resource(), "GetProductFunction");
        assert_eq!(f.module(), "get_product");
        assert_eq!(f.route().unwrap().params(), ["productId"]);
        assert_eq!(f.expectation(), "200");
    }

    #[test]
    fn requests_are_counts_by_operation_with_a_note() {
        let t = RouteTable::parse(
            "- {bin: a, crate: products, route: 'GET /p', doc: {index: t, keys: k, requests: {Query: 1 per shard, TransactWriteItems: 2, GetItem: 2 per shard + 3, note: 'per page'}}}",
        )
        .unwrap();
        let r = &t.functions[0].doc.as_ref().unwrap().requests;
        let expected = [("Query", 4), ("TransactWriteItems", 2), ("GetItem", 11)];
        assert_eq!(
            r.expected(4),
            expected.map(|(op, n)| (op.to_owned(), n)).into()
        );
        assert_eq!(
            r.to_string(),
            "N × Query + 2 × TransactWriteItems + (2N + 3) × GetItem; per page"
        );
    }

    #[test]
    fn a_bad_line_is_refused_with_its_bin() {
        for (line, says) in [
            ("- {bin: Get, crate: products, route: 'GET /p'}", "kebab-case"),
            ("- {bin: a, crate: products, route: 'FETCH /p'}", "method"),
            ("- {bin: a, crate: products, route: 'GET /p/{id}'}", "path parameters"),
            ("- {bin: a, crate: products, route: 'GET p'}", "path"),
            ("- {bin: a, crate: products}", "route"),
            ("- {bin: a, crate: products, trigger: SQS}", "expect"),
            ("- {bin: a, crate: products, route: 'GET /p', status: 404}", "2xx"),
            ("- {bin: 2fa, crate: products, route: 'GET /p'}", "letter"),
            ("- {bin: type, crate: products, route: 'GET /p'}", "keyword"),
            ("- {bin: a, crate: products, route: 'GET /p'}", "doc"),
            (
                "- {bin: a, crate: products, route: 'GET /p', doc: {index: t, keys: k, requests: {GetItem: 1}}, template: 'TenancyConfig: !Ref AWS::NoValue'}",
                "TenancyConfig",
            ),
            (
                "- {bin: a, crate: products, route: 'GET /p', doc: {index: t, keys: k, requests: {GetItem: 1}}}\n- {bin: b, crate: products, route: 'GET /p'}",
                "twice",
            ),
            (
                "- {bin: a, crate: products, route: 'GET /p', doc: {index: t, keys: k, requests: {GetItems: 1}}}",
                "\"GetItems\" is not a DynamoDB operation",
            ),
            (
                "- {bin: a, crate: products, route: 'GET /p', doc: {index: t, keys: k, requests: {Query: 1 per page}}}",
                "requests.Query",
            ),
            (
                "- {bin: a, crate: products, route: 'GET /p', doc: {index: t, keys: k, requests: '1'}}",
                "requests",
            ),
            (
                "- {bin: a, crate: products, route: 'PUT /p', lost_success: {write: Query}}",
                "lost_success.write",
            ),
            (
                "- {bin: a, crate: products, route: 'PUT /p', transaction: {actions: 2, condition: 2, condition_status: 409}}",
                "transaction.condition",
            ),
            (
                "- {bin: a, crate: products, route: 'PUT /p', transaction: {actions: 2, condition: 0, condition_status: 500}}",
                "transaction.condition",
            ),
            (
                "- {bin: a, crate: products, trigger: SQS, expect: 'batch:0', lost_success: {write: PutItem}}",
                "not triggered functions",
            ),
        ] {
            let err = RouteTable::parse(line).unwrap_err().to_string();
            assert!(err.contains(says), "{line}: {err}");
        }
    }
}
