//! The test a route is scaffolded with (tests/tests/all/<module>.rs): GIVEN the entity put through
//! its kind's own PUT, WHEN the route is called, THEN what it answers and the requests it sends, and
//! again at every phase of a re-sharding of its tenant.

use super::{fill, NewRoute, Shape};

/// The routes of the entity's own id path (`/departments/{departmentId}`) the scaffolded test goes
/// through: its PUT (required: it puts the entity in place) and its GET.
pub(super) struct EntityRoutes {
    pub(super) put: String,
    pub(super) get: Option<String>,
    pub(super) sample_id: String,
}

pub(super) fn test_source(new: &NewRoute, routes: &EntityRoutes) -> String {
    let test = match new.shape {
        Shape::Get => GET_TEST,
        Shape::List => LIST_TEST,
        Shape::Set => SET_TEST,
        Shape::Delete => DELETE_TEST,
    };
    let client = if new.operator {
        "h.caller(&Auth::Operator(tenant.clone()))"
    } else {
        "h.caller(&a.auth)"
    };
    let own_get = match &routes.get {
        Some(get) => format!(
            "    // AND the kind's own GET still reads it\n    let own = h.caller(&a.auth).{}(id).await;\n    assert_eq!(own.status, 200, \"{get}: {{}}\", own.body);\n",
            get.replace('-', "_")
        ),
        None => String::new(),
    };
    let put_module = routes.put.replace('-', "_");
    fill(
        TEST_FILE,
        new,
        &[
            ("@ABOUT@", test.about),
            ("@TEST@", test.test),
            ("@WHEN@", test.when),
            ("@PUT_MODULE@", put_module.as_str()),
            ("@PUT@", routes.put.as_str()),
            ("@CLIENT@", client),
            ("@OWN_GET@\n", own_get.as_str()),
            ("@COMMON@", TEST_COMMON),
            ("@USES@", TEST_USES),
            ("@GIVEN@\n", TEST_GIVEN),
        ],
    )
}

/// What every scaffolded test shares: the @NAME@ as the shared read finds it, a call checked
/// against the requests routes.yaml declares, and a re-sharding stepped to its end.
const TEST_COMMON: &str = r#"const BIN: &str = "@BIN@";

/// The @NAME@ `id` as the shared read finds it (wherever the tenant's layout has it), as JSON.
async fn stored(h: &Harness, tenant: &str, id: &str) -> Option<Value> {
    let t = TenantId::parse(tenant).expect("a tenant id");
    let id = EntityId::parse(id).expect("an id");
    let db = h.app.db(&t).await.expect("the tenant's client");
    let layout = h.app.directory.layout(&db).await.expect("its layout");
    let keys = Keys::of(layout, |n| sharded_entity_key(&t, kind::@SPACE@, kind::@KIND@, &id, n));
    let item = layout::get(&db, layout, &keys).await.expect("the read");
    item.map(|i| stored_view(i).expect("its view"))
}

/// The route's answer to `call`, which must be `status`, after it sent the DynamoDB requests
/// routes.yaml declares (4 shards): counted from when `call` is awaited, so it may be made before.
async fn as_declared(h: &Harness, status: u16, call: impl Future<Output = Resp>) -> Resp {
    h.requests.reset();
    let r = call.await;
    let declared = route_table()
        .function(BIN)
        .and_then(|f| f.doc.as_ref())
        .map(|d| d.requests.expected(4))
        .unwrap_or_default();
    let sent: BTreeMap<String, u32> = h
        .requests
        .by_operation()
        .into_iter()
        .map(|(op, n)| (op, n as u32))
        .collect();
    assert_eq!(r.status, status, "{}", r.body);
    assert_eq!(sent, declared, "{BIN}: sent, and declared in routes.yaml");
    r
}

/// A re-sharding of a tenant from 4 shards to 16, one phase at a time: started, writes moved, each
/// step of its moves, ended.
struct Resharding<'a> {
    h: &'a Harness,
    tenant: &'a str,
    phase: u32,
    ended: bool,
}

impl<'a> Resharding<'a> {
    fn of(h: &'a Harness, tenant: &'a str) -> Self {
        Self { h, tenant, phase: 0, ended: false }
    }

    /// The next phase reached, `None` once it has ended.
    async fn next(&mut self) -> Option<String> {
        if self.ended {
            return None;
        }
        self.phase += 1;
        let step = || self.h.operator().update_tenant(self.tenant, json!({"shardCount": 16}));
        match self.phase {
            1 => {
                let r = step().await;
                assert_eq!(r.status, 202, "{}", r.body);
                Some("started".into())
            }
            2 => {
                self.h.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS + 1);
                Some("writes moved".into())
            }
            n if n > 22 => panic!("the re-sharding of {} did not end in 20 steps", self.tenant),
            n => {
                if n == 3 {
                    self.h.clock.advance_seconds(MOVES_DELAY_SECONDS);
                }
                let r = step().await;
                if r.status == 200 {
                    // ended; and every container's cached record now shows it
                    self.h.clock.advance_seconds(WRITES_MOVE_DELAY_SECONDS + 1);
                    self.ended = true;
                    return Some("ended".into());
                }
                assert_eq!(r.status, 202, "{}", r.body);
                Some(format!("step {}", n - 2))
            }
        }
    }
}"#;

const TEST_USES: &str = r#"use std::collections::BTreeMap;
use std::future::Future;

use integration::fixtures::arrange;
use integration::routes::route_table;
use integration::{Auth, Harness, Resp};
use serde_json::{json, Value};
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{kind, sharded_entity_key};
use shared::service::sharded::stored_view;
use shared::store::lifecycle::resharding::{MOVES_DELAY_SECONDS, WRITES_MOVE_DELAY_SECONDS};
use shared::store::tenancy::layout::{self, Keys};
"#;

/// A scaffolded test's GIVEN: a @NAME@ put through its kind's own PUT, in a fresh tenant of 4 shards,
/// and the route's caller (`me`).
const TEST_GIVEN: &str = r#"    // GIVEN a @NAME@ put through @PUT@, in a tenant of 4 shards
    let h = Harness::new().await;
    let a = arrange(&h, "@PUT@").await;
    let id = a.params["@ID@"].as_str();
    let put = h.caller(&a.auth).@PUT_MODULE@(id, a.body.clone()).await;
    assert!(put.status < 300, "GIVEN @PUT@: {} {}", put.status, put.body);
    let Auth::Tenant(tenant) = &a.auth else {
        panic!("@PUT@ is a tenant's route")
    };
    let me = @CLIENT@;
"#;

/// A scaffolded test file: its shape's [`TestTemplate`] (`@ABOUT@`, `@TEST@`, `@WHEN@`) and what
/// every scaffolded test shares.
const TEST_FILE: &str = r#"//! `@BIN@`: `@METHOD@ @PATH@` (scaffolded by `pooltable new route --entity @NAME@`): @ABOUT@

@USES@
@COMMON@

#[tokio::test]
async fn @MODULE@_@TEST@() {
@GIVEN@
@WHEN@}
"#;

/// One shape's test, filled into [`TEST_FILE`].
struct TestTemplate {
    /// The module doc after the route: what the test checks.
    about: &'static str,
    /// The test's name after the route's module.
    test: &'static str,
    /// The test's body after its GIVEN.
    when: &'static str,
}

const GET_TEST: TestTemplate = TestTemplate {
    about: r#"it reads the
//! @NAME@ where `@PUT@` wrote it, in the requests routes.yaml declares, before, during and after a
//! re-sharding of its tenant."#,
    test: "reads_the_@NAME@_where_it_was_written_through_a_resharding",
    when: r#"    // WHEN the route reads it
    let r = as_declared(&h, 200, me.@MODULE@(id)).await;
    // THEN 200 with the @NAME@ the shared read finds, in the DynamoDB requests routes.yaml declares
    assert_eq!(Some(&r.body), stored(&h, tenant, id).await.as_ref());
    // AND while the tenant is re-sharded to 16 shards, at every phase, it reads the same @NAME@
    let mut resharding = Resharding::of(&h, tenant);
    while let Some(phase) = resharding.next().await {
        let again = me.@MODULE@(id).await;
        assert_eq!(again.status, 200, "{phase}: {}", again.body);
        assert_eq!(again.body, r.body, "{phase}");
    }
    // AND a @NAME@ nothing wrote is 404
    let none = me.@MODULE@("never-written").await;
    assert_eq!(none.status, 404, "{}", none.body);
"#,
};

const LIST_TEST: TestTemplate = TestTemplate {
    about: r#"it lists the
//! @NAME@ `@PUT@` wrote, once, in the requests routes.yaml declares, before, during and after a
//! re-sharding of its tenant."#,
    test: "lists_the_@NAME@_once_through_a_resharding",
    when: r#"    let want = json!([stored(&h, tenant, id).await.expect("the @NAME@")]);
    let me = me.query(&[("limit", "25")]);
    // WHEN the route lists the tenant's @NAME@s
    let r = as_declared(&h, 200, me.@MODULE@()).await;
    // THEN 200 with it, once, in the DynamoDB requests routes.yaml declares
    assert_eq!(r.body["items"], want, "{}", r.body);
    // AND while the tenant is re-sharded to 16 shards, at every phase, it lists it once
    let mut resharding = Resharding::of(&h, tenant);
    while let Some(phase) = resharding.next().await {
        let again = me.@MODULE@().await;
        assert_eq!(again.status, 200, "{phase}: {}", again.body);
        assert_eq!(again.body["items"], want, "{phase}: {}", again.body);
    }
"#,
};

const SET_TEST: TestTemplate = TestTemplate {
    about: r#"it sets a field
//! on the @NAME@ `@PUT@` wrote, in the requests routes.yaml declares, and every write lands where the
//! reads find it, before, during and after a re-sharding of its tenant."#,
    test: "writes_where_reads_find_it_through_a_resharding",
    when: r#"    // WHEN the route sets a field on it
    let r = as_declared(&h, 200, me.@MODULE@(id, json!({"@FIELD@": "v0"}))).await;
    // THEN 200 with the @NAME@ as the shared read finds it, the field set, in the DynamoDB requests
    // routes.yaml declares
    assert_eq!(r.body["@FIELD@"], "v0", "{}", r.body);
    assert_eq!(Some(&r.body), stored(&h, tenant, id).await.as_ref());
@OWN_GET@
    // AND while the tenant is re-sharded to 16 shards, a write at every phase lands where reads find it
    let mut resharding = Resharding::of(&h, tenant);
    let mut n = 0;
    while let Some(phase) = resharding.next().await {
        n += 1;
        let value = format!("v{n}");
        let w = me.@MODULE@(id, json!({"@FIELD@": value})).await;
        assert_eq!(w.status, 200, "{phase}: {}", w.body);
        let found = stored(&h, tenant, id).await.expect("the @NAME@");
        assert_eq!(found["@FIELD@"], value.as_str(), "{phase}: {found}");
        assert_eq!(found, w.body, "{phase}");
    }
    // AND a @NAME@ nothing wrote is 404, and stays unwritten
    let none = me.@MODULE@("never-written", json!({"@FIELD@": "x"})).await;
    assert_eq!(none.status, 404, "{}", none.body);
    assert_eq!(stored(&h, tenant, "never-written").await, None);
"#,
};

const DELETE_TEST: TestTemplate = TestTemplate {
    about: r#"it deletes the
//! @NAME@ `@PUT@` wrote, wherever it is, in the requests routes.yaml declares, before, during and
//! after a re-sharding of its tenant."#,
    test: "deletes_the_@NAME@_wherever_it_is_through_a_resharding",
    when: r#"    // WHEN the route deletes it
    as_declared(&h, 204, me.@MODULE@(id)).await;
    // THEN 204, and the shared read finds nothing, in the DynamoDB requests routes.yaml declares
    assert_eq!(stored(&h, tenant, id).await, None);
    // AND a second delete is 404
    let again = me.@MODULE@(id).await;
    assert_eq!(again.status, 404, "{}", again.body);
    // AND while the tenant is re-sharded to 16 shards, a @NAME@ put at every phase is deleted
    let mut resharding = Resharding::of(&h, tenant);
    while let Some(phase) = resharding.next().await {
        let put = h.caller(&a.auth).@PUT_MODULE@(id, a.body.clone()).await;
        assert!(put.status < 300, "{phase}: @PUT@ {} {}", put.status, put.body);
        assert!(stored(&h, tenant, id).await.is_some(), "{phase}");
        let d = me.@MODULE@(id).await;
        assert_eq!(d.status, 204, "{phase}: {}", d.body);
        assert_eq!(stored(&h, tenant, id).await, None, "{phase}");
    }
"#,
};
