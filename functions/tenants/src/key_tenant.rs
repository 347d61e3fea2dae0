//! Online encryption of a tenant onboarded without a key: `PATCH /tenants/{tenantId}`
//! `{"keyed": true}` alone (operator). The first call makes the tenant's key and starts sealing its
//! items (`shared::store::lifecycle::keying`); each call, and each run of the lifecycle driver,
//! seals for up to [`WORK_PER_REQUEST`]: 202 with the record and its `keying` progress until 200
//! once every item of a sealed kind is sealed. Asked of a tenant that has a key, it walks the same
//! way and seals whatever is plain (a restore from a copy older than its key brings plain items
//! back). It waits while another operation runs on the tenant; a re-sharding or a restore between
//! its steps makes it walk again from the first item.
//!
//! `PATCH {"rotateKey": true}` alone makes the next version of a keyed tenant's key ([`rotate`]).

use std::time::{Duration, Instant};

use lambda_http::http::StatusCode;
use lambda_http::{Body, Response};
use serde::Serialize;
use shared::identity::clock::rfc3339;
use shared::identity::ids::TenantId;
use shared::service::http::json_response;
use shared::store::client::scoped::TenantDb;
use shared::store::lifecycle::driving;
use shared::store::lifecycle::keying::{self, Walked};
use shared::store::lifecycle::resharding::Step;
use shared::store::tenancy::tenants::{read_record_consistent, Keying, TenantRecord};
use shared::{ApiError, App};

use crate::{accepted, TenantView};

/// How long one call (or one driver run's turn) seals before it answers.
pub const WORK_PER_REQUEST: Duration = Duration::from_secs(5);

/// An online encryption as the API shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyingView {
    pub requested_at: String,
    /// From then on, items are sealed (every container has met the key).
    pub seals_from: String,
    pub steps: u64,
    pub items_sealed: u64,
}

impl From<&Keying> for KeyingView {
    fn from(k: &Keying) -> Self {
        Self {
            requested_at: k.requested_at.clone(),
            seals_from: rfc3339(k.seals_from * 1000),
            steps: k.steps,
            items_sealed: k.sealed,
        }
    }
}

fn no_such_tenant() -> ApiError {
    ApiError::NotFound("No such tenant.".into())
}

/// 409 once the tenant's offboarding has begun: its items are deleted, not sealed (a step's
/// checkpoint is conditioned on it too, `keying::step`).
fn refuse_offboarding(record: &TenantRecord) -> Result<(), ApiError> {
    match record.offboarding {
        Some(_) => Err(ApiError::Conflict(
            "This tenant is being offboarded: its items are deleted, not sealed.".into(),
        )),
        None => Ok(()),
    }
}

/// Starts or continues sealing `tenant`'s items, asked by an operator of `by`.
pub async fn run(app: &App, by: &TenantId, tenant: &TenantId) -> Result<Response<Body>, ApiError> {
    if app.keys.is_none() {
        return Err(ApiError::bad_request(
            "keyed",
            "tenants have no keys of their own here (TENANT_KEYS_TABLE is not set)",
        ));
    }
    let deadline = Instant::now() + WORK_PER_REQUEST;
    let db = app.db_to_change(tenant).await?;
    let mut record = read_record_consistent(&db)
        .await?
        .ok_or_else(no_such_tenant)?;
    if record.keying.is_none() {
        // A revoked key: 403 before anything is written (a keying would resume by itself once the
        // key is enabled again).
        app.refuse_revoked(tenant).await?;
        // Listed for the driver first, so a begun keying is never missing from its list: it goes
        // on with nobody calling, and makes the key (`advance`) if this call fails before it does.
        let platform_db = app.db_for_operator(&TenantId::platform()).await?;
        driving::list(&platform_db, tenant, app.clock.now_millis()).await?;
        let now_ms = app.clock.now_millis();
        record =
            match keying::begin(&db, &record, by, now_ms, cache_seconds(app)).await? {
                Step::Committed(record) => *record,
                Step::Raced => return Err(ApiError::Conflict(
                    "Another operation runs on this tenant, or it is not active: seal its items \
                     once that has ended."
                        .into(),
                )),
            };
    }
    advance(app, &db, record, deadline).await
}

/// Seals `record`'s tenant's items until `deadline`: 202 while items are left, 200 once done.
pub async fn advance(
    app: &App,
    db: &TenantDb,
    mut record: TenantRecord,
    deadline: Instant,
) -> Result<Response<Body>, ApiError> {
    let Some(mut state) = record.keying.clone() else {
        return Ok(json_response(StatusCode::OK, &TenantView::from(record)));
    };
    refuse_offboarding(&record)?;
    if !state.key_made {
        return make_key_then_wait(app, db, &record, &state).await;
    }
    let now = app.clock.now_seconds();
    if now < state.seals_from {
        return Ok(accepted(record, state.seals_from - now));
    }
    // Another operation moves items: wait for it to end.
    if record.migration.is_some() || record.moving.is_some() || record.restore.is_some() {
        return Ok(accepted(record, 5));
    }
    let Some(key) = app.tenant_key(&db.tenant, Some(&record.created_at)).await? else {
        // This container's view is behind the key's making: it takes the one there, and the walk
        // waits from now (`keying::seals_from`), as for a key made only now.
        return make_key_then_wait(app, db, &record, &state).await;
    };
    loop {
        match keying::step(db, &record, &state, &key).await? {
            Walked::Stepped(next) => state = *next,
            Walked::Raced => {
                record = read_record_consistent(db)
                    .await?
                    .ok_or_else(no_such_tenant)?;
                refuse_offboarding(&record)?;
                match record.keying.clone() {
                    Some(now) => state = now,
                    None => return Ok(json_response(StatusCode::OK, &TenantView::from(record))),
                }
            }
            Walked::Done => {
                if let Step::Committed(done) = keying::finish(db, &state, &key).await? {
                    tracing::info!(tenant = %db.tenant, sealed = state.sealed, "tenant's items sealed");
                    return Ok(json_response(StatusCode::OK, &TenantView::from(*done)));
                }
                record = read_record_consistent(db)
                    .await?
                    .ok_or_else(no_such_tenant)?;
                return Ok(match record.keying {
                    Some(_) => accepted(record, 1),
                    None => json_response(StatusCode::OK, &TenantView::from(record)),
                });
            }
        }
        if Instant::now() >= deadline {
            record.keying = Some(state);
            return Ok(accepted(record, 0));
        }
    }
}

/// Makes `record`'s tenant's key (a retry takes the one there; the start records the walk first, so
/// no key is made for a start refused), then counts the walk's start from now
/// (`keying::postpone`, `keying::seals_from`): a container that cached the key's absence before its
/// row was written lets it go only a period after, and a request admitted on it ends later still. Until that is recorded, every call comes here again: 202 to wait.
async fn make_key_then_wait(
    app: &App,
    db: &TenantDb,
    record: &TenantRecord,
    state: &Keying,
) -> Result<Response<Body>, ApiError> {
    let Some(keys) = &app.keys else {
        return Err(ApiError::Internal("no tenant keys here".into()));
    };
    keys.create(&db.tenant, None, &record.created_at).await?;
    let seals_from = keying::seals_from(app.clock.now_millis(), cache_seconds(app));
    keying::postpone(db, state, seals_from).await?;
    let record = read_record_consistent(db)
        .await?
        .ok_or_else(no_such_tenant)?;
    let now = app.clock.now_seconds();
    let wait = record
        .keying
        .as_ref()
        .map_or(0, |k| k.seals_from.saturating_sub(now));
    Ok(accepted(record, wait))
}

/// How long containers cache tenants' keys here (`KEY_CACHE_SECONDS`).
fn cache_seconds(app: &App) -> u64 {
    app.keys.as_ref().map_or(0, |k| k.cache_seconds())
}

/// `{"keyed": true}` alone, or 400.
pub fn check_alone(keyed: bool, others: bool) -> Result<(), ApiError> {
    true_and_alone(
        ("keyed", keyed),
        others,
        "a tenant's key is removed by offboarding it",
        "tier, limits, status, shardCount or placement",
    )
}

/// `{"rotateKey": true}` alone, or 400.
pub fn check_rotation_alone(rotate: bool, others: bool) -> Result<(), ApiError> {
    true_and_alone(
        ("rotateKey", rotate),
        others,
        "a key version is removed only by offboarding the tenant",
        "tier, limits, status, shardCount, placement or keyed",
    )
}

/// A flag `(name, value)` asked true and with no other field (`others`), or 400 naming it: why it
/// can only be true, or the fields it is asked without.
fn true_and_alone(
    (name, value): (&str, bool),
    others: bool,
    why_only_true: &str,
    not_with: &str,
) -> Result<(), ApiError> {
    if !value {
        let detail = format!("{name} can only be true: {why_only_true}");
        return Err(ApiError::bad_request(name, detail));
    }
    if others {
        let detail = format!("{name} is asked on its own, without {not_with}");
        return Err(ApiError::bad_request(name, detail));
    }
    Ok(())
}

/// The next version of `tenant`'s key (`PATCH {"rotateKey": true}`, operator): 200 with the record
/// and its `key` versions. The new version seals from `newestSealsFrom`, once every container has
/// met it; what earlier versions sealed is not rewritten and opens as before. A retry before then
/// answers the same version. 400 when tenants have no keys here, 409 when this one has none (key
/// it first: `{"keyed": true}`), 403 when its key is revoked.
pub async fn rotate(app: &App, tenant: &TenantId) -> Result<Response<Body>, ApiError> {
    let Some(keys) = &app.keys else {
        return Err(ApiError::bad_request(
            "rotateKey",
            "tenants have no keys of their own here (TENANT_KEYS_TABLE is not set)",
        ));
    };
    let db = app.db_to_change(tenant).await?;
    let record = read_record_consistent(&db)
        .await?
        .ok_or_else(no_such_tenant)?;
    if record.offboarding.is_some() {
        return Err(ApiError::Conflict(
            "This tenant is being offboarded: its key is about to be destroyed.".into(),
        ));
    }
    let versions = keys.rotate(tenant).await?.ok_or_else(|| {
        ApiError::Conflict(
            "This tenant has no key to rotate: key it first (PATCH {\"keyed\": true}).".into(),
        )
    })?;
    tracing::info!(tenant = %tenant, version = versions.newest, "tenant key rotated");
    let mut view = TenantView::from(record);
    view.key = Some(versions);
    Ok(json_response(StatusCode::OK, &view))
}
