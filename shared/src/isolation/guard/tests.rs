use super::*;

fn t(raw: &str) -> TenantId {
    TenantId::parse(raw).unwrap()
}

fn key(pk: &str, sk: &str) -> Item {
    HashMap::from([
        (PK.to_string(), AttributeValue::S(pk.into())),
        (SK.to_string(), AttributeValue::S(sk.into())),
    ])
}

#[test]
fn keys_of_the_own_tenant_pass() {
    let k = key("TENANT#a#SESSION#1", "TENANT#a#CUSTOMER#c");
    assert!(check(&t("a"), "GetItem", &[Carried::KeyOrItem(&k)]).is_ok());
}

#[test]
fn delimiter_corner_cases_are_refused() {
    for other in ["a-b", "a_", "A", "ab"] {
        let k = key(
            &format!("TENANT#{other}#X#1"),
            &format!("TENANT#{other}#Y#1"),
        );
        assert!(
            check(&t("a"), "GetItem", &[Carried::KeyOrItem(&k)]).is_err(),
            "{other}"
        );
    }
    let forged = key("TENANT#a", "TENANT#a#x");
    assert!(check(&t("a"), "GetItem", &[Carried::KeyOrItem(&forged)]).is_err());
}

#[test]
fn sort_key_counts_because_it_is_gsi1s_partition_key() {
    let k = key("TENANT#a#SESSION#1", "TENANT#b#CUSTOMER#c");
    assert!(check(&t("a"), "PutItem", &[Carried::KeyOrItem(&k)]).is_err());
}

#[test]
fn an_item_never_enlists_in_another_tenants_catalog() {
    // GIVEN an item of tenant a whose catalog entry names tenant b
    let mut item = key("TENANT#a#SESSION#1", "TENANT#a#CUSTOMER#c");
    item.insert(
        CATALOG.into(),
        AttributeValue::S("TENANT#b#CATALOG#3".into()),
    );
    // THEN the guard refuses it, and accepts it with its own tenant's catalog entry
    assert!(check(&t("a"), "PutItem", &[Carried::KeyOrItem(&item)]).is_err());
    item.insert(
        CATALOG.into(),
        AttributeValue::S("TENANT#a#CATALOG#3".into()),
    );
    assert!(check(&t("a"), "PutItem", &[Carried::KeyOrItem(&item)]).is_ok());
}

#[test]
fn query_values_and_start_key_are_checked() {
    let values = HashMap::from([
        (
            ":pk".to_string(),
            AttributeValue::S("TENANT#a#CUSTOMER#c".into()),
        ),
        (":sk".to_string(), AttributeValue::S("TENANT#b#".into())),
    ]);
    let q = |expr| Carried::Query {
        key_condition: Some(expr),
        values: Some(&values),
        legacy_key_conditions: false,
        exclusive_start_key: None,
    };
    assert!(check(&t("a"), "Query", &[q("SK = :pk")]).is_ok());
    assert!(check(&t("a"), "Query", &[q("SK = :pk AND begins_with(PK, :sk)")]).is_err());
    assert!(check(&t("a"), "Query", &[q("SK = :missing")]).is_err());
    let start = key("TENANT#b#SESSION#1", "TENANT#a#CUSTOMER#c");
    let with_start = Carried::Query {
        key_condition: Some("SK = :pk"),
        values: Some(&values),
        legacy_key_conditions: false,
        exclusive_start_key: Some(&start),
    };
    assert!(check(&t("a"), "Query", &[with_start]).is_err());
}

#[test]
fn a_request_without_keys_is_refused() {
    assert!(check(&t("a"), "TransactWriteItems", &[]).is_err());
    let empty = HashMap::new();
    assert!(check(&t("a"), "GetItem", &[Carried::KeyOrItem(&empty)]).is_err());
}

#[test]
fn the_record_reader_reads_tenant_records_and_nothing_else() {
    let get = |pk: &str, sk: &str| {
        Input::erase(
            GetItemInput::builder()
                .table_name("t")
                .set_key(Some(key(pk, sk)))
                .build()
                .unwrap(),
        )
    };
    assert!(check_record_read(&get("TENANT#acme#TENANT", "TENANT#acme#TENANT")).is_ok());
    for (pk, sk) in [
        ("TENANT#acme#USER#TENANT", "TENANT#acme#USER#TENANT"),
        ("TENANT#acme#TENANT", "TENANT#globex#TENANT"),
        ("TENANT#a#b#TENANT", "TENANT#a#b#TENANT"),
        ("TENANT##TENANT", "TENANT##TENANT"),
        ("TENANT#acme#PRODUCT#1", "TENANT#acme#PRODUCT#p"),
    ] {
        assert!(check_record_read(&get(pk, sk)).is_err(), "{pk} {sk}");
    }
    let put = Input::erase(
        PutItemInput::builder()
            .table_name("t")
            .set_item(Some(key("TENANT#acme#TENANT", "TENANT#acme#TENANT")))
            .build()
            .unwrap(),
    );
    assert!(check_record_read(&put).is_err());
}

#[test]
fn the_report_reader_queries_one_tenant_ids_reports_and_nothing_else() {
    // GIVEN Queries as `store::offboarding::ever_offboarded` sends them, of various partitions
    let query = |pk: &str| {
        QueryInput::builder()
            .table_name("t")
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":pk", AttributeValue::S(pk.into()))
    };
    let allowed = |q: aws_sdk_dynamodb::operation::query::builders::QueryInputBuilder| {
        check_report_read(&Input::erase(q.build().unwrap())).is_ok()
    };
    // THEN one tenant id's report partition passes
    assert!(allowed(query("TENANT#_platform#OFFBOARDED#acme")));
    // AND every other partition, of the platform or of a tenant, is refused
    for pk in [
        "TENANT#_platform#OFFBOARDED#",
        "TENANT#_platform#OFFBOARDED#a#b",
        "TENANT#_platform#OFFBOARDED#_platform",
        "TENANT#_platform#DRIVE",
        "TENANT#_platform#IMPORTS_DUE#0",
        "TENANT#_platform#USAGE#0",
        "TENANT#acme#OFFBOARDED#acme",
        "TENANT#acme#TENANT",
    ] {
        assert!(!allowed(query(pk)), "{pk}");
    }
    // AND so is the right partition on an index, from a start key, or beside a second value
    let pk = "TENANT#_platform#OFFBOARDED#acme";
    assert!(!allowed(query(pk).index_name("GSI1")));
    assert!(!allowed(
        query(pk).set_exclusive_start_key(Some(key(pk, &format!("{pk}#1"))))
    ));
    assert!(!allowed(
        query(pk)
            .key_condition_expression("#pk = :pk AND begins_with(SK, :sk)")
            .expression_attribute_values(":sk", AttributeValue::S("TENANT#acme#".into()))
    ));
    // AND any other operation on the partition
    let get = GetItemInput::builder()
        .table_name("t")
        .set_key(Some(key(pk, pk)))
        .build()
        .unwrap();
    assert!(check_report_read(&Input::erase(get)).is_err());
}

#[derive(Debug)]
struct Marker;

impl Intercept for Marker {
    fn name(&self) -> &'static str {
        "Marker"
    }
}

#[test]
fn the_report_reader_is_the_record_reader_with_the_report_guard_instead() {
    // GIVEN a record reader as `TenantClients::record_reader` builds it, with a test's interceptor
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .interceptor(RecordReadGuard)
        .interceptor(Marker)
        .build();
    let records = aws_sdk_dynamodb::Client::from_conf(config);
    // WHEN the report reader is made from it
    let reports = report_reader(&records);
    // THEN it carries the report guard and the test's interceptor, and not the record guard
    let names: Vec<&str> = reports.config().interceptors().map(|i| i.name()).collect();
    assert_eq!(names, ["ReportReadGuard", "Marker"]);
}

#[test]
fn placeholders_are_found() {
    assert_eq!(
        placeholders("#sk = :sk AND #pk BETWEEN :lo_1 AND :hi"),
        vec![":sk", ":lo_1", ":hi"]
    );
}
