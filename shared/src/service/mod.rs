//! Layer 4, service: what turns a Lambda HTTP event into a store call and back: request parsing,
//! problem+json errors (the one place any error becomes a response), the runtime loop with its
//! request log and usage metering, and `App`, built once per container in `main`.

pub mod app;
pub mod error;
pub mod http;
pub mod idempotent;
pub mod metrics;
pub mod paging;
pub mod runtime;
pub mod sharded;
pub mod signing;
pub mod single;
pub mod telemetry;
