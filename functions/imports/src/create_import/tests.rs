use super::*;

#[test]
fn a_product_imports_fingerprint_is_the_one_it_had_before_imports_took_other_kinds() {
    // GIVEN a product import as a client sent it before departments and employees were added
    let items = vec![
        json_item(r#"{"productId":"p-1","document":{"name":"lamp"}}"#),
        json_item(r#"{"productId":"p-2","document":{"n":2}}"#),
    ];
    let (items, _) = checked_items(CreateImportInput {
        kind: ImportKind::Products,
        items,
    })
    .unwrap();
    // THEN its canonical bytes and digest are unchanged, so a keyed retry across the deploy
    // still names the same import
    assert_eq!(
        serde_json::to_string(&(ImportKind::Products, &items)).unwrap(),
        r#"["products",[[0,{"productId":"p-1","document":{"name":"lamp"}}],[1,{"productId":"p-2","document":{"n":2}}]]]"#
    );
    assert_eq!(
        fingerprint(ImportKind::Products, &items).unwrap(),
        "ede06853152f798842f05797b6b917be04ec5b8a7231fd9831cfcb6b160d6fee"
    );
}

#[test]
fn each_kind_takes_its_own_items_and_names_a_bad_one_by_its_index() {
    let check = |kind, items: &[&str]| {
        checked_items(CreateImportInput {
            kind,
            items: items.iter().map(|i| json_item(i)).collect(),
        })
    };
    let (departments, request_index) = check(
        ImportKind::Departments,
        &[
            r#"{"departmentId":"eng","name":"Engineering"}"#,
            r#"{"departmentId":"ops","name":"Ops"}"#,
            r#"{"departmentId":"eng","name":"Engineering 2"}"#,
        ],
    )
    .unwrap();
    // an id given twice keeps its last item, and the items are numbered from 0 again
    let ids: Vec<(u32, &str)> = departments
        .iter()
        .map(|(n, i)| (*n, i.id().as_str()))
        .collect();
    assert_eq!(ids, [(0, "ops"), (1, "eng")]);
    assert_eq!(request_index, [1, 2]);
    assert!(check(
        ImportKind::Employees,
        &[r#"{"employeeId":"e-1","name":"Ada","departmentId":"eng","email":"a@x"}"#]
    )
    .is_ok());
    for (kind, bad, field) in [
        // an employee in an import of departments
        (
            ImportKind::Departments,
            r#"{"employeeId":"e-1","name":"Ada","departmentId":"eng"}"#,
            "items[1]",
        ),
        (
            ImportKind::Employees,
            r#"{"employeeId":"e-1","name":"Ada"}"#,
            "items[1]",
        ),
        (
            ImportKind::Employees,
            r#"{"employeeId":"e-1","name":" ","departmentId":"eng"}"#,
            "items[1]",
        ),
        (
            ImportKind::Departments,
            r#"{"departmentId":"a#b","name":"x"}"#,
            "items[1]",
        ),
        (
            ImportKind::Departments,
            "{\"departmentId\":\"d\",\"name\":\"\\u0001\"}",
            "items[1].name",
        ),
    ] {
        let good = match kind {
            ImportKind::Departments => r#"{"departmentId":"ok","name":"Fine"}"#,
            _ => r#"{"employeeId":"ok","name":"Fine","departmentId":"eng"}"#,
        };
        match check(kind, &[good, bad]) {
            Err(ApiError::BadRequest { field: Some(f), .. }) => assert_eq!(f, field, "{bad}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
}

fn json_item(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}
