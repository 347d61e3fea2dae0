//! A lost success answers as a success, on every mutating route: the route's write takes effect in
//! DynamoDB, its answer is lost (a 500, as after a timeout on the way back), and the SDK retries. The
//! client must get what one clean success gives: the same status, and the effect exactly once.

use integration::fixtures::arrange;
use integration::routes::{routes_with, template_routes};
use integration::Harness;

/// A mutating route, the DynamoDB operation that makes its effect, its clean-success status, and
/// what a second request answers once the effect is done when that is no success (routes.yaml's
/// `lost_success`).
struct Case {
    bin: String,
    write: String,
    status: u16,
    again: Option<u16>,
}

fn cases() -> Vec<Case> {
    routes_with(|f| f.lost_success.as_ref())
        .map(|(f, l)| Case {
            bin: f.bin.clone(),
            write: l.write.clone(),
            status: l.status.unwrap_or(f.success_status()),
            again: l.again,
        })
        .collect()
}

#[tokio::test]
async fn every_mutating_route_answers_a_lost_success_as_a_success() {
    lost_successes_answer_as_successes(&Harness::new().await).await;
}

/// The same, for tenants with a key of their own: each write's item sealed, the retried write
/// carrying the same sealed bytes (one nonce per built item, not per attempt).
#[tokio::test]
async fn every_mutating_route_answers_a_lost_success_as_a_success_for_a_keyed_tenant_too() {
    let h = Harness::new().await.keyed().await;
    lost_successes_answer_as_successes(&h).await;
    let items = h.all_items().await;
    assert!(
        items.iter().any(shared::store::keys::is_sealed),
        "the tenants' items were sealed"
    );
}

async fn lost_successes_answer_as_successes(h: &Harness) {
    for case in cases() {
        // GIVEN the route's data, and a table where the write will succeed once
        let a = arrange(h, &case.bin).await;
        // WHEN its write takes effect but the answer is lost, and the SDK retries
        h.faults.lose_successes_of(&case.write, 1);
        h.requests.reset();
        let r = h
            .caller(&a.auth)
            .call(&case.bin, &a.params, a.body.clone())
            .await;
        let retried = h.requests.by_operation().get(case.write.as_str()).copied();
        h.faults.lose_successes(0);
        // THEN the answer is the clean success's, after a retry
        let what = format!("{}: {} {}", case.bin, r.status, r.body);
        assert_eq!(r.status, case.status, "{what}");
        assert_eq!(retried, Some(2), "{what}: the write was not retried");
        // AND a second, separate request (a moment later) sees the effect as done exactly once
        h.clock.advance_seconds(1);
        let again = h.caller(&a.auth).call(&case.bin, &a.params, a.body).await;
        let what = format!("{} again: {} {}", case.bin, again.status, again.body);
        match case.again {
            // a redeemed code, a deleted item or an expired session is gone (404); a tenant is
            // onboarded once, an order created once (409)
            Some(status) => assert_eq!(again.status, status, "{what}"),
            None => assert!(again.status < 300, "{what}"),
        }
    }
}

#[test]
fn every_mutating_route_in_the_template_has_a_case() {
    let mut mutating: Vec<String> = template_routes()
        .into_iter()
        .filter(|(_, (method, _))| method != "GET")
        .map(|(bin, _)| bin)
        .collect();
    mutating.sort();
    let mut covered: Vec<String> = cases().into_iter().map(|c| c.bin).collect();
    covered.sort();
    assert_eq!(
        mutating, covered,
        "a mutating route needs a lost-success case"
    );
}
