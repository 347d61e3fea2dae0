//! The tenant-scoped DynamoDB client and its primitives: the scoped client (credentials, key guard,
//! meter), entities (a serde struct and its declared key), store errors, typed expressions, short names for the SDK's interceptor hooks, the request meter, the
//! list-page cache, expiry-aware paging, item views, item sizes, transactions, relocating an item,
//! pulling a moving tenant's items, the walk's partition sizes, and the sealing of items under their
//! tenant's key (read items are opened here, so every view is read the same way).

pub mod entity;
pub mod error;
pub mod expr;
pub mod hooks;
pub mod items;
pub mod meter;
pub mod pages;
pub mod pull;
pub mod query;
pub mod relocate;
pub mod scoped;
pub mod sealed;
pub mod size;
pub mod transact;
pub mod walk_sizes;
pub mod write;
