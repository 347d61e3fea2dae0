//! The one place a TransactWriteItems cancellation is read. Every transactional route sends through
//! [`transact`] and gets back either success or a [`TransactError`]:
//!
//! - `ConditionalCheckFailed` on action *i* → [`TransactError::ConditionFailed`] with *i* and the item
//!   the action saw (when it asked for `ALL_OLD`); the route turns it into its documented 4xx.
//! - `TransactionConflict` (another transaction touched an item) → retried with full-jitter backoff,
//!   up to [`ATTEMPTS`] sends, then `StoreError::Contended` (409).
//! - `ThrottlingError` / `ProvisionedThroughputExceeded` → `StoreError::Unavailable` (503 with
//!   `Retry-After`).
//! - `TransactionInProgressException` (not a cancellation) → retried like a conflict, then
//!   `StoreError::Unavailable` (503).
//! - Anything else (a timeout, DynamoDB down) → [`StoreError::from_sdk`].

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::builders::TransactWriteItemsFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::CancellationReason;
use thiserror::Error;

use crate::store::client::error::StoreError;

/// An item as DynamoDB returns it (`query::Item`, named here without importing `query`, which
/// imports the scoped client that sends transactions through this module).
type Item = std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>;

/// Sends of one transaction while DynamoDB cancels it for a conflicting transaction.
pub const ATTEMPTS: u32 = 4;
/// The first backoff's ceiling; it doubles after each conflict.
const BASE_BACKOFF: Duration = Duration::from_millis(20);

pub const CONDITION_FAILED: &str = "ConditionalCheckFailed";
pub const TRANSACTION_CONFLICT: &str = "TransactionConflict";
const THROTTLED: [&str; 2] = ["ThrottlingError", "ProvisionedThroughputExceeded"];

#[derive(Debug, Error)]
pub enum TransactError {
    /// Action `index` (0-based, in the order the actions were added) failed its condition.
    #[error("transaction action {index} failed its condition")]
    ConditionFailed { index: usize, item: Option<Item> },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<aws_sdk_dynamodb::error::BuildError> for TransactError {
    fn from(err: aws_sdk_dynamodb::error::BuildError) -> Self {
        Self::Store(err.into())
    }
}

impl TransactError {
    /// Whether action `index` failed its condition.
    pub fn failed_at(&self, index: usize) -> bool {
        matches!(self, Self::ConditionFailed { index: i, .. } if *i == index)
    }
}

/// What a cancellation's reasons say, first match wins: a failed condition, a conflict, throttling.
#[derive(Debug, PartialEq)]
enum Verdict {
    ConditionFailed(usize),
    Conflict,
    Throttled,
    /// Not a cancellation: `TransactionInProgressException`.
    InProgress,
    Other(String),
}

fn verdict(reasons: &[CancellationReason]) -> Verdict {
    let code = |r: &CancellationReason| r.code().unwrap_or("None").to_owned();
    if let Some(i) = reasons
        .iter()
        .position(|r| r.code() == Some(CONDITION_FAILED))
    {
        return Verdict::ConditionFailed(i);
    }
    if reasons
        .iter()
        .any(|r| r.code() == Some(TRANSACTION_CONFLICT))
    {
        return Verdict::Conflict;
    }
    if reasons
        .iter()
        .any(|r| r.code().is_some_and(|c| THROTTLED.contains(&c)))
    {
        return Verdict::Throttled;
    }
    Verdict::Other(reasons.iter().map(code).collect::<Vec<_>>().join(","))
}

/// Sends `request`, retrying conflicts; see the module docs for what each outcome becomes.
pub async fn transact(request: TransactWriteItemsFluentBuilder) -> Result<(), TransactError> {
    for attempt in 0..ATTEMPTS {
        let err = match request.clone().send().await {
            Ok(_) => return Ok(()),
            Err(err) => err,
        };
        let verdict = match &err {
            SdkError::ServiceError(s) => match s.err() {
                TransactWriteItemsError::TransactionCanceledException(c) => {
                    verdict(c.cancellation_reasons())
                }
                // Another request with the same client token is still running: wait, as for a
                // conflict, then answer 503.
                TransactWriteItemsError::TransactionInProgressException(_) => Verdict::InProgress,
                _ => return Err(StoreError::from_sdk(err).into()),
            },
            _ => return Err(StoreError::from_sdk(err).into()),
        };
        let reasons = match &err {
            SdkError::ServiceError(s) => match s.err() {
                TransactWriteItemsError::TransactionCanceledException(c) => {
                    c.cancellation_reasons().to_vec()
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        match verdict {
            Verdict::ConditionFailed(index) => {
                let item = reasons[index].item().cloned();
                return Err(TransactError::ConditionFailed { index, item });
            }
            Verdict::Conflict | Verdict::InProgress if attempt + 1 < ATTEMPTS => {
                tracing::info!(attempt, ?verdict, "transaction not committed; retrying");
                tokio::time::sleep(jitter(BASE_BACKOFF * 2u32.pow(attempt))).await;
            }
            Verdict::InProgress => {
                return Err(StoreError::Unavailable(
                    "The same transaction is still in progress; retry later.".into(),
                )
                .into())
            }
            Verdict::Conflict => {
                return Err(StoreError::Contended(
                    "A concurrent change to the same items won repeatedly; retry.".into(),
                )
                .into())
            }
            Verdict::Throttled => {
                tracing::warn!("transaction cancelled by throttling");
                // A cancellation names no throttling reasons: the scope is unknown.
                return Err(StoreError::Throttled {
                    reasons: Vec::new(),
                }
                .into());
            }
            Verdict::Other(codes) => {
                return Err(StoreError::Internal(format!("transaction cancelled: {codes}")).into())
            }
        }
    }
    Err(StoreError::Internal("transaction retry loop ended".into()).into())
}

/// A random duration in `[0, ceiling)`: full jitter, so retrying writers spread out.
fn jitter(ceiling: Duration) -> Duration {
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let nanos = ceiling.as_nanos().max(1) as u64;
    Duration::from_nanos(random % nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reasons(codes: &[&str]) -> Vec<CancellationReason> {
        codes
            .iter()
            .map(|c| CancellationReason::builder().code(*c).build())
            .collect()
    }

    #[test]
    fn each_cancellation_reason_has_one_verdict() {
        // GIVEN the reasons DynamoDB reports per action; THEN the first failed condition wins, then
        // a conflict, then throttling
        assert_eq!(
            verdict(&reasons(&["None", CONDITION_FAILED, TRANSACTION_CONFLICT])),
            Verdict::ConditionFailed(1)
        );
        assert_eq!(
            verdict(&reasons(&["None", TRANSACTION_CONFLICT])),
            Verdict::Conflict
        );
        assert_eq!(
            verdict(&reasons(&["ThrottlingError", "None"])),
            Verdict::Throttled
        );
        assert_eq!(
            verdict(&reasons(&["None", "ProvisionedThroughputExceeded"])),
            Verdict::Throttled
        );
        assert_eq!(
            verdict(&reasons(&["ValidationError"])),
            Verdict::Other("ValidationError".into())
        );
    }

    #[test]
    fn jitter_stays_below_its_ceiling() {
        for _ in 0..100 {
            assert!(jitter(Duration::from_millis(20)) < Duration::from_millis(20));
        }
    }
}
