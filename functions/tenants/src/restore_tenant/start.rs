//! Starting a restore, once `start_or_continue` found the tenant idle and the source named: the
//! source table's checks, a dry run's answer, and the restore's beginning.

use std::time::{Duration, Instant};

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Response};
use shared::identity::ids::TenantId;
use shared::service::http::json_response;
use shared::service::idempotent;
use shared::store::client::scoped::TenantDb;
use shared::store::lifecycle::driving;
use shared::store::lifecycle::restoring::{
    self, point_in_time, Restore, Step, STARTS_DELAY_SECONDS,
};
use shared::store::tenancy::tenants::{read_record_consistent, TenantRecord, TenantStatus};
use shared::{ApiError, App};

use super::{refuse_unless_idle, DryRun};
use crate::{accepted, TenantView};

/// Source table `table`, checked: active with the catalog index (its identity, kept by the
/// restore), and holding `db`'s tenant as `record` has it now (its reader, and the tenant's shard
/// count there); 422 otherwise.
pub(super) async fn checked_source_table(
    app: &App,
    db: &TenantDb,
    manager: &aws_sdk_dynamodb::Client,
    record: &TenantRecord,
    table: &str,
) -> Result<(String, TenantDb, u32), ApiError> {
    let described = point_in_time::describe_source(manager, table).await?;
    let Some(source_id) = described.filter(|d| d.ready).map(|d| d.identity) else {
        return Err(ApiError::Unprocessable(format!(
            "No active table {table} with the catalog index ({}) to restore from.",
            shared::identity::keys::CATALOG_INDEX
        )));
    };
    let reader = app.tenants.source_reader(&db.tenant, table);
    let shards = restoring::source_shards(&reader, record)
        .await?
        .map_err(|wrong| ApiError::Unprocessable(format!("{table}: {wrong}.")))?;
    Ok((source_id, reader, shards))
}

/// A dry run's answer: the counts of what restoring `db`'s tenant from `table` (read by `reader`)
/// would put back, overwrite and delete, walked within `dry_run_seconds`
/// (`Settings::dry_run_seconds`, 25 s as deployed); 422 for a source too large to walk in it.
pub(super) async fn dry_run_answer(
    db: &TenantDb,
    reader: &TenantDb,
    record: &TenantRecord,
    source_shards: u32,
    table: String,
    dry_run_seconds: u64,
) -> Result<Response<Body>, ApiError> {
    let until = Instant::now() + Duration::from_secs(dry_run_seconds);
    let counts = Box::pin(restoring::dry_run(
        db,
        reader,
        record.shard_count,
        source_shards,
        until,
    ))
    .await?
    .map_err(|e| ApiError::Unprocessable(format!("{e}: restore without one.")))?;
    let answer = DryRun {
        tenant_id: db.tenant.to_string(),
        dry_run: true,
        source: table,
        counts,
    };
    Ok(json_response(StatusCode::OK, &answer))
}

/// Begins restore `state` of `record`'s tenant (`recorder`: the Idempotency-Key's record, written
/// in the same transaction): 202 with the record as it begins; 409 when the record changed since it
/// was read.
pub(super) async fn begin(
    app: &App,
    operator: &TenantId,
    db: &TenantDb,
    record: TenantRecord,
    state: Restore,
    now_ms: u64,
    recorder: Option<idempotent::Recorder<'_>>,
) -> Result<Response<Body>, ApiError> {
    let tenant = &db.tenant;
    let begun = TenantRecord {
        status: TenantStatus::Restoring,
        restore: Some(state.clone()),
        ..record
    };
    // Listed for the driver first: a started restore is never missing from its list.
    let platform_db = app.db_for_operator(&TenantId::platform()).await?;
    driving::list(&platform_db, tenant, now_ms).await?;
    let view = TenantView::from(begun.clone());
    let retry_after = STARTS_DELAY_SECONDS.to_string();
    let also = match &recorder {
        Some(r) => Some(r.record_with_headers(
            StatusCode::ACCEPTED,
            &view,
            &[(header::RETRY_AFTER, &retry_after)],
        )?),
        None => None,
    };
    match restoring::begin(db, &state, also).await? {
        Step::Committed(_) => {
            tracing::info!(tenant = %tenant, source = %state.source_table, by = %operator, "tenant restore started");
            crate::remember(app, tenant, &begun);
            Ok(accepted(begun.clone(), STARTS_DELAY_SECONDS))
        }
        Step::Raced => {
            let current = read_record_consistent(db)
                .await?
                .ok_or_else(|| ApiError::NotFound("No such tenant.".into()))?;
            crate::refuse_while_restoring_or_moving(&current)?;
            refuse_unless_idle(&current)?;
            Err(ApiError::Conflict(
                "The tenant record kept changing; retry.".into(),
            ))
        }
    }
}
