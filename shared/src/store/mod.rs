//! Layer 3, store: the tenant-scoped DynamoDB client (credentials from `isolation`, the key guard and
//! the request meter installed), its error classification, and the shared ways to read and write
//! through it: expiry-aware paging, scatter-gather over partitions, tenant records, usage counters.

pub mod driving;
pub mod error;
pub mod idempotency;
pub mod imports;
pub mod items;
pub mod layout;
pub mod lifecycle_events;
pub mod limiter;
pub mod meter;
pub mod offboarding;
pub mod pacing;
pub mod query;
pub mod read_cache;
pub mod resharding;
pub mod scatter;
pub mod scoped;
pub mod size;
pub mod tenant_items;
pub mod tenants;
pub mod transact;
pub mod usage;
