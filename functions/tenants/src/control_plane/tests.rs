use serde_json::json;

use super::plane::protected_tenants;
use super::*;

#[test]
fn the_protected_tenants_must_be_named_and_be_tenant_ids() {
    assert_eq!(
        protected_tenants(" ops , platform").unwrap(),
        ["ops", "platform"]
    );
    for bad in ["", " , ", "ops,has space", "a#b"] {
        assert!(protected_tenants(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_reply_carries_its_requests_ids_and_spelling() {
    // GIVEN an sbt-aws onboarding request
    let request = json!({"tenantId": "t-1", "tenantRegistrationId": "r-1", "tier": "basic"});
    // WHEN it is answered, once with success and once with a failure
    let ok = reply_of(PREFIX, Kind::Onboarding, "e-1", &request, Ok(()));
    let failed = reply_of(
        "",
        Kind::Activate,
        "e-2",
        &request,
        Err("No such tenant.".into()),
    );
    // THEN each names its request's ids, and a failure its reason
    assert_eq!(
        ok,
        json!({"detailType": "sbt_aws_provisionSuccess", "detail": {
            "tenantId": "t-1", "tenantRegistrationId": "r-1", "requestId": "e-1",
            "jobOutput": {"tenantRegistrationData": {"registrationStatus": "created"}},
        }})
    );
    assert_eq!(failed["detailType"], "activateFailure");
    assert_eq!(failed["detail"]["reason"], "No such tenant.");
    assert_eq!(
        failed["detail"]["jobOutput"]["tenantRegistrationData"]["registrationStatus"],
        "failed"
    );
}
