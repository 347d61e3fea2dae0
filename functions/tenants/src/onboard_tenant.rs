//! onboardTenant: `POST /tenants` `{tenantId, tier, limits?, shardCount?, placement?, kmsKeyArn?}` → 201, 409 if
//! it exists.
//!
//! Operator only. Tier `custom` needs `limits` (see [`crate::tier_and_limits`]). One conditional PutItem, sent with STS
//! credentials scoped to the *new* tenant's prefix, so even this route cannot write elsewhere.
//! `placement: "own"` first makes the tenant's own table (`store::tenancy::placement`: the pool's
//! definition, or the table an operator made), so its items are there from the first; its record
//! stays in the pool, written by credentials that reach only its keys in its table and its record.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use shared::identity::clock::rfc3339;
use shared::identity::ids::TenantId;
use shared::identity::shard::{
    max_shards, DEFAULT_SHARDS, MAX_OWN_TABLE_SHARDS, MAX_SHARDS, MIN_SHARDS,
};
use shared::service::http::{json_body, json_response};
use shared::service::idempotent::{self, Recorder};
use shared::store::client::error::StoreError;
use shared::store::client::scoped::TenantDb;
use shared::store::tenancy::placement::own_table_name;
use shared::store::tenancy::tenants::{TenantRecord, Tier};
use shared::{ApiError, App};

use crate::{tier_and_limits, TenantView};

pub const ROUTE: &str = "onboard-tenant";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct OnboardInput {
    pub(crate) tenant_id: TenantId,
    pub(crate) tier: Tier,
    #[serde(default)]
    pub(crate) limits: Option<crate::LimitsInput>,
    #[serde(
        default,
        deserialize_with = "shared::service::http::optional_whole_number"
    )]
    pub(crate) shard_count: Option<u32>,
    #[serde(default)]
    pub(crate) placement: PlacementInput,
    /// BYOK: a KMS key of the tenant's that wraps its data key instead of the platform's.
    #[serde(default)]
    pub(crate) kms_key_arn: Option<String>,
}

/// Where the tenant's items are kept.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PlacementInput {
    #[default]
    Pool,
    Own,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    app.require_operator(&caller).await?;
    let input: OnboardInput = json_body(&req)?;
    onboard(app, &caller.tenant, input, Some(&req)).await
}

/// Onboards `input`'s tenant, asked by an operator of `by` (the platform, for the control plane);
/// with `req`, under its `Idempotency-Key`.
pub(crate) async fn onboard(
    app: &App,
    by: &TenantId,
    input: OnboardInput,
    req: Option<&Request>,
) -> Result<Response<Body>, ApiError> {
    let shard_count = input.shard_count.unwrap_or(DEFAULT_SHARDS);
    let own = matches!(input.placement, PlacementInput::Own);
    if !(MIN_SHARDS..=max_shards(own)).contains(&shard_count) {
        return Err(ApiError::bad_request(
            "shardCount",
            format!(
                "shardCount must be {MIN_SHARDS} to {MAX_SHARDS} in the pool, or to \
                 {MAX_OWN_TABLE_SHARDS} with \"placement\": \"own\""
            ),
        ));
    }
    let (tier, limits) = tier_and_limits(Some(input.tier), input.limits)?;
    let tenant = &input.tenant_id;
    let created_at = rfc3339(app.clock.now_millis());
    let mut record = TenantRecord {
        changed_by: Some(by.to_string()),
        ..TenantRecord::new(tenant, tier, limits, shard_count, created_at)
    };
    // Checked before an own table is made or taken: a 400 leaves no table behind.
    let byok = checked_kms_key_arn(app, input.kms_key_arn.as_deref())?;
    let tables = match input.placement {
        PlacementInput::Pool => app.tenants.pooled(),
        PlacementInput::Own => {
            // A key KMS refuses, too (one GenerateDataKey more, for a BYOK tenant's own table).
            if let (Some(keys), Some(arn)) = (&app.keys, byok) {
                keys.check_kms_key(tenant, arn)
                    .await
                    .map_err(|e| kms_refusal(arn, e))?;
            }
            let name = own_table(app, tenant, &record).await?;
            let tables = app.tenants.own(&name);
            record.own_table = Some(name);
            tables
        }
    };
    let item = serde_dynamo::to_item(&record)
        .map_err(|e| ApiError::Internal(format!("serialize tenant record: {e}")))?;
    // The key first: once the record exists, its requests find it (a retry takes the one made).
    // A tenant of this id that exists already keeps its key as it is: its record's write is
    // answered 409, or the recorded answer replayed, never a new key made over the one its items
    // are sealed under (read consistently: a cached absence may be stale).
    let keys = match &app.keys {
        Some(keys) if !app.directory.exists_now(tenant).await? => Some(keys),
        _ => None,
    };
    if let Some(keys) = keys {
        let made = keys.create(tenant, byok, &record.created_at).await;
        match (made, byok) {
            (Err(e), Some(arn)) => return Err(kms_refusal(arn, e)),
            (made, _) => made?,
        };
    }
    let db = app.db_placed(tenant, &tables).await?;
    let view = TenantView::from(record);
    let now = app.clock.now_seconds();
    // With an Idempotency-Key, the record lives under the new tenant's prefix (onboarding writes with
    // the new tenant's own credentials), so a key is scoped to the tenant being onboarded.
    let response = match req {
        Some(req) => {
            idempotent::run(req, &db, &input.tenant_id, ROUTE, now, |recorder| {
                write_record(&db, item, &view, recorder)
            })
            .await?
        }
        None => write_record(&db, item, &view, None).await?,
    };
    if input.placement == PlacementInput::Own {
        // Its absence, read before the table was made, is cached: this container reads it again
        // (a failure only leaves the absence cached for its second: the onboarding stands).
        if let Err(e) = app.directory.record_now(tenant).await {
            tracing::warn!(tenant = %tenant, error = %e, "the new record could not be read back");
        }
    }
    tracing::info!(tenant = %input.tenant_id, shard_count, by = %by, "tenant onboarded");
    Ok(response)
}

/// A BYOK key's failure as the onboarding answers it: 400 naming `kmsKeyArn` when KMS refused the
/// key, else as it is (unavailable: retried).
fn kms_refusal(arn: &str, error: StoreError) -> ApiError {
    match error {
        StoreError::KeyRefused(code) => ApiError::bad_request(
            "kmsKeyArn",
            format!(
                "KMS refused {arn} ({code}): it must be an enabled symmetric key whose policy \
                 lets pooltable's functions call GenerateDataKey and Decrypt"
            ),
        ),
        other => other.into(),
    }
}

/// A BYOK key's ARN, checked: 400 when it is not a KMS key ARN, or when tenants are not keyed here.
fn checked_kms_key_arn<'a>(app: &App, arn: Option<&'a str>) -> Result<Option<&'a str>, ApiError> {
    let Some(arn) = arn else { return Ok(None) };
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let well_formed = matches!(parts.as_slice(), ["arn", partition, "kms", region, account, resource]
        if partition.starts_with("aws") && !region.is_empty()
            && account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit())
            && resource.strip_prefix("key/").is_some_and(|id| !id.is_empty()
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')));
    if !well_formed {
        return Err(ApiError::bad_request(
            "kmsKeyArn",
            "kmsKeyArn must be a KMS key ARN: arn:aws:kms:<region>:<account>:key/<key id>",
        ));
    }
    if app.keys.is_none() {
        return Err(ApiError::bad_request(
            "kmsKeyArn",
            "tenants have no keys of their own here (TENANT_KEYS_TABLE is not set)",
        ));
    }
    Ok(Some(arn))
}

/// Writes the tenant record, never over an existing one; with a recorder, in one transaction with
/// the key's record.
async fn write_record(
    db: &TenantDb,
    item: shared::store::client::query::Item,
    view: &TenantView,
    recorder: Option<Recorder<'_>>,
) -> Result<Response<Body>, ApiError> {
    if !idempotent::put_new(
        &db.for_record(),
        item,
        recorder.as_ref(),
        StatusCode::CREATED,
        view,
    )
    .await?
    {
        return Err(ApiError::Conflict("This tenant already exists.".into()));
    }
    Ok(json_response(StatusCode::CREATED, view))
}

/// The own table of `tenant`, made (or taken: [`crate::own_table::make_or_take`], walked as
/// `record`'s) unless the tenant exists: a tenant already onboarded in that table is this call's
/// retry, which the idempotency layer or the record's condition answers; one onboarded elsewhere is
/// 409 before any table is made.
async fn own_table(
    app: &App,
    tenant: &TenantId,
    record: &TenantRecord,
) -> Result<String, ApiError> {
    let pool = app.tenants.table_name();
    let name = own_table_name(pool, tenant).ok_or_else(|| {
        ApiError::bad_request(
            "placement",
            "the pool's name leaves no room for this tenant's own table name (255 characters)",
        )
    })?;
    if let Some(onboarded) = app.directory.record_now(tenant).await? {
        return onboarded_in(&onboarded, name);
    }
    // Changed on an operator path's session of the tenant (whose record is not made yet), which
    // IAM lets change only a table tagged for that tenant.
    let operator = app.db_placed(tenant, &app.tenants.pooled()).await?;
    let manager = operator.own_table_manager()?;
    match crate::own_table::make_or_take(app, manager, tenant, &name, record).await {
        Ok(()) => Ok(name),
        // The same onboarding sent twice at once: the other may have onboarded the tenant into the
        // table (its recorded answer there) since the record was read. Then the record decides, so
        // this one's answer is the other's (replayed), never the table's refusal.
        Err(refused @ ApiError::Conflict(_)) => match app.directory.record_now(tenant).await? {
            Some(onboarded) => onboarded_in(&onboarded, name),
            None => Err(refused),
        },
        Err(e) => Err(e),
    }
}

/// A tenant found `onboarded` already: in its own table `name`, this call's retry (the
/// idempotency layer or the record's condition answers it); elsewhere, 409.
fn onboarded_in(onboarded: &TenantRecord, name: String) -> Result<String, ApiError> {
    match onboarded.own_table.as_deref() == Some(name.as_str()) {
        true => Ok(name),
        false => Err(ApiError::Conflict("This tenant already exists.".into())),
    }
}
