//! The request path end to end, against DynamoDB Local and moto: claims → scoped credentials →
//! guard → DynamoDB → response.

use shared::identity::keys::{primary_key, raw_key};
use std::sync::Arc;

use integration::api::NO_PATH;
use integration::{unique, Auth, Harness};
use serde_json::json;
use shared::identity::ids::TenantId;
use shared::isolation::policy::{session_policy, TableLocation};

async fn create(h: &Harness, tenant: &str, customer: &str) -> String {
    let r = h
        .tenant(tenant)
        .create_session(json!({"customerId": customer}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["sessionId"].as_str().unwrap().to_owned()
}

async fn get(h: &Harness, tenant: &Auth, id: &str) -> integration::Resp {
    h.caller(tenant).get_session_by_session_id(id).await
}

#[tokio::test]
async fn create_then_get_returns_the_session() {
    // GIVEN a tenant
    let (h, tenant) = Harness::with_tenant("acme", 1).await;
    // WHEN it creates a session and reads it back
    let id = create(&h, &tenant, "cust-1").await;
    let r = get(&h, &Auth::Tenant(tenant.clone()), &id).await;
    // THEN the session comes back whole
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["sessionId"], id.as_str());
    assert_eq!(r.body["customerId"], "cust-1");
    assert!(r.body["lastLoginTime"].as_str().unwrap().ends_with('Z'));
    // AND the stored item is under the tenant's prefix on both keys
    let items = h.data_items().await;
    assert_eq!(items.len(), 1);
    let prefix = raw_key(&tenant, "");
    for key in ["PK", "SK"] {
        assert!(items[0][key].as_s().unwrap().starts_with(&prefix));
    }
    assert!(items[0].contains_key("expiresAt"));
}

#[tokio::test]
async fn another_tenants_session_id_is_not_found() {
    // GIVEN tenant A's session
    let (h, [a, b]) = Harness::with_tenants([("a", 1), ("b", 1)]).await;
    let id = create(&h, &a, "cust-1").await;
    // WHEN tenant B asks for it
    let r = get(&h, &Auth::Tenant(b), &id).await;
    // THEN B gets 404 problem+json
    r.assert_problem(404);
}

#[tokio::test]
async fn a_request_without_a_tenant_claim_is_401_and_touches_nothing() {
    let h = Harness::new().await;
    let r = h
        .anonymous()
        .create_session(json!({"customerId": "c"}))
        .await;
    r.assert_problem(401);
    assert_eq!(h.requests.total(), 0);
    assert!(h.data_items().await.is_empty());
}

#[tokio::test]
async fn moto_recorded_exactly_the_generated_policy_for_each_tenant() {
    // GIVEN two tenants that each make a request
    let (h, [a, b]) = Harness::with_tenants([("pa", 1), ("pb", 1)]).await;
    create(&h, &a, "c").await;
    create(&h, &b, "c").await;
    // THEN the policy moto stored for each AssumeRole is the generator's output, byte for byte
    let location =
        TableLocation::from_role_arn(integration::ROLE_ARN, "us-east-1", &h.table).unwrap();
    for t in [&a, &b] {
        let expected = session_policy(&TenantId::parse(t).unwrap(), &location).unwrap();
        assert_eq!(h.recorded_policies(t).await, vec![expected]);
    }
}

#[tokio::test]
async fn fifty_concurrent_requests_for_one_tenant_make_one_assume_role() {
    // GIVEN a tenant with no cached credentials
    let h = Arc::new(Harness::new().await);
    // (onboarded by an operator in another container, so this one's cache stays cold)
    let ops = h.another_container().await;
    let tenant = integration::onboarded(&ops, "burst").await;
    let assumed_before = h.recorded_policies(&tenant).await.len();
    // WHEN 50 requests for it arrive together
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let h = h.clone();
            let tenant = tenant.clone();
            tokio::spawn(async move {
                let created = h.tenant(&tenant).call(
                    "create-session",
                    &NO_PATH,
                    Some(json!({"customerId": format!("c{i}")})),
                );
                created.await.status
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), 201);
    }
    // THEN moto saw exactly one more AssumeRole for it
    assert_eq!(h.recorded_policies(&tenant).await.len(), assumed_before + 1);
}

#[tokio::test]
async fn the_guard_refuses_another_tenants_key_before_anything_is_sent() {
    // GIVEN tenant A's scoped client
    let h = Harness::new().await;
    let a = TenantId::parse(&integration::onboarded(&h, "ga").await).unwrap();
    let b = unique("gb");
    let db = h.app.db(&a).await.unwrap();
    h.requests.reset();
    // WHEN a hand-built GetItem and PutItem carry tenant B's key
    // (with the SDK's own builders, not TenantDb's: the guard alone must refuse them)
    let foreign = primary_key(raw_key(&b, "SESSION#x"), raw_key(&b, "CUSTOMER#c"));
    let (client, table) = (db.sdk_client(), &*db.table);
    let get = client
        .get_item()
        .table_name(table)
        .set_key(Some(foreign.clone()))
        .send()
        .await;
    let put = client
        .put_item()
        .table_name(table)
        .set_item(Some(foreign))
        .send()
        .await;
    let scan = client.scan().table_name(table).send().await;
    // THEN each is refused by the guard, and no request went on the wire
    for err in [
        get.map(|_| ()).unwrap_err().into_service_error_string(),
        put.map(|_| ()).unwrap_err().into_service_error_string(),
        scan.map(|_| ()).unwrap_err().into_service_error_string(),
    ] {
        assert!(err.contains("isolation guard refused"), "{err}");
    }
    assert_eq!(h.requests.total(), 0);
    assert!(h.data_items().await.is_empty());
}

trait ErrString {
    fn into_service_error_string(self) -> String;
}

impl<E: std::error::Error + 'static> ErrString for E {
    fn into_service_error_string(self) -> String {
        let mut out = String::new();
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(&self);
        while let Some(e) = cur {
            out.push_str(&e.to_string());
            out.push_str(" / ");
            cur = e.source();
        }
        assert!(shared::isolation::guard::is_guard_violation(&self));
        out
    }
}

#[tokio::test]
async fn every_body_route_names_the_field_of_the_wrong_type_in_valid_json() {
    // GIVEN every route that takes a body (openapi.yaml's requestBody operations), each with valid
    // JSON where one field has the wrong type
    let cases: &[(&str, serde_json::Value, Option<&str>)] = &[
        (
            "create-session",
            json!({"customerId": 5}),
            Some("customerId"),
        ),
        (
            "onboard-tenant",
            json!({"tenantId": "x", "tier": 5}),
            Some("tier"),
        ),
        ("update-tenant", json!({"tier": 5}), Some("tier")),
        ("update-tenant", json!({"status": true}), Some("status")),
        ("put-product", json!([1, 2]), None),
        ("put-department", json!({"name": 5}), Some("name")),
        (
            "put-employee",
            json!({"name": "a", "departmentId": 7}),
            Some("departmentId"),
        ),
        (
            "put-user",
            json!({"name": "a", "email": false}),
            Some("email"),
        ),
        (
            "create-order",
            json!({"date": "2026-01-01", "amount": "x", "items": []}),
            Some("amount"),
        ),
        (
            "put-integration-token",
            json!({"token": 5, "expiresAt": 1}),
            Some("token"),
        ),
        (
            "create-import",
            json!({"kind": 5, "items": []}),
            Some("kind"),
        ),
        ("restore-tenant", json!({"from": 5}), Some("from")),
    ];
    let spec: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.yaml")).unwrap(),
    )
    .unwrap();
    let with_bodies: std::collections::BTreeSet<String> = spec["paths"]
        .as_mapping()
        .unwrap()
        .values()
        .flat_map(|ops| ops.as_mapping().unwrap().values())
        .filter(|op| !op["requestBody"].is_null())
        .map(|op| op["operationId"].as_str().unwrap().to_owned())
        .collect();
    let covered: std::collections::BTreeSet<String> =
        cases.iter().map(|(bin, _, _)| bin.to_string()).collect();
    assert_eq!(
        covered, with_bodies,
        "a body route without a wrong-type case"
    );
    let (h, tenant) = Harness::with_tenant("shape", 1).await;
    let before = h.all_items().await.len();
    for (bin, body, field) in cases {
        let auth = match bin.starts_with("onboard")
            || bin.starts_with("update-tenant")
            || bin.starts_with("restore")
        {
            true => integration::operator(),
            false => Auth::Tenant(tenant.clone()),
        };
        let ids = [
            ("tenantId", tenant.as_str()),
            ("productId", "p"),
            ("departmentId", "d"),
            ("employeeId", "e"),
            ("userId", "u"),
            ("service", "svc"),
        ];
        // WHEN it is sent
        let r = h.caller(&auth).call(bin, &ids, Some(body.clone())).await;
        // THEN 400 problem+json that names the field and the type expected, never "not valid JSON"
        r.assert_problem(400);
        let detail = r.body["detail"].as_str().unwrap();
        assert!(!detail.contains("not valid JSON"), "{bin}: {detail}");
        assert!(detail.contains("expected"), "{bin}: {detail}");
        if let Some(field) = field {
            assert_eq!(r.body["field"], *field, "{bin}: {}", r.body);
        }
    }
    // AND nothing was written
    assert_eq!(h.all_items().await.len(), before);
}

#[tokio::test]
async fn making_the_table_again_takes_the_templates_table_there_and_refuses_one_of_another_shape() {
    use aws_sdk_dynamodb::types::ProjectionType;
    // GIVEN the template's table made once, with its stream and without
    let h = Harness::new().await;
    let def = devtools::table_from_template(&devtools::default_template_path()).unwrap();
    assert!(
        def.stream_view_type.is_some(),
        "the template's table has a stream"
    );
    let (with_stream, without) = (unique("again-stream"), unique("again-plain"));
    devtools::create_table(&h.admin, &with_stream, &def)
        .await
        .unwrap();
    let plain = def.clone().without_stream();
    devtools::create_table(&h.admin, &without, &plain)
        .await
        .unwrap();

    // WHEN each is made again as it was (a retried CreateTable finding its own table)
    // THEN it is taken as made
    devtools::create_table(&h.admin, &with_stream, &def)
        .await
        .unwrap();
    devtools::create_table(&h.admin, &without, &plain)
        .await
        .unwrap();

    // WHEN one is asked with another stream, or an index of another projection
    let mut other_projection = def.clone();
    let catalog = other_projection.gsis[1].clone();
    other_projection.gsis[1] = aws_sdk_dynamodb::types::GlobalSecondaryIndex::builder()
        .index_name(catalog.index_name())
        .set_key_schema(Some(catalog.key_schema().to_vec()))
        .projection(
            aws_sdk_dynamodb::types::Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()
        .unwrap();
    // THEN each is refused naming the table, never taken as the template's
    for (name, asked) in [
        (&without, &def),
        (&with_stream, &plain),
        (&with_stream, &other_projection),
    ] {
        let refused = devtools::create_table(&h.admin, name, asked)
            .await
            .expect_err("a table of another shape is not taken");
        assert!(
            refused.to_string().contains(name.as_str())
                || format!("{refused:?}").contains(name.as_str()),
            "{refused:?}"
        );
    }
}

#[tokio::test]
async fn a_query_parameter_given_twice_is_refused_naming_it_on_every_route() {
    // GIVEN every query parameter of every route (openapi.yaml), each given twice with two values
    // (API Gateway's single-value view holds the last, lambda_http the first: a cache key, a WAF
    // rule or a log could read one while the handler read the other)
    let spec: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.yaml")).unwrap(),
    )
    .unwrap();
    let resolve = |p: &serde_yaml::Value| match p["$ref"].as_str() {
        Some(r) => spec["components"]["parameters"][r.rsplit('/').next().unwrap()].clone(),
        None => p.clone(),
    };
    let values = |name: &str| match name {
        "limit" => ["5", "6"],
        "order" => ["id", "unordered"],
        "cursor" => ["c1", "c2"],
        "email" => ["a@example.com", "b@example.com"],
        "from" => ["2026-01-01", "2026-01-02"],
        "to" => ["2026-01-31", "2026-01-30"],
        "lanes" => ["2", "3"],
        other => panic!("no values for query parameter {other}: add them here"),
    };
    let (h, tenant) = Harness::with_tenant("twice", 1).await;
    let before = h.all_items().await;
    let mut sent = 0;
    for op in spec["paths"]
        .as_mapping()
        .unwrap()
        .values()
        .flat_map(|ops| ops.as_mapping().unwrap().values())
    {
        let bin = op["operationId"].as_str().unwrap();
        let params: Vec<serde_yaml::Value> = op["parameters"]
            .as_sequence()
            .into_iter()
            .flatten()
            .map(resolve)
            .filter(|p| p["in"] == "query")
            .collect();
        let f = integration::routes::route_table().function(bin).unwrap();
        let auth = match f.caller {
            devtools::routes::Caller::Operator => integration::operator(),
            _ => Auth::Tenant(tenant.clone()),
        };
        let mut ids: Vec<(String, String)> = f
            .sample
            .path
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().unwrap().to_owned(),
                    v.as_str().unwrap().to_owned(),
                )
            })
            .filter(|(k, _)| k != "tenantId")
            .collect();
        ids.push(("tenantId".into(), tenant.clone()));
        let ids: Vec<(&str, &str)> = ids.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let body = f
            .sample
            .body
            .as_deref()
            .map(|b| serde_json::from_str(b).unwrap());
        for twice in &params {
            let name = twice["name"].as_str().unwrap();
            let [first, second] = values(name);
            let mut query: Vec<(&str, &str)> = params
                .iter()
                .filter(|p| p["required"] == true && p["name"] != name)
                .map(|p| {
                    (
                        p["name"].as_str().unwrap(),
                        values(p["name"].as_str().unwrap())[0],
                    )
                })
                .collect();
            query.extend([(name, first), (name, second)]);
            // WHEN the route is called with it
            let r = h
                .caller(&auth)
                .query(&query)
                .call(bin, ids.as_slice(), body.clone())
                .await;
            // THEN 400 problem+json naming the parameter
            r.assert_problem_naming(400, "more than once");
            assert_eq!(r.body["field"], name, "{bin}: {}", r.body);
            sent += 1;
        }
    }
    assert!(
        sent >= 20,
        "only {sent} query parameters found in openapi.yaml"
    );
    // AND nothing was written
    assert_eq!(h.all_items().await, before);
}
