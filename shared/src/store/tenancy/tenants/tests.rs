use super::*;
use crate::identity::entities::{spaces, SESSION};
use crate::identity::ids::TenantId;
use crate::identity::keys::{tenant_record_key, ItemKey, KeySpace};
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::BTreeMap;

fn t(raw: &str) -> TenantId {
    TenantId::parse(raw).unwrap()
}

#[test]
fn every_named_tier_has_limits_and_custom_has_none() {
    assert_eq!(Tier::Basic.limits().unwrap().requests_per_second, 25);
    assert_eq!(Tier::Standard.limits().unwrap().requests_per_second, 100);
    assert_eq!(Tier::Premium.limits().unwrap().requests_per_second, 1_000);
    assert_eq!(Tier::Custom.limits(), None);
    assert_eq!(Some(Limits::UNONBOARDED), Tier::Basic.limits());
}

#[test]
fn golden_record_with_custom_limits() {
    let record = TenantRecord {
        pk: tenant_record_key(&t("acme")),
        sk: tenant_record_key(&t("acme")),
        tenant_id: "acme".into(),
        tier: Tier::Custom,
        limits: Some(Limits {
            requests_per_second: 7,
            capacity_units_per_second: 9,
        }),
        shard_count: 4,
        created_at: "2026-11-22T00:00:00Z".into(),
        status: TenantStatus::Active,
        offboarding: None,
        migration: None,
        restore: None,
        last_restore: None,
        order_shard_count: None,
        reshardings: 0,
        own_table: None,
        moving: None,
        changed_by: None,
    };
    let item: crate::store::client::query::Item = serde_dynamo::to_item(&record).unwrap();
    let limits = item["limits"].as_m().unwrap();
    assert_eq!(limits["requestsPerSecond"], AttributeValue::N("7".into()));
    assert_eq!(
        limits["capacityUnitsPerSecond"],
        AttributeValue::N("9".into())
    );
    assert_eq!(item["tier"], AttributeValue::S("custom".into()));
    assert_eq!(record.limits().requests_per_second, 7);
    let basic = TenantRecord {
        tier: Tier::Basic,
        limits: None,
        ..record
    };
    let item: crate::store::client::query::Item = serde_dynamo::to_item(&basic).unwrap();
    assert!(!item.contains_key("limits"));
    assert_eq!(basic.limits(), Tier::Basic.limits().unwrap());
}

#[test]
fn the_offboarding_state_reads_back_as_written() {
    // GIVEN a state with every field set, and one with none of the optional ones
    let full = Offboarding {
        requested_at: "2026-11-23T00:00:00Z".into(),
        requested_by: "ops".into(),
        deletion_starts_at: 1_795_300_000,
        started_at: Some("2026-11-23T00:01:00Z".into()),
        steps: 3,
        deleted: BTreeMap::from([("PRODUCT".to_owned(), 250), ("USAGE".to_owned(), 8)]),
        position: Some(ItemKey {
            pk: SESSION.key(&t("a"), 1),
            sk: spaces::CUSTOMER.key(&t("a"), "c"),
        }),
    };
    let empty = Offboarding {
        started_at: None,
        position: None,
        deleted: BTreeMap::new(),
        steps: 0,
        ..full.clone()
    };
    for state in [full, empty] {
        // WHEN it is written as the record stores it and read back
        let read: Offboarding = serde_dynamo::from_attribute_value(state.to_attribute()).unwrap();
        // THEN it is the same state
        assert_eq!(read, state);
    }
}

#[test]
fn golden_change_expressions() {
    let custom = Some(Limits {
        requests_per_second: 1,
        capacity_units_per_second: 1,
    });
    let change = |tier, status| change_expression(&RecordChange { tier, status });
    assert_eq!(
        change(Some((Tier::Basic, None)), None),
        "SET #tier = :tier, #changedBy = :changedBy REMOVE #limits"
    );
    assert_eq!(
        change(Some((Tier::Custom, custom)), Some(TenantStatus::Suspended)),
        "SET #tier = :tier, #limits = :limits, #status = :status, #changedBy = :changedBy"
    );
    assert_eq!(
        change(None, Some(TenantStatus::Active)),
        "SET #status = :status, #changedBy = :changedBy"
    );
    // a record written before suspension existed reads as active
    let record = tenant_record_key(&t("a"));
    let old: TenantRecord = serde_json::from_value(serde_json::json!({
        "PK": record, "SK": record, "tenantId": "a", "tier": "basic",
        "shardCount": 1, "createdAt": "2026-01-01T00:00:00Z"
    }))
    .unwrap();
    assert_eq!(old.status, TenantStatus::Active);
}

#[test]
fn limits_outside_their_bounds_are_refused() {
    let ok = Limits {
        requests_per_second: 1,
        capacity_units_per_second: 1,
    };
    assert!(ok.check().is_ok());
    assert!(Limits {
        requests_per_second: 0,
        ..ok
    }
    .check()
    .is_err());
    assert!(Limits {
        capacity_units_per_second: 0,
        ..ok
    }
    .check()
    .is_err());
    assert!(Limits {
        requests_per_second: MAX_REQUESTS_PER_SECOND + 1,
        ..ok
    }
    .check()
    .is_err());
}
