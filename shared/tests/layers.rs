//! The crate's layers hold: every `crate::` path in a module of layer L names a module of layer L or
//! below (identity < isolation < store < service), and no modules import each other in a cycle.
//! Read from the source text, as `use crate::…` paths (grouped `{a, b::c}` included).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LAYERS: [&str; 4] = ["identity", "isolation", "store", "service"];

fn layer_of(module: &str) -> Option<usize> {
    let top = module.split("::").next()?;
    LAYERS.iter().position(|l| *l == top)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/store/scatter.rs` → `store::scatter`; `src/store/mod.rs` → `store`; `src/lib.rs` → ``.
fn module_name(src: &Path, file: &Path) -> String {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| p != "mod" && p != "lib")
        .collect();
    parts.join("::")
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        rest = rest[start..]
            .find("*/")
            .map_or("", |end| &rest[start + end + 2..]);
    }
    out.push_str(rest);
    out.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The comma-separated items of a `{…}` group (`text` starts after its `{`), nested groups kept whole.
fn top_level_items(text: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0usize, 0usize, Vec::new());
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&text[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

/// Every path that follows `crate::`, with one level of `{a, b::c}` groups expanded.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        if at > 0 && text[..at].ends_with(|c: char| is_ident(c)) {
            continue; // e.g. `shared_crate::`
        }
        let mut prefix: Vec<String> = Vec::new();
        let mut rest = &text[at + "crate::".len()..];
        loop {
            if let Some(group) = rest.strip_prefix('{') {
                for item in top_level_items(group) {
                    // `meter::{self, X}` names module `meter`: keep the path up to the inner group.
                    let item = item.split("::{").next().unwrap_or("");
                    let item = item.split(" as ").next().unwrap_or("").trim();
                    if item.is_empty() || item == "self" {
                        continue;
                    }
                    let mut path = prefix.clone();
                    path.extend(item.split("::").map(|s| s.trim().to_owned()));
                    out.push(path);
                }
                break;
            }
            let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
            if end == 0 {
                out.push(prefix);
                break;
            }
            prefix.push(rest[..end].to_owned());
            rest = &rest[end..];
            match rest.strip_prefix("::") {
                Some(next) => rest = next,
                None => {
                    out.push(prefix);
                    break;
                }
            }
        }
    }
    out
}

/// Module → the modules it names.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeMap<String, PathBuf> = files
        .into_iter()
        .map(|f| (module_name(&src, &f), f))
        .collect();
    let mut graph = BTreeMap::new();
    for (module, file) in &modules {
        let text = strip_comments(&std::fs::read_to_string(file).expect("read module"));
        let mut targets = BTreeSet::new();
        for path in crate_paths(&text) {
            // The longest prefix of the path that is a module.
            let target = (1..=path.len())
                .rev()
                .map(|n| path[..n].join("::"))
                .find(|m| modules.contains_key(m));
            if let Some(t) = target.filter(|t| t != module) {
                targets.insert(t);
            }
        }
        graph.insert(module.clone(), targets);
    }
    graph
}

#[test]
fn every_module_uses_only_its_own_layer_and_those_below() {
    // GIVEN the import graph of the crate's modules
    let graph = import_graph();
    assert!(
        graph.len() > 15,
        "the parser found too few modules: {graph:?}"
    );
    // WHEN each import is placed by layer
    let mut upward = Vec::new();
    for (from, targets) in &graph {
        let Some(from_layer) = layer_of(from) else {
            continue; // the crate root only re-exports
        };
        assert!(
            from.contains("::") || LAYERS.contains(&from.as_str()),
            "{from} is outside the four layers"
        );
        for to in targets {
            let to_layer = layer_of(to).unwrap_or(usize::MAX);
            if to_layer > from_layer {
                upward.push(format!("{from} -> {to}"));
            }
        }
    }
    // THEN none reaches up
    assert_none(&upward, "imports that reach up a layer");
}

#[test]
fn no_modules_import_each_other_in_a_cycle() {
    let graph = import_graph();
    // Depth-first search with colours: an edge back to a module on the stack closes a cycle.
    fn visit<'a>(
        node: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
        cycles: &mut Vec<String>,
    ) {
        state.insert(node, 1);
        stack.push(node);
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|m| *m == next).unwrap_or(0);
                    cycles.push(format!("{} -> {next}", stack[at..].join(" -> ")));
                }
                Some(_) => {}
                None => visit(next, graph, state, stack, cycles),
            }
        }
        stack.pop();
        state.insert(node, 2);
    }
    let mut state = BTreeMap::new();
    let mut cycles = Vec::new();
    for node in graph.keys() {
        if !state.contains_key(node.as_str()) {
            visit(node, &graph, &mut state, &mut Vec::new(), &mut cycles);
        }
    }
    assert_none(&cycles, "import cycles");
}

#[test]
fn the_parser_sees_grouped_and_nested_paths() {
    let text = "use crate::store::{meter::{self}, usage as u};\nlet x = crate::identity::keys::PK; // crate::service::app";
    let paths = crate_paths(&strip_comments(text));
    assert!(paths.contains(&vec!["store".into(), "usage".into()]));
    assert!(paths.contains(&vec!["identity".into(), "keys".into(), "PK".into()]));
    assert!(!paths
        .iter()
        .any(|p| p.first().is_some_and(|s| s == "service")));
}

/// Every `.rs` file of the workspace but build output and installed tools.
fn workspace_rust_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&root).expect("read the workspace") {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let skipped = name.is_some_and(|n| n.starts_with('.') || n == "target");
        if path.is_dir() && !skipped {
            rust_files(&path, &mut files);
        }
    }
    files
}

/// Keys derive from the declarations: a key's bytes are written only in `shared/src/identity`,
/// where every builder and parser is; everything else, tests included, builds keys through them
/// (`identity::keys`, `KeySpace::key`, `keys::raw_key` for a forged one).
#[test]
fn no_key_is_written_by_hand_outside_identity() {
    let identity = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join("identity");
    let identity = identity.canonicalize().expect("identity exists");
    let mut found = Vec::new();
    for file in workspace_rust_files() {
        let file = file.canonicalize().expect("a file");
        if file.starts_with(&identity) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read");
        // Comment lines may show a key's shape; code may not hold one.
        for (n, line) in text.lines().enumerate() {
            if !line.trim_start().starts_with("//") && line.contains(concat!("TENANT", "#")) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert_none(&found, "build these keys with shared::identity::keys");
}

/// Fails, naming `what` and listing them, unless nothing was `found`.
fn assert_none<T: std::fmt::Debug>(found: &[T], what: &str) {
    assert!(found.is_empty(), "{what} ({}): {found:#?}", found.len());
}
