//! Figure 2c: a keyed create (`POST /sessions` with an `Idempotency-Key`) served as the runtime
//! serves it, against the same DynamoDB work sent raw.

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::{
    TransactWriteItemsError, TransactWriteItemsOutput,
};
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use integration::{event, unique, Auth, Harness};
use lambda_http::{Body, Request, Response};
use serde_json::json;
use shared::identity::ids::TenantId;
use shared::App;

use crate::apps::Target;
use crate::fixtures::Fixture;
use crate::report::{stat, time_ms, Report};
use crate::runtime::{body_json, status_of};

type Item = HashMap<String, AttributeValue>;

/// 2c. A keyed create (`POST /sessions` with an `Idempotency-Key`) served as the runtime serves it:
/// quota, usage meter and the idempotency layer all active. Its floor is the same DynamoDB work sent
/// raw: the consistent read of the key's record, and one transaction putting the session and the
/// record (the items are copies, re-keyed, of what the handler wrote in a warm-up call).
pub(crate) async fn idempotent_create(
    h: &Harness,
    target: &Target,
    fx: &Fixture,
    iterations: usize,
    report: &mut Report,
) {
    let t = TenantId::parse(&fx.tenant).unwrap();
    let written = warm_up(h, target, fx, &t).await;
    let samples = keyed_create_samples(h, target, fx, &t, &written, iterations).await;
    report_keyed_create(samples, target.tag, report);
}

/// `POST /sessions` of `auth`'s tenant with `Idempotency-Key: key`.
fn keyed_request(auth: &Auth, key: &str) -> Request {
    let mut req: Request = event(
        "POST",
        "/sessions",
        &[],
        &[],
        Some(json!({"customerId": "c-keyed"})),
        auth,
    );
    req.headers_mut().insert(
        shared::service::idempotent::HEADER,
        key.parse().expect("a header value"),
    );
    req
}

/// A keyed create served as the runtime serves it (quota, usage meter, idempotency). The request is
/// built here, before the returned future is timed.
fn keyed_create<'a>(
    app: &'a App,
    auth: &Auth,
    key: &str,
) -> impl Future<Output = Response<Body>> + 'a {
    let req = keyed_request(auth, key);
    shared::service::runtime::respond_admitted(
        app,
        sessions::create_session::ROUTE,
        "bench".into(),
        req,
        move |req| sessions::create_session::handle(app, req),
    )
}

/// The key (PK and SK alike) of the idempotency record of `key` in `t`'s create-session.
fn record_pk(t: &TenantId, key: &str) -> String {
    shared::store::idempotency::record_key(
        t,
        sessions::create_session::ROUTE,
        &shared::identity::ids::IdempotencyKey::parse(key).unwrap(),
    )
}

/// What a keyed create wrote: the session, and the key's record. The floor puts copies of them.
struct Written {
    session: Item,
    record: Item,
}

/// One keyed create, and the items it wrote read back.
async fn warm_up(h: &Harness, target: &Target, fx: &Fixture, t: &TenantId) -> Written {
    let raw = &target.raw;
    let warm_key = unique("warm");
    let created = keyed_create(&target.app, &fx.auth, &warm_key).await;
    assert_eq!(status_of(&created), 201);
    let session_id = body_json(&created)["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let session = raw
        .query()
        .table_name(&h.table)
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(
            ":pk",
            AttributeValue::S(shared::identity::keys::session_pk(
                t,
                &shared::identity::ids::SessionId::parse(&session_id).unwrap(),
            )),
        )
        .send()
        .await
        .unwrap()
        .items
        .unwrap()
        .remove(0);
    let record = raw
        .get_item()
        .table_name(&h.table)
        .key("PK", AttributeValue::S(record_pk(t, &warm_key)))
        .key("SK", AttributeValue::S(record_pk(t, &warm_key)))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    Written { session, record }
}

/// A Put of `item` into `table` that only creates.
fn put_new(table: &str, item: Item) -> TransactWriteItem {
    TransactWriteItem::builder()
        .put(
            Put::builder()
                .table_name(table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .unwrap(),
        )
        .build()
}

/// The floor of a keyed create with `key`: the consistent read of its record, then one transaction
/// putting copies of `written`, re-keyed to be new.
async fn raw_keyed_create(
    raw: &aws_sdk_dynamodb::Client,
    table: &str,
    t: &TenantId,
    written: &Written,
    key: &str,
) -> Result<TransactWriteItemsOutput, SdkError<TransactWriteItemsError>> {
    raw.get_item()
        .table_name(table)
        .key("PK", AttributeValue::S(record_pk(t, key)))
        .key("SK", AttributeValue::S(record_pk(t, key)))
        .consistent_read(true)
        .send()
        .await
        .expect("raw consistent get");
    let mut session = written.session.clone();
    if let Some(AttributeValue::S(pk)) = session.get_mut("PK") {
        pk.push_str(&format!("-{key}"));
    }
    let mut record = written.record.clone();
    for k in ["PK", "SK"] {
        record.insert(k.into(), AttributeValue::S(record_pk(t, key)));
    }
    raw.transact_write_items()
        .transact_items(put_new(table, session))
        .transact_items(put_new(table, record))
        .send()
        .await
}

/// Figure 2c's samples (the first 20 rounds, warming up, left out).
#[derive(Default)]
struct KeyedCreateSamples {
    floor: Vec<f64>,
    keyed: Vec<f64>,
    handler_only: Vec<f64>,
}

/// The floor, the keyed create as the runtime serves it, and the handler with idempotency alone,
/// interleaved, each with a new key.
async fn keyed_create_samples(
    h: &Harness,
    target: &Target,
    fx: &Fixture,
    t: &TenantId,
    written: &Written,
    iterations: usize,
) -> KeyedCreateSamples {
    let (app, raw) = (&target.app, &target.raw);
    let mut samples = KeyedCreateSamples::default();
    for i in 0..iterations + 20 {
        let floor_key = unique("floor");
        let (ms, out) = time_ms(raw_keyed_create(raw, &h.table, t, written, &floor_key)).await;
        out.expect("raw transaction");
        let (kms, r) = time_ms(keyed_create(app, &fx.auth, &unique("key"))).await;
        assert_eq!(status_of(&r), 201);
        let (hms, r) = time_ms(sessions::create_session::handle(
            app,
            keyed_request(&fx.auth, &unique("key")),
        ))
        .await;
        assert_eq!(status_of(&r.unwrap()), 201);
        if i >= 20 {
            samples.floor.push(ms);
            samples.keyed.push(kms);
            samples.handler_only.push(hms);
        }
    }
    samples
}

/// Adds figure 2c and its floor.
fn report_keyed_create(samples: KeyedCreateSamples, tag: &str, report: &mut Report) {
    let (floor, keyed, handler_only) = (
        stat(samples.floor),
        stat(samples.keyed),
        stat(samples.handler_only),
    );
    report.add(
        &format!("2c. keyed create-session, handler + idempotency only{tag}"),
        &handler_only,
        format!("{:.2}x floor at p50", handler_only.median / floor.median),
    );
    report.add(
        &format!("1. floor: raw consistent GetItem + 2-Put transaction{tag}"),
        &floor,
        String::new(),
    );
    report.add(
        &format!("2c. keyed create-session + idempotency + usage meter + quota{tag}"),
        &keyed,
        format!(
            "{:.2}x floor at p50 (target <= 1.15x)",
            keyed.median / floor.median
        ),
    );
}
