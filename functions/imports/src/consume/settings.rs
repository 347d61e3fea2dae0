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
    /// The longest a deferred copy waits on the queue (`IMPORT_DEFER_MAX_SECONDS`, 5–900: at least
    /// the shortest deferral, at most SQS's longest delay).
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
        Self::read(requeue, |name| std::env::var(name).ok())
    }

    /// The settings `var` gives (the value of a variable by name), deferring to `requeue`.
    fn read(
        requeue: Option<ImportQueue>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, shared::service::app::ConfigError> {
        Ok(Self {
            max_receives: setting("IMPORT_MAX_RECEIVES", &var, DEFAULT_MAX_RECEIVES, 1..=1000)?,
            writes_in_flight: setting(
                "IMPORT_WRITES_IN_FLIGHT",
                &var,
                DEFAULT_WRITES_IN_FLIGHT,
                1..=64,
            )?,
            requeue,
            // Never under the shortest deferral: a copy due at once would cycle a tenant's
            // messages through the consumer as fast as SQS delivers them.
            max_defer_seconds: setting(
                "IMPORT_DEFER_MAX_SECONDS",
                &var,
                DEFAULT_MAX_DEFER_SECONDS,
                MIN_DEFER_SECONDS..=DEFAULT_MAX_DEFER_SECONDS,
            )?,
        })
    }
}

/// The setting `name`, when `var` has it: one of `range`; `default` otherwise.
fn setting<T>(
    name: &'static str,
    var: &impl Fn(&str) -> Option<String>,
    default: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, shared::service::app::ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    use shared::service::app::ConfigError;
    match var(name) {
        Some(v) if !v.is_empty() => v.parse().ok().filter(|n| range.contains(n)).ok_or_else(|| {
            ConfigError::Invalid(
                name,
                format!("must be {} to {}", range.start(), range.end()),
            )
        }),
        _ => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings of an environment holding only `vars`.
    fn read(vars: &[(&str, &str)]) -> Result<ConsumerSettings, shared::service::app::ConfigError> {
        ConsumerSettings::read(None, |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn a_longest_deferral_under_the_shortest_is_refused_at_start() {
        // GIVEN a longest deferral of 0 or 4 seconds (each deferred copy would come back at once)
        for short in ["0", "4"] {
            // WHEN the consumer reads its settings
            let refused = read(&[("IMPORT_DEFER_MAX_SECONDS", short)]);
            // THEN it does not start, naming the variable and its range
            let why = refused.unwrap_err().to_string();
            assert!(
                why.contains("IMPORT_DEFER_MAX_SECONDS") && why.contains("5 to 900"),
                "{why}"
            );
        }
        // AND the shortest and the default are taken
        let shortest = read(&[("IMPORT_DEFER_MAX_SECONDS", "5")]).unwrap();
        assert_eq!(shortest.max_defer_seconds, MIN_DEFER_SECONDS);
        assert_eq!(
            read(&[]).unwrap().max_defer_seconds,
            DEFAULT_MAX_DEFER_SECONDS
        );
    }
}
