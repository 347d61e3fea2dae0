//! A point-in-time restore's source: DynamoDB's own RestoreTableToPointInTime of the pool into a
//! scratch table under the pool's name (`<table>-restore-<tenant>-<ms>`), with the catalog index
//! only (the walk needs it; GSI1 would cost its writes for nothing), on demand. The driver waits
//! for it, a restore reads it, and the restore's end deletes it.

use aws_sdk_dynamodb::types::{
    BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, PointInTimeRecoveryStatus,
    Projection, ProjectionType, TableStatus,
};
use aws_smithy_types::date_time::Format;
use aws_smithy_types::DateTime;

use crate::identity::ids::TenantId;
use crate::identity::keys::{CATALOG, CATALOG_INDEX, PK};
use crate::store::client::error::{unless_expected, StoreError};
use crate::store::tenancy::placement::same_encryption;

/// The infix of every table a restore reads: IAM lets the restoring functions read, create and
/// delete only tables named `<pool table>-restore-*`.
pub const SOURCE_INFIX: &str = "-restore-";

/// The scratch table of a point-in-time restore of `tenant` asked at `requested_ms`.
pub fn scratch_table(pool_table: &str, tenant: &TenantId, requested_ms: u64) -> String {
    format!("{pool_table}{SOURCE_INFIX}{tenant}-{requested_ms}")
}

/// Whether `table` may be a restore's source: a DynamoDB table name (at most 255 of
/// `[A-Za-z0-9_.-]`) under the pool's name and [`SOURCE_INFIX`].
pub fn is_source_name(pool_table: &str, table: &str) -> bool {
    let a_table_name = table.len() <= 255
        && table
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    a_table_name
        && table
            .strip_prefix(pool_table)
            .and_then(|rest| rest.strip_prefix(SOURCE_INFIX))
            .is_some_and(|rest| !rest.is_empty())
}

/// Whether `table` is a scratch table [`scratch_table`] names for `tenant`'s restores: its name and
/// 13 digits, nothing between (tenant `a` never owns tenant `a-b`'s copy).
pub fn is_scratch_of(pool_table: &str, tenant: &str, table: &str) -> bool {
    is_scratch_name(pool_table, table)
        && table
            .strip_prefix(&format!("{pool_table}{SOURCE_INFIX}{tenant}-"))
            .is_some_and(|ms| ms.len() == 13 && ms.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `table` is named as a point-in-time restore's scratch table ([`scratch_table`]:
/// `<pool>-restore-<tenant>-<13 digits>`): the copy of the whole pool another restore made, which it
/// deletes when it ends, so never a source a restore may be asked to read.
pub fn is_scratch_name(pool_table: &str, table: &str) -> bool {
    let Some(rest) = table
        .strip_prefix(pool_table)
        .and_then(|rest| rest.strip_prefix(SOURCE_INFIX))
    else {
        return false;
    };
    rest.rsplit_once('-').is_some_and(|(tenant, ms)| {
        ms.len() == 13 && ms.bytes().all(|b| b.is_ascii_digit()) && TenantId::parse(tenant).is_ok()
    })
}

/// Why a point in time cannot be restored.
#[derive(Debug, thiserror::Error)]
pub enum Unrestorable {
    #[error("not an RFC 3339 date-time: {0}")]
    NotATime(String),
    #[error("point-in-time recovery is not enabled on the table")]
    RecoveryDisabled,
    /// The server has no such operation (DynamoDB Local implements no point-in-time recovery).
    #[error("this DynamoDB does not implement point-in-time recovery ({0})")]
    NotImplemented(String),
    #[error("{at} is outside the table's restore window, {earliest} to {latest}")]
    OutsideWindow {
        at: String,
        earliest: String,
        latest: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Parses an RFC 3339 date-time.
pub fn parse_time(at: &str) -> Result<DateTime, Unrestorable> {
    DateTime::from_str(at, Format::DateTime).map_err(|_| Unrestorable::NotATime(at.to_owned()))
}

/// Checks that `pool_table` can be restored to `at` now (DescribeContinuousBackups): recovery on,
/// `at` within its window.
pub async fn check_window(
    client: &aws_sdk_dynamodb::Client,
    pool_table: &str,
    at: &str,
) -> Result<(), Unrestorable> {
    let time = parse_time(at)?;
    let out = client
        .describe_continuous_backups()
        .table_name(pool_table)
        .send()
        .await
        .map_err(unimplemented_or_store)?;
    let recovery = out
        .continuous_backups_description
        .and_then(|d| d.point_in_time_recovery_description)
        .filter(|r| r.point_in_time_recovery_status == Some(PointInTimeRecoveryStatus::Enabled))
        .ok_or(Unrestorable::RecoveryDisabled)?;
    let show = |t: Option<&DateTime>| {
        t.and_then(|t| t.fmt(Format::DateTime).ok())
            .unwrap_or_else(|| "?".into())
    };
    let earliest = recovery.earliest_restorable_date_time();
    let latest = recovery.latest_restorable_date_time();
    let inside = earliest.is_some_and(|e| e.secs() <= time.secs())
        && latest.is_some_and(|l| time.secs() <= l.secs());
    if !inside {
        return Err(Unrestorable::OutsideWindow {
            at: at.to_owned(),
            earliest: show(earliest),
            latest: show(latest),
        });
    }
    Ok(())
}

/// Starts restoring `pool_table` as it was at `at` into `scratch` (a retry finds it started).
pub async fn start(
    client: &aws_sdk_dynamodb::Client,
    pool_table: &str,
    scratch: &str,
    at: &str,
) -> Result<(), Unrestorable> {
    let time = parse_time(at)?;
    let key = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .map_err(StoreError::from)
    };
    let catalog = GlobalSecondaryIndex::builder()
        .index_name(CATALOG_INDEX)
        .key_schema(key(CATALOG, KeyType::Hash)?)
        .key_schema(key(PK, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::KeysOnly)
                .build(),
        )
        .build()
        .map_err(StoreError::from)?;
    // The copy under the pool's own key: a restore left to its default would be under the
    // AWS-owned key, out of reach of a customer-managed key's revocation.
    let pool = client
        .describe_table()
        .table_name(pool_table)
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    let encryption = pool.table().and_then(same_encryption);
    let out = client
        .restore_table_to_point_in_time()
        .source_table_name(pool_table)
        .target_table_name(scratch)
        .restore_date_time(time)
        .global_secondary_index_override(catalog)
        .billing_mode_override(BillingMode::PayPerRequest)
        .set_sse_specification_override(encryption)
        .send()
        .await;
    match out {
        Ok(_) => Ok(()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_table_already_exists_exception()) =>
        {
            Ok(())
        }
        Err(e) => Err(unimplemented_or_store(e)),
    }
}

/// DynamoDB Local's answer to an operation it does not have, told apart from a store error.
fn unimplemented_or_store<E, R>(e: aws_sdk_dynamodb::error::SdkError<E, R>) -> Unrestorable
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match e.as_service_error().and_then(|s| s.code()) {
        Some(code @ "UnknownOperationException") => Unrestorable::NotImplemented(code.to_owned()),
        _ => Unrestorable::Store(StoreError::from_sdk(e)),
    }
}

/// Whether `table` is ready to restore from: ACTIVE, with the catalog index ([`CATALOG_INDEX`],
/// the tenant walk's) ACTIVE too. `None` when there is no such table.
pub async fn ready(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<Option<bool>, StoreError> {
    Ok(describe_source(client, table).await?.map(|s| s.ready))
}

/// A restore's source as DynamoDB describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTable {
    /// ACTIVE, with the catalog index ACTIVE too ([`ready`]).
    pub ready: bool,
    /// What tells this table from another made under the same name since: its id and creation
    /// time. A restore keeps it from its start and checks it at every call.
    pub identity: String,
}

/// `table` described (one DescribeTable); `None` when there is no such table.
pub async fn describe_source(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<Option<SourceTable>, StoreError> {
    let out = client.describe_table().table_name(table).send().await;
    let Some(out) = unless_expected(out, |e| e.is_resource_not_found_exception())? else {
        return Ok(None);
    };
    let Some(table) = out.table else {
        return Ok(None);
    };
    let active = table.table_status == Some(TableStatus::Active);
    let catalog_active = table.global_secondary_indexes().iter().any(|i| {
        i.index_name() == Some(CATALOG_INDEX)
            && i.index_status().map(|s| s.as_str()) == Some("ACTIVE")
    });
    let created = table
        .creation_date_time()
        .and_then(|t| t.fmt(Format::DateTime).ok())
        .unwrap_or_default();
    Ok(Some(SourceTable {
        ready: active && catalog_active,
        identity: format!("{}@{created}", table.table_id().unwrap_or("-")),
    }))
}

/// Deletes `scratch` (gone already: done). One still being made (or changed) is
/// [`StoreError::Contended`]: DynamoDB deletes a table only once it is ready.
pub async fn drop_scratch(
    client: &aws_sdk_dynamodb::Client,
    scratch: &str,
) -> Result<(), StoreError> {
    let out = client.delete_table().table_name(scratch).send().await;
    if out
        .as_ref()
        .err()
        .and_then(|e| e.as_service_error())
        .is_some_and(|e| e.is_resource_in_use_exception())
    {
        return Err(StoreError::Contended(format!(
            "The restore's point-in-time copy {scratch} is still being made, and DynamoDB deletes \
             a table only once it is ready (a copy takes 20 minutes or more)."
        )));
    }
    unless_expected(out, |e| e.is_resource_not_found_exception())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::fixtures::acme;

    #[test]
    fn a_source_is_a_table_under_the_pools_name_and_the_restore_infix() {
        let t = acme();
        let scratch = scratch_table("pooltable-dev", &t, 1_700_000_000_000);
        assert_eq!(scratch, "pooltable-dev-restore-acme-1700000000000");
        assert!(is_source_name("pooltable-dev", &scratch));
        assert!(is_source_name("pooltable-dev", "pooltable-dev-restore-x"));
        for other in [
            "pooltable-dev",
            "pooltable-dev-restore-",
            "pooltable-dev-restore-a b",
            "pooltable-dev-restore-é",
            &format!("pooltable-dev-restore-{}", "x".repeat(255)),
            "pooltable-prod-restore-x",
            "other-restore-x",
        ] {
            assert!(!is_source_name("pooltable-dev", other), "{other}");
        }
    }

    #[test]
    fn another_restores_scratch_table_is_known_by_its_name() {
        let scratch = scratch_table(
            "pooltable-dev",
            &TenantId::parse("acme-1").unwrap(),
            1_700_000_000_000,
        );
        assert!(is_scratch_name("pooltable-dev", &scratch));
        for named_by_an_operator in [
            "pooltable-dev-restore-2026-11-28",
            "pooltable-dev-restore-yesterday",
            "pooltable-dev-restore-acme-17000",
            "other-restore-acme-1700000000000",
        ] {
            assert!(
                !is_scratch_name("pooltable-dev", named_by_an_operator),
                "{named_by_an_operator}"
            );
        }
    }

    #[test]
    fn a_scratch_table_is_its_own_tenants_only() {
        // GIVEN tenant `acme-1`'s scratch table
        let scratch = scratch_table(
            "pooltable-dev",
            &TenantId::parse("acme-1").unwrap(),
            1_700_000_000_000,
        );
        // THEN it is acme-1's, and not acme's, whose name its own begins with (before the mend it
        // was both: an abort or a driver run for acme could delete acme-1's copy)
        assert!(is_scratch_of("pooltable-dev", "acme-1", &scratch));
        assert!(!is_scratch_of("pooltable-dev", "acme", &scratch));
        assert!(!is_scratch_of(
            "pooltable-dev",
            "acme-1",
            "pooltable-dev-restore-acme-1-2-1700000000000"
        ));
    }
}
