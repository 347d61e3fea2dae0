//! Faults: DynamoDB unavailable or throttling, STS unavailable, and DynamoDB Local killed and
//! restarted. Nothing is ever half-written, and every retryable failure is a 503 with Retry-After.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use integration::{unique, Harness, Phase, Resp};
use serde_json::json;

async fn create(h: &Harness, tenant: &str, body: serde_json::Value) -> Resp {
    h.tenant(tenant).create_session(body).await
}

/// A new session of customer `c` for `tenant` (201): its id.
async fn created_session(h: &Harness, tenant: &str) -> String {
    let r = create(h, tenant, json!({"customerId": "c"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["sessionId"].as_str().unwrap().to_owned()
}

async fn get(h: &Harness, tenant: &str, id: &str) -> Resp {
    h.tenant(tenant).get_session_by_session_id(id).await
}

fn assert_unavailable(r: &Resp) {
    r.assert_problem(503);
    assert_eq!(
        r.retry_after.as_deref(),
        Some("1"),
        "503 must carry Retry-After"
    );
}

#[tokio::test]
async fn dynamodb_unreachable_is_503_with_retry_after() {
    // GIVEN tenant clients whose DynamoDB endpoint refuses connections
    let h = Harness::with_dynamodb_at("http://127.0.0.1:9", "unreachable").await;
    // WHEN a tenant writes and reads
    let t = unique("down");
    assert_unavailable(&create(&h, &t, json!({"customerId": "c"})).await);
    assert_unavailable(&get(&h, &t, "01a1fcba-9139-7bdd-8e68-8992306e0b9d").await);
}

#[tokio::test]
async fn a_transaction_lost_before_or_after_dynamodb_is_never_half_written() {
    // GIVEN a parent session
    let (h, t) = Harness::with_tenant("half", 1).await;
    let parent = created_session(&h, &t).await;
    let child_body = json!({"customerId": "c", "parentSessionId": parent});

    // WHEN the child's transaction never reaches DynamoDB
    h.faults.arm("TransactWriteItems", Phase::BeforeSend);
    assert_unavailable(&create(&h, &t, child_body.clone()).await);
    // THEN neither the child nor the parent's child count was written
    let items = h.data_items().await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["childCount"].as_n().unwrap(), "0");

    // WHEN DynamoDB applies it but the answer is lost
    h.faults.arm("TransactWriteItems", Phase::AfterSend);
    assert_unavailable(&create(&h, &t, child_body).await);
    // THEN both halves are there: the child and the parent's count
    let items = h.data_items().await;
    assert_eq!(items.len(), 2);
    let root = items.iter().find(|i| i.contains_key("childCount")).unwrap();
    assert_eq!(root["childCount"].as_n().unwrap(), "1");
}

#[tokio::test]
async fn a_retried_create_whose_first_attempt_succeeded_is_not_a_conflict() {
    // GIVEN DynamoDB applies the PutItem but its answer is lost as a 500, so the SDK retries it
    let (h, t) = Harness::with_tenant("retry", 1).await;
    create(&h, &t, json!({"customerId": "warm"})).await; // credentials cached
    h.faults.lose_successes(1);
    h.requests.reset();
    // WHEN the session is created
    let r = create(&h, &t, json!({"customerId": "c"})).await;
    // THEN the retry's failed condition is recognised as our own write: 201, one item, two attempts
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(h.requests.total(), 2);
    assert_eq!(
        get(&h, &t, r.body["sessionId"].as_str().unwrap())
            .await
            .status,
        200
    );
    assert_eq!(h.data_items().await.len(), 2);
}

#[tokio::test]
async fn throttling_is_absorbed_by_retries_and_persistent_throttling_is_503() {
    let (h, t) = Harness::with_tenant("thr", 1).await;
    let id = created_session(&h, &t).await;
    // GIVEN two throttled attempts: the standard retry mode (3 attempts, backoff with jitter) absorbs them
    h.faults.throttle(2);
    h.requests.reset();
    let r = get(&h, &t, &id).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        h.requests.total(),
        3,
        "two throttled attempts and one that succeeded"
    );
    // GIVEN persistent throttling: 503 with Retry-After, never 500
    h.faults.throttle(usize::MAX);
    assert_unavailable(&get(&h, &t, &id).await);
    assert_unavailable(&create(&h, &t, json!({"customerId": "c"})).await);
    h.faults.throttle(0);
    assert_eq!(get(&h, &t, &id).await.status, 200);
}

#[tokio::test]
async fn sts_down_serves_cached_credentials_until_they_expire_then_503() {
    let h = Harness::new().await;
    // (onboarded by an operator in another container, so this one's cache stays cold)
    let ops = h.another_container().await;
    let t = integration::onboarded(&ops, "sts").await;
    let assumed_before = h.recorded_policies(&t).await.len();
    // a tenant with no cached credentials cannot be served while STS is down
    h.sts.down.store(true, Ordering::SeqCst);
    assert_unavailable(&create(&h, &t, json!({"customerId": "c"})).await);
    // STS back: one AssumeRole
    h.sts.down.store(false, Ordering::SeqCst);
    let id = created_session(&h, &t).await;
    assert_eq!(h.recorded_policies(&t).await.len(), assumed_before + 1);
    // STS down again, 11 minutes later: inside the refresh window, the refresh fails, cached
    // credentials (valid for 15 minutes) keep serving
    h.sts.down.store(true, Ordering::SeqCst);
    h.clock.advance_seconds(11 * 60);
    assert_eq!(get(&h, &t, &id).await.status, 200);
    assert_eq!(get(&h, &t, &id).await.status, 200);
    // past their expiry: 503 with Retry-After
    h.clock.advance_seconds(5 * 60);
    assert_unavailable(&get(&h, &t, &id).await);
    assert_eq!(h.recorded_policies(&t).await.len(), assumed_before + 1);
}

#[tokio::test]
async fn credentials_are_kept_by_the_containers_clock_even_a_day_off_the_wall_clock() {
    // GIVEN a container whose clock is a day ahead of the wall clock, serving a tenant
    let (h, t) = Harness::with_tenant("skewed", 1).await;
    h.clock.advance_seconds(24 * 3600);
    let assumed_before = h.recorded_policies(&t).await.len();
    // WHEN it serves the tenant three times
    let id = created_session(&h, &t).await;
    assert_eq!(get(&h, &t, &id).await.status, 200);
    assert_eq!(get(&h, &t, &id).await.status, 200);
    // THEN it assumed the role once: STS's expiry (wall-clock time) is kept as a lifetime from the
    // container's own now, so its credentials are neither stale on arrival nor kept past their life
    assert_eq!(h.recorded_policies(&t).await.len(), assumed_before + 1);
    // AND 11 minutes on by its clock, inside the refresh window, it assumes the role again
    h.clock.advance_seconds(11 * 60);
    assert_eq!(get(&h, &t, &id).await.status, 200);
    assert_eq!(h.recorded_policies(&t).await.len(), assumed_before + 2);
}

#[tokio::test]
async fn sts_refusing_a_refresh_serves_cached_credentials_and_backs_off() {
    // GIVEN a tenant with cached credentials (one AssumeRole)
    let (h, t) = Harness::with_tenant("refused", 1).await;
    let id = created_session(&h, &t).await;
    assert_eq!(h.recorded_policies(&t).await.len(), 1);
    // WHEN STS starts refusing (a non-retryable AccessDenied) inside the refresh window
    h.sts.refuses.store(true, Ordering::SeqCst);
    h.clock.advance_seconds(11 * 60);
    // THEN the still-valid credentials keep serving, and STS is asked once, not on every request
    assert_eq!(get(&h, &t, &id).await.status, 200);
    assert_eq!(get(&h, &t, &id).await.status, 200);
    assert_eq!(h.recorded_policies(&t).await.len(), 2);
    // AND after the back-off it asks again
    h.clock.advance_seconds(31);
    assert_eq!(get(&h, &t, &id).await.status, 200);
    assert_eq!(h.recorded_policies(&t).await.len(), 3);
    h.sts.refuses.store(false, Ordering::SeqCst);
}

/// A DynamoDB Local of this test's own, file-backed, that can be killed and restarted.
struct OwnDynamoDb {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl OwnDynamoDb {
    fn jar() -> String {
        std::env::var("DYNAMODB_JAR")
            .expect("DYNAMODB_JAR is not set: run the tests through ./scripts/test.sh")
    }

    fn start(port: u16, dir: &std::path::Path) -> Child {
        let jar = Self::jar();
        let lib = std::path::Path::new(&jar)
            .parent()
            .unwrap()
            .join("DynamoDBLocal_lib");
        Command::new("java")
            .arg(format!("-Djava.library.path={}", lib.display()))
            .args(["-jar", &jar, "-sharedDb", "-dbPath"])
            .arg(dir)
            .args(["-port", &port.to_string()])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("java starts DynamoDB Local")
    }

    async fn new() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(unique("pooltable-ddb"));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Self::start(port, &dir);
        let mut me = Self { child, port, dir };
        me.wait_ready().await;
        me
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "DynamoDB Local exited ({status}); is DYNAMODB_JAR ({}) right?",
                    Self::jar()
                );
            }
            assert!(Instant::now() < deadline, "DynamoDB Local did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILL: no chance to flush anything that was not already durable.
    async fn kill_and_restart(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.child = Self::start(self.port, &self.dir);
        self.wait_ready().await;
    }
}

impl Drop for OwnDynamoDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn every_acknowledged_write_survives_dynamodb_being_killed_and_restarted() {
    // GIVEN a file-backed DynamoDB Local with the table from template.yaml
    let mut ddb = OwnDynamoDb::new().await;
    let h = Harness::with_dynamodb_at(&ddb.endpoint(), "restart").await;
    let def = devtools::table_from_template(&devtools::default_template_path())
        .unwrap()
        .without_stream();
    let deadline = Instant::now() + Duration::from_secs(60);
    while devtools::create_table(&h.admin, "restart", &def)
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "cannot create the table");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // AND 40 sessions whose creation was acknowledged (201)
    let t = integration::onboarded(&h, "durable").await;
    let mut acknowledged = Vec::new();
    for i in 0..40 {
        let r = create(&h, &t, json!({"customerId": format!("c{}", i % 4)})).await;
        assert_eq!(r.status, 201, "{}", r.body);
        acknowledged.push(r.body["sessionId"].as_str().unwrap().to_owned());
    }
    // WHEN the server is killed with SIGKILL and started again on the same files
    ddb.kill_and_restart().await;
    // THEN every acknowledged session is there
    let deadline = Instant::now() + Duration::from_secs(60);
    for id in &acknowledged {
        loop {
            let r = get(&h, &t, id).await;
            if r.status == 200 {
                break;
            }
            assert_eq!(r.status, 503, "{}", r.body);
            assert!(
                Instant::now() < deadline,
                "DynamoDB Local did not come back"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
