//! What this container last saw of the size of a tenant's walk partitions, per listing: a walk page
//! that starts with it reads its partitions side by side from its first round instead of reading
//! one alone to learn their size ([`crate::store::scatter::walk`]). Only a read's size is kept, never
//! an item; a wrong guess costs reads, never a wrong page.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::identity::ids::TenantId;

/// Listings remembered per container; all are forgotten when it is full.
pub const CAPACITY: usize = 4096;

/// What a walk page saw: the mean items of a partition read whole, and the mean size of an item
/// ([`crate::store::client::size::approximate_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionSize {
    pub items: u32,
    pub item_bytes: u32,
}

#[derive(Debug, Default)]
pub struct WalkSizes {
    sizes: Mutex<HashMap<(TenantId, String), PartitionSize>>,
}

impl WalkSizes {
    /// The sizes of `route`'s partitions of `tenant` the last walk page saw.
    pub fn get(&self, tenant: &TenantId, route: &str) -> Option<PartitionSize> {
        let sizes = self.sizes.lock().unwrap_or_else(|p| p.into_inner());
        sizes.get(&(tenant.clone(), route.to_owned())).copied()
    }

    pub fn remember(&self, tenant: &TenantId, route: &str, size: PartitionSize) {
        let mut sizes = self.sizes.lock().unwrap_or_else(|p| p.into_inner());
        if sizes.len() >= CAPACITY {
            sizes.clear();
        }
        sizes.insert((tenant.clone(), route.to_owned()), size);
    }
}
