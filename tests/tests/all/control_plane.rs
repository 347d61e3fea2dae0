//! pooltable as a SaaS Builder Toolkit application plane (#45): the control plane's requests, put on
//! a bus on moto's EventBridge and delivered through its rule's SQS target as Lambda would get them,
//! each answered by exactly one reply on the same bus, whatever EventBridge redelivers.

use aws_sdk_dynamodb::types::AttributeValue;
use integration::lifecycle_bus::LifecycleBus;
use integration::{unique, Harness};
use serde_json::{json, Value};
use shared::identity::ids::TenantId;
use shared::store::lifecycle::requests::{self, Claim};
use tenants::control_plane::{handle, ControlPlane, ControlPlaneError};

const CONTROL: &str = "sbt.control.plane";
const APPLICATION: &str = "sbt.application.plane";

/// The control plane's bus, with one queue receiving both planes' events.
struct World {
    h: Harness,
    bus: LifecycleBus,
    plane: ControlPlane,
    /// The sources of the control plane's requests and of pooltable's replies.
    control: &'static str,
    application: &'static str,
}

impl World {
    async fn new() -> Self {
        Self::with_sources(CONTROL, APPLICATION).await
    }

    /// The world of a deployment whose planes use these sources (sbt-aws's `EventManager`
    /// `controlPlaneEventSource` and `applicationPlaneEventSource`).
    async fn with_sources(control: &'static str, application: &'static str) -> Self {
        let h = Harness::new().await;
        let bus = LifecycleBus::subscribed("sbt", &[control, application]).await;
        integration::judge::stands_for(&bus.name, "ref:ControlPlaneBusArn");
        integration::judge::stands_for(application, "ref:ApplicationPlaneEventSource");
        let plane =
            ControlPlane::new(bus.events.clone(), &bus.name, application).protecting(&["platform"]);
        Self {
            h,
            bus,
            plane,
            control,
            application,
        }
    }

    /// The control plane puts one request on its bus; answers the event as its rule delivered it.
    async fn put(&self, detail_type: &str, detail: Value) -> Value {
        self.bus
            .events
            .put_events()
            .entries(
                aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
                    .event_bus_name(&self.bus.name)
                    .source(self.control)
                    .detail_type(detail_type)
                    .detail(detail.to_string())
                    .build(),
            )
            .send()
            .await
            .expect("put the request on moto's EventBridge");
        let delivered = self.bus.delivered().await;
        assert_eq!(delivered.len(), 1, "{delivered:?}");
        delivered.into_iter().next().unwrap()
    }

    /// Delivers `event` to the function, as Lambda's EventBridge trigger does.
    async fn deliver(
        &self,
        event: &Value,
    ) -> Result<tenants::control_plane::Handled, ControlPlaneError> {
        let handled = handle(&self.h.app, &self.plane, event.clone());
        Box::pin(integration::judge::as_function(
            "control-plane-events",
            handled,
        ))
        .await
    }

    /// Puts `request` on the bus and delivers it: the delivery answers `reply` (a refusal too:
    /// answered, never retried), and exactly one reply is on the bus. The event, and that reply.
    async fn answered(&self, request: &str, detail: Value, reply: &str) -> (Value, Value) {
        let event = self.put(request, detail).await;
        let handled = self.deliver(&event).await.expect("answered, not retried");
        assert_eq!(handled.reply.as_deref(), Some(reply), "{request}");
        let mut replies = self.replies().await;
        assert_eq!(replies.len(), 1, "{request}: {replies:?}");
        (event, replies.remove(0))
    }

    /// [`Self::answered`], then delivered again, as EventBridge may: the redelivery is a
    /// duplicate, answering nothing, on the bus or off it.
    async fn answered_once(&self, request: &str, detail: Value, reply: &str) -> (Value, Value) {
        let (event, answer) = self.answered(request, detail, reply).await;
        let again = self
            .deliver(&event)
            .await
            .expect("a redelivery is no error");
        assert!(
            again.duplicate && again.reply.is_none(),
            "{request}: {again:?}"
        );
        let replies = self.replies().await;
        assert!(replies.is_empty(), "{request}: {replies:?}");
        (event, answer)
    }

    /// Runs `t`'s offboarding (begun) to its end and hands the control plane its lifecycle event:
    /// the tenant is gone, and exactly one deprovision success is on the bus, which it returns.
    async fn offboarded_and_answered(&self, t: &str) -> Value {
        self.h.clock.advance_seconds(120);
        integration::drive_to_end(&self.h.app).await;
        self.h.operator().get_tenant(t).await.assert_problem(404);
        let ended = self
            .deliver(&lifecycle_event("offboardingFinished", t))
            .await
            .expect("answered");
        assert_eq!(ended.reply.as_deref(), Some("sbt_aws_deprovisionSuccess"));
        let mut replies = self.replies().await;
        assert_eq!(replies.len(), 1, "{replies:?}");
        replies.remove(0)
    }

    /// Claims the onboarding of `tenant`'s `registration` as a delivery that then stops before its
    /// answer (its function timed out, or it is still acting).
    async fn claim_onboarding(&self, tenant: &str, registration: &str) {
        let platform = self
            .h
            .app
            .db_for_operator(&TenantId::platform())
            .await
            .unwrap();
        let key = format!("onboarding#{registration}");
        let request = requests::Request {
            key: &key,
            event_id: "an-earlier-delivery",
            tenant,
        };
        let claimed = requests::claim(&platform, request, self.h.app.clock.now_millis(), 30_000)
            .await
            .unwrap();
        assert!(matches!(claimed, Claim::Mine { .. }));
    }

    /// The detail-types of the replies on the bus since the last call, sorted (the bus's queue
    /// keeps no order).
    async fn reply_types(&self) -> Vec<String> {
        let mut types: Vec<String> = self
            .replies()
            .await
            .iter()
            .map(|r| r["detail-type"].as_str().unwrap_or_default().to_owned())
            .collect();
        types.sort();
        types
    }

    /// The replies on the bus since the last call.
    async fn replies(&self) -> Vec<Value> {
        let events = self.bus.delivered().await;
        assert!(
            events.iter().all(|e| e["source"] == self.application),
            "{events:?}"
        );
        events
    }
}

#[tokio::test]
async fn each_request_is_answered_once_with_its_ids_and_redeliveries_change_nothing() {
    // GIVEN the control plane's bus, and a tenant it registers
    let w = World::new().await;
    let t = unique("sbt");
    let registration = unique("reg");
    let tenant = |extra: Value| {
        let mut detail = json!({"tenantId": t, "tenantRegistrationId": registration});
        detail
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        detail
    };
    // a control plane that puts activate and deactivate requests itself (no sbt-aws release has
    // since 0.5.8), here with the registration's id: a registration is suspended and resumed again
    // and again, each time acted on and answered
    let suspend = (
        "sbt_aws_deactivateRequest",
        tenant(json!({})),
        "sbt_aws_deactivateSuccess",
        "suspended",
    );
    let resume = (
        "sbt_aws_activateRequest",
        tenant(json!({})),
        "sbt_aws_activateSuccess",
        "active",
    );
    let steps = [
        (
            "sbt_aws_onboardingRequest",
            tenant(json!({"tier": "premium", "tenantName": "Acme", "email": "ops@acme.test"})),
            "sbt_aws_provisionSuccess",
            "active",
        ),
        suspend.clone(),
        resume.clone(),
        suspend,
        resume,
    ];
    for (request, detail, reply, status) in steps {
        // WHEN the control plane puts the request, and EventBridge delivers it twice
        // THEN exactly one reply is on the bus, with the request's ids, and the tenant is as asked
        let (event, answer) = w.answered_once(request, detail.clone(), reply).await;
        assert_eq!(answer["detail-type"], reply);
        assert_eq!(answer["detail"]["tenantId"], t.as_str());
        assert_eq!(answer["detail"]["requestId"], event["id"]);
        assert_eq!(
            answer["detail"]["tenantRegistrationId"],
            detail
                .get("tenantRegistrationId")
                .cloned()
                .unwrap_or(Value::Null)
        );
        let record = w.h.operator().get_tenant(&t).await;
        assert_eq!(record.status, 200, "{}", record.body);
        assert_eq!(record.body["status"], status, "{request}");
        if request == "sbt_aws_onboardingRequest" {
            assert_eq!(record.body["tier"], "premium");
            // AND the control plane putting the same registration again (a new event) gets the same
            // reply, once, and nothing is done again
            let (again, replayed) = w.answered_once(request, detail.clone(), reply).await;
            assert_ne!(again["id"], event["id"]);
            assert_eq!(replayed["detail"], answer["detail"]);
            // AND the same registration naming another tenant is refused, once however often
            // EventBridge delivers it, and makes nothing
            let other = unique("other");
            let mut forged = detail.clone();
            forged["tenantId"] = other.as_str().into();
            let (_, refused) = w
                .answered_once(request, forged.clone(), "sbt_aws_provisionFailure")
                .await;
            assert_eq!(w.h.operator().get_tenant(&other).await.status, 404);
            // (and put again, as a new event, refused again, once)
            let (_, again) = w
                .answered_once(request, forged, "sbt_aws_provisionFailure")
                .await;
            assert_eq!(again["detail"]["reason"], refused["detail"]["reason"]);
            assert!(
                refused["detail"]["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("another tenant")),
                "{refused}"
            );
            // (without the registration's id: sbt-aws marks the registration a reply names, and
            // this one was provisioned for the first tenant)
            assert!(
                refused["detail"].get("tenantRegistrationId").is_none(),
                "{refused}"
            );
        }
    }
    // WHEN the control plane asks to offboard it, and EventBridge delivers that twice
    let offboarding = tenant(json!({"sbtaws_active": false}));
    let event = w
        .put("sbt_aws_offboardingRequest", offboarding.clone())
        .await;
    for _ in 0..2 {
        // THEN the offboarding starts, and nothing is answered while it runs
        let handled = w.deliver(&event).await.expect("deferred, not failed");
        assert!(handled.deferred && handled.reply.is_none(), "{handled:?}");
        assert!(w.replies().await.is_empty());
    }
    assert_eq!(
        w.h.operator().get_tenant(&t).await.body["status"],
        "offboarding"
    );
    // WHEN its deletion ends, and the lifecycle event of that end reaches the control plane
    // THEN exactly one deprovision success is on the bus, with the request's ids
    let reply = w.offboarded_and_answered(&t).await;
    let replies = [reply];
    assert_eq!(replies[0]["detail"]["requestId"], event["id"]);
    assert_eq!(
        replies[0]["detail"]["tenantRegistrationId"],
        registration.as_str()
    );
    assert_eq!(
        replies[0]["detail"]["jobOutput"]["tenantRegistrationData"]["registrationStatus"],
        "deleted"
    );
    // AND the control plane putting it again gets the same answer, once
    let (_, again) = w
        .answered_once(
            "sbt_aws_offboardingRequest",
            offboarding,
            "sbt_aws_deprovisionSuccess",
        )
        .await;
    assert_eq!(
        again["detail"]["tenantRegistrationId"],
        registration.as_str()
    );
}

#[tokio::test]
async fn a_request_pooltable_refuses_is_answered_with_its_failure_and_reason_never_retried() {
    // GIVEN the control plane's bus
    let w = World::new().await;
    let unknown = unique("nobody");
    let numbered = unique("numbered");
    let taken = integration::onboarded_on_shards(&w.h, "taken", 4).await;
    let cases = [
        // activating a tenant pooltable never onboarded
        (
            "sbt_aws_activateRequest",
            json!({"tenantId": unknown}),
            "sbt_aws_activateFailure",
            "No such tenant",
        ),
        // a tier pooltable does not have
        (
            "sbt_aws_onboardingRequest",
            json!({"tenantId": unique("gold"), "tenantRegistrationId": unique("r"), "tier": "golden"}),
            "sbt_aws_provisionFailure",
            "tier golden",
        ),
        // a tenant id that exists already
        (
            "sbt_aws_onboardingRequest",
            json!({"tenantId": taken, "tenantRegistrationId": unique("r")}),
            "sbt_aws_provisionFailure",
            "already exists",
        ),
        // no tenant id at all
        (
            "sbt_aws_deactivateRequest",
            json!({}),
            "sbt_aws_deactivateFailure",
            "no tenantId",
        ),
        // an id pooltable cannot hold, in the spelling of sbt-aws before its event manager's refactor
        (
            "offboardingRequest",
            json!({"tenantId": "has spaces"}),
            "deprovisionFailure",
            "tenantId",
        ),
        // the operators' own tenant, suspended or offboarded by whoever may put events on the bus
        (
            "sbt_aws_deactivateRequest",
            json!({"tenantId": "platform"}),
            "sbt_aws_deactivateFailure",
            "protected",
        ),
        (
            "sbt_aws_offboardingRequest",
            json!({"tenantId": "platform", "tenantRegistrationId": unique("r")}),
            "sbt_aws_deprovisionFailure",
            "protected",
        ),
        // a tier that is not a name (never the default tier), and a registration id that is none
        (
            "sbt_aws_onboardingRequest",
            json!({"tenantId": numbered, "tenantRegistrationId": unique("r"), "tier": 3}),
            "sbt_aws_provisionFailure",
            "tier must be",
        ),
        (
            "sbt_aws_onboardingRequest",
            json!({"tenantId": numbered, "tenantRegistrationId": 42}),
            "sbt_aws_provisionFailure",
            "tenantRegistrationId",
        ),
    ];
    for (request, detail, reply, reason) in cases {
        // WHEN it is delivered (twice)
        // THEN one failure is on the bus, carrying the reason
        let (_, failure) = w.answered_once(request, detail, reply).await;
        let why = failure["detail"]["reason"].as_str().unwrap_or_default();
        assert!(why.contains(reason), "{request}: {why}");
        assert_eq!(
            failure["detail"]["jobOutput"]["tenantRegistrationData"]["registrationStatus"],
            "failed"
        );
    }
    // AND the tenant that exists is unchanged; the unknown one was not made
    assert_eq!(
        w.h.operator().get_tenant(&taken).await.body["tier"],
        "standard"
    );
    assert_eq!(w.h.operator().get_tenant(&unknown).await.status, 404);
    assert_eq!(w.h.operator().get_tenant(&numbered).await.status, 404);
}

#[tokio::test]
async fn an_offboarding_of_a_tenant_pooltable_never_held_is_answered_with_success_and_writes_nothing(
) {
    // GIVEN a registration whose provisioning never reached pooltable (no record, no report)
    let w = World::new().await;
    let never = unique("never");
    let before = w.h.all_items().await;

    // WHEN the control plane asks to offboard it, and EventBridge delivers the request twice
    let (_, reply) = w
        .answered_once(
            "sbt_aws_offboardingRequest",
            json!({"tenantId": never, "tenantRegistrationId": unique("r")}),
            "sbt_aws_deprovisionSuccess",
        )
        .await;

    // THEN it is answered once with success (sbt-aws can delete the registration), naming the
    // tenant, and nothing of it is written: no record, no report, no driver's entry
    assert_eq!(reply["detail"]["tenantId"], never, "{reply}");
    let of_it: Vec<_> =
        w.h.all_items()
            .await
            .into_iter()
            .filter(|i| !before.contains(i))
            .filter(|i| format!("{i:?}").contains(&never))
            .filter(|i| i.get("kind") != Some(&AttributeValue::S("CONTROL_REQUEST".into())))
            .collect();
    assert!(of_it.is_empty(), "{of_it:?}");
}

#[tokio::test]
async fn a_status_request_after_a_restore_ended_waits_behind_the_one_deferred_during_it() {
    use crate::restore::{put_products, restore_from};
    use shared::store::lifecycle::restoring::STARTS_DELAY_SECONDS;
    // GIVEN a registered tenant under restore, suspended by the control plane meanwhile (deferred)
    let w = World::new().await;
    let t = unique("overtaken");
    let detail = json!({"tenantId": t, "tenantRegistrationId": unique("reg")});
    w.answered(
        "sbt_aws_onboardingRequest",
        detail,
        "sbt_aws_provisionSuccess",
    )
    .await;
    put_products(&w.h, &t, (0..3).map(|i| format!("sku-{i}")), 1).await;
    let source = w.h.snapshot("overtakensrc").await;
    assert_eq!(restore_from(&w.h, &t, &source, false).await.status, 202);
    let tenant_only = json!({"tenantId": t});
    let suspend = w
        .put("sbt_aws_deactivateRequest", tenant_only.clone())
        .await;
    assert!(w.deliver(&suspend).await.unwrap().deferred);
    // AND the restore ended, its end's event not delivered yet
    w.h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    integration::drive_to_end(&w.h.app).await;

    // WHEN the control plane resumes it
    w.h.clock.advance_seconds(1);
    let resume = w.put("sbt_aws_activateRequest", tenant_only).await;
    let handled = w.deliver(&resume).await.expect("answered");

    // THEN both are answered, in the order they came: the tenant ends active (before the mend the
    // resumption was set at once, and the suspension deferred before it was set after it)
    assert_eq!(handled.reply.as_deref(), Some("sbt_aws_activateSuccess"));
    assert_eq!(
        w.reply_types().await,
        ["sbt_aws_activateSuccess", "sbt_aws_deactivateSuccess"]
    );
    let ended = w
        .deliver(&lifecycle_event("tenantRestoreFinished", &t))
        .await
        .unwrap();
    assert!(ended.reply.is_none(), "{ended:?}");
    assert_eq!(w.h.operator().get_tenant(&t).await.body["status"], "active");
}

#[tokio::test]
async fn an_offboarding_of_a_tenant_whose_onboarding_is_being_answered_is_retried_not_answered() {
    // GIVEN a registration whose onboarding a delivery has claimed and not answered yet
    let w = World::new().await;
    let t = unique("inflight");
    let registration = unique("reg");
    w.claim_onboarding(&t, &registration).await;

    // WHEN the control plane asks to offboard it
    let event = w
        .put(
            "sbt_aws_offboardingRequest",
            json!({"tenantId": t, "tenantRegistrationId": registration}),
        )
        .await;
    let early = w.deliver(&event).await;

    // THEN the delivery fails, to be retried, and nothing is answered (a success would leave the
    // tenant its onboarding then makes with no registration)
    assert!(
        matches!(early, Err(ControlPlaneError::Unavailable(_))),
        "{early:?}"
    );
    assert!(w.replies().await.is_empty());
}

#[tokio::test]
async fn a_delivery_that_stopped_mid_request_is_taken_over_once_its_hold_ends() {
    // GIVEN a request a first delivery claimed, then stopped on (its function timed out)
    let w = World::new().await;
    let t = unique("stopped");
    let registration = unique("reg");
    let event = w
        .put(
            "sbt_aws_onboardingRequest",
            json!({"tenantId": t, "tenantRegistrationId": registration, "tier": "basic"}),
        )
        .await;
    w.claim_onboarding(&t, &registration).await;
    // WHEN EventBridge's retry comes while the claim is held
    let early = w.deliver(&event).await;
    // THEN it fails, to be retried, and nothing is sent
    assert!(matches!(early, Err(ControlPlaneError::Busy)), "{early:?}");
    assert!(w.replies().await.is_empty());
    // WHEN the next retry comes after the hold
    w.h.clock.advance_seconds(31);
    let late = w.deliver(&event).await.expect("taken over");
    // THEN it acts and answers, once
    assert_eq!(late.reply.as_deref(), Some("sbt_aws_provisionSuccess"));
    assert_eq!(w.replies().await.len(), 1);
    assert_eq!(w.h.operator().get_tenant(&t).await.status, 200);
    assert!(w.deliver(&event).await.unwrap().duplicate);
}

/// An event of the lifecycle bus, as its rule hands it to the control plane's function.
fn lifecycle_event(detail_type: &str, tenant: &str) -> Value {
    json!({
        "id": unique("lifecycle"), "source": "pooltable", "detail-type": detail_type,
        "detail": {"tenantId": tenant},
    })
}

#[tokio::test]
async fn a_protected_tenant_is_neither_deactivated_nor_offboarded_and_nothing_of_it_changes() {
    // GIVEN the operators' tenant, onboarded and named at deployment
    let mut w = World::new().await;
    let ops = integration::onboarded(&w.h, "ops").await;
    w.plane = ControlPlane::new(w.bus.events.clone(), &w.bus.name, APPLICATION).protecting(&[&ops]);
    let before = w.h.operator().get_tenant(&ops).await.body;
    // WHEN whoever may put events on the bus asks to suspend it, then to offboard it
    for (request, detail, reply) in [
        (
            "sbt_aws_deactivateRequest",
            json!({"tenantId": ops}),
            "sbt_aws_deactivateFailure",
        ),
        (
            "sbt_aws_offboardingRequest",
            json!({"tenantId": ops, "tenantRegistrationId": unique("r")}),
            "sbt_aws_deprovisionFailure",
        ),
    ] {
        // THEN each is refused, naming the protection
        let (_, failure) = w.answered_once(request, detail, reply).await;
        let why = failure["detail"]["reason"].as_str().unwrap_or_default();
        assert!(why.contains("protected"), "{request}: {why}");
    }
    // AND its record is as it was: active, not offboarding, not listed for the driver
    assert_eq!(w.h.operator().get_tenant(&ops).await.body, before);
    assert_eq!(before["status"], "active");
}

#[tokio::test]
async fn an_offboarding_asked_during_a_move_waits_for_it_and_ends_in_the_tenant_offboarded() {
    // GIVEN a registered tenant moving into its own table
    let w = World::new().await;
    let t = unique("moving");
    let registration = unique("reg");
    let detail = json!({"tenantId": t, "tenantRegistrationId": registration});
    let mut onboarding = detail.clone();
    onboarding["tier"] = "premium".into();
    w.answered(
        "sbt_aws_onboardingRequest",
        onboarding,
        "sbt_aws_provisionSuccess",
    )
    .await;
    assert_eq!(w.h.operator().move_to(&t, "own").await.status, 202);
    // WHEN the control plane asks to offboard it while it moves
    let event = w.put("sbt_aws_offboardingRequest", detail.clone()).await;
    let handled = w.deliver(&event).await.expect("deferred, not failed");
    // THEN the request is deferred: no reply, no offboarding, nothing held as its answer
    assert!(handled.deferred && handled.reply.is_none(), "{handled:?}");
    assert!(w.replies().await.is_empty());
    assert_eq!(w.h.operator().get_tenant(&t).await.body["status"], "active");
    // AND a redelivery meanwhile defers it again, answering nothing
    assert!(w.deliver(&event).await.unwrap().deferred);
    assert!(w.replies().await.is_empty());
    // WHEN the move ends, and its lifecycle event reaches the control plane
    w.h.clock
        .advance_seconds(shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS);
    integration::drive_to_end(&w.h.app).await;
    assert_eq!(w.h.operator().get_tenant(&t).await.body["placement"], "own");
    let ended = w
        .deliver(&lifecycle_event("tenantMoveFinished", &t))
        .await
        .expect("the deferred request acted on");
    // THEN the offboarding starts, still unanswered while it runs
    assert!(ended.deferred && ended.reply.is_none(), "{ended:?}");
    assert!(w.replies().await.is_empty());
    assert_eq!(
        w.h.operator().get_tenant(&t).await.body["status"],
        "offboarding"
    );
    // WHEN the driver ends it, and its end reaches the control plane
    // THEN it is answered, once, with its registration
    let replies = [w.offboarded_and_answered(&t).await];
    assert_eq!(
        replies[0]["detail"]["tenantRegistrationId"],
        registration.as_str()
    );
    // AND nothing is left deferred: the same event again acts on nothing
    let again = w.deliver(&lifecycle_event("offboardingFinished", &t)).await;
    assert!(again.unwrap().reply.is_none());
    assert!(w.replies().await.is_empty());
    // AND the control plane putting the request again gets the same answer, once
    let (_, replayed) = w
        .answered(
            "sbt_aws_offboardingRequest",
            detail,
            "sbt_aws_deprovisionSuccess",
        )
        .await;
    assert_eq!(
        replayed["detail"]["tenantRegistrationId"],
        registration.as_str()
    );
}

#[tokio::test]
async fn a_suspension_and_a_resumption_asked_during_a_restore_are_set_in_the_order_they_came_once_it_ends(
) {
    use crate::restore::{put_products, restore_from};
    use shared::store::lifecycle::restoring::STARTS_DELAY_SECONDS;
    // GIVEN a registered tenant with products, a copy taken of it, and a restore from that copy
    // under way
    let w = World::new().await;
    let t = unique("restoring");
    let detail = json!({"tenantId": t, "tenantRegistrationId": unique("reg")});
    w.answered(
        "sbt_aws_onboardingRequest",
        detail.clone(),
        "sbt_aws_provisionSuccess",
    )
    .await;
    put_products(&w.h, &t, (0..5).map(|i| format!("sku-{i}")), 1).await;
    let source = w.h.snapshot("statussrc").await;
    let started = restore_from(&w.h, &t, &source, false).await;
    assert_eq!(started.status, 202, "{}", started.body);

    // WHEN the control plane suspends it, then resumes it, while it is restored, and EventBridge
    // delivers the suspension again after both
    let tenant_only = json!({"tenantId": t});
    let mut handled = Vec::new();
    let mut events = Vec::new();
    for request in ["sbt_aws_deactivateRequest", "sbt_aws_activateRequest"] {
        let event = w.put(request, tenant_only.clone()).await;
        handled.push(w.deliver(&event).await.expect("deferred, not failed"));
        events.push(event);
        w.h.clock.advance_seconds(1);
    }
    handled.push(w.deliver(&events[0]).await.expect("deferred again"));
    // THEN each is deferred: no reply, the tenant as the restore keeps it
    assert!(
        handled.iter().all(|h| h.deferred && h.reply.is_none()),
        "{handled:?}"
    );
    assert!(w.replies().await.is_empty());

    // WHEN the restore ends, and its lifecycle event reaches the control plane
    w.h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    integration::drive_to_end(&w.h.app).await;
    let ended = w
        .deliver(&lifecycle_event("tenantRestoreFinished", &t))
        .await
        .expect("the deferred requests acted on");
    // THEN both are answered with success, once each, in the order they came: the tenant ends
    // active (the resumption came last)
    assert_eq!(ended.reply.as_deref(), Some("sbt_aws_activateSuccess"));
    assert_eq!(
        w.reply_types().await,
        ["sbt_aws_activateSuccess", "sbt_aws_deactivateSuccess"]
    );
    assert_eq!(w.h.operator().get_tenant(&t).await.body["status"], "active");
    // AND nothing is left deferred: the same event again acts on nothing
    let again = w
        .deliver(&lifecycle_event("tenantRestoreFinished", &t))
        .await;
    assert!(again.unwrap().reply.is_none());
    assert!(w.replies().await.is_empty());
}

#[tokio::test]
async fn a_request_put_again_two_thousand_times_keeps_its_entry_small() {
    // GIVEN an answered onboarding
    let w = World::new().await;
    let t = unique("resent");
    let registration = unique("reg");
    w.answered(
        "sbt_aws_onboardingRequest",
        json!({"tenantId": t, "tenantRegistrationId": registration}),
        "sbt_aws_provisionSuccess",
    )
    .await;
    let platform =
        w.h.app
            .db_for_operator(&TenantId::platform())
            .await
            .unwrap();
    let key = format!("onboarding#{registration}");
    // WHEN the control plane puts it again 2,000 times, each a new event (the claims its
    // deliveries make; the reply each sends is the held one)
    let mut answered_again = 0;
    for i in 0..2_000 {
        let event_id = format!("resent-{i:05}");
        let request = requests::Request {
            key: &key,
            event_id: &event_id,
            tenant: &t,
        };
        let claim = requests::claim(&platform, request, w.h.app.clock.now_millis(), 30_000)
            .await
            .expect("a claim");
        answered_again += usize::from(matches!(claim, Claim::AnsweredForAnother { .. }));
    }
    // THEN each got the held reply, and the entry remembers only its newest events, far under
    // DynamoDB's 400 KB (untrimmed, the 2,000 event ids alone would pass the 16 KB asserted)
    assert_eq!(answered_again, 2_000);
    let entry =
        w.h.items_under(&shared::identity::keys::control_requests_pk())
            .await;
    let entry = entry
        .iter()
        .find(|i| i["SK"].as_s().is_ok_and(|sk| sk.ends_with(&key)))
        .expect("the entry");
    let events = entry["answeredEvents"].as_l().unwrap();
    assert_eq!(events.len(), requests::REMEMBERED_EVENTS);
    assert_eq!(events.last().unwrap().as_s().unwrap(), "resent-01999");
    let size = shared::store::client::size::approximate_bytes(entry);
    assert!(size < 16 * 1024, "{size} bytes");
    // AND the newest events are still recognized: a redelivery of one sends nothing
    let request = requests::Request {
        key: &key,
        event_id: "resent-01990",
        tenant: &t,
    };
    let claim = requests::claim(&platform, request, w.h.app.clock.now_millis(), 30_000).await;
    assert_eq!(claim.unwrap(), Claim::Duplicate);
}

#[tokio::test]
async fn releases_before_0_9_and_custom_sources_are_answered_in_their_own_spelling() {
    // GIVEN deployments of sbt-aws as they emit: a release before 0.9 (its EventManager's default
    // sources and bare detail-types, src/utils/event-manager.ts at v0.8.7), and a current one with
    // sources of its own (controlPlaneEventSource / applicationPlaneEventSource set)
    for (control, application, prefix) in [
        ("controlPlaneEventSource", "applicationPlaneEventSource", ""),
        (
            "com.example.controlplane",
            "com.example.appplane",
            "sbt_aws_",
        ),
    ] {
        let w = World::with_sources(control, application).await;
        let t = unique("spelled");
        let detail =
            json!({"tenantId": t, "tenantRegistrationId": unique("reg"), "tier": "standard"});
        // WHEN each puts an onboarding and a deactivate in its own spelling
        // THEN each is acted on and answered once, in the request's spelling, from the
        // application plane's source of that deployment
        let onboarding = format!("{prefix}onboardingRequest");
        let provisioned = format!("{prefix}provisionSuccess");
        let (_, answer) = w.answered_once(&onboarding, detail, &provisioned).await;
        assert_eq!(answer["source"], application);
        let deactivate = format!("{prefix}deactivateRequest");
        let deactivated = format!("{prefix}deactivateSuccess");
        w.answered_once(&deactivate, json!({"tenantId": t}), &deactivated)
            .await;
        let record = w.h.operator().get_tenant(&t).await;
        assert_eq!(
            (record.body["tier"].as_str(), record.body["status"].as_str()),
            (Some("standard"), Some("suspended")),
            "{control}"
        );
    }
}

#[tokio::test]
async fn a_deployments_own_tiers_reach_pooltables_tiers_and_placements() {
    // GIVEN a control plane whose tiers are its own: Platinum in a silo, Advanced pooled
    let mut w = World::new().await;
    let tiers =
        tenants::control_plane::TierMap::parse("Platinum=premium:own,Advanced=standard").unwrap();
    w.plane = ControlPlane::new(w.bus.events.clone(), &w.bus.name, APPLICATION)
        .protecting(&["platform"])
        .with_tiers(tiers);
    for (tier, expected, placement) in [
        ("Platinum", "premium", "own"),
        ("advanced", "standard", "pool"),
        ("basic", "basic", "pool"),
    ] {
        // WHEN it onboards a tenant at that tier
        let t = unique("tiered");
        let detail = json!({"tenantId": t, "tenantRegistrationId": unique("reg"), "tier": tier});
        w.answered_once(
            "sbt_aws_onboardingRequest",
            detail,
            "sbt_aws_provisionSuccess",
        )
        .await;
        // THEN the tenant has the tier and placement the map names
        let record = w.h.operator().get_tenant(&t).await;
        assert_eq!(record.body["tier"], expected, "{tier}: {}", record.body);
        assert_eq!(
            record.body["placement"], placement,
            "{tier}: {}",
            record.body
        );
    }
    // AND a tier neither pooltable nor the map knows is refused, naming the map
    let t = unique("bronze");
    let detail = json!({"tenantId": t, "tenantRegistrationId": unique("reg"), "tier": "Bronze"});
    let (_, failure) = w
        .answered_once(
            "sbt_aws_onboardingRequest",
            detail,
            "sbt_aws_provisionFailure",
        )
        .await;
    let why = failure["detail"]["reason"].as_str().unwrap_or_default();
    assert!(why.contains("tier map"), "{why}");
    w.h.operator().get_tenant(&t).await.assert_problem(404);
    // AND a Platinum tenant whose own table an operator made with other keys is refused with that
    // reason, naming the table (not as a tenant that exists)
    let t = unique("unfit");
    let table = w.h.own_table_of_other_keys(&t).await;
    let detail = json!({"tenantId": t, "tenantRegistrationId": unique("reg"), "tier": "Platinum"});
    let (_, failure) = w
        .answered_once(
            "sbt_aws_onboardingRequest",
            detail,
            "sbt_aws_provisionFailure",
        )
        .await;
    let why = failure["detail"]["reason"].as_str().unwrap_or_default();
    assert!(
        why.contains(&table) && !why.contains("already exists"),
        "{why}"
    );
    w.h.operator().get_tenant(&t).await.assert_problem(404);
}

#[tokio::test]
async fn a_registration_shaped_as_sbt_aws_sends_it_is_created_and_deleted_as_its_control_plane_waits_for(
) {
    // GIVEN the control plane's bus, and a tenant registered through sbt-aws's `POST
    // /tenant-registrations` as its scripts/sbt-aws.sh does (sbt-aws 0.9.x,
    // resources/functions/tenant-registrations/index.py): the onboarding's detail is the
    // registration's data, the tenant's data (extra fields included) and the tenant's new UUID
    let w = World::new().await;
    let t = uuid::Uuid::new_v4().to_string();
    let registration = uuid::Uuid::new_v4().to_string();
    let prices = json!([
        {"id": "price_123456789Example", "metricName": "productsSold"},
        {"id": "price_123456789AnotherExample", "metricName": "plusProductsSold"}
    ]);
    let onboarding = json!({
        "registrationStatus": "In progress",
        "tenantRegistrationData1": "test",
        "tenantName": "tenant123",
        "email": "tenant123@example.com",
        "tier": "basic",
        "prices": prices,
        "tenantRegistrationId": registration,
        "tenantId": t,
    });

    // WHEN it is put and delivered (twice)
    let (_, created) = w
        .answered_once(
            "sbt_aws_onboardingRequest",
            onboarding,
            "sbt_aws_provisionSuccess",
        )
        .await;

    // THEN the tenant is active at basic, and the reply is what sbt-aws's rule PATCHes onto
    // `/tenant-registrations/{detail.tenantRegistrationId}` (its `detail.jobOutput`): the status
    // its reference application plane sets, `created`
    assert_eq!(
        created["detail"]["tenantRegistrationId"],
        registration.as_str()
    );
    assert_eq!(
        created["detail"]["jobOutput"],
        json!({"tenantRegistrationData": {"registrationStatus": "created"}})
    );
    let record = w.h.operator().get_tenant(&t).await;
    assert_eq!(record.status, 200, "{}", record.body);
    assert_eq!(
        (&record.body["status"], &record.body["tier"]),
        (&json!("active"), &json!("basic"))
    );

    // WHEN sbt-aws's `DELETE /tenant-registrations/{id}` puts the offboarding: the tenant's item as
    // its deletion left it (`sbtaws_active` false), merged with the registration as read before
    // that (`sbtaws_active` true, its status as the reply set it), and it is delivered twice
    let offboarding = json!({
        "tenantId": t,
        "tenantName": "tenant123",
        "email": "tenant123@example.com",
        "tier": "basic",
        "prices": prices,
        "tenantRegistrationId": registration,
        "sbtaws_active": true,
        "registrationStatus": "created",
        "tenantRegistrationData1": "test",
    });
    let event = w.put("sbt_aws_offboardingRequest", offboarding).await;
    for _ in 0..2 {
        let handled = w.deliver(&event).await.expect("deferred, not failed");
        assert!(handled.deferred && handled.reply.is_none(), "{handled:?}");
    }

    // THEN once its deletion has ended, one reply sets the registration's status `deleted`
    let deleted = w.offboarded_and_answered(&t).await;
    assert_eq!(deleted["detail-type"], "sbt_aws_deprovisionSuccess");
    assert_eq!(
        deleted["detail"]["tenantRegistrationId"],
        registration.as_str()
    );
    assert_eq!(
        deleted["detail"]["jobOutput"],
        json!({"tenantRegistrationData": {"registrationStatus": "deleted"}})
    );
}

/// The write that defers a control plane request.
fn is_deferral(body: &str) -> bool {
    body.contains("CONTROL_DEFERRED")
}

/// The offboarding a request starts may end between the request's act (202: it runs) and its
/// deferral, so that the end's event finds nothing deferred. The deferral reads the record again
/// and, the tenant gone, answers the request at once (before the mend it stayed deferred with
/// nothing left to act on it, and sbt-aws never heard of the deprovisioning).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offboarding_that_ends_before_its_request_is_deferred_is_answered_once() {
    // GIVEN a registered tenant
    let w = std::sync::Arc::new(World::new().await);
    let t = unique("quickoff");
    let registration = unique("reg");
    let detail = json!({"tenantId": t, "tenantRegistrationId": registration});
    w.answered(
        "sbt_aws_onboardingRequest",
        detail.clone(),
        "sbt_aws_provisionSuccess",
    )
    .await;
    // WHEN the control plane asks to offboard it, and that delivery's deferral is held (aside:
    // the hold blocks the thread that sends it)
    let event = w.put("sbt_aws_offboardingRequest", detail).await;
    let mut held = w.h.faults.hold_next_matching(is_deferral);
    let delivery = integration::aside({
        let (w, event) = (w.clone(), event.clone());
        move || async move { w.deliver(&event).await.map(|handled| handled.reply) }
    });
    held.reached().await;
    // AND meanwhile the offboarding ends, and its end's event finds nothing deferred
    w.h.clock.advance_seconds(120);
    integration::drive_to_end(&w.h.app).await;
    w.h.operator().get_tenant(&t).await.assert_problem(404);
    let ended = w.deliver(&lifecycle_event("offboardingFinished", &t)).await;
    assert!(ended.expect("handled").reply.is_none());
    // AND the deferral goes on
    held.release();
    let reply = delivery.ended().await.expect("answered, not retried");

    // THEN the request is answered with success, once, naming its registration
    assert_eq!(reply.as_deref(), Some("sbt_aws_deprovisionSuccess"));
    let replies = w.replies().await;
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(
        replies[0]["detail"]["tenantRegistrationId"],
        registration.as_str()
    );
    // AND nothing is left deferred: the end's event again answers nothing
    let again = w.deliver(&lifecycle_event("offboardingFinished", &t)).await;
    assert!(again.expect("handled").reply.is_none());
    assert!(w.replies().await.is_empty());
}

/// A registration whose onboarding was refused (its tenant id was another's already) owns no
/// tenant: its offboarding, when the registration is deleted, removes nothing. Before the mend it
/// offboarded the tenant of that id, which the registration never made.
#[tokio::test]
async fn an_offboarding_of_a_registration_whose_onboarding_was_refused_leaves_the_tenant_of_its_id()
{
    // GIVEN a tenant onboarded through the API, with a product
    let w = World::new().await;
    let taken = integration::onboarded_on_shards(&w.h, "notyours", 2).await;
    let put =
        w.h.tenant(&taken)
            .put_product("p-1", json!({"name": "kept"}))
            .await;
    assert_eq!(put.status, 201, "{}", put.body);
    // AND a registration naming its id, whose onboarding is refused
    let registration = unique("r");
    let detail = json!({"tenantId": taken, "tenantRegistrationId": registration});
    w.answered_once(
        "sbt_aws_onboardingRequest",
        detail.clone(),
        "sbt_aws_provisionFailure",
    )
    .await;

    // WHEN the control plane deletes the registration: its offboarding is asked
    let (_, reply) = w
        .answered_once(
            "sbt_aws_offboardingRequest",
            detail,
            "sbt_aws_deprovisionSuccess",
        )
        .await;

    // THEN it is answered with success (sbt-aws deletes the registration), and the tenant is as
    // it was: active, with its product, nothing of it being offboarded
    assert_eq!(
        reply["detail"]["tenantRegistrationId"],
        registration.as_str()
    );
    let view = w.h.operator().get_tenant(&taken).await;
    assert_eq!(view.body["status"], "active", "{}", view.body);
    assert!(view.body.get("offboarding").is_none(), "{}", view.body);
    let product = w.h.tenant(&taken).get_product("p-1").await;
    assert_eq!(product.body["document"]["name"], "kept", "{}", product.body);
}

/// An event an operator sends again from the control plane's dead-letter queue finds its request's
/// entry: entries are kept longer than the queue keeps a message.
#[test]
fn a_request_entry_outlives_the_dead_letter_queues_retention() {
    // GIVEN the template's control plane dead-letter queue
    let template = std::fs::read_to_string(devtools::default_template_path()).unwrap();
    let line = template
        .lines()
        .find(|l| l.contains("control-plane-dlq"))
        .expect("the control plane's dead-letter queue");
    let retention: u64 = line
        .split("MessageRetentionPeriod:")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .expect("its MessageRetentionPeriod");
    // THEN a request's entry is kept longer
    assert!(
        requests::KEPT_SECONDS > retention,
        "{} <= {retention}",
        requests::KEPT_SECONDS
    );
}

/// EventBridge keeps no order, and an onboarding whose first delivery failed before its claim comes
/// back later (Lambda's retries, or an operator's redrive from the dead letters): acted on after
/// its registration's offboarding was answered, it onboards nothing. Before the mend it made the
/// tenant, which sbt-aws had deleted the registration of: nobody's, and never removed.
#[tokio::test]
async fn an_onboarding_delivered_after_its_registrations_offboarding_onboards_nothing() {
    // GIVEN a registration whose onboarding request is on the bus, its first delivery failed
    let w = World::new().await;
    let t = unique("late");
    let registration = unique("reg");
    let detail = json!({"tenantId": t, "tenantRegistrationId": registration, "tier": "basic"});
    let onboarding = w.put("sbt_aws_onboardingRequest", detail.clone()).await;
    let before = w.h.all_items().await;
    // AND the registration deleted meanwhile: its offboarding answered (nothing held to remove)
    w.answered(
        "sbt_aws_offboardingRequest",
        detail.clone(),
        "sbt_aws_deprovisionSuccess",
    )
    .await;

    // WHEN the onboarding's retry comes
    let handled = w.deliver(&onboarding).await.expect("answered, not retried");

    // THEN it is answered once with its failure, naming the registration and why
    assert_eq!(handled.reply.as_deref(), Some("sbt_aws_provisionFailure"));
    let replies = w.replies().await;
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(
        replies[0]["detail"]["tenantRegistrationId"],
        registration.as_str()
    );
    let reason = replies[0]["detail"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("offboarding was asked"), "{reason}");
    // AND no tenant is made: nothing of it is in the table but the two requests' entries
    w.h.operator().get_tenant(&t).await.assert_problem(404);
    let of_it: Vec<_> =
        w.h.all_items()
            .await
            .into_iter()
            .filter(|i| !before.contains(i))
            .filter(|i| format!("{i:?}").contains(&t))
            .filter(|i| i.get("kind") != Some(&AttributeValue::S("CONTROL_REQUEST".into())))
            .collect();
    assert!(of_it.is_empty(), "{of_it:?}");
    // AND a redelivery of either request answers nothing again
    assert!(w.deliver(&onboarding).await.unwrap().duplicate);
    assert!(w.replies().await.is_empty());
}

/// An onboarding and its registration's offboarding at once: the offboarding waits while the
/// onboarding is open, and the onboarding, taken over once its first delivery's hold ended, finds
/// the offboarding asked and onboards nothing; the offboarding's retry then removes nothing. The
/// registration ends with no tenant, each request answered once.
#[tokio::test]
async fn an_onboarding_taken_over_after_its_registrations_offboarding_was_asked_onboards_nothing() {
    // GIVEN a registration whose onboarding a delivery claimed, then stopped on
    let w = World::new().await;
    let t = unique("raced");
    let registration = unique("reg");
    let detail = json!({"tenantId": t, "tenantRegistrationId": registration});
    let onboarding = w.put("sbt_aws_onboardingRequest", detail.clone()).await;
    w.claim_onboarding(&t, &registration).await;
    // AND its offboarding asked meanwhile, retried while the onboarding is open
    let offboarding = w.put("sbt_aws_offboardingRequest", detail).await;
    let early = w.deliver(&offboarding).await;
    assert!(
        matches!(early, Err(ControlPlaneError::Unavailable(_))),
        "{early:?}"
    );

    // WHEN both are retried after the holds
    w.h.clock.advance_seconds(31);
    let onboarded = w.deliver(&onboarding).await.expect("taken over");
    let offboarded = w.deliver(&offboarding).await.expect("taken over");

    // THEN the onboarding fails, the offboarding succeeds, each once, and there is no tenant
    assert_eq!(onboarded.reply.as_deref(), Some("sbt_aws_provisionFailure"));
    assert_eq!(
        offboarded.reply.as_deref(),
        Some("sbt_aws_deprovisionSuccess")
    );
    assert_eq!(
        w.reply_types().await,
        ["sbt_aws_deprovisionSuccess", "sbt_aws_provisionFailure"]
    );
    w.h.operator().get_tenant(&t).await.assert_problem(404);
}
