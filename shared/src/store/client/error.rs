//! What can go wrong talking to the store, classified once: the service layer turns each kind into
//! its HTTP status, and handlers match the kinds they expect (a failed condition) before that.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use thiserror::Error;

use crate::identity::cursor::InvalidCursor;
use crate::isolation::credentials::{is_retryable_code, CredentialsError};
use crate::isolation::guard::is_guard_violation;

#[derive(Debug, Error)]
pub enum StoreError {
    /// DynamoDB or STS is unavailable: retryable.
    #[error("{0}")]
    Unavailable(String),
    /// DynamoDB throttled the request past the SDK's retries: retryable (503, as
    /// [`StoreError::Unavailable`]). `reasons` are DynamoDB's own (its `ThrottlingReasons`, such as
    /// `TableWriteKeyRangeThroughputExceeded`), when it gave any: what a lifecycle lane's backoff
    /// reads (`lifecycle::pacing::throttle_scope`).
    #[error("The data store is busy; retry later.")]
    Throttled { reasons: Vec<String> },
    /// Concurrent writers kept changing the same items: retrying later may succeed (409).
    #[error("{0}")]
    Contended(String),
    /// The isolation guard refused a request that reaches outside the caller's tenant.
    #[error("the request reaches outside the caller's tenant")]
    OutsideTenant,
    /// A pagination cursor that this store did not hand out for this listing.
    #[error(transparent)]
    BadCursor(#[from] InvalidCursor),
    /// A resource the request names exists but cannot serve it (an operator's own table with other
    /// keys than the pool's, or with items): 409, naming it.
    #[error("{0}")]
    Unfit(String),
    /// The tenant's key refuses (its KMS key disabled, its grant revoked, pending deletion, or the
    /// key destroyed): none of its data can be read or written until the key is usable again (403).
    #[error("the tenant's key refuses: {0}")]
    KeyRefused(String),
    /// The tenant has no record, so nothing sharded can be addressed.
    #[error("this tenant has not been onboarded (no tenant record)")]
    NotOnboarded,
    /// A bug or an unexpected AWS answer. The detail is for the log only.
    #[error("{0}")]
    Internal(String),
}

/// The outcome of a single conditional write whose failed condition is an answer, not an error:
/// `true` when it was written, `false` when its condition failed, else the classified error.
pub fn written_unless_condition_failed<O, E, R>(
    out: Result<O, SdkError<E, R>>,
) -> Result<bool, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match out {
        Ok(_) => Ok(true),
        Err(SdkError::ServiceError(service))
            if service.err().code() == Some("ConditionalCheckFailedException") =>
        {
            Ok(false)
        }
        Err(e) => Err(StoreError::from_sdk(e)),
    }
}

/// `out`'s output, or `None` when it failed with the service error `expected` recognises (an answer
/// such as "not found" or "already there", not a failure); else the classified error.
pub fn unless_expected<O, E, R>(
    out: Result<O, SdkError<E, R>>,
    expected: impl FnOnce(&E) -> bool,
) -> Result<Option<O>, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match out {
        Ok(output) => Ok(Some(output)),
        Err(e) if e.as_service_error().is_some_and(expected) => Ok(None),
        Err(e) => Err(StoreError::from_sdk(e)),
    }
}

impl StoreError {
    /// Classifies a DynamoDB SDK error. Callers handle the outcomes they expect (a failed condition
    /// meaning "exists" or "not found") before falling back to this.
    pub fn from_sdk<E, R>(err: SdkError<E, R>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        if is_guard_violation(&err) {
            tracing::error!(error = ?err, "isolation guard refused a request");
            return Self::OutsideTenant;
        }
        if let SdkError::ServiceError(service) = &err {
            if service.err().code().is_some_and(|c| THROTTLED.contains(&c)) {
                let reasons = throttling_reasons(service.raw());
                tracing::warn!(error = ?err, ?reasons, "DynamoDB throttling");
                return Self::Throttled { reasons };
            }
        }
        let retryable = match &err {
            SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => true,
            SdkError::ServiceError(service) => is_retryable_code(service.err().code()),
            SdkError::ResponseError(_) => true,
            _ => false,
        };
        if retryable {
            tracing::warn!(error = ?err, "DynamoDB unavailable or throttling");
            return Self::Unavailable("The data store is busy or unavailable; retry later.".into());
        }
        Self::Internal(format!("DynamoDB error: {err:?}"))
    }
}

/// The error codes of a request DynamoDB throttled.
const THROTTLED: [&str; 3] = [
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
];

/// The `reason` of each of the `ThrottlingReasons` in a throttled request's answer (`raw`, the
/// HTTP response the SDK keeps with the error), or none when it gave none.
fn throttling_reasons<R: 'static>(raw: &R) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(rename = "ThrottlingReasons", default)]
        reasons: Vec<Reason>,
    }
    #[derive(serde::Deserialize)]
    struct Reason {
        reason: Option<String>,
    }
    let any: &dyn std::any::Any = raw;
    any.downcast_ref::<aws_sdk_dynamodb::config::http::HttpResponse>()
        .and_then(|response| response.body().bytes())
        .and_then(|body| serde_json::from_slice::<Answer>(body).ok())
        .map(|answer| {
            answer
                .reasons
                .into_iter()
                .filter_map(|r| r.reason)
                .collect()
        })
        .unwrap_or_default()
}

/// A request that could not be built (a required field missing): a bug, not the caller's.
impl From<aws_sdk_dynamodb::error::BuildError> for StoreError {
    fn from(err: aws_sdk_dynamodb::error::BuildError) -> Self {
        Self::Internal(err.to_string())
    }
}

impl From<CredentialsError> for StoreError {
    fn from(err: CredentialsError) -> Self {
        match err {
            CredentialsError::StsUnavailable(cause) => {
                tracing::warn!(%cause, "STS unavailable");
                Self::Unavailable("Tenant credentials are unavailable; retry later.".into())
            }
            other => Self::Internal(other.to_string()),
        }
    }
}
