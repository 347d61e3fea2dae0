//! Every function's DynamoDB requests, as routes.yaml declares them (`doc.requests`, README's
//! "DynamoDB requests" column): for each function in routes.yaml, its common case is set up
//! (GIVEN), sent once through its handler (WHEN), and what that handler sent, by operation, equals
//! the declared counts exactly (THEN). The list is routes.yaml's: a function with no case here
//! fails the test by name.

use std::collections::{BTreeMap, HashMap};

/// DynamoDB requests sent, by operation.
type Sent = HashMap<String, usize>;

use integration::import_queue::ImportQueues;
use integration::routes::{params, route_table};
use integration::{onboard, onboarded_on_shards, unique, Auth, Harness, Resp};
use serde_json::{json, Value};

/// The shards of the test tenant (the samples' `acme` has as many): a `<k> per shard` count is k × 4.
const SHARDS: u32 = 4;

/// One test table, a tenant of [`SHARDS`] shards on it, and an operator of an onboarded tenant of
/// its own (an operator whose tenant has no record sends one more Query a call: whether that
/// tenant was offboarded).
struct World {
    h: Harness,
    tenant: String,
    operator: Auth,
    queues: ImportQueues,
}

/// A function's common case, ready to send: the route's call, with what it answers.
struct Case {
    params: BTreeMap<String, String>,
    query: Vec<(&'static str, String)>,
    body: Option<Value>,
    auth: Auth,
    /// When not the route's success status.
    status: Option<u16>,
}

impl Case {
    fn new(auth: &Auth) -> Self {
        Self {
            params: BTreeMap::new(),
            query: Vec::new(),
            body: None,
            auth: auth.clone(),
            status: None,
        }
    }
    fn at(mut self, pairs: &[(&str, &str)]) -> Self {
        self.params = params(pairs);
        self
    }
    fn query(mut self, pairs: &[(&'static str, &str)]) -> Self {
        self.query = pairs.iter().map(|(k, v)| (*k, v.to_string())).collect();
        self
    }
    fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }
    fn answers(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }
}

/// Today, by the test clock (`YYYY-MM-DD`).
fn today(h: &Harness) -> String {
    use shared::identity::clock::Clock;
    shared::identity::clock::rfc3339(h.clock.now_millis())[..10].to_owned()
}

impl World {
    async fn new() -> Self {
        let mut h = Harness::new().await;
        // The shared quota window's requests get 2 s, not the deployed 200 ms: one that runs out on
        // a loaded machine (the tests beside this one) leaves the window degraded, and the next
        // admission reserves instead of deciding alone, a request more than declared.
        h.app.limiter = shared::store::quota::limiter::RateLimiter::default()
            .with_budget(std::time::Duration::from_secs(2));
        let tenant = onboarded_on_shards(&h, "counted", SHARDS).await;
        let ops = onboarded_on_shards(&h, "ops", 1).await;
        let queues = ImportQueues::create(5, 30).await;
        Self {
            h,
            tenant,
            operator: Auth::Operator(ops),
            queues,
        }
    }

    fn me(&self) -> Auth {
        Auth::Tenant(self.tenant.clone())
    }

    /// Sends `bin` as the tenant (setup), and returns its answer, which must be a success.
    async fn given(&self, bin: &str, at: &[(&str, &str)], body: Option<Value>) -> Resp {
        let r = self.h.caller(&self.me()).call(bin, at, body).await;
        assert!(
            (200..300).contains(&r.status),
            "GIVEN {bin}: {} {}",
            r.status,
            r.body
        );
        r
    }

    async fn product(&self, id: &str) {
        self.given(
            "put-product",
            &[("productId", id)],
            Some(json!({"name": id})),
        )
        .await;
    }

    async fn department(&self, id: &str) {
        self.given(
            "put-department",
            &[("departmentId", id)],
            Some(json!({"name": id})),
        )
        .await;
    }

    async fn employee(&self, id: &str, department: &str) {
        self.department(department).await;
        self.given(
            "put-employee",
            &[("employeeId", id), ("departmentId", department)],
            Some(json!({"name": id, "departmentId": department})),
        )
        .await;
    }

    async fn user(&self, id: &str) {
        self.given(
            "put-user",
            &[("userId", id)],
            Some(json!({"name": id, "email": format!("{id}@example.com")})),
        )
        .await;
    }

    /// A user with one order, dated today.
    async fn order(&self, user: &str, order: &str) {
        self.user(user).await;
        let body = json!({"orderId": order, "date": today(&self.h), "amount": 5,
            "items": [{"itemId": "i1", "sku": "s", "qty": 1, "price": 5}]});
        self.given("create-order", &[("userId", user)], Some(body))
            .await;
    }

    async fn session(&self, customer: &str, parent: Option<&str>) -> String {
        let mut body = json!({"customerId": customer});
        if let Some(p) = parent {
            body["parentSessionId"] = json!(p);
        }
        let r = self.given("create-session", &[], Some(body)).await;
        r.body["sessionId"].as_str().unwrap().to_owned()
    }

    fn import_body(id: &str) -> Value {
        json!({"kind": "products", "items": [{"productId": id, "document": {"name": id}}]})
    }

    async fn import(&self, id: &str) -> String {
        let r = self
            .given("create-import", &[], Some(Self::import_body(id)))
            .await;
        r.body["importId"].as_str().unwrap().to_owned()
    }

    /// A fresh tenant of [`SHARDS`] shards, for the operator routes that change one.
    async fn other_tenant(&self) -> String {
        onboarded_on_shards(&self.h, "other", SHARDS).await
    }

    /// The common case of route `bin`, set up; None when this file has none.
    async fn common_case(&self, bin: &str) -> Option<Case> {
        let me = &self.me();
        let case = match bin {
            "onboard-tenant" => {
                let id = unique("new");
                Case::new(&self.operator)
                    .body(json!({"tenantId": id, "tier": "standard", "shardCount": SHARDS}))
            }
            "get-tenant" => Case::new(me).at(&[("tenantId", &self.tenant)]),
            "update-tenant" => {
                let t = self.other_tenant().await;
                Case::new(&self.operator)
                    .at(&[("tenantId", &t)])
                    .body(json!({"tier": "premium"}))
            }
            "export-tenant" => {
                let t = self.other_tenant().await;
                let r = self
                    .h
                    .tenant(&t)
                    .put_product("p", json!({"name": "p"}))
                    .await;
                assert_eq!(r.status, 201, "{}", r.body);
                Case::new(&self.operator)
                    .at(&[("tenantId", &t)])
                    .query(&[("limit", "100")])
            }
            "offboard-tenant" => {
                let t = self.other_tenant().await;
                Case::new(&self.operator)
                    .at(&[("tenantId", &t)])
                    .answers(202)
            }
            "restore-tenant" => {
                let t = self.other_tenant().await;
                let source = self.h.snapshot(&unique("counts")).await;
                Case::new(&self.operator)
                    .at(&[("tenantId", &t)])
                    .body(json!({"from": {"table": source}}))
                    .answers(202)
            }
            "put-product" => Case::new(me)
                .at(&[("productId", "p-new")])
                .body(json!({"name": "new"})),
            "get-product" => {
                self.product("p-get").await;
                Case::new(me).at(&[("productId", "p-get")])
            }
            "query-tenant-products" => {
                self.product("p-list").await;
                Case::new(me).query(&[("limit", "25")])
            }
            "delete-product" => {
                self.product("p-del").await;
                Case::new(me).at(&[("productId", "p-del")])
            }
            "put-department" => Case::new(me)
                .at(&[("departmentId", "d-new")])
                .body(json!({"name": "new"})),
            "put-employee" => {
                self.department("d-put").await;
                Case::new(me)
                    .at(&[("employeeId", "e-new")])
                    .body(json!({"name": "new", "departmentId": "d-put"}))
            }
            "get-employee" => {
                self.employee("e-get", "d-get").await;
                Case::new(me).at(&[("employeeId", "e-get")])
            }
            "get-department" => {
                self.department("d-get").await;
                Case::new(me).at(&[("departmentId", "d-get")])
            }
            "list-employees" | "list-departments" => {
                self.employee("e-list", "d-list").await;
                Case::new(me).query(&[("limit", "25")])
            }
            "list-department-employees" => {
                self.employee("e-members", "d-members").await;
                Case::new(me).at(&[("departmentId", "d-members")])
            }
            "delete-employee" => {
                self.employee("e-del", "d-del").await;
                Case::new(me).at(&[("employeeId", "e-del")])
            }
            "put-user" => Case::new(me)
                .at(&[("userId", "u-new")])
                .body(json!({"name": "new", "email": "new@example.com"})),
            "get-user" => {
                self.order("u-get", "o-get").await;
                Case::new(me).at(&[("userId", "u-get")])
            }
            "find-user-by-email" => {
                self.user("u-find").await;
                Case::new(me).query(&[("email", "u-find@example.com")])
            }
            "create-order" => {
                self.user("u-order").await;
                Case::new(me).at(&[("userId", "u-order")]).body(json!({
                    "orderId": "o-new", "date": today(&self.h), "amount": 5,
                    "items": [{"itemId": "i1", "sku": "s", "qty": 1, "price": 5}]
                }))
            }
            "get-order" => {
                self.order("u-order-get", "o-read").await;
                Case::new(me).at(&[("orderId", "o-read")])
            }
            "list-tenant-orders" => {
                self.order("u-orders", "o-list").await;
                let day = today(&self.h);
                Case::new(me).query(&[("from", &day), ("to", &day)])
            }
            "erase-user" => {
                self.user("u-erase").await;
                Case::new(me).at(&[("userId", "u-erase")])
            }
            "erase-tenant-user" => {
                self.user("u-erase-op").await;
                Case::new(&self.operator)
                    .at(&[("tenantId", &self.tenant), ("userId", "u-erase-op")])
            }
            "create-transfer-code" => {
                self.user("u-code").await;
                Case::new(me).at(&[("userId", "u-code")])
            }
            "redeem-transfer-code" => {
                self.user("u-redeem").await;
                let r = self
                    .given("create-transfer-code", &[("userId", "u-redeem")], None)
                    .await;
                let code = r.body["code"].as_str().unwrap().to_owned();
                Case::new(me).at(&[("code", &code)])
            }
            "put-integration-token" => Case::new(me).at(&[("service", "github")]).body(json!({
                "token": "tok", "expiresAt": integration::real_now_millis() / 1000 + 3600
            })),
            "get-integration-token" => {
                let expires = integration::real_now_millis() / 1000 + 3600;
                self.given(
                    "put-integration-token",
                    &[("service", "slack")],
                    Some(json!({"token": "tok", "expiresAt": expires})),
                )
                .await;
                Case::new(me).at(&[("service", "slack")])
            }
            "create-import" => {
                // Not the tenant's first import, which also makes its import key (+1 GetItem, +1 PutItem)
                self.import("p-imported-before").await;
                Case::new(me).body(Self::import_body("p-imported"))
            }
            "get-import" => {
                let id = self.import("p-import-get").await;
                Case::new(me).at(&[("importId", &id)])
            }
            "get-usage" => {
                let day = today(&self.h);
                Case::new(me).query(&[("from", &day), ("to", &day)])
            }
            "get-tenant-usage" => {
                let day = today(&self.h);
                Case::new(&self.operator)
                    .at(&[("tenantId", &self.tenant)])
                    .query(&[("from", &day), ("to", &day)])
            }
            "create-session" => Case::new(me).body(json!({"customerId": "c-new"})),
            "get-session-by-session-id" | "get-child-sessions-by-session-id" => {
                let root = self.session("c-get", None).await;
                Case::new(me).at(&[("sessionId", &root)])
            }
            "expire-session" => {
                let root = self.session("c-expire", None).await;
                self.session("c-expire", Some(&root)).await;
                Case::new(me).at(&[("sessionId", &root)]).answers(204)
            }
            "get-session-by-child-session-id" => {
                let root = self.session("c-child", None).await;
                let child = self.session("c-child", Some(&root)).await;
                Case::new(me).at(&[("childSessionId", &child)])
            }
            "get-last-login-time-by-customer-id" | "get-sessions-by-customer-id" => {
                self.session("c-login", None).await;
                Case::new(me).at(&[("customerId", "c-login")])
            }
            "get-session-id-by-customer-id" => {
                let root = self.session("c-of", None).await;
                Case::new(me).at(&[("customerId", "c-of"), ("sessionId", &root)])
            }
            _ => return None,
        };
        Some(case)
    }

    /// Sends route `bin`'s case through its handler, as the tests' dispatch does.
    async fn send(&self, bin: &str, case: &Case) -> Resp {
        let query: Vec<(&str, &str)> = case.query.iter().map(|(k, v)| (*k, v.as_str())).collect();
        if bin == "create-import" {
            // Through this file's queue, which the import consumer's case reads.
            let posted =
                self.h
                    .caller(&case.auth)
                    .query(&query)
                    .call(bin, &case.params, case.body.clone());
            return integration::sending_to(self.queues.producer(), posted).await;
        }
        self.h
            .caller(&case.auth)
            .query(&query)
            .call(bin, &case.params, case.body.clone())
            .await
    }

    /// Runs the common case of the triggered function `bin` (GIVEN and WHEN) and returns what its
    /// handler sent; None when this file has none.
    async fn run_triggered(&self, bin: &str) -> Option<Sent> {
        match bin {
            "drive-lifecycle" => {
                // GIVEN a table where nothing is listed and no import is due
                let fresh = Harness::new().await;
                onboard(&fresh, &unique("quiet"), SHARDS).await;
                fresh.requests.reset();
                let driven = Box::pin(integration::drive(
                    &fresh.app,
                    &tenants::Lanes::in_process(),
                ))
                .await;
                assert!(driven.is_ok(), "drive-lifecycle: {driven:?}");
                Some(fresh.requests.by_operation())
            }
            "work-lanes" => {
                // GIVEN a lane message (signed, as a function sends it) of a tenant with nothing
                // running in lanes (its operation ended, or another delivery's did)
                let tenant = unique("laned");
                onboard(&self.h, &tenant, SHARDS).await;
                let body = json!({"tenant": tenant, "operation": "offboarding", "lane": 0});
                let signature =
                    tenants::LaneMessage::sign(&integration::test_cursor_keys(), &body.to_string());
                let event = serde_json::from_value(json!({"Records": [
                    {"messageId": "m-1", "body": body.to_string(), "eventSource": "aws:sqs",
                     "messageAttributes": {tenants::LANE_SIGNATURE_ATTRIBUTE: {
                        "stringValue": signature, "dataType": "String"}}}
                ]}))
                .unwrap();
                self.h.app.flush_usage().await.unwrap();
                self.h.requests.reset();
                let lanes = tenants::Lanes::in_process();
                let work = tenants::work_lanes::work(&self.h.app, &lanes, event);
                let answer = integration::judge::as_function("work-lanes", work).await;
                assert!(
                    answer.batch_item_failures.is_empty(),
                    "work-lanes: {answer:?}"
                );
                Some(self.h.requests.by_operation())
            }
            "import-consumer" => {
                // GIVEN a message of one item on the import queue
                self.import("p-consumed").await;
                let batch = self.queues.receive(1).await;
                assert_eq!(batch.len(), 1, "one message on the import queue");
                let event = serde_json::from_value(self.queues.event(&batch)).unwrap();
                let settings = imports::consume::ConsumerSettings {
                    max_receives: 5,
                    writes_in_flight: 4,
                    requeue: None,
                    max_defer_seconds: imports::consume::DEFAULT_MAX_DEFER_SECONDS,
                };
                // (the usage this container holds from earlier cases written first: a consumer's
                // container holds only its own)
                self.h.app.flush_usage().await.unwrap();
                self.h.requests.reset();
                let answer =
                    integration::import_queue::consume(&self.h.app, &settings, event).await;
                let answer = serde_json::to_value(answer).unwrap();
                assert_eq!(
                    answer["batchItemFailures"],
                    json!([]),
                    "import-consumer: {answer}"
                );
                Some(self.h.requests.by_operation())
            }
            _ => None,
        }
    }
}

#[tokio::test]
async fn every_function_sends_exactly_the_dynamodb_requests_routes_yaml_declares() {
    // GIVEN a tenant of SHARDS shards and an operator, their records and credentials cached
    let w = World::new().await;
    w.given("get-tenant", &[("tenantId", &w.tenant)], None)
        .await;
    let Auth::Operator(ops) = &w.operator else {
        unreachable!()
    };
    let r = w.h.caller(&w.operator).get_tenant(ops).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut missing = Vec::new();
    let mut wrong = Vec::new();
    for f in &route_table().functions {
        let Some(doc) = &f.doc else { continue };
        let bin = f.bin.as_str();
        // WHEN its common case runs once
        let sent = if f.route().is_some() {
            let Some(case) = w.common_case(bin).await else {
                missing.push(bin);
                continue;
            };
            w.h.requests.reset();
            let r = w.send(bin, &case).await;
            let status = case.status.unwrap_or_else(|| f.success_status());
            if r.status != status {
                wrong.push(format!(
                    "{bin}: answered {} {}, not {status}",
                    r.status, r.body
                ));
                continue;
            }
            w.h.requests.by_operation()
        } else {
            match w.run_triggered(bin).await {
                Some(sent) => sent,
                None => {
                    missing.push(bin);
                    continue;
                }
            }
        };
        // THEN it sent exactly the declared requests, by operation
        let sent: BTreeMap<String, u32> = sent.into_iter().map(|(op, n)| (op, n as u32)).collect();
        let declared = doc.requests.expected(SHARDS);
        if sent != declared {
            wrong.push(format!(
                "{bin}: routes.yaml declares {declared:?}, the handler sent {sent:?}"
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "no common case in tests/tests/all/request_counts.rs for {missing:?}: add one"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
