use super::*;
use crate::identity::fixtures::{acme, tenant};

#[test]
fn an_own_table_is_named_under_the_pool_and_never_over_255_characters() {
    let acme = acme();
    assert_eq!(
        own_table_name("pooltable-dev", &acme).as_deref(),
        Some("pooltable-dev-tenant-acme")
    );
    let longest = tenant(&"t".repeat(64));
    assert!(own_table_name(&"p".repeat(183), &longest).is_some());
    assert_eq!(own_table_name(&"p".repeat(184), &longest), None);
}

#[test]
fn a_table_an_operator_made_is_taken_with_its_tenants_tag_never_from_another_tenant() {
    let acme = acme();
    let tag = |value: &str| Tag::builder().key(TENANT_TAG).value(value).build().unwrap();
    // GIVEN an existing table untagged, tagged for acme, tagged for another tenant
    // WHEN acme takes it as its own table
    // THEN the first is tagged for acme, the second taken as it is, the third refused (409)
    let added = tag_to_add(&[], "p-tenant-acme", &acme).unwrap().unwrap();
    assert_eq!((added.key(), added.value()), ("tenant", "acme"));
    assert!(tag_to_add(&[tag("acme")], "p-tenant-acme", &acme)
        .unwrap()
        .is_none());
    let refused = tag_to_add(&[tag("globex")], "p-tenant-acme", &acme).unwrap_err();
    assert!(
        matches!(&refused, StoreError::Unfit(why) if why.contains("globex")),
        "{refused}"
    );
}

#[test]
fn a_table_made_from_the_pool_keeps_its_customer_managed_key() {
    use aws_sdk_dynamodb::types::{SseDescription, SseType};
    // GIVEN a pool under a customer-managed key, and one under the AWS-owned key
    let key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";
    let cmk = TableDescription::builder()
        .sse_description(
            SseDescription::builder()
                .sse_type(SseType::Kms)
                .kms_master_key_arn(key)
                .build(),
        )
        .build();
    // WHEN a table is made from each
    // THEN the first is made under the same key, the second with no specification (owned)
    let spec = same_encryption(&cmk).expect("a specification");
    assert_eq!(
        (spec.enabled(), spec.sse_type(), spec.kms_master_key_id()),
        (Some(true), Some(&SseType::Kms), Some(key))
    );
    assert!(same_encryption(&TableDescription::builder().build()).is_none());
}

#[tokio::test]
async fn a_table_being_updated_is_walked_for_the_tenants_items_before_it_is_taken() {
    // GIVEN an existing table with the pool's keys whose item count (hours old) says 0, and a
    // walk that finds one of the tenant's items in it
    let described = |status: TableStatus| {
        TableDescription::builder()
            .table_status(status)
            .item_count(0)
            .build()
    };
    let pool = described(TableStatus::Active);
    let found = || async { Ok(Some("PRODUCT#p-1".to_owned())) };
    // WHEN it is ACTIVE, or UPDATING (its stream or billing being changed)
    // THEN it is unfit, naming the item (before the mend an UPDATING table was taken on its item
    // count, and a move replaced the tenant's live items with its stale ones)
    for status in [TableStatus::Active, TableStatus::Updating] {
        let why = unfit(&described(status.clone()), &pool, found())
            .await
            .unwrap();
        assert!(why.is_some_and(|w| w.contains("PRODUCT#p-1")), "{status:?}");
    }
    // AND a table being made (it holds nothing yet) is not walked: the walk's error would be a 500
    let unreadable = || async { Err(StoreError::Internal("ResourceNotFoundException".into())) };
    let why = unfit(&described(TableStatus::Creating), &pool, unreadable()).await;
    assert!(matches!(why, Ok(None)), "{why:?}");
    // AND ACTIVE, UPDATING and CREATING tables are judged
    for status in [
        TableStatus::Active,
        TableStatus::Updating,
        TableStatus::Creating,
    ] {
        assert!(
            not_judged(&described(status.clone()), "t").is_none(),
            "{status:?}"
        );
    }
}

#[test]
fn a_table_being_deleted_or_out_of_reach_of_its_key_is_retried_and_an_archived_one_refused() {
    // GIVEN existing tables whose item count (hours old) still says 5
    let stale = |status: TableStatus| {
        TableDescription::builder()
            .table_status(status)
            .item_count(5)
            .build()
    };
    // WHEN one is being deleted, or out of reach of its key
    // THEN it is not judged, nor tagged: 503, naming it (a move back to an own table just after
    // one away from it finds the old one DELETING, and a retry once it is gone makes it anew;
    // before the mend it was tagged, where DynamoDB answers ResourceNotFoundException once it is
    // gone, a 500; before that, 409 "holds items")
    for status in [
        TableStatus::Deleting,
        TableStatus::InaccessibleEncryptionCredentials,
    ] {
        let refusal = not_judged(&stale(status.clone()), "pooltable-dev-acme");
        assert!(
            matches!(&refusal, Some(StoreError::Unavailable(m)) if m.contains("pooltable-dev-acme")),
            "{status:?}: {refusal:?}"
        );
    }
    // AND an archived one (it is not ACTIVE again until restored) is refused, 409, naming it
    // (before the mend: waited for, 503 on every retry for good)
    for status in [TableStatus::Archiving, TableStatus::Archived] {
        let refusal = not_judged(&stale(status.clone()), "pooltable-dev-acme");
        assert!(
            matches!(&refusal, Some(StoreError::Unfit(m)) if m.contains("pooltable-dev-acme") && m.contains("archived")),
            "{status:?}: {refusal:?}"
        );
    }
}

#[test]
fn an_own_table_whose_deletion_has_begun_is_deleted_as_far_as_its_deleter_goes() {
    // GIVEN a table in each status
    let table = |status: TableStatus| TableDescription::builder().table_status(status).build();
    // WHEN its deleter finds it DELETING (its last DeleteTable sent, then cut off)
    // THEN it is done (another DeleteTable would be answered ResourceInUseException: a 500); in
    // any other status it is deleted
    assert!(being_deleted(&table(TableStatus::Deleting)));
    for status in [
        TableStatus::Active,
        TableStatus::Updating,
        TableStatus::Creating,
        TableStatus::Archived,
    ] {
        assert!(!being_deleted(&table(status.clone())), "{status:?}");
    }
}
