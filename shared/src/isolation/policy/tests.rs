//! The session policy's goldens.

use super::*;

/// The start of every golden policy: the statement for the tenant's items, up to its resources.
macro_rules! items_head {
    () => {
        concat!(
            r#"{"Version":"2012-10-17","Statement":[{"Sid":"TenantItemsOnly","Effect":"Allow","#,
            r#""Action":["dynamodb:GetItem","dynamodb:PutItem","dynamodb:UpdateItem","dynamodb:DeleteItem","#,
            r#""dynamodb:Query","dynamodb:ConditionCheckItem"],"#,
        )
    };
}

/// The items statement's condition, after its resources: the tenant's prefix leads every key.
macro_rules! items_condition {
    () => {
        concat!(
            r#""Condition":{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["<prefix>*"]},"#,
            r#""Null":{"dynamodb:LeadingKeys":"false"}}}"#,
        )
    };
}

/// The tenant session's last statement: no write of its record (`<record>`).
macro_rules! record_deny {
    () => {
        concat!(
            r#",{"Sid":"NoRecordWrites","Effect":"Deny","#,
            r#""Action":["dynamodb:PutItem","dynamodb:UpdateItem","dynamodb:DeleteItem"],"#,
            r#""Resource":"*","Condition":{"ForAnyValue:StringEquals":{"dynamodb:LeadingKeys":["<record>"]}}}"#,
        )
    };
}

fn table() -> TableLocation {
    TableLocation::from_role_arn(
        "arn:aws:iam::123456789012:role/pooltable-tenant-access",
        "eu-west-1",
        "pooltable-dev",
    )
    .unwrap()
}

#[test]
fn golden_policy_json() {
    let tenant = TenantId::parse("acme").unwrap();
    let expected = concat!(
        items_head!(),
        r#""Resource":["arn:aws:dynamodb:eu-west-1:123456789012:table/pooltable-dev","#,
        r#""arn:aws:dynamodb:eu-west-1:123456789012:table/pooltable-dev/index/*"],"#,
        items_condition!(),
        record_deny!(),
        "]}"
    )
    // `<prefix>` is the tenant's key prefix, `TENANT#acme#`; `<record>` its record's key
    .replace("<prefix>", &tenant_prefix(&tenant))
    .replace("<record>", &tenant_record_key(&tenant));
    assert_eq!(session_policy(&tenant, &table()).unwrap(), expected);
}

#[test]
fn policy_never_allows_scan_or_partiql() {
    let json = session_policy(&TenantId::parse("acme").unwrap(), &table()).unwrap();
    for forbidden in ["Scan", "PartiQL", "ExecuteStatement", "dynamodb:*"] {
        assert!(!json.contains(forbidden), "policy mentions {forbidden}");
    }
}

#[test]
fn policy_for_the_longest_tenant_and_table_fits_sts() {
    let tenant = TenantId::parse(&"t".repeat(64)).unwrap();
    let mut big = table();
    big.table_name = "x".repeat(255);
    let json = session_policy(&tenant, &big).unwrap();
    assert!(json.len() <= MAX_POLICY_CHARS, "{} chars", json.len());
}

#[test]
fn golden_policy_json_of_a_tenant_in_its_own_table() {
    // GIVEN acme placed in its own table
    let tenant = TenantId::parse("acme").unwrap();
    let tables = TenantTables::own("pooltable-dev-tenant-acme", "pooltable-dev");
    // WHEN its session policy is built
    let json = session_policy_for(&tenant, &table(), &tables).unwrap();
    // THEN it names its own table and indexes for its keys, and of the pool only its record
    let expected = concat!(
        items_head!(),
        r#""Resource":["arn:aws:dynamodb:eu-west-1:123456789012:table/pooltable-dev-tenant-acme","#,
        r#""arn:aws:dynamodb:eu-west-1:123456789012:table/pooltable-dev-tenant-acme/index/*"],"#,
        items_condition!(),
        ",",
        r#"{"Sid":"TenantRecordOnly","Effect":"Allow","#,
        r#""Action":["dynamodb:GetItem","dynamodb:PutItem","dynamodb:UpdateItem","dynamodb:DeleteItem","#,
        r#""dynamodb:ConditionCheckItem"],"#,
        r#""Resource":["arn:aws:dynamodb:eu-west-1:123456789012:table/pooltable-dev"],"#,
        r#""Condition":{"ForAllValues:StringEquals":{"dynamodb:LeadingKeys":["<record>"]},"#,
        r#""Null":{"dynamodb:LeadingKeys":"false"}}}"#,
        record_deny!(),
        "]}"
    )
    .replace("<prefix>", &tenant_prefix(&tenant))
    .replace("<record>", &tenant_record_key(&tenant));
    assert_eq!(json, expected);
}

#[test]
fn golden_policy_json_of_a_tenant_moving_into_its_own_table() {
    // GIVEN acme moving from the pool into its own table, writes moved
    let tenant = TenantId::parse("acme").unwrap();
    let tables =
        TenantTables::own("pooltable-dev-tenant-acme", "pooltable-dev").with_move(Moving {
            other: Arc::from("pooltable-dev"),
            pull: true,
            writes_move_at: 0,
            settled_at: 0,
        });
    // WHEN its session policy is built
    let json = session_policy_for(&tenant, &table(), &tables).unwrap();
    // THEN it names both tables and their indexes for its keys, and nothing else
    let expected = concat!(
        items_head!(),
        r#""Resource":["arn:aws:dynamodb:eu-west-1:123456789012:table/pooltable-dev-tenant-acme","#,
        r#""arn:aws:dynamodb:eu-west-1:123456789012:table/pooltable-dev-tenant-acme/index/*","#,
        r#""arn:aws:dynamodb:eu-west-1:123456789012:table/pooltable-dev","#,
        r#""arn:aws:dynamodb:eu-west-1:123456789012:table/pooltable-dev/index/*"],"#,
        items_condition!(),
        record_deny!(),
        "]}"
    )
    .replace("<prefix>", &tenant_prefix(&tenant))
    .replace("<record>", &tenant_record_key(&tenant));
    assert_eq!(json, expected);
}

#[test]
fn an_own_table_policy_for_the_longest_names_fits_sts() {
    let tenant = TenantId::parse(&"t".repeat(64)).unwrap();
    let pool = "p".repeat(180);
    let own = format!("{pool}-tenant-{tenant}");
    let json = session_policy_for(&tenant, &table(), &TenantTables::own(&own, &pool)).unwrap();
    assert!(json.len() <= MAX_POLICY_CHARS, "{} chars", json.len());
    // AND so does one naming both tables while it moves
    let moving = TenantTables::pooled(&pool).with_move(Moving {
        other: Arc::from(own.as_str()),
        pull: false,
        writes_move_at: 0,
        settled_at: 0,
    });
    let json = session_policy_for(&tenant, &table(), &moving).unwrap();
    assert!(json.len() <= MAX_POLICY_CHARS, "{} chars", json.len());
}

#[test]
fn an_operators_session_may_write_the_record_and_a_tenants_may_not() {
    // GIVEN acme in the pool
    let tenant = TenantId::parse("acme").unwrap();
    let tables = TenantTables::pooled("pooltable-dev");
    // WHEN both scopes' policies are built
    let tenants = session_policy_for(&tenant, &table(), &tables).unwrap();
    let operators = scoped_session_policy(&tenant, &table(), &tables, Scope::Operator).unwrap();
    // THEN they differ only by the tenant's refusal of record writes, and the operator's changes
    // and deletion of the tenant's own table (that one table, no item key)
    let deny = record_deny!().replace("<record>", &tenant_record_key(&tenant));
    let own_table = concat!(
        r#",{"Sid":"OwnTableManagement","Effect":"Allow","Action":["dynamodb:UpdateTable","#,
        r#""dynamodb:DeleteTable","dynamodb:UpdateTimeToLive","dynamodb:UpdateContinuousBackups"],"#,
        r#""Resource":["arn:aws:dynamodb:eu-west-1:123456789012:table/pooltable-dev-tenant-acme"]}"#
    );
    assert_eq!(tenants.replace(&deny, ""), operators.replace(own_table, ""));
    assert!(tenants.contains(&deny) && !operators.contains("Deny"));
    assert!(operators.contains(own_table) && !tenants.contains("OwnTableManagement"));
}

#[test]
fn table_location_refuses_a_non_role_arn() {
    for bad in [
        "",
        "arn:aws:iam::123:role/x",
        "arn:aws:s3:::bucket",
        "arn:aws:iam::123456789012:user/x",
    ] {
        assert_eq!(
            TableLocation::from_role_arn(bad, "r", "t"),
            Err(PolicyError::BadRoleArn)
        );
    }
}

#[test]
fn a_readers_policy_fits_sts_for_the_templates_pool_and_falls_back_past_it() {
    // GIVEN the longest tenant id, and the template's longest pool name (`pooltable-<Stage>`, Stage
    // at most 15 characters)
    let tenant = TenantId::parse(&"t".repeat(64)).unwrap();
    let pool = format!("pooltable-{}", "s".repeat(15));
    let own = format!("{pool}-tenant-{tenant}");
    // THEN a read-only route's session policy fits, pooled and in its own table: reads, and its
    // counters' UpdateItem (the only PutItem it names is the record's Deny)
    for tables in [TenantTables::pooled(&pool), TenantTables::own(&own, &pool)] {
        let json = scoped_session_policy(&tenant, &table(), &tables, Scope::Reader).unwrap();
        assert!(json.len() <= MAX_POLICY_CHARS, "{} chars", json.len());
        assert!(json.contains("MeteringCounters"), "{json}");
        assert_eq!(json.matches("dynamodb:PutItem").count(), 1, "{json}");
    }
    // AND under a pool named far past the template's, where it would not fit, it is a tenant
    // route's (which fits), never an error
    let pool = "p".repeat(180);
    let own = TenantTables::own(&format!("{pool}-tenant-{tenant}"), &pool);
    let reader = scoped_session_policy(&tenant, &table(), &own, Scope::Reader).unwrap();
    let tenants = scoped_session_policy(&tenant, &table(), &own, Scope::Tenant).unwrap();
    assert_eq!(reader, tenants);
}
