use super::*;
use crate::identity::entities::{spaces, PRODUCT, PRODUCTS, SESSION, USER};
use crate::identity::fixtures::{acme, tenant as t};
use crate::identity::keys::{
    catalog_shard_key, import_due_shard_pk, kind, lifecycle_drive_pk, primary_key, raw_key,
    tenant_record_key, usage_counter_pk, KeySpace,
};

/// Session `1` (its `PK` of tenant `pk_tenant`) under customer `c` (its `SK` of tenant `sk_tenant`).
fn session_of(pk_tenant: &str, sk_tenant: &str) -> Item {
    primary_key(
        SESSION.key(&t(pk_tenant), 1),
        spaces::CUSTOMER.key(&t(sk_tenant), "c"),
    )
}

/// Tenant a's guard on one key or item sent by `operation`.
fn a_checks(operation: &'static str, key_or_item: &Item) -> Result<(), GuardViolation> {
    check(&t("a"), operation, &[Carried::KeyOrItem(key_or_item)])
}

#[test]
fn keys_of_the_own_tenant_pass() {
    assert!(a_checks("GetItem", &session_of("a", "a")).is_ok());
}

#[test]
fn delimiter_corner_cases_are_refused() {
    for other in ["a-b", "a_", "A", "ab"] {
        let k = primary_key(raw_key(other, "X#1"), raw_key(other, "Y#1"));
        assert!(a_checks("GetItem", &k).is_err(), "{other}");
    }
    let forged = primary_key(
        tenant_prefix(&t("a")).trim_end_matches('#'),
        raw_key("a", "x"),
    );
    assert!(a_checks("GetItem", &forged).is_err());
}

#[test]
fn sort_key_counts_because_it_is_gsi1s_partition_key() {
    assert!(a_checks("PutItem", &session_of("a", "b")).is_err());
}

#[test]
fn an_item_never_enlists_in_another_tenants_catalog() {
    // GIVEN an item of tenant a whose catalog entry names tenant b
    let mut item = session_of("a", "a");
    item.insert(
        CATALOG.into(),
        AttributeValue::S(catalog_shard_key(&t("b"), 3)),
    );
    // THEN the guard refuses it, and accepts it with its own tenant's catalog entry
    assert!(a_checks("PutItem", &item).is_err());
    item.insert(
        CATALOG.into(),
        AttributeValue::S(catalog_shard_key(&t("a"), 3)),
    );
    assert!(a_checks("PutItem", &item).is_ok());
}

#[test]
fn query_values_and_start_key_are_checked() {
    let values = HashMap::from([
        (
            ":pk".to_string(),
            AttributeValue::S(spaces::CUSTOMER.key(&t("a"), "c")),
        ),
        (":sk".to_string(), AttributeValue::S(tenant_prefix(&t("b")))),
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
    let start = session_of("b", "a");
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
    assert!(a_checks("GetItem", &empty).is_err());
}

#[test]
fn the_record_reader_reads_tenant_records_and_nothing_else() {
    let get = |pk: &str, sk: &str| {
        Input::erase(
            GetItemInput::builder()
                .table_name("t")
                .set_key(Some(primary_key(pk, sk)))
                .build()
                .unwrap(),
        )
    };
    let acme = t("acme");
    let record = tenant_record_key(&acme);
    assert!(check_record_read(&get(&record, &record)).is_ok());
    let user_named_tenant = USER.key(&acme, kind::TENANT);
    let tenant_named_a_b = raw_key("a", format!("b#{}", kind::TENANT));
    let tenant_named_nothing = raw_key("", kind::TENANT);
    for (pk, sk) in [
        (&user_named_tenant, &user_named_tenant),
        (&record, &tenant_record_key(&t("globex"))),
        (&tenant_named_a_b, &tenant_named_a_b),
        (&tenant_named_nothing, &tenant_named_nothing),
        (&PRODUCTS.key(&acme, 1), &PRODUCT.key(&acme, "p")),
    ] {
        assert!(check_record_read(&get(pk, sk)).is_err(), "{pk} {sk}");
    }
    let put = Input::erase(
        PutItemInput::builder()
            .table_name("t")
            .set_item(Some(primary_key(&record, &record)))
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
    let (acme, platform) = (t("acme"), TenantId::platform());
    // THEN one tenant id's report partition passes
    assert!(allowed(query(&offboarding_reports_pk(&acme))));
    // AND every other partition, of the platform or of a tenant, is refused
    for pk in [
        spaces::OFFBOARDED.prefix(&platform),
        spaces::OFFBOARDED.key(&platform, "a#b"),
        offboarding_reports_pk(&platform),
        lifecycle_drive_pk(),
        import_due_shard_pk(0),
        usage_counter_pk(&platform, 0),
        spaces::OFFBOARDED.key(&acme, "acme"),
        tenant_record_key(&acme),
    ] {
        assert!(!allowed(query(&pk)), "{pk}");
    }
    // AND so is the right partition on an index, from a start key, or beside a second value
    let pk = &offboarding_reports_pk(&acme);
    assert!(!allowed(query(pk).index_name("GSI1")));
    assert!(!allowed(query(pk).set_exclusive_start_key(Some(
        primary_key(pk, format!("{pk}#1"))
    ))));
    assert!(!allowed(
        query(pk)
            .key_condition_expression("#pk = :pk AND begins_with(SK, :sk)")
            .expression_attribute_values(":sk", AttributeValue::S(tenant_prefix(&acme)))
    ));
    // AND any other operation on the partition
    let get = GetItemInput::builder()
        .table_name("t")
        .set_key(Some(primary_key(pk, pk)))
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

#[test]
fn a_moving_tenant_reaches_both_of_its_tables_and_no_third() {
    use crate::isolation::policy::{Moving, TenantTables};
    use aws_sdk_dynamodb::operation::get_item::GetItemInput;
    use aws_smithy_runtime_api::client::interceptors::context::Input;
    // GIVEN a tenant moving from the pool into its own table
    let tenant = acme();
    let tables = TenantTables::own("pool-tenant-acme", "pool").with_move(Moving {
        other: std::sync::Arc::from("pool"),
        pull: true,
        writes_move_at: 0,
        settled_at: 0,
    });
    let get = |table: &str| {
        let key = crate::identity::keys::raw_key("acme", "PRODUCT#0");
        Input::erase(
            GetItemInput::builder()
                .table_name(table)
                .key(PK, AttributeValue::S(key.clone()))
                .key(SK, AttributeValue::S(key))
                .build()
                .unwrap(),
        )
    };
    // WHEN it reads one of its items in either table THEN the table rule lets it
    for table in ["pool-tenant-acme", "pool"] {
        assert!(
            check_tables(&tenant, &tables, &get(table)).is_ok(),
            "{table}"
        );
    }
    // WHEN it names another tenant's own table THEN it is refused
    assert!(check_tables(&tenant, &tables, &get("pool-tenant-other")).is_err());
}
