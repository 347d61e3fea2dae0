//! The clock, injected so that tests can create sessions "in the past" and out of id order.

use std::time::{SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_millis(&self) -> u64;

    fn now_seconds(&self) -> u64 {
        self.now_millis() / 1000
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// Epoch milliseconds of an RFC 3339 time as [`rfc3339`] writes it; `None` when it is not one.
pub fn millis_of_rfc3339(text: &str) -> Option<u64> {
    aws_smithy_types::DateTime::from_str(text, aws_smithy_types::date_time::Format::DateTime)
        .ok()?
        .to_millis()
        .ok()
        .and_then(|ms| u64::try_from(ms).ok())
}

/// RFC 3339 for API responses, from epoch milliseconds.
pub fn rfc3339(unix_millis: u64) -> String {
    aws_smithy_types::DateTime::from_millis(unix_millis as i64)
        .fmt(aws_smithy_types::date_time::Format::DateTime)
        .unwrap_or_default()
}
