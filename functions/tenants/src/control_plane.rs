//! `control-plane-events`: pooltable as the application plane of a SaaS Builder Toolkit (sbt-aws)
//! control plane.
//!
//! An EventBridge rule on the control plane's bus (template parameter `ControlPlane=sbt`) hands this
//! function the four requests sbt-aws defines, and it answers each on the same bus with the reply
//! sbt-aws expects, with source `sbt.application.plane` (`CONTROL_PLANE_REPLY_SOURCE`):
//!
//! | request (`detail-type`) | what pooltable does | reply |
//! |---|---|---|
//! | `sbt_aws_onboardingRequest` | onboards `tenantId` at `tier` (`basic` when absent), in the pool | `provisionSuccess` / `provisionFailure` |
//! | `sbt_aws_offboardingRequest` | starts the offboarding (the lifecycle driver deletes every item); answered when it has ended | `deprovisionSuccess` / `deprovisionFailure` |
//! | `sbt_aws_activateRequest` | resumes the tenant (`status: active`) | `activateSuccess` / `activateFailure` |
//! | `sbt_aws_deactivateRequest` | suspends it (`status: suspended`) | `deactivateSuccess` / `deactivateFailure` |
//!
//! sbt-aws before its event manager's refactor named them without the `sbt_aws_` prefix; both are
//! taken, and a reply carries its request's spelling. A reply's `detail` holds the request's
//! `tenantId`, `tenantRegistrationId` (when it had one) and event id (`requestId`), and `jobOutput`
//! in the shape sbt-aws's tenant registration service reads (`tenantRegistrationData`, which it
//! stores on the registration); a failure also carries its `reason` (the problem's detail).
//!
//! Each request is answered exactly once (`shared::store::lifecycle::requests`), whatever
//! EventBridge's at-least-once delivery does: an onboarding or an offboarding is its registration's
//! (`<kind>#<tenantRegistrationId>`; the control plane putting it again gets the same reply, once,
//! and nothing is done again), an activate or a deactivate its event's (a registration is
//! suspended and resumed many times). A request pooltable must
//! refuse (an unknown tenant, a tier it does not have, a tenant that exists) is answered with its
//! failure, never retried; only what may pass (DynamoDB or EventBridge unavailable) fails the
//! invocation, which Lambda retries. An offboarding is deferred, unanswered (`requests::defer`),
//! while the tenant is moved, re-sharded or restored, and while its own deletion runs: the end of
//! that operation (its lifecycle event, `reshardingFinished`, `tenantMoveFinished`,
//! `tenantRestoreFinished` or `offboardingFinished`, which a rule on the lifecycle bus hands this
//! function) acts on it again, and the control plane putting it again does too; it is answered
//! `deprovisionSuccess` once the tenant is gone.
//!
//! The tenants no request may suspend or offboard (the operators' own) must be named
//! (`CONTROL_PLANE_PROTECTED_TENANTS`): the function does not start without them, so that a
//! deployment never leaves its operators' tenant to whoever may put events on the bus.

use lambda_http::http::StatusCode;
use lambda_http::Body;
use serde::Deserialize;
use serde_json::{json, Value};
use shared::identity::ids::TenantId;
use shared::service::app::{env_var, env_var_or, lambda_sdk_config, ConfigError};
use shared::store::lifecycle::requests::{self, Claim};
use shared::store::tenancy::tenants::{RecordChange, TenantStatus};
use shared::{ApiError, App};
use thiserror::Error;

use crate::onboard_tenant::OnboardInput;
use crate::operation::Operation;

mod tiers;
pub use tiers::TierMap;

/// The prefix of sbt-aws's detail-types since its event manager's refactor (`sbt_aws_<name>`).
const PREFIX: &str = "sbt_aws_";
/// How long a delivery holds a request before another may take it over: longer than the
/// function's timeout, so a running holder is never taken over.
const HOLD_MS: u64 = 30_000;
/// The tier of an onboarding request that names none.
const DEFAULT_TIER: &str = "basic";
/// The source of this plane's replies, unless `CONTROL_PLANE_REPLY_SOURCE` names another.
const DEFAULT_REPLY_SOURCE: &str = "sbt.application.plane";

/// The control plane's bus and the source of this plane's replies.
pub struct ControlPlane {
    client: aws_sdk_eventbridge::Client,
    bus: String,
    source: String,
    /// Tenants no request may suspend or offboard (the operators' own: any principal that may put
    /// events on the control plane's bus could otherwise lock every operator out).
    protected: Vec<String>,
    /// The deployment's own tier names, mapped to pooltable's tiers and placements.
    tiers: TierMap,
    /// Where an offboarding's lanes run.
    lanes: crate::Lanes,
}

impl ControlPlane {
    pub fn new(client: aws_sdk_eventbridge::Client, bus: &str, source: &str) -> Self {
        Self {
            client,
            bus: bus.to_owned(),
            source: source.to_owned(),
            protected: Vec::new(),
            tiers: TierMap::default(),
            lanes: crate::Lanes::in_process(),
        }
    }

    /// The same, onboarding the tiers `tiers` names as it maps them.
    pub fn with_tiers(self, tiers: TierMap) -> Self {
        Self { tiers, ..self }
    }

    /// The same, refusing to suspend or offboard `tenants`.
    pub fn protecting(self, tenants: &[&str]) -> Self {
        Self {
            protected: tenants.iter().map(|t| (*t).to_owned()).collect(),
            ..self
        }
    }

    /// `CONTROL_PLANE_EVENT_BUS` (the bus's name or ARN; required), `CONTROL_PLANE_REPLY_SOURCE`
    /// (default `sbt.application.plane`) and `CONTROL_PLANE_PROTECTED_TENANTS` (comma-separated).
    pub fn from_env() -> Result<Self, ConfigError> {
        let bus = env_var("CONTROL_PLANE_EVENT_BUS")?;
        let source = env_var_or(
            "CONTROL_PLANE_REPLY_SOURCE",
            DEFAULT_REPLY_SOURCE.to_owned(),
        )?;
        let client = aws_sdk_eventbridge::Client::new(&lambda_sdk_config()?);
        let named = std::env::var("CONTROL_PLANE_PROTECTED_TENANTS").unwrap_or_default();
        let protected = protected_tenants(&named)?;
        let tiers = TierMap::parse(&std::env::var("CONTROL_PLANE_TIER_MAP").unwrap_or_default())
            .map_err(|e| ConfigError::Invalid("CONTROL_PLANE_TIER_MAP", e))?;
        let lanes = crate::Lanes::from_env()?;
        Ok(Self {
            lanes,
            ..Self::new(client, &bus, &source)
                .protecting(&protected)
                .with_tiers(tiers)
        })
    }

    async fn send(&self, detail_type: &str, detail: &str) -> Result<(), ControlPlaneError> {
        let entry = aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus)
            .source(&self.source)
            .detail_type(detail_type)
            .detail(detail)
            .build();
        let out = self
            .client
            .put_events()
            .entries(entry)
            .send()
            .await
            .map_err(|e| {
                ControlPlaneError::Bus(
                    aws_sdk_eventbridge::error::DisplayErrorContext(e).to_string(),
                )
            })?;
        match out.failed_entry_count() {
            0 => Ok(()),
            _ => Err(ControlPlaneError::Bus(format!(
                "the reply was not put: {:?}",
                out.entries().first().and_then(|e| e.error_message())
            ))),
        }
    }
}

/// The protected tenants of `CONTROL_PLANE_PROTECTED_TENANTS` (comma-separated): at least one, each
/// a tenant id, so a typo cannot leave the operators unprotected.
fn protected_tenants(value: &str) -> Result<Vec<&str>, ConfigError> {
    const NAME: &str = "CONTROL_PLANE_PROTECTED_TENANTS";
    let tenants: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if tenants.is_empty() {
        return Err(ConfigError::Invalid(
            NAME,
            "must name the operators' tenants (comma-separated): no control plane request may \
             suspend or offboard them"
                .into(),
        ));
    }
    if let Some(bad) = tenants.iter().find(|t| TenantId::parse(t).is_err()) {
        return Err(ConfigError::Invalid(
            NAME,
            format!("{bad:?} is not a tenant id"),
        ));
    }
    Ok(tenants)
}

/// What fails an invocation (Lambda retries it); everything else is answered.
#[derive(Debug, Error)]
pub enum ControlPlaneError {
    #[error("the control plane's bus refused the reply: {0}")]
    Bus(String),
    #[error("the request could not be acted on or recorded now: {0}")]
    Unavailable(String),
    #[error("another delivery of this request is answering it")]
    Busy,
}

impl From<ApiError> for ControlPlaneError {
    fn from(e: ApiError) -> Self {
        Self::Unavailable(e.to_string())
    }
}

impl From<shared::store::client::error::StoreError> for ControlPlaneError {
    fn from(e: shared::store::client::error::StoreError) -> Self {
        Self::Unavailable(e.to_string())
    }
}

/// An EventBridge event, as a rule's Lambda target gets it.
#[derive(Debug, Deserialize)]
struct Envelope {
    id: String,
    #[serde(rename = "detail-type")]
    detail_type: String,
    #[serde(default)]
    detail: Value,
}

/// The four requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Onboarding,
    Offboarding,
    Activate,
    Deactivate,
}

impl Kind {
    fn of(name: &str) -> Option<Self> {
        match name {
            "onboardingRequest" => Some(Self::Onboarding),
            "offboardingRequest" => Some(Self::Offboarding),
            "activateRequest" => Some(Self::Activate),
            "deactivateRequest" => Some(Self::Deactivate),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Onboarding => "onboarding",
            Self::Offboarding => "offboarding",
            Self::Activate => "activate",
            Self::Deactivate => "deactivate",
        }
    }

    /// The reply's name, by outcome.
    fn reply(self, success: bool) -> &'static str {
        match (self, success) {
            (Self::Onboarding, true) => "provisionSuccess",
            (Self::Onboarding, false) => "provisionFailure",
            (Self::Offboarding, true) => "deprovisionSuccess",
            (Self::Offboarding, false) => "deprovisionFailure",
            (Self::Activate, true) => "activateSuccess",
            (Self::Activate, false) => "activateFailure",
            (Self::Deactivate, true) => "deactivateSuccess",
            (Self::Deactivate, false) => "deactivateFailure",
        }
    }

    /// The registration status a success leaves (sbt-aws stores it on the registration).
    fn done(self) -> &'static str {
        match self {
            Self::Onboarding => "provisioned",
            Self::Offboarding => "offboarded",
            Self::Activate => "active",
            Self::Deactivate => "suspended",
        }
    }
}

/// What an invocation did: the reply it sent (its detail-type), or why it sent none.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Handled {
    /// The reply's detail-type; none for a duplicate, a deferred request or an event that is no
    /// request.
    pub reply: Option<String>,
    /// This request was answered before: nothing was done or sent.
    pub duplicate: bool,
    /// This request waits for its tenant's operation to end: nothing was done or sent.
    pub deferred: bool,
}

impl Handled {
    const NOTHING: Self = Self {
        reply: None,
        duplicate: false,
        deferred: false,
    };
}

/// The lifecycle events of an operation's end, after which a deferred request is acted on again (an
/// offboarding's own end among them: its request is answered then).
const OPERATION_ENDS: [&str; 4] = [
    "reshardingFinished",
    "tenantMoveFinished",
    "tenantRestoreFinished",
    "offboardingFinished",
];

/// What acting on a request came to.
enum Outcome {
    Done,
    /// Refused for good: answered with this reason.
    Refused(String),
    /// Refused while an operation on the tenant runs: deferred until it ends.
    Deferred(String),
}

/// Answers one event.
pub async fn handle(
    app: &App,
    plane: &ControlPlane,
    event: Value,
) -> Result<Handled, ControlPlaneError> {
    let ignored = Handled::NOTHING;
    let raw = event.to_string();
    let Ok(envelope) = serde_json::from_value::<Envelope>(event) else {
        tracing::warn!("an event that is no EventBridge event: ignored");
        return Ok(ignored);
    };
    if OPERATION_ENDS.contains(&envelope.detail_type.as_str()) {
        let tenant = envelope.detail["tenantId"].as_str().unwrap_or_default();
        return act_on_deferred(app, plane, tenant).await;
    }
    let (prefix, name) = match envelope.detail_type.strip_prefix(PREFIX) {
        Some(name) => (PREFIX, name),
        None => ("", envelope.detail_type.as_str()),
    };
    let Some(kind) = Kind::of(name) else {
        tracing::warn!(detail_type = %envelope.detail_type, "not a control plane request: ignored");
        return Ok(ignored);
    };
    let detail = &envelope.detail;
    // A registration is provisioned and deprovisioned once: those requests are the registration's.
    // It is activated and deactivated again and again: each of those events is a request of its own.
    let registration = match kind {
        Kind::Onboarding | Kind::Offboarding => detail["tenantRegistrationId"]
            .as_str()
            .filter(|r| valid_registration(r)),
        Kind::Activate | Kind::Deactivate => None,
    };
    let key = format!("{}#{}", kind.name(), registration.unwrap_or(&envelope.id));
    let request = requests::Request {
        key: &key,
        event_id: &envelope.id,
        tenant: detail["tenantId"].as_str().unwrap_or_default(),
    };
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    let now_ms = app.clock.now_millis();
    let (claimed_at_ms, held, taken_over) =
        match requests::claim(&platform_db, request, now_ms, HOLD_MS).await? {
            Claim::Duplicate => {
                tracing::info!(request = key, "an event answered before: nothing done");
                return Ok(Handled {
                    duplicate: true,
                    ..Handled::NOTHING
                });
            }
            // The control plane asked again: the same answer, nothing done again.
            Claim::AnsweredForAnother { reply } => return send(plane, &reply).await,
            Claim::OtherTenant => {
                let refusal =
                    Err("this tenantRegistrationId was answered for another tenant".into());
                let reply = reply_of(prefix, kind, &envelope.id, detail, refusal);
                return send(plane, &reply.to_string()).await;
            }
            Claim::Busy => return Err(ControlPlaneError::Busy),
            Claim::Mine {
                claimed_at_ms,
                first_claimed_at_ms,
                held_reply,
                taken_over,
            } => (
                claimed_at_ms,
                held_reply,
                taken_over.then_some(first_claimed_at_ms),
            ),
        };
    let reply = match held {
        Some(reply) => reply,
        None => {
            let outcome = match act(app, plane, kind, detail, taken_over).await? {
                Outcome::Done => Ok(()),
                Outcome::Refused(reason) => Err(reason),
                Outcome::Deferred(reason) => {
                    if !requests::defer(&platform_db, request, claimed_at_ms, &raw).await? {
                        return Err(ControlPlaneError::Busy);
                    }
                    tracing::info!(
                        request = key,
                        reason,
                        "deferred until the tenant's operation ends"
                    );
                    return Ok(Handled {
                        deferred: true,
                        ..Handled::NOTHING
                    });
                }
            };
            let reply = reply_of(prefix, kind, &envelope.id, detail, outcome).to_string();
            if !requests::hold_reply(&platform_db, &key, claimed_at_ms, &reply).await? {
                return Err(ControlPlaneError::Busy);
            }
            reply
        }
    };
    let handled = send(plane, &reply).await?;
    requests::mark_answered(&platform_db, request).await?;
    tracing::info!(request = key, reply = ?handled.reply, "control plane request answered");
    Ok(handled)
}

/// Acts again on every request deferred for `tenant`, now that an operation on it ended; each one
/// acted on (answered, or refused for good) is dropped, one deferred again is kept.
async fn act_on_deferred(
    app: &App,
    plane: &ControlPlane,
    tenant: &str,
) -> Result<Handled, ControlPlaneError> {
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    let mut last = Handled::NOTHING;
    for deferred in requests::deferred_of(&platform_db, tenant).await? {
        let event = serde_json::from_str(&deferred.event).unwrap_or(Value::Null);
        last = Box::pin(handle(app, plane, event)).await?;
        if !last.deferred {
            requests::undefer(&platform_db, tenant, &deferred.key).await?;
        }
    }
    Ok(last)
}

/// Sends a held reply (`{detailType, detail}`).
async fn send(plane: &ControlPlane, reply: &str) -> Result<Handled, ControlPlaneError> {
    let parsed: Value = serde_json::from_str(reply).unwrap_or(Value::Null);
    let detail_type = parsed["detailType"].as_str().unwrap_or_default().to_owned();
    plane
        .send(&detail_type, &parsed["detail"].to_string())
        .await?;
    Ok(Handled {
        reply: Some(detail_type),
        ..Handled::NOTHING
    })
}

/// A registration id this plane keys a request by: what sbt-aws makes (a UUID), within a sort
/// key's room.
fn valid_registration(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// The reply to a request: its detail-type and detail (held as one JSON value).
fn reply_of(
    prefix: &str,
    kind: Kind,
    event_id: &str,
    request: &Value,
    outcome: Result<(), String>,
) -> Value {
    let mut detail = json!({
        "tenantId": request["tenantId"],
        "requestId": event_id,
    });
    if let Some(registration) = request["tenantRegistrationId"].as_str() {
        detail["tenantRegistrationId"] = registration.into();
    }
    match &outcome {
        Ok(()) => {
            detail["jobOutput"] =
                json!({"tenantRegistrationData": {"registrationStatus": kind.done()}});
        }
        Err(reason) => {
            detail["reason"] = reason.as_str().into();
            detail["jobOutput"] = json!({"tenantRegistrationData": {
                "registrationStatus": "failed",
                "reason": reason,
            }});
        }
    }
    json!({
        "detailType": format!("{prefix}{}", kind.reply(outcome.is_ok())),
        "detail": detail,
    })
}

/// Acts on one request: [`Outcome::Refused`] is answered with the failure, [`Outcome::Deferred`]
/// waits for the tenant's operation to end; `Err` may pass (retried).
/// `taken_over`: when an earlier delivery first claimed the request, if this one took it over.
async fn act(
    app: &App,
    plane: &ControlPlane,
    kind: Kind,
    detail: &Value,
    taken_over: Option<u64>,
) -> Result<Outcome, ControlPlaneError> {
    let by = TenantId::platform();
    if let Some(registration) = detail["tenantRegistrationId"].as_str() {
        if !valid_registration(registration) {
            return Ok(Outcome::Refused(
                "tenantRegistrationId must be 1 to 128 of A-Z a-z 0-9 - _ . :".into(),
            ));
        }
    }
    let tenant = match detail["tenantId"].as_str().map(TenantId::parse) {
        Some(Ok(tenant)) => tenant,
        Some(Err(e)) => return Ok(Outcome::Refused(format!("tenantId {e}"))),
        None => return Ok(Outcome::Refused("the request has no tenantId".into())),
    };
    if matches!(kind, Kind::Offboarding | Kind::Deactivate)
        && plane.protected.iter().any(|p| p == tenant.as_str())
    {
        return Ok(Outcome::Refused(format!(
            "tenant {tenant} is protected (CONTROL_PLANE_PROTECTED_TENANTS): operators act from it"
        )));
    }
    let done = match kind {
        Kind::Onboarding => {
            let requested = detail["tier"].as_str().unwrap_or(DEFAULT_TIER);
            // In the pool, unless the deployment's tier map puts the tier in a table of its own:
            // the detail is partly the signup's own data, so nothing else in it decides a table.
            let (tier, placement) = match plane.tiers.resolve(requested) {
                Ok(resolved) => resolved,
                Err(reason) => return Ok(Outcome::Refused(reason)),
            };
            let input = OnboardInput {
                tenant_id: tenant.clone(),
                tier,
                limits: None,
                shard_count: None,
                placement,
            };
            match crate::onboard_tenant::onboard(app, &by, input, None).await {
                // A delivery that took over from one that stopped after onboarding: its own work,
                // made since the request was first claimed.
                Err(ApiError::Conflict(_)) => match taken_over {
                    Some(since) if onboarded_since(app, &tenant, since).await => Ok(()),
                    _ => Err(ApiError::Conflict("This tenant already exists.".into())),
                },
                other => other.map(drop),
            }
        }
        // Answered once the tenant is gone: sbt-aws takes a deprovision success as the work done.
        Kind::Offboarding => match Operation::Offboarding
            .charged(
                app,
                crate::offboard_tenant::offboard_as(app, &plane.lanes, &by, &tenant, None),
            )
            .await
        {
            Ok(response) if response.status() == StatusCode::ACCEPTED => {
                return Ok(Outcome::Deferred(
                    "the offboarding runs: answered when it ends".into(),
                ))
            }
            Ok(response) if response.status() == StatusCode::OK => Ok(()),
            Ok(response) => Err(ApiError::Internal(problem_detail(response.body()))),
            Err(e) => Err(e),
        },
        Kind::Activate | Kind::Deactivate => {
            let status = match kind {
                Kind::Activate => TenantStatus::Active,
                _ => TenantStatus::Suspended,
            };
            let change = RecordChange {
                tier: None,
                status: Some(status),
            };
            crate::update_tenant::change_record(app, &by, &tenant, change)
                .await
                .map(drop)
        }
    };
    match done {
        Ok(()) => Ok(Outcome::Done),
        // Every conflict an offboarding meets is an operation in progress on the tenant (a move, a
        // re-sharding, a restore), which ends.
        Err(ApiError::Conflict(reason)) if kind == Kind::Offboarding => {
            Ok(Outcome::Deferred(reason))
        }
        Err(e) => {
            let response = e.into_response();
            match response.status().is_server_error() {
                true => Err(ControlPlaneError::Unavailable(problem_detail(
                    response.body(),
                ))),
                false => Ok(Outcome::Refused(problem_detail(response.body()))),
            }
        }
    }
}

/// Whether `tenant`'s record was made since `since_ms` (to the second; a second earlier counts).
async fn onboarded_since(app: &App, tenant: &TenantId, since_ms: u64) -> bool {
    let since = shared::identity::clock::rfc3339(since_ms.saturating_sub(1000));
    matches!(
        app.directory.record_now(tenant).await,
        Ok(Some(record)) if record.created_at.get(..19) >= since.get(..19)
    )
}

/// A problem+json body's `detail` (or its title), for a reply's reason.
fn problem_detail(body: &Body) -> String {
    let text = match body {
        Body::Text(text) => text.as_str(),
        Body::Binary(bytes) => std::str::from_utf8(bytes).unwrap_or_default(),
        _ => "",
    };
    let problem: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    problem["detail"]
        .as_str()
        .or(problem["title"].as_str())
        .unwrap_or("refused")
        .to_owned()
}

#[cfg(test)]
mod tests {
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
                "jobOutput": {"tenantRegistrationData": {"registrationStatus": "provisioned"}},
            }})
        );
        assert_eq!(failed["detailType"], "activateFailure");
        assert_eq!(failed["detail"]["reason"], "No such tenant.");
        assert_eq!(
            failed["detail"]["jobOutput"]["tenantRegistrationData"]["registrationStatus"],
            "failed"
        );
    }
}
