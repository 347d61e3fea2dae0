//! Which tenant of an id this container's counts belong to ([`Incarnations`]).

use crate::identity::ids::TenantId;

/// Which tenant of an id this container's counts belong to: its record's `createdAt`. A new value
/// means the id was offboarded and onboarded again.
#[derive(Debug, Default)]
pub(super) struct Incarnations(std::sync::Mutex<std::collections::HashMap<TenantId, String>>);

impl Incarnations {
    /// Records `created_at` for `tenant`; true when it replaced another value.
    pub(super) fn changed(&self, tenant: &TenantId, created_at: &str) -> bool {
        let mut known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match known.get(tenant) {
            Some(seen) if seen == created_at => false,
            Some(_) => {
                known.insert(tenant.clone(), created_at.to_owned());
                true
            }
            None => {
                known.insert(tenant.clone(), created_at.to_owned());
                false
            }
        }
    }
}
