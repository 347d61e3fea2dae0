//! Where a tenant's items are: the pool, or its own table `<pool>-tenant-<tenant id>`
//! ([`own_table_name`]). The record says which (`ownTable`), and every access resolves its tables
//! here ([`tables_of`]): the keys stay the same in both (`TENANT#<t>#…`), so the guard and
//! `dynamodb:LeadingKeys` apply inside an own table as in the pool; the record stays in the pool.
//!
//! An own table is made with the pool's own definition, read from DynamoDB, not written twice: its
//! key schema, attribute definitions, indexes (keys and projections), billing mode, encryption and
//! deletion protection (DescribeTable), its TTL attribute (DescribeTimeToLive) and its point-in-time
//! recovery (DescribeContinuousBackups: a server without it, DynamoDB Local, has none to copy),
//! plus a `tenant` tag. IAM lets the platform's functions create, change and delete only tables
//! named `<pool>-tenant-*`.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    BillingMode, GlobalSecondaryIndex, KeySchemaElement, PointInTimeRecoverySpecification,
    Projection, SseSpecification, TableDescription, TableStatus, Tag, TimeToLiveDescription,
    TimeToLiveSpecification, TimeToLiveStatus,
};
use aws_sdk_dynamodb::Client;

use crate::identity::ids::TenantId;
pub use crate::isolation::policy::{own_table_name, OWN_TABLE_INFIX};

/// The tag an own table names its tenant by; IAM lets an operator session change or delete the
/// table only when it names that session's tenant (template.yaml, `TenantOperatorRole`).
pub const TENANT_TAG: &str = "tenant";
use crate::isolation::policy::{Moving, TenantTables};
use crate::store::client::error::{unless_expected, StoreError};
use crate::store::client::scoped::TenantClients;
use crate::store::tenancy::tenants::TenantRecord;

mod fit;
use fit::{being_deleted, not_judged, unfit};

/// How long a call waits for a new own table to be ACTIVE before answering 503 (the table is
/// kept, and a retry finds it): well inside the functions' 10-second timeout.
pub const ACTIVE_WAIT: Duration = Duration::from_secs(6);

/// The tables of the tenant `record` describes at `now` (epoch seconds): the pool when it has no
/// own table, or no record. While a move runs, writes use the source until `writesMoveAt` (the
/// target still empty), then the target, pulling each item out of the source first
/// ([`crate::store::client::pull`]); the credentials name both tables throughout.
pub fn tables_of(clients: &TenantClients, record: Option<&TenantRecord>, now: u64) -> TenantTables {
    let placed = |table: Option<&str>| match table {
        Some(own) if own != clients.table_name() => clients.own(own),
        _ => clients.pooled(),
    };
    let Some(record) = record else {
        return clients.pooled();
    };
    let Some(moving) = &record.moving else {
        return placed(record.own_table.as_deref());
    };
    let pull = moving.writes_moved(now);
    let (items, other) = match pull {
        true => (&moving.to_table, &moving.from_table),
        false => (&moving.from_table, &moving.to_table),
    };
    placed(Some(items)).with_move(Moving {
        other: Arc::from(other.as_str()),
        pull,
        writes_move_at: moving.progress.writes_move_at,
        settled_at: moving.progress.moves_start_at,
    })
}

/// Creates `tenant`'s own table `name` with the pool's definition and its `tenant` tag, or takes
/// the one that is there when its keys and indexes are the pool's and it is empty (an operator
/// made it: tagged for the tenant here, refused when tagged for another), and waits for it to be
/// ACTIVE (up to [`ACTIVE_WAIT`]: then 503, and a retry waits again), then gives it the pool's time
/// to live and point-in-time recovery. `client` makes and describes it, on the function's own
/// credentials ([`TenantClients::table_manager`]); `manager` changes it, on the tenant's operator
/// session ([`TenantDb::own_table_manager`]), which IAM lets change only a table tagged for its
/// tenant. `holds` is asked only of an existing ACTIVE table: the key of an item it holds under the
/// tenant's keys, read consistently (the tenant walk), which DynamoDB's item count can miss.
pub async fn create_own_table(
    client: &Client,
    manager: &Client,
    pool: &str,
    name: &str,
    tenant: &TenantId,
    holds: impl std::future::Future<Output = Result<Option<String>, StoreError>>,
) -> Result<(), StoreError> {
    let pool_table = describe(client, pool)
        .await?
        .ok_or_else(|| StoreError::Internal(format!("the pool {pool} cannot be described")))?;
    match describe(client, name).await? {
        Some(existing) => {
            if let Some(refusal) = not_judged(&existing, name) {
                return Err(refusal);
            }
            if let Some(why) = unfit(&existing, &pool_table, holds).await? {
                return Err(StoreError::Unfit(format!(
                    "The table {name} exists and {why}: a tenant's own table is made by pooltable, or \
                     is an empty one an operator made with the pool's keys and indexes. Delete it, \
                     or make it so."
                )));
            }
            tag_for(client, &existing, name, tenant).await?;
        }
        None => create(client, &pool_table, name, tenant).await?,
    }
    wait_active(client, name).await?;
    copy_time_to_live(client, manager, pool, name).await?;
    copy_point_in_time_recovery(client, manager, pool, name).await
}

/// The `tenant` tag IAM lets an operator session change or delete an own table by: an existing
/// table an operator made gets it; one tagged for another tenant is refused.
async fn tag_for(
    client: &Client,
    table: &TableDescription,
    name: &str,
    tenant: &TenantId,
) -> Result<(), StoreError> {
    let Some(arn) = table.table_arn() else {
        return Ok(());
    };
    // DynamoDB Local has no tagging: there, a table is taken untagged.
    let tags = match client
        .list_tags_of_resource()
        .resource_arn(arn)
        .send()
        .await
    {
        Ok(out) => out.tags.unwrap_or_default(),
        Err(e) if unknown_operation(&e) => return Ok(()),
        Err(e) => return Err(StoreError::from_sdk(e)),
    };
    let Some(tag) = tag_to_add(&tags, name, tenant)? else {
        return Ok(());
    };
    client
        .tag_resource()
        .resource_arn(arn)
        .tags(tag)
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(())
}

/// Whether an existing table of `tags` can be `tenant`'s own table `name`, and the tag it still
/// needs: none when it names the tenant already; refused when it names another.
fn tag_to_add(tags: &[Tag], name: &str, tenant: &TenantId) -> Result<Option<Tag>, StoreError> {
    match tags.iter().find(|t| t.key() == TENANT_TAG) {
        Some(tag) if tag.value() == tenant.as_str() => Ok(None),
        Some(tag) => Err(StoreError::Unfit(format!(
            "The table {name} exists and is tagged for tenant {}: a tenant's own table is its \
             own. Delete it, or tag it for this tenant.",
            tag.value()
        ))),
        None => Ok(Some(
            Tag::builder()
                .key(TENANT_TAG)
                .value(tenant.as_str())
                .build()?,
        )),
    }
}

async fn describe(client: &Client, table: &str) -> Result<Option<TableDescription>, StoreError> {
    let out = client.describe_table().table_name(table).send().await;
    Ok(unless_expected(out, |e| e.is_resource_not_found_exception())?.and_then(|out| out.table))
}

/// The pool's encryption at rest, for a table made from it (an own table, a point-in-time copy):
/// under a customer-managed key (`TableKmsKeyArn`) the copy stays under that key, so that disabling
/// or deleting it reaches the copies too; `None` for the AWS-owned key (the default).
pub fn same_encryption(pool: &TableDescription) -> Option<SseSpecification> {
    let sse = pool.sse_description()?;
    Some(
        SseSpecification::builder()
            .enabled(true)
            .set_sse_type(sse.sse_type().cloned())
            .set_kms_master_key_id(sse.kms_master_key_arn().map(str::to_owned))
            .build(),
    )
}

async fn create(
    client: &Client,
    pool: &TableDescription,
    name: &str,
    tenant: &TenantId,
) -> Result<(), StoreError> {
    // On demand whatever the pool's billing: a provisioned pool's capacity is the pool's.
    let mut create = client
        .create_table()
        .table_name(name)
        .set_attribute_definitions(Some(pool.attribute_definitions().to_vec()))
        .set_key_schema(Some(pool.key_schema().to_vec()))
        .billing_mode(BillingMode::PayPerRequest)
        .deletion_protection_enabled(pool.deletion_protection_enabled().unwrap_or(false))
        .tags(
            Tag::builder()
                .key(TENANT_TAG)
                .value(tenant.as_str())
                .build()?,
        );
    for index in pool.global_secondary_indexes() {
        let key_schema: Vec<KeySchemaElement> = index.key_schema().to_vec();
        let index = GlobalSecondaryIndex::builder()
            .set_index_name(index.index_name().map(str::to_owned))
            .set_key_schema(Some(key_schema))
            .set_projection(
                index
                    .projection()
                    .cloned()
                    .or_else(|| Some(Projection::builder().build())),
            )
            .build()?;
        create = create.global_secondary_indexes(index);
    }
    create = create.set_sse_specification(same_encryption(pool));
    // Made meanwhile by another call: it is checked when described again.
    unless_expected(create.send().await, |e| e.is_resource_in_use_exception())?;
    Ok(())
}

async fn wait_active(client: &Client, name: &str) -> Result<(), StoreError> {
    let deadline = tokio::time::Instant::now() + ACTIVE_WAIT;
    loop {
        let status = describe(client, name)
            .await?
            .and_then(|t| t.table_status().cloned());
        if status == Some(TableStatus::Active) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(StoreError::Unavailable(format!(
                "the tenant's table {name} is being created"
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn copy_time_to_live(
    client: &Client,
    manager: &Client,
    pool: &str,
    name: &str,
) -> Result<(), StoreError> {
    let Some(attribute) = time_to_live(client, pool)
        .await?
        .and_then(|d| d.attribute_name)
    else {
        return Ok(());
    };
    if time_to_live(client, name).await?.is_some() {
        return Ok(());
    }
    let enabled = TimeToLiveSpecification::builder()
        .enabled(true)
        .attribute_name(attribute);
    manager
        .update_time_to_live()
        .table_name(name)
        .time_to_live_specification(enabled.build()?)
        .send()
        .await
        .map_err(|e| refused_by_tag(e, name, Change::JustMade))?;
    Ok(())
}

/// An operator session's change of own table `name` that IAM refused: the table's `tenant` tag is
/// not (yet) its tenant. Just after the table is made that is the tag not yet in force (tags reach
/// authorization eventually): 503, and a retry goes on; later it is an operator's table tagged for
/// another tenant: 409 naming it. Any other error is classified as usual.
fn refused_by_tag<E, R>(
    e: aws_sdk_dynamodb::error::SdkError<E, R>,
    name: &str,
    change: Change,
) -> StoreError
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let denied = e
        .as_service_error()
        .and_then(|s| s.code())
        .is_some_and(|c| c == "AccessDeniedException");
    match (denied, change) {
        (true, Change::JustMade) => StoreError::Unavailable(format!(
            "the tenant's table {name} is made, and its tenant tag is not yet in force; retry"
        )),
        (true, Change::Deletion) => StoreError::Unfit(format!(
            "The table {name} cannot be deleted on its tenant's operator session: IAM allows that \
             only while its `tenant` tag names this tenant. Tag it so, then retry."
        )),
        (false, _) => StoreError::from_sdk(e),
    }
}

/// Which change of an own table an operator session makes ([`refused_by_tag`]).
#[derive(Debug, Clone, Copy)]
enum Change {
    /// Time to live and point-in-time recovery, right after the table is made or taken.
    JustMade,
    /// Deletion protection lifted, then the table deleted.
    Deletion,
}

/// Whether an SDK error is a server's "no such operation" (DynamoDB Local has no backups).
fn unknown_operation<E: aws_sdk_dynamodb::error::ProvideErrorMetadata, R>(
    e: &aws_sdk_dynamodb::error::SdkError<E, R>,
) -> bool {
    e.as_service_error()
        .and_then(|s| s.code())
        .is_some_and(|c| c.contains("UnknownOperation"))
}

async fn copy_point_in_time_recovery(
    client: &Client,
    manager: &Client,
    pool: &str,
    name: &str,
) -> Result<(), StoreError> {
    let pool_backups = match client
        .describe_continuous_backups()
        .table_name(pool)
        .send()
        .await
    {
        Ok(out) => out,
        Err(e) if unknown_operation(&e) => return Ok(()),
        Err(e) => return Err(StoreError::from_sdk(e)),
    };
    let enabled = pool_backups
        .continuous_backups_description()
        .and_then(|d| d.point_in_time_recovery_description())
        .and_then(|p| p.point_in_time_recovery_status())
        .is_some_and(|s| s.as_str() == "ENABLED");
    if !enabled {
        return Ok(());
    }
    let spec = PointInTimeRecoverySpecification::builder()
        .point_in_time_recovery_enabled(true)
        .build()?;
    match manager
        .update_continuous_backups()
        .table_name(name)
        .point_in_time_recovery_specification(spec)
        .send()
        .await
    {
        Ok(_) => Ok(()),
        // A new table's backups are not ready for a while: 503, and a retry finds the table and
        // turns them on.
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_continuous_backups_unavailable_exception()) =>
        {
            Err(StoreError::Unavailable(format!(
                "the tenant's table {name} is not yet ready for point-in-time recovery"
            )))
        }
        Err(e) => Err(refused_by_tag(e, name, Change::JustMade)),
    }
}

/// Whether the table `name` exists (in any state).
pub async fn table_exists(client: &Client, name: &str) -> Result<bool, StoreError> {
    Ok(describe(client, name).await?.is_some())
}

/// Deletes `tenant`'s own table `name`: deletion protection off first, then the table. Gone
/// already is done. `client` describes it (the function's own credentials); `manager` changes and
/// deletes it (the tenant's operator session: [`create_own_table`]).
pub async fn delete_own_table(
    client: &Client,
    manager: &Client,
    name: &str,
) -> Result<(), StoreError> {
    let Some(table) = describe(client, name).await? else {
        return Ok(());
    };
    if being_deleted(&table) {
        return Ok(());
    }
    if table.deletion_protection_enabled() == Some(true) {
        manager
            .update_table()
            .table_name(name)
            .deletion_protection_enabled(false)
            .send()
            .await
            .map_err(|e| refused_by_tag(e, name, Change::Deletion))?;
        wait_active(client, name).await?;
    }
    let out = manager.delete_table().table_name(name).send().await;
    match out {
        Ok(_) => Ok(()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_not_found_exception()) =>
        {
            Ok(())
        }
        Err(e) => Err(refused_by_tag(e, name, Change::Deletion)),
    }
}

/// Table `name`'s time to live, when it is enabled.
async fn time_to_live(
    client: &Client,
    name: &str,
) -> Result<Option<TimeToLiveDescription>, StoreError> {
    let out = client.describe_time_to_live().table_name(name).send().await;
    let description = out.map_err(StoreError::from_sdk)?.time_to_live_description;
    Ok(description.filter(|d| d.time_to_live_status() == Some(&TimeToLiveStatus::Enabled)))
}

/// Deletes the table `name` (gone already: done): an own table, or a restore's scratch table.
pub async fn delete_table(client: &Client, name: &str) -> Result<(), StoreError> {
    let out = client.delete_table().table_name(name).send().await;
    unless_expected(out, |e| e.is_resource_not_found_exception())?;
    Ok(())
}

#[cfg(test)]
mod tests;
