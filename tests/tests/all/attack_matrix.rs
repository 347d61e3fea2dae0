//! The attack matrix, over every route in template.yaml: hostile ids in every path parameter, hostile
//! or missing tenant claims, another tenant's ids, and cursors from another tenant, tampered with, or
//! from another route. Every attack answers 4xx problem+json, writes nothing, and returns nothing of
//! the other tenant.

use shared::identity::keys::raw_key;
use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use integration::routes::{api_routes, path_params};
use integration::{onboard, unique, Auth, Harness, Resp};
use serde_json::{json, Value};

type Item = HashMap<String, AttributeValue>;

struct World {
    h: Harness,
    a: String,
    b: String,
    /// Path parameter values per tenant: its own session, child, customer, product, …
    ids: HashMap<String, BTreeMap<String, String>>,
    /// Every item once both tenants were seeded: what no attack may change.
    seeded: Vec<Item>,
}

fn body_for(bin: &str, tenant: &str) -> Option<Value> {
    match bin {
        "create-session" => Some(json!({"customerId": "c1"})),
        "onboard-tenant" => Some(json!({"tenantId": unique("newco"), "tier": "basic"})),
        "update-tenant" => Some(json!({"tier": "premium"})),
        "put-product" => Some(json!({"owner": tenant})),
        "put-department" => Some(json!({"name": "Dept"})),
        "put-employee" => Some(json!({"name": "Emp", "departmentId": "d1"})),
        "put-user" => Some(json!({"name": "User", "email": format!("other-{tenant}@example.com")})),
        "create-order" => Some(
            json!({"date": "2026-11-20", "amount": 10, "items": [{"itemId": "i1", "sku": "s", "qty": 1, "price": 10}]}),
        ),
        "put-integration-token" => Some(
            json!({"token": format!("tok-{tenant}"), "expiresAt": integration::real_now_millis() / 1000 + 3600}),
        ),
        "create-import" => Some(
            json!({"kind": "products", "items": [{"productId": "imported", "document": {"owner": tenant}}]}),
        ),
        _ => None,
    }
}

fn query_for(bin: &str, tenant: &str) -> Vec<(&'static str, String)> {
    match bin {
        "find-user-by-email" => vec![("email", format!("{tenant}@example.com"))],
        "list-tenant-orders" | "get-usage" | "get-tenant-usage" => {
            vec![("from", "2026-01-01".into()), ("to", "2026-12-31".into())]
        }
        _ => vec![],
    }
}

/// Calls `bin` with a valid body for `body_tenant`; the query (an email, a date range) names `query_tenant`'s data.
async fn call_with(
    w: &World,
    bin: &str,
    params: &BTreeMap<String, String>,
    extra: &[(&str, &str)],
    body_tenant: &str,
    query_tenant: &str,
    auth: &Auth,
) -> Resp {
    let q = query_for(bin, query_tenant);
    let mut query: Vec<(&str, &str)> = q.iter().map(|(k, v)| (*k, v.as_str())).collect();
    query.extend_from_slice(extra);
    w.h.caller(auth)
        .query(&query)
        .call(bin, params, body_for(bin, body_tenant))
        .await
}

/// Calls `bin` with a valid body for `tenant`, and a query naming `tenant`'s data.
async fn call_as(
    w: &World,
    bin: &str,
    params: &BTreeMap<String, String>,
    tenant: &str,
    auth: &Auth,
) -> Resp {
    call_with(w, bin, params, &[], tenant, tenant, auth).await
}

async fn seed(h: &Harness, t: &str) -> BTreeMap<String, String> {
    let auth = Auth::Tenant(t.into());
    let mut ids = BTreeMap::new();
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let r = h
            .caller(&auth)
            .create_session(json!({"customerId": "c1", "state": t}))
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
        sessions.push(r.body["sessionId"].as_str().unwrap().to_owned());
    }
    for _ in 0..2 {
        let r = h
            .caller(&auth)
            .create_session(json!({"customerId": "c1", "parentSessionId": sessions[0], "state": t}))
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
        ids.insert(
            "childSessionId".into(),
            r.body["sessionId"].as_str().unwrap().to_owned(),
        );
    }
    ids.insert("sessionId".into(), sessions[0].clone());
    ids.insert("customerId".into(), "c1".into());
    ids.insert("tenantId".into(), t.to_owned());
    // Two of each entity, by PUT: the first is the one the matrix names.
    let entities = [
        (
            "put-product",
            "productId",
            ["p1", "p2"],
            json!({"owner": t}),
        ),
        (
            "put-department",
            "departmentId",
            ["d1", "d2"],
            json!({"name": t}),
        ),
        (
            "put-employee",
            "employeeId",
            ["e1", "e2"],
            json!({"name": t, "departmentId": "d1"}),
        ),
    ];
    for (bin, param, pair, body) in entities {
        for id in pair {
            let r = h
                .caller(&auth)
                .call(bin, &[(param, id)], Some(body.clone()))
                .await;
            assert_eq!(r.status, 201, "{bin} {id}: {}", r.body);
        }
        ids.insert(param.into(), pair[0].into());
    }
    let user = BTreeMap::from([("userId".to_string(), "u1".to_string())]);
    let r = h
        .caller(&auth)
        .call(
            "put-user",
            &user,
            Some(json!({"name": t, "email": format!("{t}@example.com")})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    for o in ["o1", "o2"] {
        let body = json!({"orderId": o, "date": "2026-11-20", "amount": 5, "items": [{"itemId": "i1", "sku": t, "qty": 1, "price": 5}]});
        let r = h
            .caller(&auth)
            .call("create-order", &user, Some(body))
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let r = h
        .caller(&auth)
        .call("create-transfer-code", &user, None)
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    ids.insert("code".into(), r.body["code"].as_str().unwrap().to_owned());
    let service = BTreeMap::from([("service".to_string(), "github".to_string())]);
    let token = json!({"token": format!("secret-{t}"), "expiresAt": integration::real_now_millis() / 1000 + 3600});
    assert_eq!(
        h.caller(&auth)
            .call("put-integration-token", &service, Some(token))
            .await
            .status,
        200
    );
    let import =
        json!({"kind": "products", "items": [{"productId": "imported", "document": {"owner": t}}]});
    let r = h.caller(&auth).create_import(import).await;
    assert_eq!(r.status, 202, "{}", r.body);
    ids.insert(
        "importId".into(),
        r.body["importId"].as_str().unwrap().to_owned(),
    );
    ids.insert("userId".into(), "u1".into());
    ids.insert("orderId".into(), "o1".into());
    ids.insert("service".into(), "github".into());
    ids
}

/// Every item in the table, in key order.
async fn sorted_items(h: &Harness) -> Vec<Item> {
    let mut items = h.all_items().await;
    items.sort_by_key(|i| format!("{:?}{:?}", i["PK"], i["SK"]));
    items
}

impl World {
    async fn new() -> Self {
        let h = Harness::new().await;
        let (a, b) = (unique("victim"), unique("attacker"));
        onboard(&h, &a, 4).await;
        onboard(&h, &b, 4).await;
        let mut ids = HashMap::new();
        ids.insert(a.clone(), seed(&h, &a).await);
        ids.insert(b.clone(), seed(&h, &b).await);
        let seeded = sorted_items(&h).await;
        Self {
            h,
            a,
            b,
            ids,
            seeded,
        }
    }

    /// Asserts the table holds exactly what it held once seeded.
    async fn assert_unchanged(&self, what: &str) {
        assert_eq!(self.items().await, self.seeded, "{what}");
    }

    async fn items(&self) -> Vec<Item> {
        sorted_items(&self.h).await
    }

    async fn items_of(&self, tenant: &str) -> Vec<Item> {
        let prefix = raw_key(tenant, "");
        self.items()
            .await
            .into_iter()
            .filter(|i| i["PK"].as_s().unwrap().starts_with(&prefix))
            .collect()
    }
}

fn assert_4xx_problem(r: &Resp, what: &str) {
    assert!(
        (400..500).contains(&r.status),
        "{what}: expected 4xx, got {} {}",
        r.status,
        r.body
    );
    assert_eq!(r.content_type, "application/problem+json", "{what}");
}

fn assert_nothing_of(r: &Resp, tenant: &str, ids: &BTreeMap<String, String>, what: &str) {
    let text = r.body.to_string();
    assert!(
        !text.contains(tenant),
        "{what}: response carries the victim tenant: {text}"
    );
    for key in ["sessionId", "childSessionId", "code"] {
        assert!(
            !text.contains(&ids[key]),
            "{what}: response carries the victim's {key}: {text}"
        );
    }
}

const HOSTILE_IDS: &[&str] = &[
    "a#b",
    "*",
    "?",
    "%23",
    "\u{0430}cme",
    "${aws:username}",
    "a b",
    "a/b",
];

#[tokio::test]
async fn hostile_ids_in_every_path_parameter_are_refused_and_write_nothing() {
    let w = World::new().await;
    let long = "x".repeat(10 * 1024);
    let mut cases = 0;
    for (bin, (_, route)) in api_routes() {
        for param in path_params(&route) {
            // AND a whole key value as an id
            let key_value = raw_key("x", "SESSION#1");
            for hostile in HOSTILE_IDS
                .iter()
                .copied()
                .chain([long.as_str(), key_value.as_str()])
            {
                let mut params = w.ids[&w.a].clone();
                params.insert(param.clone(), hostile.to_owned());
                let what = format!("{bin} with {param}={:.40}", hostile);
                let r = call_as(&w, &bin, &params, &w.a, &Auth::Tenant(w.a.clone())).await;
                assert_4xx_problem(&r, &what);
                cases += 1;
            }
        }
    }
    assert!(cases > 100, "{cases}");
    w.assert_unchanged("an attack wrote something").await;
}

#[tokio::test]
async fn hostile_and_missing_tenant_claims_are_refused_on_every_route() {
    let w = World::new().await;
    for (bin, _) in api_routes() {
        let params = &w.ids[&w.a];
        let tenant_x = shared::identity::keys::TENANT_SEGMENT.to_owned() + "x";
        for claim in [
            "*",
            "a#b",
            "${aws:username}",
            "",
            tenant_x.as_str(),
            "\u{0430}cme",
            "a?",
        ] {
            let r = call_as(&w, &bin, params, &w.a, &Auth::Tenant(claim.into())).await;
            assert_4xx_problem(&r, &format!("{bin} with claim {claim:?}"));
            assert_eq!(r.status, 403, "{bin} with claim {claim:?}");
        }
        let r = call_as(&w, &bin, params, &w.a, &Auth::NoTenant).await;
        assert_eq!(r.status, 401, "{bin} without a tenant claim");
    }
    w.assert_unchanged("a refused claim wrote something").await;
}

#[tokio::test]
async fn another_tenants_ids_reach_nothing_of_that_tenant() {
    let w = World::new().await;
    let victim_before = w.items_of(&w.a).await;
    let victim_ids = &w.ids[&w.a];
    for (bin, (method, route)) in api_routes() {
        // the attacker uses every id of the victim
        let r = call_with(
            &w,
            &bin,
            victim_ids,
            &[],
            &w.b,
            &w.a,
            &Auth::Tenant(w.b.clone()),
        )
        .await;
        let what = format!("{bin} by the attacker with the victim's ids");
        assert!(r.status < 500, "{what}: {} {}", r.status, r.body);
        assert_nothing_of(&r, &w.a, victim_ids, &what);
        // ids that exist only for the victim (its sessions, its tenant record) are not found
        let unique_to_victim = ["sessionId", "childSessionId", "tenantId", "code"]
            .iter()
            .any(|p| path_params(&route).contains(&p.to_string()));
        if unique_to_victim && method != "POST" {
            assert_4xx_problem(&r, &what);
        }
    }
    assert_eq!(
        w.items_of(&w.a).await,
        victim_before,
        "the victim's items changed"
    );
}

/// The tenant routes that page with a cursor: those whose operation in openapi.yaml takes a
/// `cursor` query parameter (routes.yaml says which routes are a tenant's).
fn tenant_list_routes() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let table = devtools::routes::RouteTable::load(&root).unwrap();
    let openapi: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(root.join("openapi.yaml")).unwrap()).unwrap();
    table
        .routes()
        .filter(|r| r.function.caller == devtools::routes::Caller::Tenant)
        .filter(|r| {
            let op = &openapi["paths"][r.path][r.method.to_ascii_lowercase().as_str()];
            op["parameters"].as_sequence().is_some_and(|ps| {
                ps.iter().any(|p| {
                    p["name"].as_str() == Some("cursor") && p["in"].as_str() == Some("query")
                })
            })
        })
        .map(|r| r.function.bin.clone())
        .collect()
}

#[tokio::test]
async fn cursors_from_another_tenant_route_or_tampered_are_400() {
    let w = World::new().await;
    let lists = tenant_list_routes();
    assert!(lists.len() >= 7, "{lists:?}");
    let lists: Vec<&str> = lists.iter().map(String::as_str).collect();
    // one genuine cursor per list route, for each tenant
    let mut cursors: HashMap<(String, &str), String> = HashMap::new();
    for t in [&w.a, &w.b] {
        for &bin in &lists {
            let auth = Auth::Tenant(t.clone());
            let r = call_with(&w, bin, &w.ids[t], &[("limit", "1")], t, t, &auth).await;
            assert_eq!(r.status, 200, "{bin}: {}", r.body);
            let c = r.body["nextCursor"]
                .as_str()
                .unwrap_or_else(|| panic!("{bin} gave no cursor"))
                .to_owned();
            cursors.insert((t.clone(), bin), c);
        }
    }
    for &bin in &lists {
        let b = Auth::Tenant(w.b.clone());
        let params = &w.ids[&w.b];
        let victim_cursor = &cursors[&(w.a.clone(), bin)];
        let own = &cursors[&(w.b.clone(), bin)];
        let mut tampered = own.clone().into_bytes();
        let mid = tampered.len() / 2;
        tampered[mid] = if tampered[mid] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        let mut attempts = vec![
            ("the victim's cursor", victim_cursor.clone()),
            ("a tampered cursor", tampered),
            ("a truncated cursor", own[..own.len() / 2].to_owned()),
            ("garbage", "%%%".to_owned()),
        ];
        for other in lists.iter().filter(|o| **o != bin) {
            attempts.push((
                "another route's cursor",
                cursors[&(w.b.clone(), *other)].clone(),
            ));
        }
        for (what, cursor) in attempts {
            let cursor = [("cursor", cursor.as_str())];
            let r = call_with(&w, bin, params, &cursor, &w.b, &w.b, &b).await;
            assert_4xx_problem(&r, &format!("{bin} with {what}"));
            assert_eq!(r.status, 400, "{bin} with {what}: {}", r.body);
            assert_nothing_of(&r, &w.a, &w.ids[&w.a], bin);
        }
    }
    w.assert_unchanged("a refused cursor wrote something").await;
}

/// The operator routes: onboarding, reading another tenant's record, usage or items, changing its
/// tier, offboarding it.
const OPERATOR_ROUTES: &[&str] = &[
    "onboard-tenant",
    "get-tenant",
    "update-tenant",
    "offboard-tenant",
    "export-tenant",
    "erase-tenant-user",
    "get-tenant-usage",
];

#[tokio::test]
async fn tenant_users_get_403_on_the_operator_only_routes_even_for_their_own_tenant() {
    let w = World::new().await;
    // (get-tenant serves a tenant its own record)
    for &bin in OPERATOR_ROUTES.iter().filter(|b| **b != "get-tenant") {
        for tenant in [&w.a, &w.b] {
            let mut params = w.ids[&w.b].clone();
            params.insert("tenantId".into(), tenant.clone());
            let r = call_as(&w, bin, &params, &w.b, &Auth::Tenant(w.b.clone())).await;
            let what = format!("{bin} for {tenant} by tenant user {}", w.b);
            assert_eq!(r.status, 403, "{what}: {}", r.body);
            assert_4xx_problem(&r, &what);
        }
    }
    w.assert_unchanged("a tenant user changed something").await;
}

#[tokio::test]
async fn a_self_made_admin_without_the_scope_is_refused_on_operator_routes() {
    // GIVEN the attacker wrote custom:role = platform-admin into their own profile (a custom
    // attribute a Cognito app client can write), or look-alike custom claims
    let w = World::new().await;
    let self_made = [
        Auth::TenantWithRole(w.b.clone(), "platform-admin".into()),
        Auth::TenantWithRole(w.b.clone(), "pooltable/admin".into()),
    ];
    for bin in OPERATOR_ROUTES {
        let mut params = w.ids[&w.b].clone();
        params.insert("tenantId".into(), w.a.clone());
        for auth in &self_made {
            // WHEN they call an operator route (the victim's record, or onboarding a tenant)
            let r = call_as(&w, bin, &params, &w.b, auth).await;
            // THEN 403 problem+json, nothing of the victim, nothing written
            let what = format!("{bin} as {auth:?}");
            assert_eq!(r.status, 403, "{what}: {}", r.body);
            assert_4xx_problem(&r, &what);
            assert_nothing_of(&r, &w.a, &w.ids[&w.a], &what);
        }
    }
    w.assert_unchanged("a self-made admin wrote something")
        .await;
    // AND the real boundary works: the scope, or the group, reads the victim's record
    let mut params = w.ids[&w.b].clone();
    params.insert("tenantId".into(), w.a.clone());
    for operator in [
        Auth::Operator(w.b.clone()),
        Auth::OperatorByGroup(w.b.clone()),
    ] {
        let r = call_as(&w, "get-tenant", &params, &w.b, &operator).await;
        assert_eq!(r.status, 200, "{operator:?}: {}", r.body);
    }
}

#[tokio::test]
async fn nobody_but_an_operator_can_re_shard_a_tenant() {
    // GIVEN two tenants with products and employees
    let w = World::new().await;
    let attackers = [
        Auth::Tenant(w.b.clone()),
        Auth::TenantWithRole(w.b.clone(), "platform-admin".into()),
        Auth::TenantWithRole(w.b.clone(), "pooltable/admin".into()),
    ];
    for victim in [&w.a, &w.b] {
        for auth in &attackers {
            // WHEN a tenant user (plain, or with a self-written admin role) asks to re-shard a tenant,
            // its own included
            let r =
                w.h.caller(auth)
                    .call(
                        "update-tenant",
                        &BTreeMap::from([("tenantId".to_owned(), victim.clone())]),
                        Some(json!({"shardCount": 7})),
                    )
                    .await;
            // THEN 403 problem+json, and no migration starts
            let what = format!("re-sharding {victim} as {auth:?}");
            assert_eq!(r.status, 403, "{what}: {}", r.body);
            assert_4xx_problem(&r, &what);
        }
    }
    w.assert_unchanged("a tenant user started a migration")
        .await;
}
