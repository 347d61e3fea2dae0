use super::*;
use crate::identity::entities::{spaces, SESSION};
use crate::identity::fixtures::tenant as t;
use crate::identity::keys::{tenant_record_key, ItemKey, KeySpace};
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::BTreeMap;

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
    let limits = Limits {
        requests_per_second: 7,
        capacity_units_per_second: 9,
    };
    let created_at = "2026-11-22T00:00:00Z".to_owned();
    let record = TenantRecord::new(&t("acme"), Tier::Custom, Some(limits), 4, created_at);
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
        lanes_asked: Some(8),
        lanes: Some(16),
        lanes_since_ms: Some(1_795_300_001_000),
        walked: true,
    };
    let empty = Offboarding {
        started_at: None,
        position: None,
        lanes_asked: None,
        lanes: None,
        lanes_since_ms: None,
        walked: false,
        deleted: BTreeMap::new(),
        steps: 0,
        ..full.clone()
    };
    for state in [full, empty] {
        // WHEN it is written as the record stores it and read back
        let read: Offboarding =
            serde_dynamo::from_attribute_value(state.to_attribute().unwrap()).unwrap();
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

#[test]
fn golden_stored_states_are_flat_and_never_hold_an_empty_map() {
    // GIVEN a re-sharding and a move between placements, their progress flattened into each
    let progress = MoveProgress {
        requested_at: "2026-11-27T00:00:00Z".into(),
        requested_by: "ops".into(),
        writes_move_at: 10,
        moves_start_at: 20,
        steps: 0,
        moved: 0,
        lanes_moved: 0,
    };
    let migration = Migration {
        lanes_asked: Some(4),
        lanes: Some(4),
        lanes_since_ms: Some(1_795_300_001_000),
        from: 4,
        to: 16,
        progress: progress.clone(),
        position: None,
    };
    let moving = PlacementMove {
        to: Placement::Own,
        from_table: "pool".into(),
        to_table: "own".into(),
        progress,
        window_shards: 2,
        position: None,
        lanes_asked: None,
        lanes: Some(16),
        lanes_since_ms: Some(1_795_300_001_000),
    };
    let names = |state: AttributeValue| -> Vec<String> {
        let mut names: Vec<String> = state.as_m().unwrap().keys().cloned().collect();
        names.sort();
        names
    };
    let progress_names = [
        "movesStartAt",
        "moved",
        "requestedAt",
        "requestedBy",
        "steps",
        "writesMoveAt",
    ];
    // WHEN each is stored, THEN its attributes are its own and the progress's, side by side
    let mut expected: Vec<&str> = progress_names
        .iter()
        .copied()
        .chain(["from", "lanes", "lanesAsked", "lanesSinceMs", "to"])
        .collect();
    expected.sort();
    assert_eq!(names(migration.to_attribute().unwrap()), expected);
    let own = [
        "fromTable",
        "lanes",
        "lanesSinceMs",
        "to",
        "toTable",
        "windowShards",
    ];
    let mut expected: Vec<&str> = progress_names.iter().copied().chain(own).collect();
    expected.sort();
    assert_eq!(names(moving.to_attribute().unwrap()), expected);
    // AND each reads back as written
    let read: Migration =
        serde_dynamo::from_attribute_value(migration.to_attribute().unwrap()).unwrap();
    assert_eq!(read, migration);
    let read: PlacementMove =
        serde_dynamo::from_attribute_value(moving.to_attribute().unwrap()).unwrap();
    assert_eq!(read, moving);
    // AND a restore with no counts yet stores none (DynamoDB Local's stream cannot type an empty map)
    let restore = Restore::new("source".into(), None, 0, "ops".into(), 1, None);
    let stored = restore.to_attribute().unwrap();
    let stored = stored.as_m().unwrap();
    assert!(["putBack", "overwritten", "deleted"]
        .iter()
        .all(|k| !stored.contains_key(*k)));
    assert_eq!(stored["phase"], AttributeValue::S("putting".into()));
    let read: Restore =
        serde_dynamo::from_attribute_value(restore.to_attribute().unwrap()).unwrap();
    assert_eq!(read, restore);
}
