//! Tenant records. Onboarding, changing, offboarding and exporting a tenant are operator actions: they need the
//! `pooltable/admin` scope or the `platform-admin` group (never a custom attribute; see
//! `shared::isolation::claims`), and even so they write through scoped credentials of the tenant
//! concerned.

pub use lane_queue::{LaneMessage, LaneQueue, Lanes, LANE_SIGNATURE_ATTRIBUTE, WORK_PER_MESSAGE};
pub use lanes_view::LanesProgress;

pub mod control_plane;
pub mod drive_lifecycle;
pub mod key_tenant;
mod lane_queue;
pub mod lane_walk;
mod lanes_view;
pub mod move_tenant;
pub mod operation;
mod own_table;
pub mod pre_token_generation;
pub mod publish_events;
pub mod reshard_tenant;
mod restore_lanes;
pub mod work_lanes;
// @generated begin: `pooltable gen` writes the route modules from routes.yaml
pub mod export_tenant;
pub mod get_tenant;
pub mod offboard_tenant;
pub mod onboard_tenant;
pub mod restore_tenant;
pub mod update_tenant;
// @generated end

use std::collections::BTreeMap;

use serde::Serialize;
use shared::identity::ids::TenantId;
use shared::store::client::scoped::TenantDb;
use shared::store::tenancy::tenants::{Limits, TenantRecord, TenantStatus, Tier};
use shared::ApiError;

/// A tenant record as the API returns it, with the limits in force.
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantView {
    pub tenant_id: String,
    pub tier: Tier,
    pub limits: Limits,
    pub shard_count: u32,
    pub created_at: String,
    pub status: TenantStatus,
    /// `pool`, or `own` with `ownTable`.
    pub placement: &'static str,
    pub own_table: Option<String>,
    /// While the tenant is being offboarded: its progress.
    pub offboarding: Option<OffboardingView>,
    /// While the tenant is being re-sharded: its progress.
    pub migration: Option<MigrationView>,
    /// While the tenant is being restored: its progress.
    pub restore: Option<RestoreView>,
    /// While the tenant is being moved between placements: its progress.
    #[serde(rename = "move")]
    pub moving: Option<move_tenant::MoveView>,
    /// The last restore's report.
    pub last_restore: Option<RestoreView>,
    /// While its items are being sealed under its new key: the progress.
    pub keying: Option<key_tenant::KeyingView>,
    /// Its key's versions: in the answer to a rotation (`PATCH {"rotateKey": true}`).
    pub key: Option<shared::store::keys::KeyVersions>,
}

/// A restore (running, or its report), as the API shows it.
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreView {
    /// The table read.
    pub source: String,
    pub point_in_time: Option<String>,
    pub requested_at: String,
    /// The tenant of the operator who asked: shown to operators only.
    pub requested_by: Option<String>,
    /// From then on, items are written.
    pub starts_at: String,
    /// `preparing`, `putting`, `deleting`, `finished` or `abandoned`.
    pub phase: &'static str,
    /// Why it was abandoned: its source could not serve (nothing was written), or an operator
    /// aborted it (what its counts say was written stays).
    pub reason: Option<String>,
    pub steps: u64,
    #[serde(flatten)]
    pub counts: shared::store::lifecycle::restoring::Counts,
    pub finished_at: Option<String>,
    /// The walking phase's lanes, while it runs in them (`GET /tenants/{tenantId}` only; the
    /// counts above are the phases' before it).
    pub lanes: Option<LanesProgress>,
}

impl From<&shared::store::lifecycle::restoring::Restore> for RestoreView {
    fn from(r: &shared::store::lifecycle::restoring::Restore) -> Self {
        use shared::store::lifecycle::restoring::RestorePhase;
        let (phase, reason) = match &r.phase {
            RestorePhase::Preparing => ("preparing", None),
            RestorePhase::Putting => ("putting", None),
            RestorePhase::Deleting => ("deleting", None),
            RestorePhase::Finished => ("finished", None),
            RestorePhase::Abandoned(why) => ("abandoned", Some(why.clone())),
        };
        Self {
            source: r.source_table.clone(),
            point_in_time: r.point_in_time.clone(),
            requested_at: r.requested_at.clone(),
            requested_by: Some(r.requested_by.clone()),
            starts_at: shared::identity::clock::rfc3339(r.starts_at * 1000),
            phase,
            reason,
            steps: r.steps,
            counts: shared::store::lifecycle::restoring::Counts::of(r),
            finished_at: r.finished_at.clone(),
            lanes: None,
        }
    }
}

/// 200 with the record.
pub fn done(record: TenantRecord) -> lambda_http::Response<lambda_http::Body> {
    shared::service::http::json_response(
        lambda_http::http::StatusCode::OK,
        &TenantView::from(record),
    )
}

/// Keeps `record`, just read or written consistently, as this container's copy of `tenant`'s
/// record: the calls that follow in this container go on from it.
pub(crate) fn remember(app: &shared::App, tenant: &TenantId, record: &TenantRecord) {
    app.directory
        .remember(tenant, Some(std::sync::Arc::new(record.clone())));
}

/// What every call's work on a running operation starts with: `record` (just read or written)
/// [`remember`]ed, and the operation's state in it (`state_of`); 500 when it holds none (`what`
/// names the operation).
pub(crate) fn running_state<S: Clone>(
    app: &shared::App,
    db: &TenantDb,
    record: &TenantRecord,
    state_of: impl FnOnce(&TenantRecord) -> Option<&S>,
    what: &str,
) -> Result<S, ApiError> {
    remember(app, &db.tenant, record);
    state_of(record)
        .cloned()
        .ok_or_else(|| ApiError::Internal(format!("{what} record without its state")))
}

/// The answer from `tenant`'s record as it is now (read consistently, and remembered): 202 while
/// `running` says the operation still runs (come back in a second), 200 once it ended.
pub(crate) async fn reread(
    app: &shared::App,
    db: &TenantDb,
    running: fn(&TenantRecord) -> bool,
) -> Result<lambda_http::Response<lambda_http::Body>, ApiError> {
    let record = shared::store::tenancy::tenants::read_record_consistent(db)
        .await?
        .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
    remember(app, &db.tenant, &record);
    Ok(match running(&record) {
        true => accepted(record, 1),
        false => done(record),
    })
}

/// 202 with the record and its progress, and when to call again (`Retry-After`).
pub fn accepted(
    record: TenantRecord,
    retry_after_seconds: u64,
) -> lambda_http::Response<lambda_http::Body> {
    let mut response = shared::service::http::json_response(
        lambda_http::http::StatusCode::ACCEPTED,
        &TenantView::from(record),
    );
    if let Ok(value) = retry_after_seconds.to_string().parse() {
        response
            .headers_mut()
            .insert(lambda_http::http::header::RETRY_AFTER, value);
    }
    response
}

/// What a re-sharding and a move between placements both show of their progress, after what each
/// shows of its own.
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressView {
    pub requested_at: String,
    /// The tenant of the operator who started it: shown to operators only
    /// ([`TenantView::for_tenant_user`]).
    pub requested_by: Option<String>,
    /// From then on, writes go to the new layout or table.
    pub writes_move_at: String,
    /// From then on, items are moved.
    pub moves_start_at: String,
    /// Steps committed, and the items they moved (while lanes run, theirs are in `lanes.itemsDone`
    /// until the walk's end notes them here).
    pub steps: u64,
    pub items_moved: u64,
}

impl From<&shared::store::tenancy::tenants::MoveProgress> for ProgressView {
    fn from(p: &shared::store::tenancy::tenants::MoveProgress) -> Self {
        let at = |s: u64| shared::identity::clock::rfc3339(s * 1000);
        Self {
            requested_at: p.requested_at.clone(),
            requested_by: Some(p.requested_by.clone()),
            writes_move_at: at(p.writes_move_at),
            moves_start_at: at(p.moves_start_at),
            steps: p.steps,
            items_moved: p.moved_in_all(),
        }
    }
}

/// A re-sharding in progress, as the API shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationView {
    pub from_shard_count: u32,
    pub to_shard_count: u32,
    #[serde(flatten)]
    pub progress: ProgressView,
    /// While its walk runs in lanes: their progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lanes: Option<LanesProgress>,
}

impl From<&shared::store::lifecycle::resharding::Migration> for MigrationView {
    fn from(m: &shared::store::lifecycle::resharding::Migration) -> Self {
        Self {
            from_shard_count: m.from,
            to_shard_count: m.to,
            progress: (&m.progress).into(),
            lanes: None,
        }
    }
}

impl TenantView {
    /// The view a tenant's own user gets: nothing that names another tenant (the operator's tenant
    /// that started a re-sharding). An offboarding's progress needs no such care: a tenant being
    /// offboarded is refused every route.
    pub fn for_tenant_user(mut self) -> Self {
        if let Some(m) = &mut self.migration {
            m.progress.requested_by = None;
        }
        if let Some(m) = &mut self.moving {
            m.progress.requested_by = None;
        }
        for r in [&mut self.restore, &mut self.last_restore]
            .into_iter()
            .flatten()
        {
            r.requested_by = None;
        }
        self
    }
}

impl From<TenantRecord> for TenantView {
    fn from(r: TenantRecord) -> Self {
        Self {
            migration: r.migration.as_ref().map(MigrationView::from),
            restore: r.restore.as_ref().map(RestoreView::from),
            moving: r.moving.as_ref().map(move_tenant::MoveView::from),
            last_restore: r.last_restore.as_ref().map(RestoreView::from),
            keying: r.keying.as_ref().map(key_tenant::KeyingView::from),
            key: None,
            offboarding: r
                .offboarding
                .as_ref()
                .map(|o| OffboardingView::running(&r.tenant_id, o, None)),
            status: r.status,
            placement: match r.own_table {
                Some(_) => "own",
                None => "pool",
            },
            own_table: r.own_table.clone(),
            limits: r.limits(),
            tenant_id: r.tenant_id,
            tier: r.tier,
            shard_count: r.shard_count,
            created_at: r.created_at,
        }
    }
}

/// The operator calling and the tenant of the path it acts on, for an action an operator may not
/// take on its own tenant (409 with `own_tenant`): its operators would be refused while it runs.
pub async fn operator_on_another_tenant(
    app: &shared::App,
    req: &lambda_http::Request,
    own_tenant: &str,
) -> Result<
    (
        shared::identity::ids::TenantId,
        shared::identity::ids::TenantId,
    ),
    ApiError,
> {
    let caller = app.caller(req)?;
    app.require_operator(&caller).await?;
    let tenant = shared::service::http::path_tenant_id(req)?;
    if tenant == caller.tenant {
        return Err(ApiError::Conflict(own_tenant.into()));
    }
    Ok((caller.tenant, tenant))
}

/// 409 while `record`'s tenant is being restored or moved between placements: a re-sharding, an
/// offboarding, a restore and a move of one tenant refuse each other.
pub fn refuse_while_restoring_or_moving(record: &TenantRecord) -> Result<(), ApiError> {
    if let Some(m) = &record.moving {
        return Err(ApiError::Conflict(format!(
            "This tenant is being moved to {} (asked at {}); finish that first \
             (PATCH /tenants/{{tenantId}} {{\"placement\": \"{}\"}}).",
            m.to_table,
            m.progress.requested_at,
            move_tenant::placement_name(m.to)
        )));
    }
    match &record.restore {
        Some(r) => Err(ApiError::Conflict(format!(
            "This tenant is being restored from {} (asked at {}); it ends by itself, \
             watch it with GET /tenants/{{tenantId}}.",
            r.source_table, r.requested_at
        ))),
        None => Ok(()),
    }
}

/// Custom limits as an operator sends them (whole numbers, also when written as `5.0`).
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsInput {
    #[serde(deserialize_with = "shared::service::http::whole_number")]
    requests_per_second: u32,
    #[serde(deserialize_with = "shared::service::http::whole_number")]
    capacity_units_per_second: u32,
}

impl From<LimitsInput> for Limits {
    fn from(l: LimitsInput) -> Self {
        Limits {
            requests_per_second: l.requests_per_second,
            capacity_units_per_second: l.capacity_units_per_second,
        }
    }
}

/// The tier and custom limits an operator asks for, checked together: `custom` needs `limits`, any
/// other tier takes its own (so `limits` alone means `custom`).
pub fn tier_and_limits(
    tier: Option<Tier>,
    limits: Option<impl Into<Limits>>,
) -> Result<(Tier, Option<Limits>), ApiError> {
    let limits: Option<Limits> = limits.map(Into::into);
    if let Some(limits) = &limits {
        limits
            .check()
            .map_err(|detail| ApiError::bad_request("limits", detail))?;
    }
    match (tier, limits) {
        (None | Some(Tier::Custom), Some(limits)) => Ok((Tier::Custom, Some(limits))),
        (Some(Tier::Custom), None) => Err(ApiError::bad_request(
            "limits",
            "tier custom needs limits {requestsPerSecond, capacityUnitsPerSecond}",
        )),
        (Some(tier), None) => Ok((tier, None)),
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "limits",
            "limits go with tier custom only; the other tiers have their own",
        )),
        (None, None) => Err(ApiError::bad_request("tier", "tier is required")),
    }
}

#[cfg(test)]
mod tests;

/// An offboarding as the API shows it: in progress (`offboarding`) or done (`offboarded`, the
/// deletion report).
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OffboardingView {
    pub tenant_id: String,
    /// `offboarding` or `offboarded`.
    pub status: &'static str,
    pub requested_at: String,
    pub requested_by: String,
    pub deletion_starts_at: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// Items deleted so far, by kind.
    pub deleted: BTreeMap<String, u64>,
    pub deleted_total: u64,
    /// While the walk runs in lanes: their progress.
    pub lanes: Option<LanesProgress>,
    /// The tenant's key, destroyed when its items were: every copy of what it sealed (point-in-time
    /// recovery, restore tables, exports) is ciphertext no key the platform holds opens.
    pub tenant_key: Option<shared::store::keys::Shredded>,
}

impl OffboardingView {
    pub fn running(
        tenant: &str,
        o: &shared::store::lifecycle::offboarding::Offboarding,
        lanes: Option<LanesProgress>,
    ) -> Self {
        let deleted = lanes
            .as_ref()
            .map_or_else(|| o.deleted.clone(), |l| l.by_kind.clone());
        Self {
            lanes,
            tenant_key: None,
            tenant_id: tenant.to_owned(),
            status: "offboarding",
            requested_at: o.requested_at.clone(),
            requested_by: o.requested_by.clone(),
            deletion_starts_at: Some(shared::identity::clock::rfc3339(
                o.deletion_starts_at * 1000,
            )),
            started_at: o.started_at.clone(),
            finished_at: None,
            deleted_total: deleted.values().sum(),
            deleted,
        }
    }

    /// The report of a finished offboarding: `o` with the record's own deletion counted.
    pub fn finished(
        tenant: &str,
        o: &shared::store::lifecycle::offboarding::Offboarding,
        at: String,
    ) -> Self {
        let deleted = shared::store::lifecycle::offboarding::with_record(o.deleted.clone());
        Self {
            tenant_id: tenant.to_owned(),
            status: "offboarded",
            requested_at: o.requested_at.clone(),
            requested_by: o.requested_by.clone(),
            deletion_starts_at: None,
            started_at: Some(o.started_at.clone().unwrap_or_else(|| at.clone())),
            finished_at: Some(at),
            lanes: None,
            tenant_key: None,
            deleted_total: deleted.values().sum(),
            deleted,
        }
    }
}
