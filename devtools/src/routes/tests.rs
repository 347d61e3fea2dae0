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
