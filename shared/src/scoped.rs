//! Tenant-scoped DynamoDB clients. For each tenant: one STS AssumeRole with the tenant's session
//! policy, cached per container and refreshed 5 minutes before expiry; concurrent first requests for
//! a tenant share one AssumeRole. Every client carries the [`TenantKeyGuard`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_sdk_dynamodb::config::SharedInterceptor;
use thiserror::Error;

use crate::clock::Clock;
use crate::error::{is_retryable_code, ApiError};
use crate::guard::TenantKeyGuard;
use crate::ids::TenantId;
use crate::policy::{session_policy, PolicyError, TableLocation};

/// Refresh credentials this long before they expire, so no request runs on nearly-expired ones.
pub const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// After a failed refresh (STS down or slow), serve the still-valid cached credentials and wait this
/// long before asking STS again, so an STS outage does not add its timeout to every request.
pub const REFRESH_RETRY_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, Error)]
pub enum ScopedClientError {
    #[error("STS is unavailable or throttling: {0}")]
    StsUnavailable(String),
    #[error("STS refused AssumeRole: {0}")]
    StsRefused(String),
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

impl From<ScopedClientError> for ApiError {
    fn from(err: ScopedClientError) -> Self {
        match err {
            ScopedClientError::StsUnavailable(cause) => {
                tracing::warn!(%cause, "STS unavailable");
                ApiError::Unavailable("Tenant credentials are unavailable; retry later.".into())
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// A DynamoDB client that can only touch one tenant's keys, plus what requests need to address it.
#[derive(Debug, Clone)]
pub struct TenantDb {
    pub client: aws_sdk_dynamodb::Client,
    pub tenant: TenantId,
    pub table: Arc<str>,
}

#[derive(Debug)]
struct Cached {
    db: TenantDb,
    expires: SystemTime,
    /// Set after a failed refresh: no new attempt before this time.
    next_attempt: Option<SystemTime>,
}

/// Settings for [`TenantClients`], all read once in `main`.
#[derive(Debug, Clone)]
pub struct ScopedSettings {
    pub role_arn: String,
    pub table: TableLocation,
    /// 900 to 3,600 seconds.
    pub duration_seconds: i32,
}

/// The per-container cache of tenant-scoped clients.
pub struct TenantClients {
    sts: aws_sdk_sts::Client,
    dynamodb: aws_sdk_dynamodb::Config,
    settings: ScopedSettings,
    table_name: Arc<str>,
    extra_interceptors: Vec<SharedInterceptor>,
    clock: Arc<dyn Clock>,
    // One async lock per tenant: concurrent first requests wait for one AssumeRole instead of racing.
    entries: Mutex<HashMap<TenantId, Arc<tokio::sync::Mutex<Option<Cached>>>>>,
}

impl TenantClients {
    pub fn new(
        sts: aws_sdk_sts::Client,
        dynamodb: aws_sdk_dynamodb::Config,
        settings: ScopedSettings,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            sts,
            dynamodb,
            table_name: Arc::from(settings.table.table_name.as_str()),
            settings,
            extra_interceptors: Vec::new(),
            clock,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.clock.now_millis())
    }

    /// Adds an interceptor to every tenant client built from now on (request counting, fault injection).
    pub fn with_interceptor(mut self, interceptor: SharedInterceptor) -> Self {
        self.extra_interceptors.push(interceptor);
        self
    }

    pub fn table_name(&self) -> &str {
        &self.table_name
    }

    /// The scoped client for `tenant`, assuming the tenant role only when no fresh credentials are cached.
    pub async fn for_tenant(&self, tenant: &TenantId) -> Result<TenantDb, ScopedClientError> {
        let slot = {
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            entries.entry(tenant.clone()).or_default().clone()
        };
        let mut cached = slot.lock().await;
        let now = self.now();
        if let Some(c) = cached.as_ref() {
            let fresh = now + REFRESH_BEFORE_EXPIRY < c.expires;
            let backing_off = c.next_attempt.is_some_and(|t| now < t) && now < c.expires;
            if fresh || backing_off {
                return Ok(c.db.clone());
            }
        }
        match self.assume(tenant).await {
            Ok(fresh) => {
                let db = fresh.db.clone();
                *cached = Some(fresh);
                Ok(db)
            }
            // STS is down or slow but the cached credentials are still valid: keep serving on them,
            // and do not ask STS again for a while.
            Err(ScopedClientError::StsUnavailable(cause)) => match cached.as_mut() {
                Some(c) if now < c.expires => {
                    tracing::warn!(%cause, tenant = %tenant, "STS refresh failed; serving cached credentials");
                    c.next_attempt = Some(now + REFRESH_RETRY_AFTER);
                    Ok(c.db.clone())
                }
                _ => Err(ScopedClientError::StsUnavailable(cause)),
            },
            Err(e) => Err(e),
        }
    }

    async fn assume(&self, tenant: &TenantId) -> Result<Cached, ScopedClientError> {
        let policy = session_policy(tenant, &self.settings.table)?;
        let out = self
            .sts
            .assume_role()
            .role_arn(&self.settings.role_arn)
            .role_session_name(role_session_name(tenant))
            .policy(policy)
            .duration_seconds(self.settings.duration_seconds)
            .send()
            .await
            .map_err(|e| {
                use aws_sdk_sts::error::{ProvideErrorMetadata, SdkError};
                let retryable = match &e {
                    SdkError::TimeoutError(_)
                    | SdkError::DispatchFailure(_)
                    | SdkError::ResponseError(_) => true,
                    SdkError::ServiceError(s) => is_retryable_code(s.err().code()),
                    _ => false,
                };
                if retryable {
                    ScopedClientError::StsUnavailable(format!("{e:?}"))
                } else {
                    ScopedClientError::StsRefused(format!("{e:?}"))
                }
            })?;
        let creds = out
            .credentials()
            .ok_or_else(|| ScopedClientError::StsRefused("no credentials in the answer".into()))?;
        let expires = SystemTime::try_from(*creds.expiration())
            .unwrap_or_else(|_| SystemTime::now() + Duration::from_secs(900));
        let credentials = Credentials::new(
            creds.access_key_id(),
            creds.secret_access_key(),
            Some(creds.session_token().to_owned()),
            Some(expires),
            "pooltable-tenant-sts",
        );
        let mut config = self
            .dynamodb
            .to_builder()
            .credentials_provider(credentials)
            .interceptor(TenantKeyGuard::new(tenant.clone()))
            .interceptor(crate::runtime::RequestMetering);
        for extra in &self.extra_interceptors {
            config.push_interceptor(extra.clone());
        }
        Ok(Cached {
            db: TenantDb {
                client: aws_sdk_dynamodb::Client::from_conf(config.build()),
                tenant: tenant.clone(),
                table: self.table_name.clone(),
            },
            expires,
            next_attempt: None,
        })
    }
}

/// `pooltable-<tenant>`, cut to STS's 64-character limit. It names the session in CloudTrail; the
/// policy, not this name, is what scopes access.
pub fn role_session_name(tenant: &TenantId) -> String {
    let mut name = format!("pooltable-{tenant}");
    name.truncate(64);
    name
}
