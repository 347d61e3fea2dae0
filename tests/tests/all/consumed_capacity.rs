//! Consumed capacity per request: every tenant client asks DynamoDB for its consumed capacity on the
//! table and GSI1 (`ReturnConsumedCapacity=INDEXES`), and the request meter sums exactly the units
//! DynamoDB reports: a 3 KB put with its GSI1 copy, a Query of 10 items, and a transaction.

use shared::identity::keys::raw_key;
use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, Put, ReturnConsumedCapacity, TransactWriteItem};
use integration::{unique, Harness};
use shared::identity::ids::TenantId;
use shared::store::client::meter::with_request_meta;

type Item = HashMap<String, AttributeValue>;

fn item(tenant: &str, pk: &str, sk: &str, bytes: usize) -> Item {
    HashMap::from([
        ("PK".into(), AttributeValue::S(raw_key(tenant, pk))),
        ("SK".into(), AttributeValue::S(raw_key(tenant, sk))),
        ("data".into(), AttributeValue::S("x".repeat(bytes))),
    ])
}

/// The three operations, on `tenant`'s keys, through `client`; `ask` sets ReturnConsumedCapacity
/// explicitly (the raw client, whose answers are the reference), or leaves it to the interceptor.
/// Returns the units each reported, when asked: (3 KB put, 10-item query, transaction).
async fn three_operations(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    tenant: &str,
    ask: bool,
) -> (f64, f64, f64) {
    let rcc = ask.then_some(ReturnConsumedCapacity::Indexes);
    let total = |c: Option<&aws_sdk_dynamodb::types::ConsumedCapacity>| {
        c.and_then(|c| c.capacity_units()).unwrap_or(0.0)
    };
    let put = client
        .put_item()
        .table_name(table)
        // A 3 KB item: 2,900 bytes of data plus its attribute names and keys.
        .set_item(Some(item(tenant, "BIG#1", "BIG#1", 2_900)))
        .set_return_consumed_capacity(rcc.clone())
        .send()
        .await
        .unwrap();
    let query = client
        .query()
        .table_name(table)
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(raw_key(tenant, "TEN")))
        .set_return_consumed_capacity(rcc.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(query.count(), 10);
    let txn = client
        .transact_write_items()
        .transact_items(
            TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(table)
                        .set_item(Some(item(tenant, "TXN#1", "TXN#1", 100)))
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .set_return_consumed_capacity(rcc)
        .send()
        .await
        .unwrap();
    (
        total(put.consumed_capacity()),
        total(query.consumed_capacity()),
        txn.consumed_capacity()
            .iter()
            .map(|c| c.capacity_units().unwrap_or(0.0))
            .sum(),
    )
}

#[tokio::test]
async fn the_request_meter_sums_exactly_the_units_dynamodb_reports() {
    // GIVEN two tenants, each with a partition of 10 small items (written outside any request)
    let h = Harness::new().await;
    let (reference, metered) = (unique("ref"), integration::onboarded(&h, "cap").await);
    for t in [&reference, &metered] {
        for i in 0..10 {
            h.put_raw(&h.table, item(t, "TEN", &format!("ITEM#{i}"), 50))
                .await;
        }
    }
    // AND the units DynamoDB reports for the three operations when asked directly
    let (put, query, txn) = three_operations(&h.admin, &h.table, &reference, true).await;
    // (DynamoDB Local: 3 KB on the table + 3 KB on GSI1; one eventually consistent 4 KB read;
    // a transactional write costs twice, on the table and on GSI1)
    assert_eq!((put, query, txn), (6.0, 0.5, 4.0));

    // WHEN the same operations run through a tenant client inside one request
    let tenant = TenantId::parse(&metered).unwrap();
    let db = h.app.db(&tenant).await.unwrap();
    let (_, meta) =
        with_request_meta(three_operations(db.sdk_client(), &h.table, &metered, false)).await;

    // THEN the request's meter holds exactly their sum: reads from the query, writes from the rest
    assert_eq!(meta.read_capacity_units(), query);
    assert_eq!(meta.write_capacity_units(), put + txn);
    assert_eq!(meta.dynamodb_requests(), 3);
}
