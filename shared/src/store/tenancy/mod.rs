//! Tenant records and where a tenant's items live: the record and directory (`tenants`), the shard
//! layout a write or read goes to (`layout`), the table its items are in (`placement`), and the per-container cache of records (`read_cache`).

pub mod layout;
pub mod placement;
pub mod read_cache;
pub mod tenants;
