//! Rooms that fit, over the whole workspace: no source file is longer than [`MAX_FILE_LINES`] and no
//! function longer than [`MAX_FN_LINES`], in every crate's own code (`shared`, the functions,
//! `devtools`, `bench`, `client` and the test harness in `tests/src`). Test scenario files
//! (`*/tests/`) are lists of cases and are not held to it. Generated files (those that open with
//! [`GENERATED`]) and fixture tables ([`FIXTURE_TABLES`]) are exempt.

use syn::visit::Visit;
use workspace::{read, room_files};

mod workspace;

/// A module that grows past this is split into private submodules by what they serve (see
/// ARCHITECTURE's map), not appended to.
const MAX_FILE_LINES: usize = 500;

/// Counted from the line of `fn` to the line of the closing brace. 100 lines is what a reader takes
/// in at once on two screens without scrolling back to see what a name meant; every function that
/// was longer when the rule came in was a sequence of steps that each had a name to give (a figure's
/// setup, run and report; a walk's resume, batch and next cursor), and reads better as those.
const MAX_FN_LINES: usize = 100;

/// Functions that are one table of data, read row by row, not steps: `key_table` declares every
/// key of the single-table design (ARCHITECTURE's key scheme is printed from it).
const FIXTURE_TABLES: [&str; 1] = ["shared/src/identity/keys/table.rs::key_table"];

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let too_long: Vec<String> = room_files()
        .into_iter()
        .filter_map(|file| {
            let lines = read(&file).lines().count();
            (lines > MAX_FILE_LINES).then(|| format!("{file} ({lines} lines)"))
        })
        .collect();
    assert!(
        too_long.is_empty(),
        "split these into private submodules (at most {MAX_FILE_LINES} lines each): {too_long:#?}"
    );
}

/// Every function's and method's length in lines, named `file::name`.
struct FnLengths<'f> {
    file: &'f str,
    found: Vec<(String, usize)>,
}

impl FnLengths<'_> {
    fn record(&mut self, name: &syn::Ident, fn_token: &syn::token::Fn, block: &syn::Block) {
        let first = fn_token.span.start().line;
        let last = block.brace_token.span.close().end().line;
        self.found
            .push((format!("{}::{name}", self.file), last - first + 1));
    }
}

impl<'ast> Visit<'ast> for FnLengths<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.record(&f.sig.ident, &f.sig.fn_token, &f.block);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.record(&f.sig.ident, &f.sig.fn_token, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.record(&f.sig.ident, &f.sig.fn_token, block);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

fn function_lengths() -> Vec<(String, usize)> {
    let mut all = Vec::new();
    for file in room_files() {
        let parsed = syn::parse_file(&read(&file)).unwrap_or_else(|e| panic!("parse {file}: {e}"));
        let mut lengths = FnLengths {
            file: &file,
            found: Vec::new(),
        };
        lengths.visit_file(&parsed);
        all.extend(lengths.found);
    }
    all
}

#[test]
fn no_function_is_longer_than_the_limit() {
    let too_long: Vec<String> = function_lengths()
        .into_iter()
        .filter(|(name, lines)| *lines > MAX_FN_LINES && !FIXTURE_TABLES.contains(&name.as_str()))
        .map(|(name, lines)| format!("{name} ({lines} lines)"))
        .collect();
    assert!(
        too_long.is_empty(),
        "break these into named steps (at most {MAX_FN_LINES} lines each): {too_long:#?}"
    );
}

/// The counter sees what it must: a known function, at its known length; and an exemption that
/// no longer names anything long is dropped, not kept.
#[test]
fn the_counter_finds_every_function_and_each_exemption_is_still_needed() {
    let lengths = function_lengths();
    assert!(lengths.len() > 1000, "{} functions", lengths.len());
    for exempt in FIXTURE_TABLES {
        let found = lengths.iter().find(|(name, _)| name == exempt);
        assert!(
            found.is_some_and(|(_, lines)| *lines > MAX_FN_LINES),
            "{exempt} is no longer over {MAX_FN_LINES} lines (or gone): drop its exemption"
        );
    }
    let files = room_files();
    assert!(files.iter().any(|f| f == "shared/src/lib.rs"), "{files:#?}");
    assert!(
        !files
            .iter()
            .any(|f| f.starts_with("functions/products/src/bin/")),
        "generated bins are exempt"
    );
}
