//! The lifecycle driver's list: the tenants whose re-sharding or offboarding runs to its end with no
//! client calling (`functions/tenants`, `drive-lifecycle`, on a schedule). Kept in the platform's
//! partition (`TENANT#_platform#DRIVE`, one item per tenant), read with the platform's scoped client.
//!
//! A tenant is listed *before* its operation starts ([`list`], then the record's conditional update),
//! so no started operation is ever missing from the list; an entry whose tenant has nothing running
//! (the start was refused, or the operation has ended) is removed by the driver ([`unlist`]). Both
//! writes are idempotent.
//!
//! Imports have a list of their own (`TENANT#_platform#IMPORTS_DUE#<shard>`, 8 partitions since
//! every tenant's imports are listed), sorted by deadline: each is
//! listed before its record is claimed, and the driver closes it once due
//! (`store::imports::close`), then unlists it.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::primary_key;
use crate::identity::keys::{
    import_due_pk, import_due_shard_pk, import_due_sk, import_due_sk_before, lifecycle_drive_pk,
    lifecycle_drive_sk, parse_import_due_sk, IMPORT_DUE_CREATED_AT, IMPORT_DUE_LISTING,
    IMPORT_DUE_SHARDS, PK, SK,
};
use crate::store::client::error::StoreError;
use crate::store::client::expr::{attr, exists};
use crate::store::client::scoped::TenantDb;
use crate::store::client::transact::TransactError;
use crate::store::imports::Finished;

/// Lists `tenant` for the driver (`platform_db`: the platform partition's client), at `now_ms`.
pub async fn list(
    platform_db: &TenantDb,
    tenant: &TenantId,
    now_ms: u64,
) -> Result<(), StoreError> {
    let s = |v: String| AttributeValue::S(v);
    let entry = HashMap::from([
        (PK.to_owned(), s(lifecycle_drive_pk())),
        (SK.to_owned(), s(lifecycle_drive_sk(tenant))),
        ("kind".to_owned(), s("LIFECYCLE_DRIVE".into())),
        ("tenantId".to_owned(), s(platform_db.tenant.to_string())),
        ("drivenTenantId".to_owned(), s(tenant.to_string())),
        (
            LISTED_AT_MS.to_owned(),
            AttributeValue::N(now_ms.to_string()),
        ),
    ]);
    crate::store::client::items::put(platform_db, entry).await
}

/// Removes `tenant`'s entry from the driver's list, only if it is still the listing the driver read
/// (`listed_at_ms`): a tenant listed again meanwhile (re-onboarded and re-sharded or offboarded
/// between the driver's read and this delete) keeps its newer entry. `false` when it was kept.
pub async fn unlist(
    platform_db: &TenantDb,
    tenant: &TenantId,
    listed_at_ms: u64,
) -> Result<bool, StoreError> {
    let out = platform_db
        .sdk_delete_at(lifecycle_drive_pk(), lifecycle_drive_sk(tenant))
        .condition_expression("#listed = :read")
        .expression_attribute_names("#listed", LISTED_AT_MS)
        .expression_attribute_values(":read", AttributeValue::N(listed_at_ms.to_string()))
        .send()
        .await;
    crate::store::client::error::written_unless_condition_failed(out)
}

const LISTED_AT_MS: &str = "listedAtMs";
const DRIVEN_AT_MS: &str = "drivenAtMs";

/// A tenant on the driver's list: when it was listed, and when the driver last gave it a call's
/// worth (0: never).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub tenant: TenantId,
    pub listed_at_ms: u64,
    pub driven_at_ms: u64,
}

/// Every listed tenant, by a consistent read (one Query per 1 MB of entries), in the order the
/// driver serves them: the least recently driven first (never driven before any), then the longest
/// listed. So a run that cannot serve every tenant starts the next where it left off, and no
/// tenant's operation waits for another's to end.
pub async fn listed(platform_db: &TenantDb) -> Result<Vec<Listed>, StoreError> {
    let query = platform_db
        .query_partition(&lifecycle_drive_pk())
        .consistent();
    let mut tenants = Vec::new();
    for item in query.all().await? {
        if let Some(AttributeValue::S(raw)) = item.get("drivenTenantId") {
            let at = |name| crate::store::client::query::u64_attr(&item, name).unwrap_or(0);
            match TenantId::parse(raw) {
                Ok(tenant) => tenants.push(Listed {
                    tenant,
                    listed_at_ms: at(LISTED_AT_MS),
                    driven_at_ms: at(DRIVEN_AT_MS),
                }),
                Err(e) => tracing::warn!(error = %e, "a lifecycle entry names no valid tenant"),
            }
        }
    }
    tenants.sort_by(|a, b| {
        (a.driven_at_ms, a.listed_at_ms, &a.tenant).cmp(&(
            b.driven_at_ms,
            b.listed_at_ms,
            &b.tenant,
        ))
    });
    Ok(tenants)
}

/// Notes on `entry` that the driver gave its tenant a call's worth at `now_ms`, only if it is still
/// the listing the driver read: an entry unlisted or listed anew meanwhile is left as it is.
pub async fn note_driven(
    platform_db: &TenantDb,
    entry: &Listed,
    now_ms: u64,
) -> Result<(), StoreError> {
    let out = platform_db
        .sdk_update_at(lifecycle_drive_pk(), lifecycle_drive_sk(&entry.tenant))
        .update_expression("SET #driven = :now")
        .condition_expression("#listed = :read")
        .expression_attribute_names("#driven", DRIVEN_AT_MS)
        .expression_attribute_names("#listed", LISTED_AT_MS)
        .expression_attribute_values(":now", AttributeValue::N(now_ms.to_string()))
        .expression_attribute_values(":read", AttributeValue::N(entry.listed_at_ms.to_string()))
        .send()
        .await;
    crate::store::client::error::written_unless_condition_failed(out).map(|_| ())
}

/// An import the driver brings to a final state once it is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueImport {
    pub due_at_ms: u64,
    pub tenant: TenantId,
    pub import: EntityId,
    /// The acceptance of the import this entry is for: a later import of the same id (its key
    /// reused after expiry, or a tenant of the same id) is not closed by an older entry.
    pub created_at_ms: u64,
}

impl DueImport {
    /// The key (`PK`, `SK`) of this import's entry in the deadline list.
    fn key(&self) -> (String, String) {
        let pk = import_due_pk(&self.tenant, &self.import);
        (
            pk,
            import_due_sk(self.due_at_ms, &self.tenant, &self.import),
        )
    }
}

/// The `kind` of an import's entry in the deadline list (the stream's filter names it).
const ENTRY_KIND: &str = "IMPORT_DUE";

/// Lists an import for the driver, before its record is claimed (idempotent: an upsert).
pub async fn list_import(platform_db: &TenantDb, due: &DueImport) -> Result<(), StoreError> {
    let (pk, sk) = due.key();
    // Only these attributes: they are all the producer's session may name on the list.
    let [kind, tenant, created] = IMPORT_DUE_LISTING;
    platform_db
        .sdk_update_at(pk, sk)
        .update_expression("SET #kind = :kind, #tenant = :tenant, #created = :created")
        .expression_attribute_names("#kind", kind)
        .expression_attribute_names("#tenant", tenant)
        .expression_attribute_names("#created", created)
        .expression_attribute_values(":kind", AttributeValue::S(ENTRY_KIND.into()))
        .expression_attribute_values(":tenant", AttributeValue::S(platform_db.tenant.to_string()))
        .expression_attribute_values(":created", AttributeValue::N(due.created_at_ms.to_string()))
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(())
}

/// Notes on import `due`'s entry that the import is final, as its closed record holds it
/// (`finished`), at `now_ms`: the change the pool's stream carries as the import's one
/// `importFinished` event (`store::lifecycle::events`), wherever the record is (a table of the
/// tenant's own is on a stream the publisher does not read, and a record moves between the two).
/// Once only: an entry noted already (a run cut off before unlisting it) or gone is left as it is.
pub async fn note_import_finished(
    platform_db: &TenantDb,
    due: &DueImport,
    finished: &Finished,
    now_ms: u64,
) -> Result<(), StoreError> {
    let (pk, sk) = due.key();
    let (update, not_noted) = finished.note(&due.import, now_ms);
    // The entry's kind again, with the note: the stream's filter takes a noted entry of this kind,
    // and the producer's session may have changed it (it may write the listing's attributes).
    let [kind, ..] = IMPORT_DUE_LISTING;
    let update = update.and(attr(kind).set(ENTRY_KIND));
    let noted = platform_db
        .update_item(primary_key(pk, sk), update)
        .when(exists())
        .when(not_noted)
        .send(platform_db)
        .await;
    match noted {
        Ok(_) | Err(TransactError::ConditionFailed { .. }) => Ok(()),
        Err(TransactError::Store(e)) => Err(e),
    }
}

/// Removes an import's entry.
pub async fn unlist_import(platform_db: &TenantDb, due: &DueImport) -> Result<(), StoreError> {
    let (pk, sk) = due.key();
    platform_db
        .sdk_delete_at(pk, sk)
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(())
}

/// Up to `limit` imports due at `now_ms` from each partition of the list, earliest first in each
/// (one consistent Query per partition: entries not yet due are never read).
pub async fn imports_due(
    platform_db: &TenantDb,
    now_ms: u64,
    limit: i32,
) -> Result<Vec<DueImport>, StoreError> {
    let mut due = Vec::new();
    for shard in 0..IMPORT_DUE_SHARDS {
        let out = platform_db
            .sdk_query()
            .key_condition_expression("#pk = :pk AND #sk < :before")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", AttributeValue::S(import_due_shard_pk(shard)))
            .expression_attribute_values(":before", AttributeValue::S(import_due_sk_before(now_ms)))
            .consistent_read(true)
            .limit(limit)
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        due.extend(out.items().iter().filter_map(|item| {
            let sk = crate::store::client::query::string_attr(item, SK)?;
            let Some((due_at_ms, tenant, import)) = parse_import_due_sk(&sk) else {
                tracing::warn!(sk, "an import entry that names no import");
                return None;
            };
            Some(DueImport {
                due_at_ms,
                tenant,
                import,
                created_at_ms: crate::store::client::query::u64_attr(item, IMPORT_DUE_CREATED_AT)
                    .unwrap_or(0),
            })
        }));
    }
    Ok(due)
}

/// `due` in the order the driver closes them: earliest deadline first within each tenant, and the
/// tenants in turn (each tenant's first, by deadline, then each tenant's second, …), so a tenant
/// with many imports due never holds up another tenant's close; with a tenant's open imports
/// bounded ([`crate::store::imports::MAX_OPEN_IMPORTS`]), every tenant with one due is reached in
/// the first round.
pub fn fair_order(mut due: Vec<DueImport>) -> Vec<DueImport> {
    due.sort_by(|a, b| (a.due_at_ms, &a.tenant).cmp(&(b.due_at_ms, &b.tenant)));
    let mut rounds: Vec<Vec<DueImport>> = Vec::new();
    let mut seen: std::collections::HashMap<TenantId, usize> = std::collections::HashMap::new();
    for entry in due {
        let round = seen.entry(entry.tenant.clone()).or_insert(0);
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push(entry);
        *round += 1;
    }
    rounds.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::fixtures;

    fn due(tenant: &str, at: u64) -> DueImport {
        DueImport {
            due_at_ms: at,
            tenant: fixtures::tenant(tenant),
            import: fixtures::id(&format!("i{at}")),
            created_at_ms: at,
        }
    }

    #[test]
    fn a_tenant_with_many_imports_due_does_not_hold_up_another_tenants_close() {
        // GIVEN a flooding tenant with 200 imports due before another tenant's one
        let mut entries: Vec<DueImport> = (0..200).map(|i| due("flood", i)).collect();
        entries.push(due("quiet", 500));
        entries.push(due("other", 900));
        // WHEN the driver orders them
        let order = fair_order(entries);
        // THEN every tenant's earliest import comes in the first round, by deadline
        let first: Vec<&str> = order[..3].iter().map(|d| d.tenant.as_str()).collect();
        assert_eq!(first, ["flood", "quiet", "other"]);
        // AND each tenant's own imports keep their deadline order, and none is lost
        let flood: Vec<u64> = order
            .iter()
            .filter(|d| d.tenant.as_str() == "flood")
            .map(|d| d.due_at_ms)
            .collect();
        assert_eq!(flood, (0..200).collect::<Vec<_>>());
        assert_eq!(order.len(), 202);
    }
}
