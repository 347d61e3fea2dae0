//! The route table: the attack matrix and the load test drive every route by name through it
//! ([`crate::api::Client::call`]). Routes come from routes.yaml and handlers from the dispatch generated from it
//! (`tests/src/dispatch.rs`), so a route cannot be forgotten.

use std::collections::BTreeMap;

use crate::Resp;

/// template.yaml, parsed once per test process: every routed call reads it, and parsing 2,600 lines
/// of YAML in a debug build costs tens of milliseconds, enough to starve a burst test's runtime.
fn template() -> &'static serde_yaml::Value {
    static TEMPLATE: std::sync::OnceLock<serde_yaml::Value> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    })
}

/// `bin → (METHOD, /route/{template})` for every route in routes.yaml.
pub fn api_routes() -> BTreeMap<String, (String, String)> {
    cached_routes().clone()
}

/// The route table, routes.yaml, read once.
pub fn route_table() -> &'static devtools::routes::RouteTable {
    static TABLE: std::sync::OnceLock<devtools::routes::RouteTable> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        devtools::routes::RouteTable::load(&root).expect("routes.yaml")
    })
}

/// Every routed function that has the section `section` picks (routes.yaml's `lost_success`,
/// `transaction`, …), with that section: the cases of a test that walks one.
pub fn routes_with<S: 'static>(
    section: impl Fn(&'static devtools::routes::Function) -> Option<&'static S>,
) -> impl Iterator<Item = (&'static devtools::routes::Function, &'static S)> {
    route_table()
        .routes()
        .filter_map(move |r| Some((r.function, section(r.function)?)))
}

/// Route `bin`'s `(METHOD, /route/{template})`.
pub fn route_of(bin: &str) -> (&'static str, &'static str) {
    let (method, route) = cached_routes()
        .get(bin)
        .unwrap_or_else(|| panic!("{bin} is not a route in routes.yaml"));
    (method, route)
}

fn cached_routes() -> &'static BTreeMap<String, (String, String)> {
    static ROUTES: std::sync::OnceLock<BTreeMap<String, (String, String)>> =
        std::sync::OnceLock::new();
    ROUTES.get_or_init(|| {
        route_table()
            .routes()
            .map(|r| {
                (
                    r.function.bin.clone(),
                    (r.method.to_owned(), r.path.to_owned()),
                )
            })
            .collect()
    })
}

/// `bin → (METHOD, /route/{template})` for every function template.yaml serves behind the API.
pub fn template_routes() -> BTreeMap<String, (String, String)> {
    let mut routes = BTreeMap::new();
    for (_, r) in template()["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let api = &r["Properties"]["Events"]["Api"]["Properties"];
        if api.is_null() {
            // Not behind the API (the import consumer, on its queue).
            continue;
        }
        routes.insert(
            r["Metadata"]["BuildProperties"]["Binary"]
                .as_str()
                .unwrap()
                .to_owned(),
            (
                api["Method"].as_str().unwrap().to_owned(),
                api["Path"].as_str().unwrap().to_owned(),
            ),
        );
    }
    routes
}

/// The binary of every function in template.yaml, behind the API or not.
pub fn template_binaries() -> std::collections::BTreeSet<String> {
    template()["Resources"]
        .as_mapping()
        .unwrap()
        .values()
        .filter(|r| r["Type"].as_str() == Some("AWS::Serverless::Function"))
        .map(|r| {
            r["Metadata"]["BuildProperties"]["Binary"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// The path parameters of a route template, in order.
pub fn path_params(route: &str) -> Vec<String> {
    route
        .split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        .map(str::to_owned)
        .collect()
}

/// Path parameters by name, for [`crate::api::Client::call`].
pub fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// How many of `answers` have `status`.
pub fn count_status(answers: &[Resp], status: u16) -> usize {
    answers.iter().filter(|r| r.status == status).count()
}
