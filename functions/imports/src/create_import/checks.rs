//! What a request asks, checked before anything is sent: its items (a 400 names the first bad one
//! by its index in the request), and for an import of employees, their departments.

use std::collections::HashMap;

use futures::{StreamExt, TryStreamExt};
use shared::identity::ids::{EntityId, TenantId};
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

use super::CreateImportInput;
use crate::{ImportItem, MAX_ITEMS};

/// Department reads in flight at once when an import of employees is checked.
const DEPARTMENT_READS_IN_FLIGHT: usize = 8;

/// Every item, checked (1 to [`MAX_ITEMS`] of them, each well-formed for the import's kind; a 400
/// names the item's index in the request), numbered in request order. An id given more than once
/// keeps its last item, as if the items were written in order: the queue keeps no order, so
/// sending both would let either win. Beside them, each kept item's index in the request, for a 400
/// that names it.
pub(super) fn checked_items(input: CreateImportInput) -> Result<(Numbered, Vec<u32>), ApiError> {
    if input.items.is_empty() || input.items.len() > MAX_ITEMS {
        return Err(ApiError::bad_request(
            "items",
            format!(
                "An import takes 1 to {MAX_ITEMS} items; this one has {}.",
                input.items.len()
            ),
        ));
    }
    let mut last: HashMap<EntityId, usize> = HashMap::new();
    let mut items = Vec::with_capacity(input.items.len());
    for (index, raw) in input.items.into_iter().enumerate() {
        let item = input.kind.item(raw, &format!("items[{index}]"))?;
        last.insert(item.id().clone(), index);
        items.push((index as u32, item));
    }
    items.retain(|(index, item)| last.get(item.id()) == Some(&(*index as usize)));
    // Numbered 0..accepted from here on (the consumer's markers, and the deadline's close, count on
    // it); a retry of the same request numbers them the same way.
    let request_index = items.iter().map(|(index, _)| *index).collect();
    let items = items
        .into_iter()
        .enumerate()
        .map(|(n, (_, item))| (n as u32, item))
        .collect();
    Ok((items, request_index))
}

/// An import's items, numbered `0..accepted`.
pub(super) type Numbered = Vec<(u32, ImportItem)>;

/// For an import of employees: every department they name exists now (a 400 names the first item
/// naming one that does not, and nothing is sent). Departments are never deleted, so the consumer
/// finds each one when it writes the employee (on whichever shard a re-sharding has put it by then).
pub(super) async fn departments_exist(
    app: &App,
    db: &TenantDb,
    t: &TenantId,
    items: &[(u32, ImportItem)],
    request_index: &[u32],
) -> Result<(), ApiError> {
    let mut seen = std::collections::HashSet::new();
    // Owned ids: a stream's closure over borrowed ones is not `Send` for every lifetime.
    // Each department with the request index of the first item naming it.
    let first_naming: Vec<(EntityId, u32)> = items
        .iter()
        .zip(request_index)
        .filter_map(|((_, item), index)| match item {
            ImportItem::Employee(e) if seen.insert(&e.department_id) => {
                Some((e.department_id.clone(), *index))
            }
            _ => None,
        })
        .collect();
    if first_naming.is_empty() {
        return Ok(());
    }
    let layout = app.directory.layout(db).await?;
    let found: Vec<Option<u32>> = futures::stream::iter(first_naming)
        .map(|(d, index)| async move {
            let keys = hr::store::keys(t, layout, shared::identity::keys::kind::DEPARTMENT, &d);
            let found = shared::store::tenancy::layout::locate(db, layout, &keys).await?;
            Ok::<_, ApiError>(found.is_none().then_some(index))
        })
        .buffered(DEPARTMENT_READS_IN_FLIGHT)
        .try_collect()
        .await?;
    // In item order, so the 400 names the first item naming a missing department.
    let missing = found.into_iter().flatten().next();
    match missing {
        None => Ok(()),
        Some(index) => Err(ApiError::bad_request(
            &format!("items[{index}].departmentId"),
            "names no existing department; import the departments first",
        )),
    }
}
