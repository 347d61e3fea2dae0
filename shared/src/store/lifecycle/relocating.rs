//! A re-sharding's or a move's lane step: the items its page holds to move go a few to a
//! transaction, each transaction with the lane's checkpoint past them, so an item moved is an item
//! counted.

use std::collections::BTreeMap;

use crate::identity::keys::ItemKey;
use crate::store::client::error::StoreError;
use crate::store::client::query::Item;
use crate::store::client::relocate::{relocate_with, Relocation};
use crate::store::client::scoped::TenantDb;
use crate::store::lifecycle::lanes::{checkpoint, Lane};

/// Items a re-sharding's or a move's lane relocates in one transaction with its checkpoint at most.
/// Small on purpose: the tenant's own requests wait behind a transaction holding their item, and
/// one of 25 (50 actions) doubled their p99 during a move (figure 15: 4.0× at 25, 1.5–2.0× at 5,
/// for a fifth less throughput).
pub const RELOCATIONS_PER_COMMIT: usize = 5;

/// How a lane's step relocates what its page holds ([`relocate_page`]).
#[derive(Debug, Clone, Copy)]
pub struct Relocating<'a> {
    /// The table its walk reads, and the one its items go to (the same for a re-sharding).
    pub from: &'a str,
    pub to: &'a str,
    /// Whether an original is deleted only while it is as read (else it is carried as it now is),
    /// or while it is there at all.
    pub unchanged: bool,
    /// Whether its walk ends only with a pass that finds nothing ([`Lane::after_confirming_step`]:
    /// a move's, whose source must be seen empty).
    pub confirming: bool,
    /// The lane's count of the items it relocated.
    pub count_as: &'a str,
}

/// Relocates what `page` (read from `lane`'s walk) holds to move (`relocation`: an item's, `None`
/// for one that stays), [`RELOCATIONS_PER_COMMIT`] at a time, each group in one transaction with
/// the lane's checkpoint past it (the last one past the page): a group's items and their count
/// commit together or not at all, so a second caller stepping the lane, or a worker killed
/// mid-page, never leaves a moved item uncounted or counted twice. The lane after the page, or
/// `None` when another caller committed a step of it first (this call wrote nothing since).
pub async fn relocate_page(
    db: &TenantDb,
    how: Relocating<'_>,
    lane: &Lane,
    page: &crate::store::lifecycle::tenant_items::Page,
    relocation: impl Fn(&Item) -> Option<Relocation>,
    now_ms: u64,
) -> Result<Option<Lane>, StoreError> {
    let mut lane = lane.clone();
    let (mut group, mut walked) = (Vec::new(), 0);
    for (n, item) in page.items.iter().enumerate() {
        walked += 1;
        group.extend(relocation(item));
        let position = crate::store::lifecycle::tenant_items::position_of(item);
        if group.len() < RELOCATIONS_PER_COMMIT || n + 1 == page.items.len() || position.is_none() {
            continue;
        }
        match commit_relocations(db, how, &lane, &group, position, walked, now_ms).await? {
            Some(next) => lane = next,
            None => return Ok(None),
        }
        (group, walked) = (Vec::new(), 0);
    }
    commit_relocations(db, how, &lane, &group, page.next.clone(), walked, now_ms).await
}

/// Relocates `group` with `lane`'s checkpoint to `position`, the group's walk having found
/// `found` items: the lane after, or `None` when another caller stepped it first.
async fn commit_relocations(
    db: &TenantDb,
    how: Relocating<'_>,
    lane: &Lane,
    group: &[Relocation],
    position: Option<ItemKey>,
    found: u64,
    now_ms: u64,
) -> Result<Option<Lane>, StoreError> {
    let next = |moved: u64| {
        let counts = BTreeMap::from([(how.count_as.to_owned(), moved)]);
        match how.confirming {
            true => lane.after_confirming_step(position.clone(), &counts, found, now_ms),
            false => lane.after_step(position.clone(), &counts, now_ms),
        }
    };
    let moved = relocate_with(
        &db.client,
        how.from,
        how.to,
        group,
        how.unchanged,
        |moved| checkpoint(db, lane, &next(moved)),
    )
    .await?;
    Ok(moved.map(next))
}
