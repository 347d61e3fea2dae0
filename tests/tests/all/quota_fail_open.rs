//! The tier quota across containers: shared through DynamoDB, and failing open within a share of
//! the limits when its store refuses. It captures logs with a subscriber of its thread
//! (`CapturedLogs::install`, which rebuilds tracing's callsite interest cache so that tests on other
//! threads of the process cannot make it miss a line), on a current-thread runtime.

use integration::api::get_product_admitted;
use integration::routes::count_status;
use integration::{onboard_tier, unique, Harness};
use shared::identity::clock::Clock;

#[tokio::test(flavor = "current_thread")]
async fn the_quota_is_shared_by_containers_through_dynamodb_and_fails_open_when_its_store_refuses()
{
    // GIVEN a basic tenant served by two containers (each its own App and caches, one table)
    let a = Harness::new().await;
    let b = a.another_container().await;
    b.clock.set_millis(a.clock.now_millis());
    let t = unique("shared");
    onboard_tier(&a, &t, 4, "basic").await;
    // WHEN container A serves 20 requests in one second, and then container B 20
    let mut first = Vec::new();
    for _ in 0..20 {
        first.push(get_product_admitted(&a.app, &t).await);
    }
    let mut second = Vec::new();
    for _ in 0..20 {
        second.push(get_product_admitted(&b.app, &t).await);
    }
    // THEN A's all ran (404: there is no product) and B admitted only the 5 left of 25
    assert_eq!(count_status(&first, 404), 20);
    assert_eq!(count_status(&second, 404), 5, "B did not see A's requests");
    assert_eq!(count_status(&second, 429), 15);

    // AND, in the next second, each container serves it again after the other has (so each
    // knows that two serve it)
    let next_second = |c: &Harness| c.clock.set_millis((c.clock.now_millis() / 1000 + 1) * 1000);
    // (a whole second on, so each container's counts are due: they are written every 100 ms)
    for c in [&a, &b] {
        c.clock.advance_seconds(1);
        next_second(c);
    }
    assert_eq!(get_product_admitted(&a.app, &t).await.status, 404);
    assert_eq!(get_product_admitted(&b.app, &t).await.status, 404);
    a.clock.set_millis(a.clock.now_millis() + 200);
    assert_eq!(get_product_admitted(&a.app, &t).await.status, 404);

    // WHEN, in the next second, the limiter's store refuses every write (throttled)
    for c in [&a, &b] {
        next_second(c);
    }
    a.faults.refuse_requests_containing(Some("#RATE#"));
    b.faults.refuse_requests_containing(Some("#RATE#"));
    let (logs, _guard) = integration::CapturedLogs::install();
    let mut answers = Vec::new();
    for _ in 0..20 {
        answers.push(get_product_admitted(&a.app, &t).await);
    }
    for _ in 0..20 {
        answers.push(get_product_admitted(&b.app, &t).await);
    }
    // THEN the quota fails open within a share: each container, knowing two serve the tenant,
    // holds it to half of 25 on its own count (12), so 24 run in all and the rest get 429; and
    // the refused counter writes are logged as warnings (at least each container's first)
    assert_eq!(
        count_status(&answers, 404),
        24,
        "{:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert_eq!(count_status(&answers, 429), 16);
    let text = logs.text();
    let warnings = text
        .lines()
        .filter(|l| l.contains("\"level\":\"WARN\"") && l.contains("quota counter"))
        .count();
    assert!(warnings >= 2, "{text}");
}
