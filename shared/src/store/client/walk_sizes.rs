//! What this container last saw of the size of a tenant's walk partitions, per listing: a walk page
//! that starts with it reads its partitions side by side from its first round instead of reading
//! one alone to learn their size ([`crate::store::scatter::walk`]). Only a read's size is kept, never
//! an item; a wrong guess costs reads, never a wrong page.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::identity::ids::TenantId;

/// Listings remembered per container; all are forgotten when it is full.
pub const CAPACITY: usize = 4096;

#[derive(Debug, Default)]
pub struct WalkSizes {
    sizes: Mutex<HashMap<(TenantId, String), u32>>,
}

impl WalkSizes {
    /// The mean size of `route`'s partitions of `tenant` the last walk page saw whole.
    pub fn get(&self, tenant: &TenantId, route: &str) -> Option<u32> {
        let sizes = self.sizes.lock().unwrap_or_else(|p| p.into_inner());
        sizes.get(&(tenant.clone(), route.to_owned())).copied()
    }

    pub fn remember(&self, tenant: &TenantId, route: &str, mean: u32) {
        let mut sizes = self.sizes.lock().unwrap_or_else(|p| p.into_inner());
        if sizes.len() >= CAPACITY {
            sizes.clear();
        }
        sizes.insert((tenant.clone(), route.to_owned()), mean);
    }
}
