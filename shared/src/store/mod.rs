//! Layer 3, store: the tenant-scoped DynamoDB client (credentials from `isolation`, the key guard and
//! the request meter installed), its error classification, and the shared ways to read and write
//! through it: expiry-aware paging, scatter-gather over partitions, tenant records, usage counters, and the operator's table-wide tools.

pub mod client;
pub mod erasures;
pub mod idempotency;
pub mod imports;
pub mod keys;
pub mod lifecycle;
pub mod operator;
pub mod quota;
pub mod scatter;
pub mod tenancy;
