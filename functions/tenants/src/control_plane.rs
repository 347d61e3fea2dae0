//! `control-plane-events`: pooltable as the application plane of a SaaS Builder Toolkit (sbt-aws)
//! control plane.
//!
//! An EventBridge rule on the control plane's bus (template parameter `ControlPlane=sbt`) hands this
//! function the four requests sbt-aws defines, and it answers each on the same bus with the reply
//! sbt-aws expects, with source `sbt.application.plane` (`CONTROL_PLANE_REPLY_SOURCE`):
//!
//! | request (`detail-type`) | what pooltable does | reply |
//! |---|---|---|
//! | `sbt_aws_onboardingRequest` | onboards `tenantId` at `tier` (`basic` when absent), in the pool; nothing once its registration's offboarding was asked | `provisionSuccess` / `provisionFailure` |
//! | `sbt_aws_offboardingRequest` | starts the offboarding (the lifecycle driver deletes every item); answered when it has ended (at once for a tenant pooltable never held: nothing to remove) | `deprovisionSuccess` / `deprovisionFailure` |
//! | `sbt_aws_activateRequest` | resumes the tenant (`status: active`); while it is restored, deferred until the restore ends | `activateSuccess` / `activateFailure` |
//! | `sbt_aws_deactivateRequest` | suspends it (`status: suspended`); likewise | `deactivateSuccess` / `deactivateFailure` |
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
//! while the tenant is moved, re-sharded or restored, and while its own deletion runs; an activate
//! or a deactivate while it is restored (a restore ends with the tenant active), and those deferred
//! are acted on in the order they came. The end of
//! that operation (its lifecycle event, `reshardingFinished`, `tenantMoveFinished`,
//! `tenantRestoreFinished` or `offboardingFinished`, which a rule on the lifecycle bus hands this
//! function) acts on it again, and the control plane putting it again does too; it is answered
//! `deprovisionSuccess` once the tenant is gone.
//!
//! The tenants no request may suspend or offboard (the operators' own) must be named
//! (`CONTROL_PLANE_PROTECTED_TENANTS`): the function does not start without them, so that a
//! deployment never leaves its operators' tenant to whoever may put events on the bus.

use serde_json::Value;
use shared::identity::ids::TenantId;
use shared::store::client::scoped::TenantDb;
use shared::store::lifecycle::requests::{self, Claim};
use shared::{ApiError, App};
use thiserror::Error;

mod act;
mod plane;
mod request;
#[cfg(test)]
mod tests;
mod tiers;

use act::{act, Outcome};
pub use plane::ControlPlane;
use request::{reply_of, request_key, Envelope, Kind};
pub use tiers::TierMap;

/// The prefix of sbt-aws's detail-types since its event manager's refactor (`sbt_aws_<name>`).
const PREFIX: &str = "sbt_aws_";
/// How long a delivery holds a request before another may take it over: longer than the
/// function's timeout, so a running holder is never taken over.
const HOLD_MS: u64 = 30_000;

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

/// Answers one event.
pub async fn handle(
    app: &App,
    plane: &ControlPlane,
    event: Value,
) -> Result<Handled, ControlPlaneError> {
    handle_event(app, plane, event, false).await
}

/// [`handle`]; `replaying` a deferred request (acted on now, in its turn, never deferred behind the
/// requests deferred with it).
async fn handle_event(
    app: &App,
    plane: &ControlPlane,
    event: Value,
    replaying: bool,
) -> Result<Handled, ControlPlaneError> {
    let ignored = Handled::NOTHING;
    let raw = event.to_string();
    let Ok(envelope) = serde_json::from_value::<Envelope>(event) else {
        tracing::warn!("an event that is no EventBridge event: ignored");
        return Ok(ignored);
    };
    if OPERATION_ENDS.contains(&envelope.detail_type.as_str()) {
        let tenant = envelope.detail["tenantId"].as_str().unwrap_or_default();
        return act_on_deferred(app, plane, tenant, None).await;
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
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    let now_ms = app.clock.now_millis();
    let claimed = claimed(&platform_db, kind, detail, &envelope.id, now_ms).await?;
    let key = claimed.key;
    let request = requests::Request {
        key: &key,
        event_id: &envelope.id,
        tenant: detail["tenantId"].as_str().unwrap_or_default(),
    };
    let (claimed_at_ms, held, taken_over) = match claimed.claim {
        // (`OtherTenant` again: this event's id was asked for another tenant before, and answered)
        Claim::Duplicate | Claim::OtherTenant => {
            tracing::info!(request = key, "an event answered before: nothing done");
            return Ok(Handled {
                duplicate: true,
                ..Handled::NOTHING
            });
        }
        // The control plane asked again: the same answer, nothing done again.
        Claim::AnsweredForAnother { reply } => return send(plane, &reply).await,
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
        None if claimed.refused => {
            let reply = other_tenants_refusal(prefix, kind, &envelope.id, detail);
            if !requests::hold_reply(&platform_db, &key, claimed_at_ms, &reply).await? {
                return Err(ControlPlaneError::Busy);
            }
            reply
        }
        None => {
            let outcome = match act(app, plane, kind, detail, taken_over, replaying).await? {
                Outcome::Done => Ok(()),
                Outcome::Refused(reason) => Err(reason),
                Outcome::Deferred(reason) => {
                    let deferral = (claimed_at_ms, raw.as_str(), reason);
                    let waits = Waits::Offboarding;
                    return defer_while(app, plane, &platform_db, request, deferral, waits).await;
                }
                Outcome::Blocked(reason) => {
                    let deferral = (claimed_at_ms, raw.as_str(), reason);
                    let waits = Waits::Blocking;
                    return defer_while(app, plane, &platform_db, request, deferral, waits).await;
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

/// What one delivery claimed: the request's key and its claim, or, when that key was answered for
/// another tenant than this event names, the claim of this event's refusal (`refused`).
struct Claimed {
    key: String,
    refused: bool,
    claim: Claim,
}

/// Claims the request `event_id` asks (its `kind` and `detail`) at `now_ms`. A request whose key
/// names another tenant is refused; that refusal is this event's own request
/// (`<key>#refused#<event id>`), claimed and answered once like any other, so that a redelivery of
/// the event sends nothing again.
async fn claimed(
    platform_db: &TenantDb,
    kind: Kind,
    detail: &Value,
    event_id: &str,
    now_ms: u64,
) -> Result<Claimed, ControlPlaneError> {
    let tenant = detail["tenantId"].as_str().unwrap_or_default();
    let key = request_key(kind, detail, event_id);
    let request = requests::Request {
        key: &key,
        event_id,
        tenant,
    };
    let claim = requests::claim(platform_db, request, now_ms, HOLD_MS).await?;
    if claim != Claim::OtherTenant {
        return Ok(Claimed {
            key,
            refused: false,
            claim,
        });
    }
    let key = format!("{key}#refused#{event_id}");
    let refusal = requests::Request {
        key: &key,
        event_id,
        tenant,
    };
    let claim = requests::claim(platform_db, refusal, now_ms, HOLD_MS).await?;
    Ok(Claimed {
        key,
        refused: true,
        claim,
    })
}

/// The reply refusing a request whose key was answered for another tenant: without the
/// registration's id, since sbt-aws marks the registration a reply names, and this one belongs to
/// the tenant it was answered for.
fn other_tenants_refusal(prefix: &str, kind: Kind, event_id: &str, detail: &Value) -> String {
    let refusal = Err("this tenantRegistrationId was answered for another tenant".into());
    let mut detail = detail.clone();
    if let Some(fields) = detail.as_object_mut() {
        fields.remove("tenantRegistrationId");
    }
    reply_of(prefix, kind, event_id, &detail, refusal).to_string()
}

/// Defers `request` (claimed at `claimed_at_ms`, its event `raw`), unanswered, until its tenant's
/// operation ends; `Busy` when another delivery took it over meanwhile.
async fn defer(
    platform_db: &TenantDb,
    request: requests::Request<'_>,
    claimed_at_ms: u64,
    raw: &str,
    reason: String,
) -> Result<Handled, ControlPlaneError> {
    if !requests::defer(platform_db, request, claimed_at_ms, raw).await? {
        return Err(ControlPlaneError::Busy);
    }
    tracing::info!(
        request = request.key,
        reason,
        "deferred until the tenant's operation ends"
    );
    Ok(Handled {
        deferred: true,
        ..Handled::NOTHING
    })
}

/// What a deferred request waits for.
enum Waits {
    /// The offboarding it started, or found running, to end.
    Offboarding,
    /// The operation that blocks it (a move, a re-sharding, a restore) to end.
    Blocking,
}

/// Defers `request` (claimed at, its event, why) until what it `waits` for ends. That end acts on
/// what it finds deferred; it may have come between the request's act and its deferral, finding
/// nothing: the record is read again, and the deferred requests acted on now when it has ended.
async fn defer_while(
    app: &App,
    plane: &ControlPlane,
    platform_db: &TenantDb,
    request: requests::Request<'_>,
    (claimed_at_ms, raw, reason): (u64, &str, String),
    waits: Waits,
) -> Result<Handled, ControlPlaneError> {
    let deferred = defer(platform_db, request, claimed_at_ms, raw, reason).await?;
    let still = match waits {
        Waits::Offboarding => act::still_offboarding(app, request.tenant).await?,
        Waits::Blocking => act::still_blocked(app, request.tenant).await?,
    };
    if still {
        return Ok(deferred);
    }
    act_on_deferred(app, plane, request.tenant, Some(request.key)).await
}

/// Acts again on every request deferred for `tenant`, now that an operation on it ended; each one
/// acted on (answered, or refused for good) is dropped, one deferred again is kept. What became of
/// the request keyed `own` when there is one among them (the caller's own), else of the last.
async fn act_on_deferred(
    app: &App,
    plane: &ControlPlane,
    tenant: &str,
    own: Option<&str>,
) -> Result<Handled, ControlPlaneError> {
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    let (mut last, mut mine) = (Handled::NOTHING, None);
    for deferred in requests::deferred_of(&platform_db, tenant).await? {
        let event = serde_json::from_str(&deferred.event).unwrap_or(Value::Null);
        last = Box::pin(handle_event(app, plane, event, true)).await?;
        if !last.deferred {
            requests::undefer(&platform_db, tenant, &deferred.key).await?;
        }
        if own == Some(deferred.key.as_str()) {
            mine = Some(last.clone());
        }
    }
    Ok(mine.unwrap_or(last))
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
