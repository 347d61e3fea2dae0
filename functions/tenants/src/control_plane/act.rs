//! Acting on a request: the tenant it names, checked, then the onboarding, offboarding or status
//! change it asks, done as the platform's operator would do it.

use lambda_http::http::StatusCode;
use lambda_http::Body;
use serde_json::Value;
use shared::identity::ids::TenantId;
use shared::store::lifecycle::requests;
use shared::store::tenancy::tenants::{RecordChange, TenantStatus, Tier};
use shared::{ApiError, App};

use super::request::{registration_key, reply_failed, valid_registration, Kind};
use super::{ControlPlane, ControlPlaneError};
use crate::onboard_tenant::{OnboardInput, PlacementInput};
use crate::operation::Operation;

/// The tier of an onboarding request that names none.
const DEFAULT_TIER: &str = "basic";

/// What acting on a request came to.
pub(super) enum Outcome {
    Done,
    /// Refused for good: answered with this reason.
    Refused(String),
    /// The offboarding runs: deferred until it ends.
    Deferred(String),
    /// Refused while another operation on the tenant runs (an offboarding: a move, a re-sharding,
    /// a restore; a status: a restore): deferred until it ends.
    Blocked(String),
}

/// Acts on one request: [`Outcome::Refused`] is answered with the failure, [`Outcome::Deferred`]
/// waits for the offboarding to end, [`Outcome::Blocked`] for the operation that blocks it; `Err`
/// may pass (retried).
/// `taken_over`: when an earlier delivery first claimed the request, if this one took it over;
/// `replaying`: a deferred request acted on in its turn.
pub(super) async fn act(
    app: &App,
    plane: &ControlPlane,
    kind: Kind,
    detail: &Value,
    taken_over: Option<u64>,
    replaying: bool,
) -> Result<Outcome, ControlPlaneError> {
    let by = TenantId::platform();
    let tenant = match tenant_to_act_on(plane, kind, detail) {
        Ok(tenant) => tenant,
        Err(refusal) => return Ok(Outcome::Refused(refusal)),
    };
    // An offboarding of a registration whose onboarding pooltable refused (the tenant id was
    // another's already) removes nothing: that tenant is not the registration's.
    if kind == Kind::Offboarding && onboarding_refused(app, detail).await? {
        tracing::info!(tenant = %tenant, "an offboarding of a registration whose onboarding was refused: nothing of it to remove");
        return outcome_of(kind, Ok(()));
    }
    let done = match kind {
        Kind::Onboarding => return onboarding(app, plane, &tenant, detail, taken_over).await,
        // Answered once the tenant is gone: sbt-aws takes a deprovision success as the work done.
        // A conflict is deferred only while an operation blocks it (read again): another (two
        // writers met) passes, to be retried, never deferred behind an operation that is not there.
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
            Err(ApiError::Conflict(reason)) if !still_blocked(app, tenant.as_str()).await? => {
                return Err(ControlPlaneError::Unavailable(reason))
            }
            // No record and no report: pooltable never held this tenant (its registration's
            // provisioning failed, or was never asked of this plane). Nothing of it is here to
            // remove, and a failure would leave the registration undeletable in sbt-aws.
            // An onboarding of its registration still being answered may make it yet: retried.
            Err(ApiError::NotFound(_)) if onboarding_open(app, detail).await? => {
                return Err(ControlPlaneError::Unavailable(
                    "the registration's onboarding is still being answered".into(),
                ))
            }
            Err(ApiError::NotFound(_)) => {
                tracing::info!(tenant = %tenant, "an offboarding of a tenant pooltable never held: nothing to remove");
                Ok(())
            }
            Err(e) => Err(e),
        },
        // A restore ends with the tenant active: a status asked meanwhile waits for its end, and
        // is set then (deferred in the order the requests came). One refused for good (the tenant
        // is being offboarded, or is none) is answered.
        Kind::Activate | Kind::Deactivate => {
            // Behind an earlier status request deferred for the tenant: deferred too, so that they
            // are set in the order they came (the restore may have ended before its end's event
            // acted on them).
            if !replaying && status_deferred(app, tenant.as_str()).await? {
                return Ok(Outcome::Blocked(
                    "an earlier status request of this tenant waits for its restore's end".into(),
                ));
            }
            match set_status(app, &by, &tenant, kind).await {
                Err(ApiError::Conflict(reason)) if still_blocked(app, tenant.as_str()).await? => {
                    return Ok(Outcome::Blocked(reason))
                }
                // Refused while a restore ran that has ended since: set now. Refused again, it is
                // being offboarded (answered).
                Err(ApiError::Conflict(_)) => set_status(app, &by, &tenant, kind).await,
                done => done,
            }
        }
    };
    outcome_of(kind, done)
}

/// Acts on an onboarding request of `tenant` (its `detail`): refused for a tier the plane has not,
/// or once its registration's offboarding was asked; else onboarded.
async fn onboarding(
    app: &App,
    plane: &ControlPlane,
    tenant: &TenantId,
    detail: &Value,
    taken_over: Option<u64>,
) -> Result<Outcome, ControlPlaneError> {
    let requested = detail["tier"].as_str().unwrap_or(DEFAULT_TIER);
    // In the pool, unless the deployment's tier map puts the tier in a table of its own:
    // the detail is partly the signup's own data, so nothing else in it decides a table.
    let resolved = match plane.tiers.resolve(requested) {
        Ok(resolved) => resolved,
        Err(reason) => return Ok(Outcome::Refused(reason)),
    };
    // EventBridge keeps no order, and a first delivery that failed before its claim comes
    // back minutes later (Lambda's retries) or days later (redriven from the dead
    // letters): an onboarding acted on after its registration's offboarding was asked
    // onboards nothing. sbt-aws deleted the registration, so a tenant made now would be
    // nobody's, and no request would ever remove it. (The offboarding, for its part,
    // waits while this onboarding is open: each claims its entry before it reads the
    // other's, so at least one of them sees the other.) A delivery that took over from
    // one that onboarded the tenant before the offboarding was asked answers that work.
    if offboarding_asked(app, detail, tenant).await? {
        let ours = match taken_over {
            Some(since) => onboarded_since(app, tenant, since).await,
            None => false,
        };
        if !ours {
            return Ok(Outcome::Refused(
                "the registration's offboarding was asked before its onboarding was acted on: nothing is onboarded".into(),
            ));
        }
    }
    outcome_of(
        Kind::Onboarding,
        onboard(app, &TenantId::platform(), tenant, resolved, taken_over).await,
    )
}

/// The tenant `detail` names, when a request of `kind` may act on it; else the reason it is
/// refused: a registration id or a tenant id that is none, or a protected tenant to suspend or
/// offboard.
fn tenant_to_act_on(plane: &ControlPlane, kind: Kind, detail: &Value) -> Result<TenantId, String> {
    match detail.get("tenantRegistrationId") {
        None | Some(Value::Null) => {}
        Some(Value::String(registration)) if valid_registration(registration) => {}
        Some(_) => {
            return Err("tenantRegistrationId must be 1 to 128 of A-Z a-z 0-9 - _ . :".into())
        }
    }
    // A tier that is there but not a name is a mistake, never the default tier.
    if detail
        .get("tier")
        .is_some_and(|t| !t.is_null() && !t.is_string())
    {
        return Err(format!(
            "tier must be a tier's name, not {}",
            detail["tier"]
        ));
    }
    let tenant = match detail["tenantId"].as_str().map(TenantId::parse) {
        Some(Ok(tenant)) => tenant,
        Some(Err(e)) => return Err(format!("tenantId {e}")),
        None => return Err("the request has no tenantId".into()),
    };
    if matches!(kind, Kind::Offboarding | Kind::Deactivate)
        && plane.protected.iter().any(|p| p == tenant.as_str())
    {
        return Err(format!(
            "tenant {tenant} is protected (CONTROL_PLANE_PROTECTED_TENANTS): operators act from it"
        ));
    }
    Ok(tenant)
}

/// Onboards `tenant` at the tier and placement its request resolved to.
async fn onboard(
    app: &App,
    by: &TenantId,
    tenant: &TenantId,
    (tier, placement): (Tier, PlacementInput),
    taken_over: Option<u64>,
) -> Result<(), ApiError> {
    let input = OnboardInput {
        tenant_id: tenant.clone(),
        tier,
        limits: None,
        shard_count: None,
        placement,
        kms_key_arn: None,
    };
    match crate::onboard_tenant::onboard(app, by, input, None).await {
        // A delivery that took over from one that stopped after onboarding: its own work,
        // made since the request was first claimed.
        // Otherwise its own reason: the tenant exists, or its own table cannot serve it.
        Err(ApiError::Conflict(reason)) => match taken_over {
            Some(since) if onboarded_since(app, tenant, since).await => Ok(()),
            _ => Err(ApiError::Conflict(reason)),
        },
        other => other.map(drop),
    }
}

/// Resumes (`Activate`) or suspends (`Deactivate`) `tenant`.
async fn set_status(
    app: &App,
    by: &TenantId,
    tenant: &TenantId,
    kind: Kind,
) -> Result<(), ApiError> {
    let status = match kind {
        Kind::Activate => TenantStatus::Active,
        _ => TenantStatus::Suspended,
    };
    let change = RecordChange {
        tier: None,
        status: Some(status),
    };
    crate::update_tenant::change_record(app, by, tenant, change)
        .await
        .map(drop)
}

/// Whether a status request (activate, deactivate) is deferred for `tenant`.
async fn status_deferred(app: &App, tenant: &str) -> Result<bool, ControlPlaneError> {
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    let deferred = requests::deferred_of(&platform_db, tenant).await?;
    Ok(deferred.iter().any(|d| {
        [Kind::Activate, Kind::Deactivate]
            .iter()
            .any(|k| d.key.starts_with(&format!("{}#", k.name())))
    }))
}

/// Whether the onboarding of `detail`'s registration is claimed and not answered yet.
async fn onboarding_open(app: &App, detail: &Value) -> Result<bool, ControlPlaneError> {
    let Some(key) = registration_key(Kind::Onboarding, detail) else {
        return Ok(false);
    };
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    Ok(requests::is_open(&platform_db, &key).await?)
}

/// Whether the onboarding of `detail`'s registration was answered with a failure (its entry's
/// held reply; an entry expired, or a registration without one, is not known refused).
async fn onboarding_refused(app: &App, detail: &Value) -> Result<bool, ControlPlaneError> {
    let Some(key) = registration_key(Kind::Onboarding, detail) else {
        return Ok(false);
    };
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    let held = requests::held_reply(&platform_db, &key).await?;
    Ok(held.is_some_and(|reply| reply_failed(&reply)))
}

/// Whether the offboarding of `detail`'s registration was asked for `tenant` (its entry claimed,
/// whatever its state).
async fn offboarding_asked(
    app: &App,
    detail: &Value,
    tenant: &TenantId,
) -> Result<bool, ControlPlaneError> {
    let Some(key) = registration_key(Kind::Offboarding, detail) else {
        return Ok(false);
    };
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    Ok(requests::claimed_for(&platform_db, &key, tenant.as_str()).await?)
}

/// Whether an operation that ends still blocks `tenant`'s offboarding or a change of its status (a
/// re-sharding, a move, a restore; not an offboarding), its record read now, consistently.
pub(super) async fn still_blocked(app: &App, tenant: &str) -> Result<bool, ControlPlaneError> {
    let Ok(tenant) = TenantId::parse(tenant) else {
        return Ok(false);
    };
    Ok(match app.directory.record_now(&tenant).await? {
        Some(record) => crate::offboard_tenant::refuse_while_resharding(&record).is_err(),
        None => false,
    })
}

/// Whether `tenant`'s offboarding still runs (its record, read now, consistently, is there and
/// being offboarded): once it is gone, its offboarding has ended.
pub(super) async fn still_offboarding(app: &App, tenant: &str) -> Result<bool, ControlPlaneError> {
    let Ok(tenant) = TenantId::parse(tenant) else {
        return Ok(false);
    };
    Ok(app
        .directory
        .record_now(&tenant)
        .await?
        .is_some_and(|record| record.offboarding.is_some()))
}

/// What a request of `kind` came to, from what acting on it `done`: a refusal the client caused is
/// answered, a failure on the server's side may pass (retried).
fn outcome_of(kind: Kind, done: Result<(), ApiError>) -> Result<Outcome, ControlPlaneError> {
    match done {
        Ok(()) => Ok(Outcome::Done),
        // A conflict left to an offboarding is an operation in progress on the tenant (a move, a
        // re-sharding, a restore; `act` checked), which ends.
        Err(ApiError::Conflict(reason)) if kind == Kind::Offboarding => {
            Ok(Outcome::Blocked(reason))
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
