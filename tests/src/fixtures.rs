//! The data each mutating route needs, in place, and the request that exercises it: shared by the
//! transaction-cancellation and lost-success tests, which run every mutating route.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use shared::identity::clock::Clock;

use crate::{onboard, unique, Auth, Harness, Resp};

/// A request to one route: who calls, its path parameters and its body.
pub struct Arranged {
    pub auth: Auth,
    pub params: BTreeMap<String, String>,
    pub body: Option<Value>,
}

fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A fresh tenant (onboarded, 4 shards) with what mutating route `bin` needs in place, and the
/// request that makes `bin` succeed once: for a tenant's route that needs nothing in place, its
/// sample request from routes.yaml. Panics for an operator's route or one that needs data it does
/// not know: such a route needs an arrangement here.
pub async fn arrange(h: &Harness, bin: &str) -> Arranged {
    let tenant = unique("fx");
    onboard(h, &tenant, 4).await;
    if let Some(arranged) = operator_arrangement(h, bin, &tenant).await {
        return arranged;
    }
    let auth = Auth::Tenant(tenant.clone());
    let (params, body) = tenant_arrangement(h, bin, &tenant, &auth).await;
    Arranged { auth, params, body }
}

/// An operator's request to route `bin` about `tenant`, with what it needs in place; `None` for a
/// tenant's route.
async fn operator_arrangement(h: &Harness, bin: &str, tenant: &str) -> Option<Arranged> {
    let operator = |auth: String, params: BTreeMap<String, String>, body: Option<Value>| Arranged {
        auth: Auth::Operator(auth),
        params,
        body,
    };
    let arranged = match bin {
        "onboard-tenant" => {
            let body = json!({"tenantId": unique("new"), "tier": "standard", "shardCount": 4});
            operator(unique("ops"), BTreeMap::new(), Some(body))
        }
        "offboard-tenant" => operator(
            crate::onboarded(h, "ops").await,
            params(&[("tenantId", tenant)]),
            None,
        ),
        "restore-tenant" => {
            let source = h.snapshot(&unique("fx")).await;
            let body = json!({"from": {"table": source}});
            operator(unique("ops"), params(&[("tenantId", tenant)]), Some(body))
        }
        "update-tenant" => operator(
            unique("ops"),
            params(&[("tenantId", tenant)]),
            Some(json!({"tier": "premium"})),
        ),
        "erase-tenant-user" => {
            let user = params(&[("userId", "u-1")]);
            let body = json!({"name": "Ada", "email": "ada@example.com"});
            let put = h
                .caller(&Auth::Tenant(tenant.into()))
                .call("put-user", &user, Some(body))
                .await;
            assert_eq!(put.status, 201, "setup for {bin}: {}", put.body);
            let mut p = user;
            p.insert("tenantId".into(), tenant.into());
            operator(unique("ops"), p, None)
        }
        _ => return None,
    };
    Some(arranged)
}

/// The path parameters and body of tenant route `bin`, as `auth` (of `tenant`), with what it
/// needs in place.
async fn tenant_arrangement(
    h: &Harness,
    bin: &str,
    tenant: &str,
    auth: &Auth,
) -> (BTreeMap<String, String>, Option<Value>) {
    let ok = |r: Resp| {
        assert!(r.status < 300, "setup for {bin}: {} {}", r.status, r.body);
        r
    };
    let none = BTreeMap::new();
    let run = |bin: &'static str, p: BTreeMap<String, String>, body: Option<Value>| {
        let auth = auth.clone();
        async move { ok(h.caller(&auth).call(bin, &p, body).await) }
    };
    let session = |customer: &str| {
        run(
            "create-session",
            none.clone(),
            Some(json!({"customerId": customer})),
        )
    };
    let user = || {
        run(
            "put-user",
            params(&[("userId", "u-1")]),
            Some(json!({"name": "Ada", "email": "ada@example.com"})),
        )
    };
    let department = || {
        run(
            "put-department",
            params(&[("departmentId", "eng")]),
            Some(json!({"name": "Engineering"})),
        )
    };
    let employee = json!({"name": "Ada", "departmentId": "eng"});
    match bin {
        "create-session" => {
            let parent = session("c-1").await.body["sessionId"]
                .as_str()
                .unwrap()
                .to_owned();
            (
                none.clone(),
                Some(json!({"customerId": "c-1", "parentSessionId": parent})),
            )
        }
        "expire-session" => {
            let id = session("c-1").await.body["sessionId"]
                .as_str()
                .unwrap()
                .to_owned();
            (params(&[("sessionId", &id)]), None)
        }
        "delete-product" => {
            let p = params(&[("productId", "p-1")]);
            run("put-product", p.clone(), Some(json!({"name": "Book"}))).await;
            (p, None)
        }
        "put-employee" => {
            department().await;
            (params(&[("employeeId", "e-1")]), Some(employee))
        }
        "delete-employee" => {
            department().await;
            let p = params(&[("employeeId", "e-1")]);
            run("put-employee", p.clone(), Some(employee)).await;
            (p, None)
        }
        "create-order" => {
            user().await;
            let body = json!({"orderId": "o-1", "date": "2026-11-20", "amount": 19.99,
                "items": [{"itemId": "l-1", "sku": "BOOK-1", "qty": 1, "price": 19.99}]});
            (params(&[("userId", "u-1")]), Some(body))
        }
        "erase-user" | "create-transfer-code" => {
            user().await;
            (params(&[("userId", "u-1")]), None)
        }
        "redeem-transfer-code" => {
            user().await;
            let created = run("create-transfer-code", params(&[("userId", "u-1")]), None).await;
            let code = created.body["code"].as_str().unwrap().to_owned();
            (params(&[("code", &code)]), None)
        }
        "put-integration-token" => {
            let expires = h.clock.now_seconds() + 3600;
            (
                params(&[("service", "crm")]),
                Some(json!({"token": "tok-1", "expiresAt": expires})),
            )
        }
        "create-import" => sealing_key_in_place(h, tenant).await,
        // A route that needs nothing in place: its sample request (routes.yaml), as the tenant.
        other => sample_request(other).unwrap_or_else(|| {
            panic!("no arrangement for mutating route {other}: add one in tests/src/fixtures.rs, or give it a tenant's sample in routes.yaml")
        }),
    }
}

/// The tenant's import sealing key in place, as after its first import (the route's own writes are
/// then its claim and its transaction), and a one-product import.
async fn sealing_key_in_place(
    h: &Harness,
    tenant: &str,
) -> (BTreeMap<String, String>, Option<Value>) {
    let t = shared::identity::ids::TenantId::parse(tenant).unwrap();
    let db = h.app.db(&t).await.unwrap();
    shared::store::imports::ensure_sealing_item(&db, &t)
        .await
        .unwrap();
    let product = json!({"productId": "p-1", "document": {"name": "Book"}});
    (
        BTreeMap::new(),
        Some(json!({"kind": "products", "items": [product]})),
    )
}

/// The path parameters and body of tenant route `bin`'s sample request (routes.yaml).
fn sample_request(bin: &str) -> Option<(BTreeMap<String, String>, Option<Value>)> {
    let f = crate::routes::route_table().function(bin)?;
    if f.caller != devtools::routes::Caller::Tenant {
        return None;
    }
    let params = f
        .sample
        .path
        .iter()
        .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned())))
        .collect();
    let body = match &f.sample.body {
        Some(text) => Some(serde_json::from_str(text).ok()?),
        None => None,
    };
    Some((params, body))
}
