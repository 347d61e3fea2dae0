//! `Idempotency-Key` on the routes that create something: the same key and request within 24 hours
//! get the first answer again and cause one effect, whatever the concurrency; the same key with a
//! different request gets 422; a malformed key gets 400 and writes nothing.

use std::sync::Arc;

use integration::fixtures::arrange;
use integration::{unique, Harness};
use serde_json::json;

const ROUTES: &[&str] = &[
    "create-session",
    "create-order",
    "create-transfer-code",
    "redeem-transfer-code",
    "onboard-tenant",
];

/// The items the table holds whose key is not an idempotency record.
async fn effects(h: &Harness) -> usize {
    h.all_items()
        .await
        .iter()
        .filter(|i| !i["PK"].as_s().unwrap().contains("#IDEMPOTENCY#"))
        .count()
}

#[tokio::test]
async fn the_same_key_and_request_replay_the_first_answer_with_one_effect() {
    let h = Arc::new(Harness::new().await);
    for bin in ROUTES {
        // GIVEN the route's data and a key
        let a = Arc::new(arrange(&h, bin).await);
        let key = unique("key");
        let before = effects(&h).await;
        // WHEN 8 identical requests with the key run at once, and one more afterwards
        let send = |h: Arc<Harness>, a: Arc<integration::fixtures::Arranged>, key: String| async move {
            h.caller(&a.auth)
                .header("Idempotency-Key", &key)
                .call(bin, &a.params, a.body.clone())
                .await
        };
        let tasks: Vec<_> = (0..8)
            .map(|_| tokio::spawn(send(h.clone(), a.clone(), key.clone())))
            .collect();
        let mut answers = Vec::new();
        for t in tasks {
            answers.push(t.await.unwrap());
        }
        answers.push(send(h.clone(), a.clone(), key.clone()).await);
        // THEN every answer is the first one: same status and body
        let first = &answers[0];
        assert!(first.status < 300, "{bin}: {} {}", first.status, first.body);
        for r in &answers {
            assert_eq!((r.status, &r.body), (first.status, &first.body), "{bin}");
        }
        // AND the effect happened once: the items one clean request writes, and one record under
        // the tenant's prefix
        let written = effects(&h).await - before;
        let expected = match *bin {
            "create-order" => 4,         // header, summary, date index, one line
            "redeem-transfer-code" => 0, // the code is marked, not added
            _ => 1,
        };
        assert_eq!(written, expected, "{bin}");
        let records: Vec<String> = h
            .all_items()
            .await
            .iter()
            .map(|i| i["PK"].as_s().unwrap().clone())
            .filter(|pk| pk.ends_with(&format!("#IDEMPOTENCY#{bin}#{key}")))
            .collect();
        assert_eq!(records.len(), 1, "{bin}: {records:?}");
        assert!(
            records[0].starts_with(shared::identity::keys::TENANT_SEGMENT),
            "{bin}"
        );
    }
}

#[tokio::test]
async fn the_same_key_with_another_request_is_422_and_a_bad_key_is_400() {
    let h = Harness::new().await;
    // GIVEN a session created with a key
    let a = arrange(&h, "create-session").await;
    let first = h
        .caller(&a.auth)
        .header("Idempotency-Key", "k-1")
        .call("create-session", &a.params, a.body.clone())
        .await;
    assert_eq!(first.status, 201, "{}", first.body);
    let before = h.all_items().await.len();
    // WHEN the key comes back with another body, THEN 422, and nothing is written
    let other = h
        .caller(&a.auth)
        .header("Idempotency-Key", "k-1")
        .call(
            "create-session",
            &a.params,
            Some(json!({"customerId": "someone-else"})),
        )
        .await;
    assert_eq!(other.status, 422, "{}", other.body);
    assert_eq!(other.content_type, "application/problem+json");
    // AND malformed keys are 400 naming the header
    for bad in ["", "has space", "x#y", &"k".repeat(129)] {
        let r = h
            .caller(&a.auth)
            .header("Idempotency-Key", bad)
            .call("create-session", &a.params, a.body.clone())
            .await;
        assert_eq!(r.status, 400, "{bad:?}: {}", r.body);
        assert_eq!(r.body["field"], "Idempotency-Key");
    }
    // AND a key sent twice is 400 as a REST API passes it (two values) and as an HTTP API does (one,
    // joined with a comma), never the first key taken alone
    let caller = h.caller(&a.auth).header("Idempotency-Key", "k-2");
    let mut twice = caller.request("create-session", &a.params, a.body.clone());
    twice.headers_mut().append(
        "Idempotency-Key",
        lambda_http::http::HeaderValue::from_static("k-3"),
    );
    let joined = h.caller(&a.auth).header("Idempotency-Key", "k-2,k-3");
    let joined = joined.request("create-session", &a.params, a.body.clone());
    for (shape, req) in [("REST", twice), ("HTTP API", joined)] {
        let r = caller.send("create-session", req).await;
        assert_eq!(r.status, 400, "{shape}: {}", r.body);
        assert_eq!(r.content_type, "application/problem+json");
        assert_eq!(r.body["field"], "Idempotency-Key", "{shape}");
    }
    assert_eq!(h.all_items().await.len(), before);
}

#[tokio::test]
async fn a_key_is_remembered_for_24_hours_and_then_starts_afresh() {
    let h = Harness::new().await;
    // (a root session: a child could not outlive its parent's hour)
    let a = arrange(&h, "create-session").await;
    let body = Some(json!({"customerId": "c-1"}));
    let send = || {
        h.caller(&a.auth).header("Idempotency-Key", "daily").call(
            "create-session",
            &a.params,
            body.clone(),
        )
    };
    let first = send().await;
    // WHEN the same request comes 24 hours less a second later, THEN it is replayed
    h.clock.advance_seconds(24 * 3600 - 1);
    assert_eq!(send().await.body, first.body);
    // AND once the record has expired (TTL may not have removed it yet), it runs again
    h.clock.advance_seconds(2);
    let later = send().await;
    assert_eq!(later.status, 201);
    assert_ne!(later.body["sessionId"], first.body["sessionId"]);
}
