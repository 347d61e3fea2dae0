//! Ids for unit tests, parsed from literals the tests know to be valid: the one place their
//! parsing is unwrapped.

use crate::identity::ids::{EntityId, TenantId};

/// The tenant `raw` (a valid tenant id).
pub fn tenant(raw: &str) -> TenantId {
    TenantId::parse(raw).expect("a test's tenant id is valid")
}

/// `acme`: the tenant most tests are about.
pub fn acme() -> TenantId {
    tenant("acme")
}

/// The entity id `raw` (a valid id).
pub fn id(raw: &str) -> EntityId {
    EntityId::parse(raw).expect("a test's entity id is valid")
}
