//! Run by scripts/test.sh after the whole suite (hence `#[ignore]` in the main run): scans every table
//! the suite left in DynamoDB Local and asserts that every `PK` and every `SK` starts with
//! `TENANT#<its tenant>#`, that no item carries keys of two tenants, and that an item's `tenantId`
//! attribute, where it has one, names that same tenant; a tenant's own table holds only its keys; a
//! key table holds one wrapped key a row, each of a valid tenant.

use aws_sdk_dynamodb::types::AttributeValue;

fn tenant_of(key: &str) -> Option<&str> {
    let tenant = shared::identity::keys::tenant_segment(key)?;
    let tail = key.strip_prefix(&shared::identity::keys::raw_key(tenant, ""))?;
    use shared::identity::ids::TenantId;
    // The platform's own partition (offboarding reports) counts as one more tenant here.
    let valid = TenantId::parse(tenant).is_ok() || tenant == TenantId::PLATFORM;
    (valid && !tail.is_empty()).then_some(tenant)
}

/// A key table's row: a valid tenant id, a version, a wrapped key, the KMS key that wrapped it, the
/// incarnation it serves and from when it seals, and nothing else (no item keys, no key in the clear).
fn audit_key_row(table: &str, row: &std::collections::HashMap<String, AttributeValue>) {
    let mut names: Vec<&str> = row.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "createdAt",
            "kmsKeyId",
            "sealsFromMs",
            "tenantId",
            "version",
            "wrapped"
        ],
        "{table}: {row:?}"
    );
    match row.get("tenantId") {
        Some(AttributeValue::S(t)) => {
            assert!(
                shared::identity::ids::TenantId::parse(t).is_ok(),
                "{table}: {t}"
            )
        }
        other => panic!("{table}: tenantId is {other:?}"),
    }
    assert!(
        matches!(row.get("wrapped"), Some(AttributeValue::B(_))),
        "{table}: {row:?}"
    );
}

#[tokio::test]
#[ignore = "run by scripts/test.sh after the whole suite, over every table it left"]
async fn every_key_in_every_table_is_under_exactly_one_tenant() {
    integration::endpoints();
    let sdk = shared::service::app::load_sdk_config().await;
    let admin = aws_sdk_dynamodb::Client::new(&sdk);
    let tables: Vec<String> = admin
        .list_tables()
        .into_paginator()
        .items()
        .send()
        .collect::<Result<_, _>>()
        .await
        .unwrap();
    let mut audited = 0usize;
    for table in &tables {
        // A tenant's own table (`<pool>-tenant-<id>`) holds that tenant's keys and no other's.
        let owner = table
            .rsplit_once(shared::store::tenancy::placement::OWN_TABLE_INFIX)
            .map(|(_, tenant)| tenant.to_owned());
        let mut start = None;
        loop {
            let out = admin
                .scan()
                .table_name(table)
                .set_exclusive_start_key(start)
                .send()
                .await
                .unwrap();
            for item in out.items.unwrap_or_default() {
                // A key table (`<pool>-keys`, template.yaml's TenantKeysTable) holds tenants' keys,
                // never items: one tenant's wrapped key a row, nothing in the clear.
                if table.ends_with("-keys") {
                    audit_key_row(table, &item);
                    audited += 1;
                    continue;
                }
                let key = |name: &str| match item.get(name) {
                    Some(AttributeValue::S(s)) => s.clone(),
                    other => panic!("{table}: {name} is {other:?}"),
                };
                let (pk, sk) = (key("PK"), key("SK"));
                let pk_tenant = tenant_of(&pk)
                    .unwrap_or_else(|| panic!("{table}: PK {pk:?} is not tenant-prefixed"));
                let sk_tenant = tenant_of(&sk)
                    .unwrap_or_else(|| panic!("{table}: SK {sk:?} is not tenant-prefixed"));
                assert_eq!(
                    pk_tenant, sk_tenant,
                    "{table}: an item carries keys of two tenants: {pk} / {sk}"
                );
                if let Some(owner) = &owner {
                    assert_eq!(pk_tenant, owner, "{table}: another tenant's item {pk}");
                }
                if let Some(AttributeValue::S(owner)) = item.get("tenantId") {
                    assert_eq!(
                        owner, pk_tenant,
                        "{table}: tenantId disagrees with the keys of {pk}"
                    );
                }
                audited += 1;
            }
            start = out.last_evaluated_key.filter(|k| !k.is_empty());
            if start.is_none() {
                break;
            }
        }
    }
    println!("audited {audited} items in {} tables", tables.len());
    assert!(
        audited > 1000,
        "the suite should have left items to audit, found {audited}"
    );
}
