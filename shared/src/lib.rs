//! pooltable's shared crate: everything the function binaries are built on, in four layers. A module
//! uses only its own layer and the layers below it (`tests/layers.rs` fails on an upward `use` or an
//! import cycle):
//!
//! 1. [`identity`]: validated ids, the key scheme, shards, cursors, the clock. Pure; no AWS calls.
//! 2. [`isolation`]: who the caller is (claims), what a tenant may touch (session policy, key guard),
//!    and the tenant credentials that carry it (STS AssumeRole, cached).
//! 3. [`store`]: the tenant-scoped DynamoDB client and everything that reads or writes through it:
//!    paging, scatter-gather, tenant records, usage counters, request metering, store errors.
//! 4. [`service`]: HTTP in and out: problem+json errors, request parsing, the runtime loop, `App`.

pub mod identity;
pub mod isolation;
pub mod service;
pub mod store;

pub use lambda_http;
pub use service::app::App;
pub use service::error::ApiError;
