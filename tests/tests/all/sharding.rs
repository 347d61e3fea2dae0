//! Sharded tenant data against DynamoDB Local: onboarding, products with parallel scatter-gather,
//! employees and departments with atomic moves.

use shared::identity::keys::raw_key;
use std::collections::HashSet;
use std::sync::atomic::Ordering;

use futures::StreamExt;
use integration::{unique, Auth, Client, Harness, Phase, Resp};
use serde_json::json;
use shared::identity::ids::TenantId;
use shared::isolation::policy::{scoped_session_policy, Scope, TableLocation, TenantTables};

fn admin() -> Auth {
    Auth::Operator(unique("ops"))
}

async fn onboard_as(h: &Harness, who: &Auth, body: serde_json::Value) -> Resp {
    h.caller(who).onboard_tenant(body).await
}

async fn list_products(h: &Harness, tenant: &str, limit: u32, cursor: Option<&str>) -> Resp {
    let limit = limit.to_string();
    let mut q = vec![("limit", limit.as_str())];
    if let Some(c) = cursor {
        q.push(("cursor", c));
    }
    h.tenant(tenant).query(&q).query_tenant_products().await
}

async fn walk_products(h: &Harness, tenant: &str, limit: u32) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let r = list_products(h, tenant, limit, cursor.as_deref()).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let items = r.body["items"].as_array().unwrap();
        assert!(items.len() as u32 <= limit);
        for i in items {
            assert_eq!(
                i["document"]["owner"], tenant,
                "a product of another tenant was returned"
            );
            ids.push(i["productId"].as_str().unwrap().to_owned());
        }
        match r.body["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return ids,
        }
    }
}

#[tokio::test]
async fn onboarding_is_operator_only_validated_and_never_duplicated() {
    let h = Harness::new().await;
    let new = unique("newco");
    // a non-operator gets 403, and nothing is written
    onboard_as(
        &h,
        &Auth::Tenant(new.clone()),
        json!({"tenantId": new, "tier": "basic"}),
    )
    .await
    .assert_problem(403);
    // invalid shard counts and bodies get 400 naming the field
    for (body, field) in [
        (
            json!({"tenantId": new, "tier": "basic", "shardCount": 0}),
            "shardCount",
        ),
        (
            json!({"tenantId": new, "tier": "basic", "shardCount": 101}),
            "shardCount",
        ),
        (
            json!({"tenantId": new, "tier": "basic", "shardCount": "4"}),
            "shardCount",
        ),
        (json!({"tenantId": new, "tier": "gold"}), "tier"),
        (json!({"tenantId": "a#b", "tier": "basic"}), "tenantId"),
    ] {
        let r = onboard_as(&h, &admin(), body).await;
        r.assert_problem(400);
        assert_eq!(r.body["field"], field);
    }
    assert!(h.all_items().await.is_empty());
    // an operator onboards; a second time is 409
    let ops = admin();
    let r = onboard_as(
        &h,
        &ops,
        json!({"tenantId": new, "tier": "premium", "shardCount": 16}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["shardCount"], 16);
    onboard_as(&h, &ops, json!({"tenantId": new, "tier": "basic"}))
        .await
        .assert_problem(409);
    // the record was written with the NEW tenant's scoped credentials, an operator's session of the
    // tenant-operator role (the only one that writes a record), as moto recorded
    let location =
        TableLocation::from_role_arn(integration::ROLE_ARN, "us-east-1", &h.table).unwrap();
    let expected = scoped_session_policy(
        &TenantId::parse(&new).unwrap(),
        &location,
        &TenantTables::pooled(&h.table),
        Scope::Operator,
    )
    .unwrap();
    assert_eq!(h.recorded_operator_policies(&new).await, vec![expected]);
    assert!(h.recorded_policies(&new).await.is_empty());
    let Auth::Operator(ops_tenant) = &ops else {
        unreachable!()
    };
    assert!(
        h.recorded_policies(ops_tenant).await.is_empty()
            && h.recorded_operator_policies(ops_tenant).await.is_empty(),
        "the operator's own tenant was not used"
    );
    // reading: the tenant itself and an operator may; another tenant may not
    let get = |who: Auth| {
        let h = &h;
        let new = new.clone();
        async move { h.caller(&who).get_tenant(&new).await }
    };
    assert_eq!(get(Auth::Tenant(new.clone())).await.body["tier"], "premium");
    assert_eq!(get(admin()).await.status, 200);
    get(Auth::Tenant(unique("other"))).await.assert_problem(403);
}

#[tokio::test]
async fn products_need_an_onboarded_tenant() {
    let h = Harness::new().await;
    h.tenant(&unique("nobody"))
        .put_product("p1", json!({}))
        .await
        .assert_problem(403);
    assert!(h.all_items().await.is_empty());
}

#[tokio::test]
async fn two_thousand_products_over_16_shards_walk_exactly_once_and_stay_in_their_tenant() {
    // GIVEN a tenant with 16 shards and 2,000 products of ~12 KB (so a shard read of 100 items spans
    // more than one 1 MB DynamoDB page), and a second tenant with products of its own
    let (h, [a, b]) = Harness::with_tenants([("big", 16), ("small", 3)]).await;
    let padding = "x".repeat(12_000);
    let ids: Vec<String> = (0..2000).map(|i| format!("p-{i:05}")).collect();
    let results: Vec<u16> = futures::stream::iter(ids.iter())
        .map(|id| {
            let (h, a, padding) = (&h, &a, &padding);
            async move {
                h.tenant(a)
                    .put_product(id, json!({"owner": a, "padding": padding}))
                    .await
                    .status
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(results.iter().all(|s| *s == 201));
    h.tenant(&b)
        .put_new_products((0..50).map(|i| (format!("p-{i:05}"), json!({"owner": b}))))
        .await;
    // every shard holds some products
    let shards: HashSet<u32> = ids
        .iter()
        .map(|id| shared::identity::shard::shard_for(id, 16))
        .collect();
    assert_eq!(shards.len(), 16);

    // WHEN tenant A walks its catalog with several page sizes
    for limit in [100, 37] {
        let walked = walk_products(&h, &a, limit).await;
        // THEN every product comes exactly once, in productId order, and none of B's
        assert_eq!(walked, ids, "limit {limit}");
    }
    assert_eq!(walk_products(&h, &b, 25).await.len(), 50);

    // WHEN it walks the whole catalog unordered (`?order=unordered`), in pages of 1,000 and of 37
    for limit in [1000, 37] {
        h.requests.reset();
        let mut walked = walk_unordered(&h, &a, limit).await;
        let queries = h.requests.by_operation().get("Query").copied().unwrap_or(0);
        // THEN every product comes exactly once (in shard order), and none of B's
        walked.sort();
        assert_eq!(walked, ids, "unordered, limit {limit}");
        // AND with pages of 1,000 it sends at most 1.25x the Queries of reading each shard once,
        // paginated, with the same Limit (DynamoDB's 1 MB pages included)
        if limit == 1000 {
            let floor = raw_paginated_queries(&h, &a, 16, limit).await;
            assert!(
                queries as f64 <= floor as f64 * 1.25,
                "{queries} Queries against a floor of {floor}"
            );
        }
    }
}

/// Every product id of `tenant`, walked with `?order=unordered`.
async fn walk_unordered(h: &Harness, tenant: &str, limit: u32) -> Vec<String> {
    let limit = limit.to_string();
    let query = [("limit", limit.as_str()), ("order", "unordered")];
    let pages = h
        .tenant(tenant)
        .pages(&query, |c| c.query_tenant_products())
        .await;
    let mut ids = Vec::new();
    for page in &pages {
        for i in page.body["items"].as_array().unwrap() {
            assert_eq!(i["document"]["owner"], tenant);
        }
        ids.extend(page.ids("productId"));
    }
    ids
}

/// The Queries of reading every product shard of `tenant` once, paginated, with `limit`.
async fn raw_paginated_queries(h: &Harness, tenant: &str, shards: u32, limit: u32) -> usize {
    let t = TenantId::parse(tenant).unwrap();
    let mut queries = 0;
    for s in 0..shards {
        let mut start = None;
        loop {
            let out = h
                .admin
                .query()
                .table_name(&h.table)
                .key_condition_expression("PK = :pk AND begins_with(SK, :k)")
                .expression_attribute_values(
                    ":pk",
                    aws_sdk_dynamodb::types::AttributeValue::S(shared::identity::keys::shard_pk(
                        &t, "PRODUCT", s,
                    )),
                )
                .expression_attribute_values(
                    ":k",
                    aws_sdk_dynamodb::types::AttributeValue::S(
                        shared::identity::keys::entity_sk_prefix(&t, "PRODUCT"),
                    ),
                )
                .limit(limit as i32)
                .set_exclusive_start_key(start)
                .send()
                .await
                .unwrap();
            queries += 1;
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
    }
    queries
}

#[tokio::test]
async fn get_product_is_one_get_item_and_crud_round_trips() {
    let (h, t) = Harness::with_tenant("crud", 8).await;
    // created, then replaced
    for (price, status) in [(10, 201), (12, 200)] {
        let r = h
            .tenant(&t)
            .put_product("sku-1", json!({"owner": t, "price": price}))
            .await;
        assert_eq!(r.status, status, "price {price}: {}", r.body);
    }
    let get = || resp_get(&h, &t, "sku-1");
    h.requests.reset();
    let r = get().await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["document"]["price"], 12);
    assert_eq!(
        h.requests.by_operation(),
        [("GetItem".to_string(), 1)].into()
    );
    // the item sits on the shard the id hashes to
    let items = h.all_items().await;
    let product = items
        .iter()
        .find(|i| i["SK"].as_s().unwrap().ends_with("#PRODUCT#sku-1"))
        .unwrap();
    assert_eq!(
        product["PK"].as_s().unwrap(),
        &raw_key(
            &t,
            format!("PRODUCT#{}", shared::identity::shard::shard_for("sku-1", 8))
        )
    );
    // delete, then 404 on both
    let del = h.tenant(&t).delete_product("sku-1").await;
    assert_eq!(del.status, 204);
    get().await.assert_problem(404);
    // bad input
    h.tenant(&t)
        .put_product("sku-2", json!([1, 2]))
        .await
        .assert_problem(400);
    h.tenant(&t)
        .put_product("a#b", json!({}))
        .await
        .assert_problem(400);
    h.tenant(&t)
        .put_product("big", json!({"x": "y".repeat(70_000)}))
        .await
        .assert_problem(413);
}

async fn resp_get(h: &Harness, t: &str, id: &str) -> Resp {
    h.tenant(t).get_product(id).await
}

#[tokio::test]
async fn a_page_over_16_shards_queries_them_all_concurrently() {
    // GIVEN a 16-shard tenant with a few products, its shard count and credentials cached
    let (h, t) = Harness::with_tenant("par", 16).await;
    h.tenant(&t)
        .put_new_products((0..40).map(|i| (format!("p{i}"), json!({"owner": t}))))
        .await;
    list_products(&h, &t, 10, None).await;
    h.requests.reset();
    // WHEN one page is listed
    let r = list_products(&h, &t, 10, None).await;
    assert_eq!(r.status, 200);
    // THEN 16 Queries went out and all 16 were in flight at once (no wall-clock involved)
    assert_eq!(
        h.requests.by_operation(),
        [("Query".to_string(), 16)].into()
    );
    assert_eq!(h.requests.peak_in_flight.load(Ordering::SeqCst), 16);
}

#[tokio::test]
async fn product_cursors_are_bound_to_tenant_and_route() {
    let (h, [a, b]) = Harness::with_tenants([("ca", 4), ("cb", 4)]).await;
    h.tenant(&a)
        .put_new_products((0..10).map(|i| (format!("p{i}"), json!({"owner": a}))))
        .await;
    let cursor = list_products(&h, &a, 3, None).await.body["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    list_products(&h, &b, 3, None).await; // caches b's shard count
    h.requests.reset();
    list_products(&h, &b, 3, Some(&cursor))
        .await
        .assert_problem(400);
    list_products(&h, &a, 3, Some(&format!("{cursor}x")))
        .await
        .assert_problem(400);
    let employees = h
        .tenant(&a)
        .query(&[("cursor", &cursor)])
        .list_employees()
        .await;
    employees.assert_problem(400);
    assert_eq!(h.requests.total(), 0);
}

/// A tenant's HR routes.
struct Hr<'a>(Client<'a>);

impl Hr<'_> {
    async fn put_department(&self, id: &str) -> Resp {
        self.0
            .put_department(id, json!({"name": format!("Dept {id}")}))
            .await
    }
    async fn put_employee(&self, id: &str, dept: &str) -> Resp {
        self.0
            .put_employee(
                id,
                json!({"name": format!("Employee {id}"), "departmentId": dept}),
            )
            .await
    }
    async fn members(&self, dept: &str) -> Vec<String> {
        let r = self.0.list_department_employees(dept).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.ids("employeeId")
    }
    async fn employee(&self, id: &str) -> Resp {
        self.0.get_employee(id).await
    }
}

#[tokio::test]
async fn employees_and_departments_round_trip_and_list() {
    let (h, t) = Harness::with_tenant("hr", 4).await;
    let hr = Hr(h.tenant(&t));
    for d in ["eng", "ops"] {
        assert_eq!(hr.put_department(d).await.status, 201);
    }
    for i in 0..12 {
        assert_eq!(
            hr.put_employee(&format!("e{i:02}"), if i % 2 == 0 { "eng" } else { "ops" })
                .await
                .status,
            201
        );
    }
    hr.put_employee("e99", "nowhere").await.assert_problem(400);
    assert_eq!(hr.members("eng").await.len(), 6);
    assert_eq!(hr.employee("e03").await.body["departmentId"], "ops");
    let dept = hr.0.get_department("eng").await;
    assert_eq!(dept.body["name"], "Dept eng");
    // the two kinds share the HR shards but list separately
    let list = |q: &'static str| {
        let client = hr.0.clone();
        async move {
            let r = if q == "employees" {
                client.query(&[("limit", "5")]).list_employees().await
            } else {
                client.list_departments().await
            };
            assert_eq!(r.status, 200, "{}", r.body);
            r
        }
    };
    let page = list("employees").await;
    assert_eq!(page.body["items"].as_array().unwrap().len(), 5);
    assert_eq!(page.body["items"][0]["employeeId"], "e00");
    assert_eq!(
        list("departments").await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // delete removes the membership too
    let del = hr.0.delete_employee("e00").await;
    assert_eq!(del.status, 204);
    assert_eq!(hr.members("eng").await.len(), 5);
    hr.employee("e00").await.assert_problem(404);
}

#[tokio::test]
async fn moving_an_employee_is_atomic_even_when_a_fault_strikes() {
    // GIVEN an employee in department A
    let (h, t) = Harness::with_tenant("move", 4).await;
    let hr = Hr(h.tenant(&t));
    hr.put_department("a").await;
    hr.put_department("b").await;
    assert_eq!(hr.put_employee("ada", "a").await.status, 201);

    // WHEN the move's transaction never reaches DynamoDB
    h.faults.arm("TransactWriteItems", Phase::BeforeSend);
    let failed = hr.put_employee("ada", "b").await;
    // THEN the caller gets a 5xx problem, and ada is still wholly in A
    assert!(failed.status >= 500, "{}", failed.body);
    assert_eq!(
        (hr.members("a").await, hr.members("b").await),
        (vec!["ada".to_string()], vec![])
    );
    assert_eq!(hr.employee("ada").await.body["departmentId"], "a");

    // WHEN the transaction runs but its answer is lost
    h.faults.arm("TransactWriteItems", Phase::AfterSend);
    let lost = hr.put_employee("ada", "b").await;
    assert!(lost.status >= 500, "{}", lost.body);
    // THEN ada is wholly in B: never in both, never in neither
    assert_eq!(
        (hr.members("a").await, hr.members("b").await),
        (vec![], vec!["ada".to_string()])
    );
    assert_eq!(hr.employee("ada").await.body["departmentId"], "b");

    // AND a normal move back works
    assert_eq!(hr.put_employee("ada", "a").await.status, 200);
    assert_eq!(
        (hr.members("a").await, hr.members("b").await),
        (vec!["ada".to_string()], vec![])
    );
}

#[tokio::test]
async fn a_walk_cursor_in_the_format_before_walks_were_bound_to_the_layout_goes_on_in_id_order_and_is_not_issued_again(
) {
    // GIVEN a 4-shard tenant with 60 products
    let (h, tenant) = Harness::with_tenant("legacywalk", 4).await;
    let client = h.tenant(&tenant);
    let ids: Vec<String> = (0..60).map(|i| format!("p{i:02}")).collect();
    client
        .put_new_products(ids.iter().map(|id| (id.clone(), json!({ "n": id }))))
        .await;
    // AND the first page of an unordered walk, its cursor turned into the format walks had before
    // they were bound to the layout: the same position, signed for `<route>?order=unordered`
    let walk = [("limit", "20"), ("order", "unordered")];
    let first = client.clone().query(&walk).query_tenant_products().await;
    assert_eq!(first.status, 200, "{}", first.body);
    let current = first.body["nextCursor"].as_str().expect("a next page");
    let (keys, t) = (
        integration::test_cursor_keys(),
        TenantId::parse(&tenant).unwrap(),
    );
    let route = shared::identity::cursor::signed_route(&keys, &t, current).unwrap();
    let position =
        shared::identity::cursor::decode(&keys, &t, &route, current, |_, _| true).unwrap();
    let legacy_route = format!("{}?order=unordered", route.split('?').next().unwrap());
    let legacy = shared::identity::cursor::encode(&keys, &t, &legacy_route, &position);

    // WHEN the walk goes on from that cursor, page after page
    let mut walked = first.ids("productId");
    let mut cursor = Some(legacy);
    let mut pages = 0;
    while let Some(c) = cursor.take() {
        let page = client
            .clone()
            .query(&walk)
            .query(&[("cursor", c.as_str())])
            .query_tenant_products()
            .await;
        assert_eq!(page.status, 200, "{}", page.body);
        walked.extend(page.ids("productId"));
        cursor = page.body["nextCursor"].as_str().map(str::to_owned);
        // THEN no cursor it is given back is in the old format
        if let Some(next) = &cursor {
            let signed = shared::identity::cursor::signed_route(&keys, &t, next).unwrap();
            assert_ne!(signed, legacy_route, "the old format was issued again");
        }
        pages += 1;
        assert!(pages < 20, "the walk does not end");
    }
    // AND every product came exactly once
    walked.sort();
    assert_eq!(walked, ids);
}
