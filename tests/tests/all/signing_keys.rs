//! The signing keys live in a secret store (Secrets Manager; moto's here), read by each container
//! when it starts and again when its copy is stale. A rotation in three steps (next, then current +
//! previous, then previous dropped) loses no cursor and no import message between containers that
//! pick up each step at different times.

use std::time::Duration;

use integration::api::NO_PATH;
use integration::import_queue::ImportQueues;
use integration::{onboard, unique, Harness, Resp};
use serde_json::{json, Value};
use shared::service::signing::{SecretSource, SigningKeys};

const REFRESH_SECONDS: u64 = 60;

/// Secrets Manager on the local stack's second moto (the one that also serves SQS, EventBridge and KMS).
async fn secrets_client() -> aws_sdk_secretsmanager::Client {
    let sdk = shared::service::app::load_sdk_config().await;
    let moto = std::env::var("AWS_ENDPOINT_URL_SECRETS_MANAGER").expect(
        "AWS_ENDPOINT_URL_SECRETS_MANAGER is not set: run the tests with ./scripts/test.sh (moto)",
    );
    // Judged: a container's read of its keys in a request is the function's (its role's
    // GetSecretValue on SigningKeysSecret).
    aws_sdk_secretsmanager::Client::from_conf(
        aws_sdk_secretsmanager::config::Builder::from(&sdk)
            .endpoint_url(moto)
            .interceptor(integration::judge::Judged)
            .build(),
    )
}

/// A container on `h`'s table whose keys are the secret `id`'s.
async fn container(h: &Harness, client: &aws_sdk_secretsmanager::Client, id: &str) -> Harness {
    let c = h
        .another_container()
        .await
        .with_signing(SigningKeys::from_secret(
            client.clone(),
            SecretSource {
                id: id.to_owned(),
                refresh_seconds: REFRESH_SECONDS,
            },
        ));
    c.app
        .signing
        .refresh(c.app.clock.now_millis())
        .await
        .unwrap();
    c
}

/// A new secret holding `keys`, template.yaml's `SigningKeysSecret`: its ARN.
async fn create_keys(client: &aws_sdk_secretsmanager::Client, keys: Value) -> String {
    let arn = client
        .create_secret()
        .name(unique("pooltable-signing-keys"))
        .secret_string(keys.to_string())
        .send()
        .await
        .expect("create the secret on moto")
        .arn
        .expect("the secret's ARN");
    integration::judge::stands_for(&arn, "ref:SigningKeysSecret");
    arn
}

/// A fresh tenant on `h`'s table (1 shard) with products `p-0`..`p-{n-1}`.
async fn tenant_with_products(h: &Harness, prefix: &str, n: usize) -> String {
    let t = unique(prefix);
    onboard(h, &t, 1).await;
    h.tenant(&t)
        .put_new_products((0..n).map(|i| (format!("p-{i}"), json!({"n": i}))))
        .await;
    t
}

/// Writes the secret's next version.
async fn put_keys(client: &aws_sdk_secretsmanager::Client, id: &str, keys: Value) {
    client
        .put_secret_value()
        .secret_id(id)
        .secret_string(keys.to_string())
        .send()
        .await
        .expect("put the signing keys on moto");
}

/// `c` picks up the secret as it is now (its copy is made stale first).
async fn refreshed(c: &Harness) {
    c.clock.advance_seconds(REFRESH_SECONDS);
    c.app
        .signing
        .refresh(c.app.clock.now_millis())
        .await
        .unwrap();
}

async fn page(c: &Harness, tenant: &str, cursor: Option<&str>) -> Resp {
    let mut query = vec![("limit", "1")];
    if let Some(c) = cursor {
        query.push(("cursor", c));
    }
    c.tenant(tenant)
        .query(&query)
        .admitted()
        .query_tenant_products()
        .await
}

/// The cursor `c` hands out with the first page of `tenant`'s products.
async fn first_cursor(c: &Harness, tenant: &str) -> String {
    let first = page(c, tenant, None).await;
    assert_eq!(first.status, 200, "{}", first.body);
    first.body["nextCursor"]
        .as_str()
        .expect("a cursor")
        .to_owned()
}

/// A cursor handed out by `from` is accepted by `to`.
async fn cursor_crosses(from: &Harness, to: &Harness, tenant: &str) {
    let cursor = first_cursor(from, tenant).await;
    let second = page(to, tenant, Some(&cursor)).await;
    assert_eq!(second.status, 200, "{}", second.body);
}

/// An import sent by `from` is written by `to`'s consumer, every item once.
async fn import_crosses(
    from: &Harness,
    to: &Harness,
    tenant: &str,
    queues: &ImportQueues,
    n: &str,
) {
    let body = json!({"kind": "products", "items": [{"productId": format!("imp-{n}"), "document": {"n": n}}]});
    let posted = from
        .tenant(tenant)
        .call("create-import", &NO_PATH, Some(body));
    let posted = integration::sending_to(queues.producer(), posted).await;
    assert_eq!(posted.status, 202, "{}", posted.body);
    let batch = queues.receive(10).await;
    assert_eq!(batch.len(), 1);
    let settings = imports::consume::ConsumerSettings {
        max_receives: queues.max_receives,
        writes_in_flight: 4,
        requeue: None,
        max_defer_seconds: imports::consume::DEFAULT_MAX_DEFER_SECONDS,
    };
    let event = serde_json::from_value(queues.event(&batch)).unwrap();
    let answer = integration::import_queue::consume(&to.app, &settings, event).await;
    assert!(
        answer.batch_item_failures.is_empty(),
        "the message was not written"
    );
    queues
        .settle(&batch, Some(&serde_json::to_value(answer).unwrap()))
        .await;
}

/// Cursors and import messages cross between `a` and `b`, both ways.
async fn everything_crosses(
    a: &Harness,
    b: &Harness,
    tenant: &str,
    queues: &ImportQueues,
    step: &str,
) {
    cursor_crosses(a, b, tenant).await;
    cursor_crosses(b, a, tenant).await;
    import_crosses(a, b, tenant, queues, &format!("{step}-ab")).await;
    import_crosses(b, a, tenant, queues, &format!("{step}-ba")).await;
}

#[tokio::test]
async fn a_rotation_in_three_steps_loses_no_cursor_and_no_import_message() {
    // GIVEN the signing keys in a secret, containers A and B reading it, and a tenant with products
    let h = Harness::new().await;
    let client = secrets_client().await;
    let (k0, k1) = ("0".repeat(64), "1".repeat(64));
    let id = create_keys(&client, json!({"current": k0, "previous": "", "next": ""})).await;
    let (a, b) = (
        container(&h, &client, &id).await,
        container(&h, &client, &id).await,
    );
    let t = tenant_with_products(&h, "rotating", 3).await;
    let queues = ImportQueues::create(5, 1).await;
    everything_crosses(&a, &b, &t, &queues, "before").await;

    // WHEN step 1 (next = the new key) reaches A, then B
    put_keys(
        &client,
        &id,
        json!({"current": k0, "previous": "", "next": k1}),
    )
    .await;
    refreshed(&a).await;
    everything_crosses(&a, &b, &t, &queues, "step1-a").await;
    refreshed(&b).await;
    everything_crosses(&a, &b, &t, &queues, "step1-ab").await;
    // AND step 2 (current = the new key, previous = the old) reaches B first, then A
    put_keys(
        &client,
        &id,
        json!({"current": k1, "previous": k0, "next": ""}),
    )
    .await;
    refreshed(&b).await;
    everything_crosses(&a, &b, &t, &queues, "step2-b").await;
    let signed_before_step3 = first_cursor(&a, &t).await;
    refreshed(&a).await;
    everything_crosses(&a, &b, &t, &queues, "step2-ab").await;
    // AND step 3 (the old key dropped) reaches both
    put_keys(
        &client,
        &id,
        json!({"current": k1, "previous": "", "next": ""}),
    )
    .await;
    refreshed(&a).await;
    refreshed(&b).await;

    // THEN at every step every cursor and every message crossed (above), and now only what the
    // new key signed verifies: a cursor signed with the old key is refused
    everything_crosses(&a, &b, &t, &queues, "after").await;
    page(&b, &t, Some(&signed_before_step3))
        .await
        .assert_problem(400);
}

#[tokio::test]
async fn a_container_reads_its_keys_again_only_when_its_copy_is_stale_and_keeps_them_when_the_store_fails(
) {
    // GIVEN a container whose keys came from a secret
    let h = Harness::new().await;
    let client = secrets_client().await;
    let (k0, k1) = ("a".repeat(64), "b".repeat(64));
    let id = create_keys(&client, json!({"current": k0})).await;
    let c = container(&h, &client, &id).await;
    let t = tenant_with_products(&h, "stale", 2).await;
    let old_cursor = first_cursor(&c, &t).await;
    // WHEN the secret changes to a new key only, within the refresh interval
    put_keys(&client, &id, json!({"current": k1})).await;
    c.clock.advance_seconds(REFRESH_SECONDS - 1);
    // THEN the container still holds the old keys (no read per request)
    assert_eq!(page(&c, &t, Some(&old_cursor)).await.status, 200);
    // AND once stale, its next request (through the runtime) reads the new ones
    c.clock.advance_seconds(1);
    page(&c, &t, Some(&old_cursor)).await.assert_problem(400);
    // AND a secret that cannot be read keeps the keys the container has, even the verify-only ones
    put_keys(&client, &id, json!({"current": k1, "previous": k0})).await;
    c.clock.advance_seconds(REFRESH_SECONDS);
    assert_eq!(page(&c, &t, Some(&old_cursor)).await.status, 200);
    client
        .delete_secret()
        .secret_id(&id)
        .force_delete_without_recovery(true)
        .send()
        .await
        .unwrap();
    c.clock.advance_seconds(REFRESH_SECONDS);
    tokio::time::timeout(Duration::from_secs(30), async {
        assert_eq!(page(&c, &t, Some(&old_cursor)).await.status, 200);
    })
    .await
    .unwrap();
    // AND after twelve refresh intervals without a read, only the current key verifies: a retired
    // key does not verify forever in a container cut off from the store
    c.clock
        .advance_seconds(REFRESH_SECONDS * shared::service::signing::STALE_AFTER_REFRESHES);
    page(&c, &t, Some(&old_cursor)).await.assert_problem(400);
    let cursor = first_cursor(&c, &t).await;
    assert_eq!(page(&c, &t, Some(&cursor)).await.status, 200);
}
