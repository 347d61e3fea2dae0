//! routes.yaml is the one list of routes: what `pooltable gen` derives from it is current, the
//! template it writes deploys the same resources as the hand-written one it replaced, and no
//! hand-written file holds a list of routes in one of the old shapes. No local stack needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use devtools::routes::RouteTable;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn table() -> RouteTable {
    RouteTable::load(&root()).expect("routes.yaml")
}

/// The names of the files in `dir` (relative to the root) ending in `suffix`, without it.
fn stems(dir: &str, suffix: &str) -> BTreeSet<String> {
    std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            name.strip_suffix(suffix).map(str::to_owned)
        })
        .collect()
}

#[test]
fn every_generated_file_is_what_pooltable_gen_writes() {
    // GIVEN the repository as committed
    // WHEN the generator runs in check mode
    let stale = devtools::generate::stale(&root()).expect("pooltable gen");
    // THEN nothing differs
    assert!(
        stale.is_empty(),
        "not what routes.yaml makes them: {stale:?}; run `cargo run -p devtools --bin pooltable -- gen`"
    );
}

#[test]
fn every_binary_and_event_is_a_function_of_the_route_table() {
    let table = table();
    let declared: BTreeSet<String> = table.functions.iter().map(|f| f.bin.clone()).collect();
    let mut bins = BTreeSet::new();
    for krate in stems("functions", "") {
        let dir = format!("functions/{krate}/src/bin");
        if root().join(&dir).is_dir() {
            for bin in stems(&dir, ".rs") {
                let f = table
                    .function(&bin)
                    .unwrap_or_else(|| panic!("{dir}/{bin}.rs is not in routes.yaml"));
                assert_eq!(f.krate, krate, "{bin}: routes.yaml names another crate");
                bins.insert(bin);
            }
        }
    }
    assert_eq!(bins, declared, "binaries vs routes.yaml");
    assert_eq!(stems("events", ".json"), declared, "events/ vs routes.yaml");
}

#[test]
fn the_template_deploys_what_the_hand_written_one_did() {
    // GIVEN the processed form (cfn-lint's parse, SAM's Globals merged) of template.yaml as it was
    // written by hand before the route table (tests/golden/processed-template.jsonl, one line per
    // resource; rewrite it with scripts/processed_template.py after an intended change to an
    // existing resource: a new route's resources need no rewrite)
    let golden = read("tests/golden/processed-template.jsonl");
    // WHEN the generated template is processed the same way
    let python = root().join(".tools/venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: scripts/test.sh installs it (ensure_py_tools)",
        python.display()
    );
    let out = std::process::Command::new(python)
        .arg(root().join("scripts/processed_template.py"))
        .arg(root().join("template.yaml"))
        .output()
        .expect("run scripts/processed_template.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let processed = String::from_utf8(out.stdout).unwrap();
    // THEN every resource of the golden (its type, properties, conditions and checkov skips) is
    // there unchanged; the REST API keeps every operation it had
    let entries = |text: &str| -> BTreeMap<String, serde_json::Value> {
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
                let (name, body) = v.as_object().unwrap().iter().next().unwrap();
                (name.clone(), body.clone())
            })
            .collect()
    };
    let (mut now, mut before) = (entries(&processed), entries(&golden));
    let operations = |api: &mut serde_json::Value| -> BTreeMap<String, serde_json::Value> {
        let paths = api["Properties"]["DefinitionBody"]["paths"].take();
        let mut ops = BTreeMap::new();
        for (path, methods) in paths.as_object().cloned().unwrap_or_default() {
            for (method, op) in methods.as_object().cloned().unwrap_or_default() {
                ops.insert(format!("{method} {path}"), op);
            }
        }
        ops
    };
    let ops_now = operations(now.get_mut("TenantRestApi").unwrap());
    for (op, body) in operations(before.get_mut("TenantRestApi").unwrap()) {
        assert_eq!(
            ops_now.get(&op),
            Some(&body),
            "TenantRestApi {op} changed or went"
        );
    }
    for (name, body) in &before {
        assert_eq!(now.get(name), Some(body), "{name} changed or went");
    }
    // AND what it did not have is a route's function, role or invoke permission, of a route in routes.yaml,
    // a function's log group, the functions' telemetry policy, or the control plane's application
    // plane (#45)
    let table = table();
    let is_function = |name: &str| {
        now.get(name)
            .is_some_and(|r| r["Type"] == "AWS::Serverless::Function")
    };
    for name in now.keys().filter(|n| !before.contains_key(*n)) {
        let log_group_of_a_function = name
            .strip_suffix("Logs")
            .is_some_and(|f| is_function(f) && now[name]["Type"] == "AWS::Logs::LogGroup");
        assert!(
            log_group_of_a_function
                || name == "TelemetryPolicy"
                || name.starts_with("ControlPlane")
                || table.routes().any(|r| {
                    let resource = r.function.resource();
                    *name == resource
                        || *name == format!("{resource}RestPermission")
                        || *name == r.function.role()
                }),
            "{name} is new and no route's"
        );
    }
    // AND every function of the route table is there once
    let functions = now
        .values()
        .filter(|r| r["Type"] == "AWS::Serverless::Function")
        .count();
    assert_eq!(functions, table.functions.len());
}

#[test]
fn the_template_source_is_at_most_half_the_hand_written_template() {
    // The hand-written template.yaml had 2,559 lines when the route table was proposed (#34); since
    // then the tenant-operator role and its policy, the control plane's rule for the end of an
    // operation and the rule that it protects the operators' tenants (#56), and the control plane's
    // two sources, its tier map and the API's throttling defaults (#60), and the control plane's own
    // role (#56); then the optional custom domain, its rule and output (#60), and the optional
    // customer-managed table key, its two policies and their attachments (#56), and the platform's
    // partition narrowed per function: the usage reader's role, three trust statements and three
    // narrowed-session statements (#56), and own tables' changes and deletion moved to the
    // tenant-operator role, bound to the table's tenant tag, which is given once (#56); then the
    // lane queue, its dead letters, its two policies, the lane worker, its two parameters, the
    // queue's output and its variables (#58, 119 lines); then the alarm on forged lane messages
    // (#58, 17 lines); then the two narrower policies of the functions that only destroy keys and
    // describe own tables, never make them (least privilege, 15 lines); then the alarm on the lane
    // dead letters (#58, 18 lines); then the narrower policy of the lane worker, which reads and
    // drops restore copies but never starts a restore (least privilege, 9 lines); then the
    // deletion of restore tables held to point-in-time copies' names (least privilege, 10 lines):
    // 460 lines no route derives.
    let lines = read("template.in.yaml").lines().count();
    assert!(
        lines <= 2_559 / 2 + 460,
        "template.in.yaml has {lines} lines"
    );
}

/// The text of `file` outside its generated part (between the `@generated begin` and `end` lines).
fn hand_written(file: &str) -> String {
    let text = read(file);
    match (text.find("@generated begin"), text.find("@generated end")) {
        (Some(a), Some(b)) => format!("{}{}", &text[..a], &text[b..]),
        _ => text,
    }
}

#[test]
fn no_hand_written_file_lists_the_routes_in_an_old_shape() {
    let table = table();
    let routes: Vec<_> = table.routes().collect();
    // the watch router's entries
    assert!(!hand_written("Cargo.toml").contains("function = \""));
    // openapi.yaml's paths, and the contract check's list of operator routes
    assert!(!read("openapi.in.yaml").contains("\npaths:"));
    assert!(
        !hand_written("scripts/schemathesis.sh").contains("--exclude-operation-id onboard-tenant")
    );
    let tests: Vec<(String, String)> = stems("tests/tests/all", ".rs")
        .into_iter()
        .map(|t| {
            let text = read(&format!("tests/tests/all/{t}.rs"));
            (t, text)
        })
        .collect();
    for f in &table.functions {
        let bin = &f.bin;
        // an expected status line of the end-to-end scripts
        for script in stems("scripts", ".sh") {
            let text = hand_written(&format!("scripts/{script}.sh"));
            assert!(
                !text.contains(&format!("\"{bin} {}\"", f.expectation())),
                "scripts/{script}.sh lists {bin}'s expected status"
            );
        }
        // README's access-pattern row
        assert!(
            !hand_written("README.md").contains(&format!("| `{bin}` |")),
            "README.md has a hand-written row for {bin}"
        );
        // a case of the fault tests' route tables (lost success, transactions)
        for (test, text) in &tests {
            assert!(
                !text.contains(&format!("bin: \"{bin}\"")),
                "tests/tests/all/{test}.rs lists a case for {bin} by hand"
            );
        }
    }
    let source = read("template.in.yaml");
    let tests_src = stems("tests/src", ".rs")
        .into_iter()
        .filter(|s| s != "dispatch")
        .map(|s| read(&format!("tests/src/{s}.rs")))
        .collect::<String>();
    for r in &routes {
        let f = r.function;
        // a function resource, a REST API path or its invoke permission in the template's source
        assert!(
            !source.contains(&format!("Binary: {}\n", f.bin)),
            "template.in.yaml declares {}",
            f.bin
        );
        assert!(!source.contains(&format!("${{{}.Arn}}", f.resource())));
        assert!(!source.contains(&format!("{}RestPermission:", f.resource())));
        // the tests' dispatch by hand
        assert!(
            !tests_src.contains(&format!("\"{}\" => {}::", f.bin, f.krate)),
            "tests/src dispatches {} by hand",
            f.bin
        );
    }
}

#[test]
fn no_hand_written_list_of_kinds_is_left() {
    // The lists the entity declarations (shared::identity::entities) replaced, in their old shapes,
    // in no source file of shared or of a function crate (the files that held them were split and
    // moved: every file is read).
    let mut files = Vec::new();
    files.extend(integration::rust_files_under(&root().join("shared/src")));
    files.extend(integration::rust_files_under(&root().join("functions")));
    assert!(files.len() > 50, "{} source files", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        for shape in [
            "FIXED_PARTITION_KINDS",
            "SHARDED_PARTITIONS",
            "[kind::PRODUCT, kind::HR]",
            "shard_pk(tenant, kind::HR",
            "#USAGE#{shard}",
            "#RATE#{shard}",
            "pub const USER: &str = \"USER\"",
            "KIND_CHILD: &str = \"CHILD_SESSION\"",
        ] {
            assert!(!text.contains(shape), "{file:?} still holds {shape}");
        }
    }
}
