//! One error type for every handler, turned into an `application/problem+json` response (RFC 9457)
//! in exactly one place. Bodies carry a title and a safe detail; internal causes go to the log only.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Response};
use serde::Serialize;
use thiserror::Error;

use crate::identity::cursor::InvalidCursor;
use crate::isolation::claims::ClaimsError;
use crate::store::client::error::StoreError;
use crate::store::client::transact::TransactError;

/// Seconds a client should wait before retrying a 503.
pub const RETRY_AFTER_SECONDS: u32 = 1;

#[derive(Debug, Error)]
pub enum ApiError {
    #[error("{detail}")]
    BadRequest {
        detail: String,
        field: Option<String>,
    },
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    /// Well-formed but not processable: an `Idempotency-Key` reused for a different request.
    #[error("{0}")]
    Unprocessable(String),
    /// The tenant is over its tier quota: 429 with Retry-After, the seconds until it is not.
    #[error("{detail}")]
    TooManyRequests {
        detail: String,
        retry_after_seconds: u32,
    },
    /// DynamoDB or STS is unavailable or throttling: retryable, so 503 with Retry-After.
    #[error("{0}")]
    Unavailable(String),
    /// A bug or an unexpected AWS answer. The detail is logged, never returned.
    #[error("{0}")]
    Internal(String),
}

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    title: &'a str,
    status: u16,
    detail: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
}

impl ApiError {
    pub fn bad_request(field: &str, detail: impl Into<String>) -> Self {
        Self::BadRequest {
            detail: detail.into(),
            field: Some(field.to_owned()),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn slug(&self) -> &'static str {
        match self {
            Self::BadRequest { .. } => "bad-request",
            Self::Unauthorized(_) => "unauthorized",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) => "not-found",
            Self::Conflict(_) => "conflict",
            Self::PayloadTooLarge(_) => "payload-too-large",
            Self::Unprocessable(_) => "unprocessable",
            Self::TooManyRequests { .. } => "too-many-requests",
            Self::Unavailable(_) => "unavailable",
            Self::Internal(_) => "internal",
        }
    }

    pub fn into_response(self) -> Response<Body> {
        let status = self.status();
        let title = status.canonical_reason().unwrap_or("Error");
        let detail = match &self {
            Self::Internal(cause) => {
                tracing::error!(cause = %cause, "internal error");
                "An internal error occurred."
            }
            other => other.public_detail(),
        };
        let field = match &self {
            Self::BadRequest { field, .. } => field.as_deref(),
            _ => None,
        };
        let kind = format!("https://pooltable.dev/problems/{}", self.slug());
        let body = serde_json::to_string(&Problem {
            kind: &kind,
            title,
            status: status.as_u16(),
            detail,
            field,
        })
        .unwrap_or_default();
        let mut builder = Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "application/problem+json");
        if status == StatusCode::SERVICE_UNAVAILABLE {
            builder = builder.header(header::RETRY_AFTER, RETRY_AFTER_SECONDS.to_string());
        }
        if let Self::TooManyRequests {
            retry_after_seconds,
            ..
        } = &self
        {
            builder = builder.header(header::RETRY_AFTER, retry_after_seconds.to_string());
        }
        builder
            .body(Body::Text(body))
            .unwrap_or_else(|_| Response::new(Body::Empty))
    }

    fn public_detail(&self) -> &str {
        match self {
            Self::BadRequest { detail, .. } => detail,
            Self::Unauthorized(d)
            | Self::Forbidden(d)
            | Self::NotFound(d)
            | Self::Conflict(d)
            | Self::PayloadTooLarge(d)
            | Self::Unprocessable(d)
            | Self::TooManyRequests { detail: d, .. }
            | Self::Unavailable(d)
            | Self::Internal(d) => d,
        }
    }

    /// Classifies a DynamoDB SDK error (see [`StoreError::from_sdk`]). Callers handle the outcomes
    /// they expect (a failed condition meaning "exists" or "not found") before falling back to this.
    pub fn from_dynamodb<E, R>(err: SdkError<E, R>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        StoreError::from_sdk(err).into()
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Unavailable(detail) => Self::Unavailable(detail),
            throttled @ StoreError::Throttled { .. } => Self::Unavailable(throttled.to_string()),
            StoreError::Contended(detail) => Self::Conflict(detail),
            StoreError::Unfit(detail) => Self::Conflict(detail),
            StoreError::OutsideTenant => {
                Self::Forbidden("The request reaches outside the caller's tenant.".into())
            }
            StoreError::KeyRefused(_) => Self::Forbidden(
                "This tenant's encryption key is disabled, revoked or destroyed: none of its \
                 data can be read or written until its key is usable again."
                    .into(),
            ),
            StoreError::NotOnboarded => {
                Self::Forbidden("This tenant has not been onboarded (no tenant record).".into())
            }
            StoreError::BadCursor(invalid) => invalid.into(),
            StoreError::Internal(cause) => Self::Internal(cause),
        }
    }
}

impl From<TransactError> for ApiError {
    /// A failed condition the route did not map itself: the items changed under the request.
    fn from(err: TransactError) -> Self {
        match err {
            TransactError::ConditionFailed { .. } => {
                Self::Conflict("The items changed while the request was written; retry.".into())
            }
            TransactError::Store(store) => store.into(),
        }
    }
}

impl From<InvalidCursor> for ApiError {
    fn from(err: InvalidCursor) -> Self {
        Self::bad_request("cursor", err.to_string())
    }
}

impl From<ClaimsError> for ApiError {
    fn from(err: ClaimsError) -> Self {
        match err {
            ClaimsError::NoTenantClaim => Self::Unauthorized(err.to_string()),
            ClaimsError::InvalidTenantClaim(_)
            | ClaimsError::OtherTenantsEnvironment
            | ClaimsError::OtherAppClient => Self::Forbidden(err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(resp: &Response<Body>) -> serde_json::Value {
        match resp.body() {
            Body::Text(t) => serde_json::from_str(t).unwrap(),
            _ => panic!("text body expected"),
        }
    }

    #[test]
    fn bad_request_is_problem_json_naming_the_field() {
        let resp = ApiError::bad_request("limit", "must be 1 to 100").into_response();
        assert_eq!(resp.status(), 400);
        assert_eq!(
            resp.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        let b = body(&resp);
        assert_eq!(b["field"], "limit");
        assert_eq!(b["status"], 400);
        assert_eq!(b["detail"], "must be 1 to 100");
    }

    #[test]
    fn unavailable_carries_retry_after() {
        let resp = ApiError::Unavailable("x".into()).into_response();
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
    }

    #[test]
    fn internal_detail_never_reaches_the_body() {
        let resp = ApiError::Internal("secret table arn".into()).into_response();
        assert_eq!(resp.status(), 500);
        assert!(!body(&resp).to_string().contains("secret"));
    }

    #[test]
    fn lower_layer_errors_map_to_their_statuses() {
        // GIVEN each kind a lower layer reports; WHEN it becomes a response; THEN its status.
        let cases: Vec<(ApiError, u16)> = vec![
            (ClaimsError::NoTenantClaim.into(), 401),
            (ClaimsError::InvalidTenantClaim("x".into()).into(), 403),
            (ClaimsError::OtherTenantsEnvironment.into(), 403),
            (ClaimsError::OtherAppClient.into(), 403),
            (InvalidCursor.into(), 400),
            (StoreError::BadCursor(InvalidCursor).into(), 400),
            (StoreError::NotOnboarded.into(), 403),
            (
                StoreError::KeyRefused("DisabledException".into()).into(),
                403,
            ),
            (StoreError::OutsideTenant.into(), 403),
            (StoreError::Unavailable("x".into()).into(), 503),
            (StoreError::Contended("x".into()).into(), 409),
            (StoreError::Unfit("x".into()).into(), 409),
            (
                TransactError::ConditionFailed {
                    index: 0,
                    item: None,
                }
                .into(),
                409,
            ),
            (StoreError::Internal("x".into()).into(), 500),
        ];
        for (err, status) in cases {
            assert_eq!(err.status(), status, "{err:?}");
        }
        let cursor = ApiError::from(InvalidCursor).into_response();
        assert_eq!(body(&cursor)["field"], "cursor");
    }
}
