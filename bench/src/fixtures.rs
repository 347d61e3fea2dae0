//! What the figures read, written before they run: products seeded straight into the table, the
//! fixture figures 1–9 share, and the list routes' items of figure 9b.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::routes::params;
use integration::{event, onboard_at_max_limits as onboard, unique, Auth, Harness};
use serde_json::{json, Value};
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{entity_sk, kind, shard_pk};
use shared::App;

use crate::apps::production_app;
use crate::requests;
use crate::runtime::{body_json, status_of};

pub(crate) async fn seed_products(h: &Harness, tenant: &str, shards: u32, count: usize) {
    seed_products_with(h, tenant, shards, count, |i| {
        AttributeValue::M(HashMap::from([(
            "name".into(),
            AttributeValue::S(format!("product {i}")),
        )]))
    })
    .await
}

/// Seeds `count` products of `tenant` over `shards` straight into the table (the seeding is not the
/// tenant's traffic), product `i` with `document(i)`.
pub(crate) async fn seed_products_with(
    h: &Harness,
    tenant: &str,
    shards: u32,
    count: usize,
    document: impl Fn(usize) -> AttributeValue,
) {
    let t = TenantId::parse(tenant).unwrap();
    let mut items = Vec::with_capacity(count);
    for i in 0..count {
        let id = EntityId::parse(&format!("p-{i:05}")).unwrap();
        let item: HashMap<String, AttributeValue> = HashMap::from([
            (
                "PK".into(),
                AttributeValue::S(shard_pk(
                    &t,
                    kind::PRODUCT,
                    shared::identity::shard::shard_for(id.as_str(), shards),
                )),
            ),
            (
                "SK".into(),
                AttributeValue::S(entity_sk(&t, kind::PRODUCT, &id)),
            ),
            ("kind".into(), AttributeValue::S("PRODUCT".into())),
            ("tenantId".into(), AttributeValue::S(tenant.into())),
            ("productId".into(), AttributeValue::S(id.to_string())),
            ("document".into(), document(i)),
            (
                "updatedAt".into(),
                AttributeValue::S("2026-11-21T00:00:00Z".into()),
            ),
        ]);
        items.push(item);
    }
    shared::store::operator::put_all(&h.admin, &h.table, &items)
        .await
        .expect("seed");
}

/// What figures 1–5 read, created once and shared by both passes.
pub(crate) struct Fixture {
    pub(crate) tenant: String,
    pub(crate) auth: Auth,
    pub(crate) session_id: String,
    pub(crate) product_key: HashMap<String, AttributeValue>,
    pub(crate) session_pk: String,
    /// (shard count, tenant) holding 2,000 products each.
    pub(crate) scatter_tenants: Vec<(u32, String)>,
}

/// A tenant with a product and a session, and the scatter tenants. Every tenant the benchmark
/// onboards has custom limits at the maxima (`onboard_at_max_limits`): an overhead figure is never
/// refused by a quota it is not measuring, however fast the machine (figure 3 alone sends ~2,000
/// requests a second on a fast one, over the premium tier's quota).
pub(crate) async fn fixture(h: &Harness, sdk: &aws_types::SdkConfig) -> Fixture {
    let tenant = unique("bench");
    onboard(h, &tenant, 4).await;
    let app = production_app(sdk, &h.table);
    let auth = Auth::Tenant(tenant.clone());
    let put = requests::put_product(&auth, "p-1", json!({"name": "bench"}));
    assert!(matches!(
        status_of(&products::put_product::handle(&app, put).await.unwrap()),
        200 | 201
    ));
    let created = sessions::create_session::handle(
        &app,
        event(
            "POST",
            "/sessions",
            &[],
            &[],
            Some(json!({"customerId": "c1"})),
            &auth,
        ),
    )
    .await
    .unwrap();
    let session: Value = body_json(&created);
    let session_id = session["sessionId"].as_str().unwrap().to_owned();
    let t = TenantId::parse(&tenant).unwrap();
    let product_key = products::product_key(&t, &EntityId::parse("p-1").unwrap(), 4)
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let session_pk = shared::identity::keys::session_pk(
        &t,
        &shared::identity::ids::SessionId::parse(&session_id).unwrap(),
    );
    let mut scatter_tenants = Vec::new();
    for shards in [1u32, 4, 16, 64] {
        let st = unique(&format!("sg{shards}"));
        onboard(h, &st, shards).await;
        seed_products(h, &st, shards, 2000).await;
        scatter_tenants.push((shards, st));
    }
    Fixture {
        tenant,
        auth,
        session_id,
        product_key,
        session_pk,
        scatter_tenants,
    }
}

/// The parent session `seed_lists` created (the customer `c-parent`'s only session).
pub(crate) async fn parent_session(app: &App, auth: &Auth) -> String {
    let r = integration::Client::new(app, auth.clone())
        .query(&[("limit", "1")])
        .call(
            "get-sessions-by-customer-id",
            &[("customerId", "c-parent")],
            None,
        )
        .await;
    r.body["items"][0]["sessionId"]
        .as_str()
        .expect("c-parent has a session")
        .to_owned()
}

/// `items` departments (`d-000`…), `items` employees all in `d-000`, and `items` orders of one user
/// dated in November 2026; with `sessions`, also `items` sessions of customer `c-cost` and
/// as many children as a session may have (99) under one session of `c-parent`.
pub(crate) async fn seed_lists(app: &App, auth: &Auth, items: usize, with_sessions: bool) {
    let client = integration::Client::new(app, auth.clone());
    let ok = |r: integration::Resp| assert!(matches!(r.status, 200 | 201), "{}", r.body);
    for i in 0..items {
        let d = format!("d-{i:03}");
        ok(client
            .call(
                "put-department",
                &params(&[("departmentId", &d)]),
                Some(json!({"name": d})),
            )
            .await);
    }
    for i in 0..items {
        let e = format!("e-{i:03}");
        ok(client.call("put-employee", &params(&[("employeeId", &e)]), Some(
                json!({"name": e, "departmentId": "d-000", "email": format!("{e}@bench.example")}),
            ))
        .await);
    }
    ok(client
        .call(
            "put-user",
            &params(&[("userId", "u-1")]),
            Some(json!({"name": "u", "email": "u@bench.example"})),
        )
        .await);
    for i in 0..items {
        ok(client
            .call(
                "create-order",
                &params(&[("userId", "u-1")]),
                Some(json!({
                    "orderId": format!("o-{i:03}"),
                    "date": format!("2026-11-{:02}", 1 + i % 28),
                    "amount": 1.0,
                    "items": [{"itemId": "l-1", "sku": "S", "qty": 1, "price": 1.0}]
                })),
            )
            .await);
    }
    if with_sessions {
        for _ in 0..items {
            ok(client
                .call(
                    "create-session",
                    &params(&[]),
                    Some(json!({"customerId": "c-cost"})),
                )
                .await);
        }
        let parent = client
            .call(
                "create-session",
                &params(&[]),
                Some(json!({"customerId": "c-parent"})),
            )
            .await;
        ok(parent.clone());
        let parent = parent.body["sessionId"].as_str().unwrap().to_owned();
        for _ in 0..sessions::model::MAX_CHILDREN {
            ok(client
                .call(
                    "create-session",
                    &params(&[]),
                    Some(json!({"customerId": "c-parent", "parentSessionId": parent})),
                )
                .await);
        }
    }
}
