//! The consumer's settings (`IMPORT_*`), read once in `main`.

use crate::ImportQueue;

/// The queue's `maxReceiveCount` when `IMPORT_MAX_RECEIVES` is not set (template.yaml's).
pub const DEFAULT_MAX_RECEIVES: u32 = 5;
/// Items one invocation writes at once when `IMPORT_WRITES_IN_FLIGHT` is not set.
pub const DEFAULT_WRITES_IN_FLIGHT: usize = 4;

/// The consumer's own settings, read once in `main`.
#[derive(Debug, Clone)]
pub struct ConsumerSettings {
    /// The queue's `maxReceiveCount`: the delivery on which a failing item is recorded as failed.
    pub max_receives: u32,
    /// Items written at once by one invocation (1–64).
    pub writes_in_flight: usize,
    /// The import queue, where a message deferred by its tenant's capacity quota goes back
    /// (`IMPORT_QUEUE_URL`; without it a deferred message waits for its visibility timeout).
    pub requeue: Option<ImportQueue>,
    /// The longest a deferred copy waits on the queue (`IMPORT_DEFER_MAX_SECONDS`, 0–900; SQS's
    /// longest delay is 900).
    pub max_defer_seconds: u32,
}

/// A deferred message's shortest delay, in seconds.
pub const MIN_DEFER_SECONDS: u32 = 5;
/// A deferred message's longest delay: SQS's maximum.
pub const DEFAULT_MAX_DEFER_SECONDS: u32 = 900;

impl ConsumerSettings {
    pub fn from_env() -> Result<Self, shared::service::app::ConfigError> {
        let requeue = match std::env::var("IMPORT_QUEUE_URL") {
            Ok(url) if !url.is_empty() => Some(ImportQueue::from_env()?),
            _ => None,
        };
        Ok(Self {
            max_receives: setting("IMPORT_MAX_RECEIVES", DEFAULT_MAX_RECEIVES, 1..=1000)?,
            writes_in_flight: setting("IMPORT_WRITES_IN_FLIGHT", DEFAULT_WRITES_IN_FLIGHT, 1..=64)?,
            requeue,
            max_defer_seconds: setting(
                "IMPORT_DEFER_MAX_SECONDS",
                DEFAULT_MAX_DEFER_SECONDS,
                0..=DEFAULT_MAX_DEFER_SECONDS,
            )?,
        })
    }
}

/// The setting `name`, when set: one of `range`; `default` otherwise.
fn setting<T>(
    name: &'static str,
    default: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, shared::service::app::ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    use shared::service::app::ConfigError;
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v.parse().ok().filter(|n| range.contains(n)).ok_or_else(|| {
            ConfigError::Invalid(
                name,
                format!("must be {} to {}", range.start(), range.end()),
            )
        }),
        _ => Ok(default),
    }
}
