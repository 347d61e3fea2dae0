//! The entity declarations (`shared::identity::entities`) change no stored byte: every kind's keys,
//! built by the functions that write them, are exactly today's (golden values), and every
//! declaration says what the machinery does with it. No local stack needed.

use shared::identity::entities::{self, Home, ENTITIES};
use shared::identity::ids::{EntityId, SessionId, TenantId};
use shared::identity::keys::{
    catalog_key, child_sk, customer_sk, key_shape, session_pk, tenant_record_key, Key, PK, SK,
};

fn t() -> TenantId {
    TenantId::parse("acme").unwrap()
}

fn id(s: &str) -> EntityId {
    EntityId::parse(s).unwrap()
}

fn pk_sk(key: &Key) -> (String, String) {
    let s = |name: &str| key[name].as_s().unwrap().clone();
    (s(PK), s(SK))
}

#[test]
fn every_kind_keeps_its_key_bytes() {
    let t = t();
    let session = SessionId::parse("019aa6f0-5d2c-7b3e-9c41-2f8e6d1a7b90").unwrap();
    // products and HR: write shards of the tenant's shard count (4 here), the shard from the id
    assert_eq!(
        pk_sk(&products::product_key(&t, &id("sku-1"), 4)),
        (
            "TENANT#acme#PRODUCT#0".into(),
            "TENANT#acme#PRODUCT#sku-1".into()
        )
    );
    assert_eq!(
        pk_sk(&hr::hr_key(&t, entities::EMPLOYEE.kind, &id("emp-7"), 4)),
        (
            "TENANT#acme#HR#1".into(),
            "TENANT#acme#EMPLOYEE#emp-7".into()
        )
    );
    assert_eq!(
        pk_sk(&hr::hr_key(&t, entities::DEPARTMENT.kind, &id("eng"), 4)),
        (
            "TENANT#acme#HR#3".into(),
            "TENANT#acme#DEPARTMENT#eng".into()
        )
    );
    assert_eq!(
        pk_sk(&hr::membership_key(&t, &id("eng"), &id("emp-7"))),
        (
            "TENANT#acme#DEPARTMENT#eng#MEMBERS".into(),
            "TENANT#acme#EMPLOYEE#emp-7".into()
        )
    );
    // users, orders and their indexes
    assert_eq!(users::user_key(&t, &id("u-1")), "TENANT#acme#USER#u-1");
    assert_eq!(
        users::email_key(&t, &users::Email::parse("Ada@Acme.example").unwrap()),
        "TENANT#acme#EMAIL#ada@acme.example"
    );
    assert_eq!(users::order_key(&t, &id("o-1")), "TENANT#acme#ORDER#o-1");
    assert_eq!(
        users::order_line_sk(&t, &id("o-1"), &id("i-1")),
        "TENANT#acme#ORDER#o-1#ITEM#i-1"
    );
    let date = users::Date::parse("2026-11-20").unwrap();
    assert_eq!(
        users::order_date_pk(&t, date, &id("o-1")),
        "TENANT#acme#ORDERDATE#2026-11-20#o-1"
    );
    assert_eq!(
        users::order_month_sk(&t, date.month(), 3),
        "TENANT#acme#ORDERS#2026-11#3"
    );
    assert_eq!(
        users::integration_key(&t, &id("github")),
        "TENANT#acme#INTEGRATION#github"
    );
    // sessions
    assert_eq!(
        session_pk(&t, &session),
        "TENANT#acme#SESSION#019aa6f0-5d2c-7b3e-9c41-2f8e6d1a7b90"
    );
    assert_eq!(customer_sk(&t, &id("c-1")), "TENANT#acme#CUSTOMER#c-1");
    assert_eq!(
        child_sk(&t, &session),
        "TENANT#acme#CHILD#019aa6f0-5d2c-7b3e-9c41-2f8e6d1a7b90"
    );
    // the fixed partitions that are no entity's
    assert_eq!(tenant_record_key(&t), "TENANT#acme#TENANT");
    assert_eq!(
        shared::store::quota::usage::counter_pk(&t, 7),
        "TENANT#acme#USAGE#7"
    );
    assert_eq!(
        shared::store::quota::limiter::window_pk(&t, 2),
        "TENANT#acme#RATE#2"
    );
}

#[test]
fn the_catalog_and_the_key_shape_follow_the_declarations() {
    let t = t();
    // GIVEN a partition of every fixed space, and one named by an id
    for fixed in [
        "TENANT#acme#PRODUCT#3",
        "TENANT#acme#HR#0",
        "TENANT#acme#USAGE#7",
        "TENANT#acme#RATE#2",
        "TENANT#acme#TENANT",
    ] {
        // THEN a fixed partition's item carries no catalog entry
        assert_eq!(catalog_key(&t, fixed), None, "{fixed}");
    }
    // AND an id-named one carries today's entry
    assert_eq!(
        catalog_key(&t, "TENANT#acme#USER#u-1").as_deref(),
        Some("TENANT#acme#CATALOG#4")
    );
    // AND telemetry keeps the shard only where it says something about load
    for (value, shape) in [
        ("TENANT#acme#PRODUCT#3", "PRODUCT#3"),
        ("TENANT#acme#HR#0", "HR#0"),
        ("TENANT#acme#USAGE#7", "USAGE#7"),
        ("TENANT#acme#ORDERS#2026-11#3", "ORDERS#3"),
        ("TENANT#acme#RATE#2", "RATE"),
        (
            "TENANT#acme#SESSION#019aa6f0-5d2c-7b3e-9c41-2f8e6d1a7b90",
            "SESSION",
        ),
    ] {
        assert_eq!(key_shape(value), shape, "{value}");
    }
}

#[test]
fn what_imports_take_is_what_the_declarations_say() {
    // Every kind bulk imports accept is a declared entity importable by that name, and back.
    let declared: Vec<&str> = ENTITIES.iter().filter_map(|e| e.import_as).collect();
    let kinds: Vec<&str> = imports::ImportKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(declared, ["products", "employees", "departments"]);
    let (mut declared, mut kinds) = (declared, kinds);
    declared.sort();
    kinds.sort();
    assert_eq!(declared, kinds);
    // AND every kind a re-sharding moves (the write-sharded ones) can be imported
    for entity in ENTITIES.iter().filter(|e| e.resharded()) {
        assert!(
            entity.import_as.is_some(),
            "{} cannot be imported",
            entity.stored_as
        );
    }
    for kind in imports::ImportKind::ALL {
        assert_eq!(
            entities::importable(kind.as_str()).map(|e| e.kind),
            Some(kind.entity()),
            "{kind:?}"
        );
        assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
    }
    assert_eq!(
        entities::importable("products").map(|e| e.home),
        Some(Home::Fixed(entities::PRODUCTS.kind))
    );
}
