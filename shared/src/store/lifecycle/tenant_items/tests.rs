use super::*;
use crate::identity::entities::{HR, PRODUCTS, SESSION};
use crate::identity::fixtures::{acme, tenant};
use crate::identity::ids::SessionId;
use crate::identity::keys::{quota_window_pk, session_pk, usage_counter_pk, KeySpace, Space};

#[test]
fn golden_sources_fixed_partitions_then_the_catalog_then_the_record() {
    // GIVEN a tenant with 2 shards, WHEN its sources are listed with the record
    let all = sources(&acme(), 2, 8, RecordInWalk::Included);
    // THEN products, HR, usage, quota windows, the 16 catalog partitions, the record
    let names: Vec<String> = all
        .iter()
        .map(|s| match s {
            Source::Partition(p) => p.clone(),
            Source::Catalog(c) => format!("catalog {c}"),
            Source::Record(r) => format!("record {r}"),
        })
        .collect();
    assert_eq!(
        names[..4],
        [
            PRODUCTS.key(&acme(), 0),
            PRODUCTS.key(&acme(), 1),
            HR.key(&acme(), 0),
            HR.key(&acme(), 1)
        ]
    );
    assert_eq!(names[4], usage_counter_pk(&acme(), 0));
    assert_eq!(names[12], quota_window_pk(&acme(), 0));
    assert_eq!(
        names[20],
        format!("catalog {}", catalog_shard_key(&acme(), 0))
    );
    assert_eq!(
        names[35],
        format!("catalog {}", catalog_shard_key(&acme(), 15))
    );
    assert_eq!(
        names.last().unwrap(),
        &format!("record {}", tenant_record_key(&acme()))
    );
    assert_eq!(names.len(), 37);
    // AND without the record, the same less the last
    assert_eq!(sources(&acme(), 2, 8, RecordInWalk::Excluded), all[..36]);
}

#[test]
fn a_position_names_its_source_and_a_foreign_one_is_refused() {
    let all = sources(&acme(), 4, 8, RecordInWalk::Included);
    let at = |pk: &str| {
        source_of(
            &acme(),
            &all,
            &Position {
                pk: pk.into(),
                sk: pk.into(),
            },
        )
    };
    assert_eq!(at(&HR.key(&acme(), 1)), Ok(5));
    let id = SessionId::parse("0193a0b1-0000-7000-8000-000000000001").unwrap();
    let session = &session_pk(&acme(), &id);
    let catalog = catalog_key(&acme(), session).unwrap();
    assert_eq!(all[at(session).unwrap()], Source::Catalog(catalog));
    assert_eq!(at(&tenant_record_key(&acme())), Ok(all.len() - 1));
    let other = tenant("other");
    assert_eq!(at(&SESSION.key(&other, "x")), Err(UnknownPosition));
    assert_eq!(at(&PRODUCTS.key(&acme(), 9)), Err(UnknownPosition));
}

#[test]
fn every_attribute_type_survives_dynamodb_json() {
    // GIVEN an item with every type
    let blob = aws_sdk_dynamodb::primitives::Blob::new(vec![0u8, 255, 7]);
    let item = Item::from([
        ("PK".into(), AttributeValue::S(Space("X").key(&acme(), 1))),
        ("n".into(), AttributeValue::N("-1.5e3".into())),
        ("b".into(), AttributeValue::B(blob.clone())),
        ("t".into(), AttributeValue::Bool(true)),
        ("z".into(), AttributeValue::Null(true)),
        (
            "m".into(),
            AttributeValue::M(Item::from([(
                "k".into(),
                AttributeValue::L(vec![AttributeValue::S("v".into())]),
            )])),
        ),
        (
            "ss".into(),
            AttributeValue::Ss(vec!["a".into(), "b".into()]),
        ),
        ("ns".into(), AttributeValue::Ns(vec!["1".into()])),
        ("bs".into(), AttributeValue::Bs(vec![blob])),
    ]);
    // WHEN it is written as DynamoDB JSON and read back
    let json = item_to_json(&item);
    // THEN it is the same item, in the golden format
    assert_eq!(json["b"], serde_json::json!({"B": "AP8H"}));
    assert_eq!(
        json["m"],
        serde_json::json!({"M": {"k": {"L": [{"S": "v"}]}}})
    );
    assert_eq!(item_from_json(&json), Ok(item));
    assert!(item_from_json(&serde_json::json!({"a": {"S": 1}})).is_err());
    assert!(item_from_json(&serde_json::json!({"a": {"X": "1"}})).is_err());
    assert!(item_from_json(&serde_json::json!({"a": {"S": "1", "N": "1"}})).is_err());
}
