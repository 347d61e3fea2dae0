use shared::identity::keys::TENANT_SEGMENT;

use super::entry::route_entry;
use super::files::with_module;
use super::handler::handler_source;
use super::test_file::test_source;
use super::test_file::EntityRoutes;
use super::*;
use crate::routes::RouteTable;

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
    let n = parse("get-department-head get /departments/{departmentId}/head --entity Department")
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
    let n = parse("put-department-head PUT /departments/{departmentId}/head --entity department")
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
