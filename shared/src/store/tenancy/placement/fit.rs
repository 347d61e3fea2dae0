//! Whether an existing table can be a tenant's own table: judged now or not, and fit or not.

use aws_sdk_dynamodb::types::{TableDescription, TableStatus};

use crate::store::client::error::StoreError;

/// The answer for an existing table `name` that cannot be judged now, before anything is asked of
/// it or tagged on it: one being deleted, out of reach of its key, or in a state this code does not
/// know is retried later (503: neither its description nor its hours-old item count says what it
/// will hold, and once a deleted one is gone a retry makes it anew); an archived one is refused
/// (409: it is not ACTIVE again until an operator restores it). `None`: judge it ([`unfit`]).
pub(super) fn not_judged(existing: &TableDescription, name: &str) -> Option<StoreError> {
    match existing.table_status() {
        Some(TableStatus::Active | TableStatus::Updating | TableStatus::Creating) => None,
        Some(TableStatus::Archiving | TableStatus::Archived) => Some(StoreError::Unfit(format!(
            "The table {name} exists and is archived (its KMS key was out of reach for days): a \
             tenant's own table is made by pooltable, or is an empty one an operator made with the \
             pool's keys and indexes. Delete it, or restore it from its archive."
        ))),
        Some(TableStatus::Deleting) => Some(StoreError::Unavailable(format!(
            "The table {name} is being deleted; retry once it is gone."
        ))),
        other => Some(StoreError::Unavailable(format!(
            "The table {name} is {}; retry once it is ACTIVE.",
            other.map_or("of no known status", |s| s.as_str())
        ))),
    }
}

/// Whether `table`'s deletion has begun (an offboarding or a move cut off just after its
/// DeleteTable): its deletion is done as far as the caller goes, where another DeleteTable is
/// answered ResourceInUseException until the table is gone.
pub(super) fn being_deleted(table: &TableDescription) -> bool {
    table.table_status() == Some(&TableStatus::Deleting)
}

/// Why `existing` cannot be a tenant's own table beside `pool`: other keys, indexes or key types,
/// or items already. Items under the tenant's keys are found by `holds` (read consistently, when the
/// table is ACTIVE or UPDATING: an UPDATING table is read as an ACTIVE one, its item count hours
/// old): a move or a re-sharding would take one for the tenant's own and drop the item it replaces.
/// Any other item is found by DynamoDB's item count, which it refreshes about every six hours (a
/// table filled within them may pass with items under keys the walk does not visit: another
/// tenant's, or a shard beyond the tenant's). Asked only of a table [`not_judged`] lets through.
pub(super) async fn unfit(
    existing: &TableDescription,
    pool: &TableDescription,
    holds: impl std::future::Future<Output = Result<Option<String>, StoreError>>,
) -> Result<Option<String>, StoreError> {
    let status = existing.table_status();
    if !same_keys(existing, pool) || key_types(existing) != key_types(pool) {
        return Ok(Some("has other keys or indexes than the pool's".into()));
    }
    // Only a table that can be read is walked: one being made holds nothing yet.
    if status != Some(&TableStatus::Creating) {
        if let Some(key) = holds.await? {
            return Ok(Some(format!(
                "holds an item under one of this tenant's keys ({key})"
            )));
        }
    }
    Ok(match existing.item_count() {
        Some(n) if n > 0 => Some(format!("holds items ({n}, as DynamoDB counts them)")),
        _ => None,
    })
}

/// The attribute types of `table`'s key attributes (its own and its indexes'), by name.
fn key_types(table: &TableDescription) -> Vec<(String, String)> {
    let mut types: Vec<(String, String)> = table
        .attribute_definitions()
        .iter()
        .map(|a| {
            (
                a.attribute_name().to_owned(),
                a.attribute_type().as_str().to_owned(),
            )
        })
        .collect();
    types.sort();
    types
}

/// Whether `a` and `b` have the same key schema and the same indexes (names, keys, projections).
fn same_keys(a: &TableDescription, b: &TableDescription) -> bool {
    let indexes = |t: &TableDescription| {
        let mut out: Vec<_> = t
            .global_secondary_indexes()
            .iter()
            .map(|i| {
                (
                    i.index_name().map(str::to_owned),
                    i.key_schema().to_vec(),
                    i.projection().cloned(),
                )
            })
            .collect();
        out.sort_by(|x, y| x.0.cmp(&y.0));
        out
    };
    a.key_schema() == b.key_schema() && indexes(a) == indexes(b)
}
