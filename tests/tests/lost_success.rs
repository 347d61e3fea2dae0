//! A lost success answers as a success, on every mutating route: the route's write takes effect in
//! DynamoDB, its answer is lost (a 500, as after a timeout on the way back), and the SDK retries. The
//! client must get what one clean success gives: the same status, and the effect exactly once.

use integration::fixtures::arrange;
use integration::routes::{call, template_routes};
use integration::Harness;

/// A mutating route, the DynamoDB operation that makes its effect, and its clean-success status.
struct Case {
    bin: &'static str,
    write: &'static str,
    status: u16,
}

const CASES: &[Case] = &[
    Case {
        bin: "create-session",
        write: "TransactWriteItems",
        status: 201,
    },
    Case {
        bin: "expire-session",
        write: "TransactWriteItems",
        status: 204,
    },
    Case {
        bin: "onboard-tenant",
        write: "PutItem",
        status: 201,
    },
    Case {
        bin: "update-tenant",
        write: "UpdateItem",
        status: 200,
    },
    Case {
        bin: "offboard-tenant",
        write: "UpdateItem",
        status: 202,
    },
    Case {
        bin: "put-product",
        write: "PutItem",
        status: 201,
    },
    Case {
        bin: "delete-product",
        write: "TransactWriteItems",
        status: 204,
    },
    Case {
        bin: "put-department",
        write: "PutItem",
        status: 201,
    },
    Case {
        bin: "put-employee",
        write: "TransactWriteItems",
        status: 201,
    },
    Case {
        bin: "delete-employee",
        write: "TransactWriteItems",
        status: 204,
    },
    Case {
        bin: "put-user",
        write: "TransactWriteItems",
        status: 201,
    },
    Case {
        bin: "create-order",
        write: "TransactWriteItems",
        status: 201,
    },
    Case {
        bin: "create-transfer-code",
        write: "TransactWriteItems",
        status: 201,
    },
    Case {
        bin: "redeem-transfer-code",
        write: "UpdateItem",
        status: 200,
    },
    Case {
        bin: "put-integration-token",
        write: "PutItem",
        status: 200,
    },
    Case {
        bin: "create-import",
        write: "PutItem",
        status: 202,
    },
];

#[tokio::test]
async fn every_mutating_route_answers_a_lost_success_as_a_success() {
    let h = Harness::new().await;
    for case in CASES {
        // GIVEN the route's data, and a table where the write will succeed once
        let a = arrange(&h, case.bin).await;
        // WHEN its write takes effect but the answer is lost, and the SDK retries
        h.faults.lose_successes_of(case.write, 1);
        h.requests.reset();
        let r = call(&h.app, case.bin, &a.params, &[], a.body.clone(), &a.auth).await;
        let retried = h.requests.by_operation().get(case.write).copied();
        h.faults.lose_successes(0);
        // THEN the answer is the clean success's, after a retry
        let what = format!("{}: {} {}", case.bin, r.status, r.body);
        assert_eq!(r.status, case.status, "{what}");
        assert_eq!(retried, Some(2), "{what}: the write was not retried");
        // AND a second, separate request (a moment later) sees the effect as done exactly once
        h.clock.advance_seconds(1);
        let again = call(&h.app, case.bin, &a.params, &[], a.body, &a.auth).await;
        match case.bin {
            // a redeemed code is gone; a deleted item or expired session too
            "redeem-transfer-code" | "delete-product" | "delete-employee" | "expire-session" => {
                assert_eq!(again.status, 404, "{} again: {}", case.bin, again.body)
            }
            // one onboarding per tenant id, one order per id
            "onboard-tenant" | "create-order" => {
                assert_eq!(again.status, 409, "{} again: {}", case.bin, again.body)
            }
            _ => assert!(again.status < 300, "{} again: {}", case.bin, again.body),
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
    let mut covered: Vec<String> = CASES.iter().map(|c| c.bin.to_owned()).collect();
    covered.sort();
    assert_eq!(
        mutating, covered,
        "a mutating route needs a lost-success case"
    );
}
