//! The entity declarations (`shared::identity::entities`) are where every key comes from: every
//! crate's key functions are the identity builders (whose bytes are golden in shared::identity and
//! in the generated key table), and every declaration says what the machinery does with it. No
//! local stack needed.

use shared::identity::entities::{
    self, spaces, Home, DEPARTMENT, EMAIL, EMPLOYEE, ENTITIES, HR, INTEGRATION, ORDER, ORDER_DATE,
    PRODUCT, PRODUCTS, RATE, SESSION, USAGE, USER,
};
use shared::identity::ids::{EntityId, SessionId, TenantId};
use shared::identity::keys::{
    self, catalog_key, child_sk, customer_sk, key_shape, session_pk, tenant_record_key, Key,
    KeySpace, PK, SK,
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
fn every_crate_builds_its_keys_with_the_identity_builders() {
    // The key bytes themselves are golden in shared::identity's own tests and in the generated key
    // table (docs/key-scheme.md, `pooltable gen --check`); here every crate's key function is shown
    // to be those builders on its typed values, so no crate writes a key of its own.
    let t = t();
    let session = SessionId::parse("019aa6f0-5d2c-7b3e-9c41-2f8e6d1a7b90").unwrap();
    // products and HR: write shards of the tenant's shard count (4 here), the shard from the id
    let sharded = |space: &str, kind: &str, raw: &str| {
        pk_sk(&keys::sharded_entity_key(&t, space, kind, &id(raw), 4))
    };
    assert_eq!(
        pk_sk(&products::product_key(&t, &id("sku-1"), 4)),
        sharded(PRODUCTS.kind, PRODUCT.kind, "sku-1")
    );
    assert_eq!(
        pk_sk(&hr::hr_key(&t, EMPLOYEE.kind, &id("emp-7"), 4)),
        sharded(HR.kind, EMPLOYEE.kind, "emp-7")
    );
    assert_eq!(
        pk_sk(&hr::hr_key(&t, DEPARTMENT.kind, &id("eng"), 4)),
        sharded(HR.kind, DEPARTMENT.kind, "eng")
    );
    assert_eq!(
        pk_sk(&hr::membership_key(&t, &id("eng"), &id("emp-7"))),
        (
            keys::department_members_pk(&t, &id("eng")),
            keys::entity_sk(&t, EMPLOYEE.kind, &id("emp-7"))
        )
    );
    // users, orders and their indexes
    assert_eq!(keys::user_key(&t, &id("u-1")), USER.key(&t, "u-1"));
    assert_eq!(
        users::Email::parse("Ada@Acme.example")
            .unwrap()
            .plain_segment()
            .key(&t),
        EMAIL.key(&t, "ada@acme.example")
    );
    assert_eq!(keys::order_key(&t, &id("o-1")), ORDER.key(&t, "o-1"));
    assert_eq!(
        keys::order_line_sk(&t, &id("o-1"), &id("i-1")),
        ORDER.key(&t, "o-1#ITEM#i-1")
    );
    let date = users::Date::parse("2026-11-20").unwrap();
    assert_eq!(
        keys::order_date_pk(&t, date, &id("o-1")),
        ORDER_DATE.key(&t, "2026-11-20#o-1")
    );
    assert_eq!(
        keys::order_month_sk(&t, date.month(), 3),
        keys::order_month_sk(&t, "2026-11", 3)
    );
    assert_eq!(
        keys::integration_key(&t, &id("github")),
        INTEGRATION.key(&t, "github")
    );
    // sessions
    assert_eq!(session_pk(&t, &session), SESSION.key(&t, session));
    assert_eq!(customer_sk(&t, &id("c-1")), spaces::CUSTOMER.key(&t, "c-1"));
    assert_eq!(child_sk(&t, &session), spaces::CHILD.key(&t, session));
    // the fixed partitions that are no entity's
    assert_eq!(
        shared::store::quota::usage::counter_pk(&t, 7),
        USAGE.key(&t, 7)
    );
    assert_eq!(
        shared::store::quota::limiter::window_pk(&t, 2),
        RATE.key(&t, 2)
    );
}

#[test]
fn the_catalog_and_the_key_shape_follow_the_declarations() {
    let t = t();
    // GIVEN a partition of every fixed space, and one named by an id
    for fixed in [
        PRODUCTS.key(&t, 3),
        HR.key(&t, 0),
        USAGE.key(&t, 7),
        RATE.key(&t, 2),
        tenant_record_key(&t),
    ] {
        // THEN a fixed partition's item carries no catalog entry
        assert_eq!(catalog_key(&t, &fixed), None, "{fixed}");
    }
    // AND an id-named one carries today's entry
    assert_eq!(
        catalog_key(&t, &USER.key(&t, "u-1")),
        Some(keys::catalog_shard_key(&t, 4))
    );
    // AND telemetry keeps the shard only where it says something about load
    let session = SessionId::parse("019aa6f0-5d2c-7b3e-9c41-2f8e6d1a7b90").unwrap();
    for (value, shape) in [
        (PRODUCTS.key(&t, 3), "PRODUCT#3"),
        (HR.key(&t, 0), "HR#0"),
        (USAGE.key(&t, 7), "USAGE#7"),
        (keys::order_month_sk(&t, "2026-11", 3), "ORDERS#3"),
        (RATE.key(&t, 2), "RATE"),
        (SESSION.key(&t, session), "SESSION"),
    ] {
        assert_eq!(key_shape(&value), shape, "{value}");
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
