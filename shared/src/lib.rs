//! pooltable's shared crate: the key scheme, claims, the session policy generator, the tenant-scoped
//! client with its isolation guard, and the one error type. Every function binary is built on it.

pub mod app;
pub mod claims;
pub mod clock;
pub mod cursor;
pub mod error;
pub mod guard;
pub mod http;
pub mod ids;
pub mod keys;
pub mod policy;
pub mod query;
pub mod runtime;
pub mod scatter;
pub mod scoped;
pub mod shard;
pub mod tenants;
pub mod usage;

pub use app::App;
pub use error::ApiError;
pub use lambda_http;
