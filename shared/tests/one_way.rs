//! One way to the table: outside `shared::store` no code sends a raw DynamoDB operation, builds a
//! raw SDK request or transaction action, sets an expression, holds the scoped client's SDK client
//! or writes an expression string. What goes to the table goes through `store`'s typed requests
//! (`TenantDb::query`, `get`, `put_item`, `update_item`, `delete_item`, `check_item`) and its typed
//! expressions (`store::client::expr`).
//!
//! Held over the rooms of `rooms.rs` (`workspace::ROOMS`), with these named exemptions:
//! - `shared/src/store/`: the one way itself;
//! - test code: `#[cfg(test)]` items, the `tests.rs` files their parents load under `#[cfg(test)]`,
//!   and the integration harness (`tests/src`), which reads the raw table to check what `store` wrote (a witness that
//!   read through `store` would check `store` against itself) and sends what a compromised
//!   handler could, for the guard to refuse;
//! - the benchmark's floors ([`FLOORS`]): the raw SDK calls each figure is a ratio against.
//!
//! And a scoped client built on a client as it is (`TenantDb::on_client`, no guard) is the
//! operator's tools' alone: `devtools`.

use syn::visit::Visit;
use workspace::{read, room_files};

mod workspace;

/// The SDK's operations, as a client starts them: `client.query()` (no arguments; the store's
/// typed `db.query(key)` takes one).
const RAW_OPERATIONS: [&str; 10] = [
    "get_item",
    "put_item",
    "update_item",
    "delete_item",
    "query",
    "scan",
    "batch_get_item",
    "batch_write_item",
    "transact_get_items",
    "transact_write_items",
];

/// The SDK builders' expression setters (their getters, which the guards read, take no argument).
const EXPRESSION_SETTERS: [&str; 7] = [
    "key_condition_expression",
    "condition_expression",
    "update_expression",
    "filter_expression",
    "projection_expression",
    "expression_attribute_names",
    "expression_attribute_values",
];

/// The SDK's request and transaction-action types, whose `builder()` starts a raw one.
const SDK_BUILDERS: [&str; 9] = [
    "Put",
    "Update",
    "Delete",
    "ConditionCheck",
    "Get",
    "TransactWriteItem",
    "TransactGetItem",
    "PutRequest",
    "WriteRequest",
];

/// The functions an expression is written in: a string naming one is an expression.
const EXPRESSION_FUNCTIONS: [&str; 6] = [
    "attribute_exists(",
    "attribute_not_exists(",
    "attribute_type(",
    "begins_with(",
    "if_not_exists(",
    "list_append(",
];

/// A comparison against a value placeholder (`PK = :pk`, `n < :max`, `BETWEEN :lo`).
const PLACEHOLDER_COMPARISONS: [&str; 7] =
    ["= :", "> :", "< :", "<> :", ">= :", "<= :", "BETWEEN :"];

/// The benchmark's floors, `file::function`: each sends the raw SDK requests its figure is measured
/// against (`scripts/bench.sh`), so it must not go through `store`. And its damage: what a restore
/// repairs, done to the table as an outsider (an operator's mistake) would.
const FLOORS: [&str; 11] = [
    "bench/src/costs.rs::raw_page_rcu",
    "bench/src/idempotent.rs::warm_up",
    "bench/src/idempotent.rs::put_new",
    "bench/src/idempotent.rs::raw_keyed_create",
    "bench/src/lanes.rs::raw_transactions",
    "bench/src/lanes.rs::raw_relocations",
    "bench/src/lanes.rs::send_raw_transactions",
    "bench/src/latency.rs::floor_and_warm_samples",
    "bench/src/latency.rs::live_session_query",
    "bench/src/scatter.rs::product_shard_query",
    "bench/src/restore.rs::damage",
];

/// Whether `text` is an expression: it calls an expression function, compares against a value
/// placeholder, or is an update's clause. Markdown prose that quotes one in backticks (the route
/// table's request lists) is not: no expression DynamoDB is sent holds a backtick.
fn is_expression(text: &str) -> bool {
    if text.contains('`') {
        return false;
    }
    let update = ["SET ", "ADD ", "REMOVE ", "DELETE "]
        .iter()
        .any(|clause| text.starts_with(clause) && (text.contains('#') || text.contains(':')));
    update
        || EXPRESSION_FUNCTIONS.iter().any(|f| text.contains(f))
        || PLACEHOLDER_COMPARISONS.iter().any(|c| text.contains(c))
}

/// What one file does that only `store` may, each as `file::function: what`.
struct Finder<'f> {
    file: &'f str,
    /// The exempt functions ([`FLOORS`], or none to see everything).
    floors: &'f [&'f str],
    function: Vec<String>,
    found: Vec<String>,
}

impl Finder<'_> {
    fn note(&mut self, what: String) {
        let place = self.function.last().map(String::as_str).unwrap_or("(item)");
        let at = format!("{}::{place}", self.file);
        if !self.floors.contains(&at.as_str()) {
            self.found.push(format!("{at}: {what}"));
        }
    }

    fn string(&mut self, text: &str) {
        if is_expression(text) {
            self.note(format!("expression string {text:?}"));
        }
    }

    /// The string literals in a macro's tokens (`format!`, `json!`): syn leaves them unparsed.
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        for token in tokens {
            match token {
                proc_macro2::TokenTree::Group(group) => self.tokens(group.stream()),
                proc_macro2::TokenTree::Literal(literal) => {
                    if let Ok(text) = syn::parse_str::<syn::LitStr>(&literal.to_string()) {
                        self.string(&text.value());
                    }
                }
                _ => {}
            }
        }
    }

    fn in_function(&mut self, name: &syn::Ident, visit: impl FnOnce(&mut Self)) {
        self.function.push(name.to_string());
        visit(self);
        self.function.pop();
    }
}

/// `#[cfg(test)]` and `#[test]` (never `cfg(not(test))`, which is production code).
fn is_test_code(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let cfg_test = a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|list| list.tokens.to_string() == "test");
        cfg_test || a.path().is_ident("test")
    })
}

impl<'ast> Visit<'ast> for Finder<'_> {
    // Doc comments and attributes name expressions in prose; they send nothing.
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_code(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.in_function(&f.sig.ident, |me| syn::visit::visit_item_fn(me, f));
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.in_function(&f.sig.ident, |me| syn::visit::visit_impl_item_fn(me, f));
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        let method = call.method.to_string();
        let method = method.as_str();
        if call.args.is_empty() && RAW_OPERATIONS.contains(&method) {
            self.note(format!("raw operation .{method}()"));
        }
        if !call.args.is_empty() && EXPRESSION_SETTERS.contains(&method) {
            self.note(format!("expression setter .{method}(…)"));
        }
        if method == "sdk_client" {
            self.note("the scoped client's SDK client".into());
        }
        syn::visit::visit_expr_method_call(self, call);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let names: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if let [.., sdk_type, last] = names.as_slice() {
            if last == "builder" && SDK_BUILDERS.contains(&sdk_type.as_str()) {
                self.note(format!("raw SDK builder {sdk_type}::builder()"));
            }
            // A scoped client on a client as it is, with no guard: the operator's tools only.
            if sdk_type == "TenantDb" && last == "on_client" && !self.file.starts_with("devtools/")
            {
                self.note("an unguarded TenantDb (TenantDb::on_client) outside devtools".into());
            }
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_lit_str(&mut self, literal: &'ast syn::LitStr) {
        self.string(&literal.value());
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if !mac.path.is_ident("assert") && !mac.path.is_ident("assert_eq") {
            self.tokens(mac.tokens.clone());
        }
    }
}

/// The files the rule holds over: the rooms, but `store` and the test code named above.
fn held_files() -> Vec<String> {
    room_files()
        .into_iter()
        .filter(|f| {
            !f.starts_with("shared/src/store/")
                && !f.starts_with("tests/src/")
                && !is_test_module_file(f)
        })
        .collect()
}

/// Whether `file` is a `tests.rs` its parent module loads under `#[cfg(test)]` (`dir/tests.rs`
/// from `dir.rs` or `dir/mod.rs`, or at a crate root from `dir/lib.rs` or `dir/main.rs`): the name alone exempts nothing, so production code in a file of
/// that name is held like any other.
fn is_test_module_file(file: &str) -> bool {
    let Some(dir) = file.strip_suffix("/tests.rs") else {
        return false;
    };
    let parent = [
        format!("{dir}.rs"),
        format!("{dir}/mod.rs"),
        format!("{dir}/lib.rs"),
        format!("{dir}/main.rs"),
    ]
    .into_iter()
    .find(|p| workspace::workspace_root().join(p).is_file());
    parent.is_some_and(|p| read(&p).contains("#[cfg(test)]\nmod tests;"))
}

fn findings(files: &[String], floors: &[&str]) -> Vec<String> {
    let mut all = Vec::new();
    for file in files {
        let parsed = syn::parse_file(&read(file)).unwrap_or_else(|e| panic!("parse {file}: {e}"));
        let mut finder = Finder {
            file,
            floors,
            function: Vec::new(),
            found: Vec::new(),
        };
        finder.visit_file(&parsed);
        all.extend(finder.found);
    }
    all
}

#[test]
fn nothing_outside_store_reaches_the_table_but_through_it() {
    let found = findings(&held_files(), &FLOORS);
    assert!(
        found.is_empty(),
        "go through shared::store's typed requests and expressions: {found:#?}"
    );
}

/// Every `tests.rs` of the rooms is a test module today: its parent loads it under `#[cfg(test)]`.
#[test]
fn each_tests_file_is_a_test_module() {
    let not_tests: Vec<String> = room_files()
        .into_iter()
        .filter(|f| f.ends_with("/tests.rs") && !is_test_module_file(f))
        .collect();
    assert!(
        not_tests.is_empty(),
        "load these under #[cfg(test)], or rename them: {not_tests:#?}"
    );
}

/// Each floor is still one: an exemption that no longer sends anything raw is dropped, not kept.
#[test]
fn each_floor_still_sends_raw_requests() {
    let unexempted = findings(&held_files(), &[]);
    for floor in FLOORS {
        assert!(
            unexempted
                .iter()
                .any(|f| f.starts_with(&format!("{floor}: "))),
            "{floor} sends nothing raw any more: drop its exemption"
        );
    }
}

/// What the rule would count in the whole workspace, `store` included (the closing note's figures:
/// `WORKSPACE_ROOT=<checkout> cargo test -p shared --test one_way -- --ignored --nocapture`).
#[test]
#[ignore]
fn count_everywhere() {
    let everywhere = findings(&room_files(), &[]);
    let count = |what: &str, inside: bool| {
        everywhere
            .iter()
            .filter(|f| f.contains(what) && f.starts_with("shared/src/store/") == inside)
            .count()
    };
    for what in [
        "expression string",
        "raw operation",
        "expression setter",
        "raw SDK builder",
    ] {
        println!(
            "{what}: {} outside store, {} inside",
            count(what, false),
            count(what, true)
        );
    }
}

/// The finder sees each thing it names, and nothing in prose or in tests.
#[test]
fn the_finder_sees_what_it_names() {
    let source = r#"
        /// A doc comment naming attribute_exists(PK) is prose.
        fn raw(db: &Db) {
            db.client.query().key_condition_expression("PK = :pk");
            let _ = Put::builder();
            let _ = format!("{} AND attribute_not_exists(#x)", a);
            db.query(key).first_live(now);
            input.key_condition_expression();
            let _ = TenantDb::on_client(c, t, "x");
        }
        #[cfg(not(test))]
        fn production() { client.scan(); }
        #[cfg(test)]
        mod tests {
            fn t() { client.get_item(); }
        }
    "#;
    let parsed = syn::parse_file(source).expect("parse");
    let mut finder = Finder {
        file: "x.rs",
        floors: &[],
        function: Vec::new(),
        found: Vec::new(),
    };
    finder.visit_file(&parsed);
    let found = finder.found.join("\n");
    assert_eq!(finder.found.len(), 7, "{found}");
    for what in [
        "x.rs::raw: raw operation .query()",
        "x.rs::raw: expression setter .key_condition_expression(…)",
        "x.rs::raw: expression string \"PK = :pk\"",
        "x.rs::raw: raw SDK builder Put::builder()",
        "x.rs::raw: expression string \"{} AND attribute_not_exists(#x)\"",
        "x.rs::raw: an unguarded TenantDb (TenantDb::on_client) outside devtools",
        "x.rs::production: raw operation .scan()",
    ] {
        assert!(found.contains(what), "{what} not in {found}");
    }
    assert!(is_expression("SET #by = :nonce"));
    assert!(!is_expression(
        "Delete `attribute_exists(PK)` + Put tombstone"
    ));
    assert!(!is_expression("a sentence: nothing = nothing"));
}
