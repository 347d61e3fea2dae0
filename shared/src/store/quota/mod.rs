//! Quotas and metering: the request/capacity limiter's windows and admission (`limiter`) and the
//! per-tenant usage counters (`usage`).

pub mod limiter;
pub mod usage;
