//! Tenant credentials. For each tenant: one STS AssumeRole with the tenant's session policy, cached per
//! container with whatever the caller builds from it (the store layer caches the scoped DynamoDB
//! client), refreshed 5 minutes before expiry; concurrent first requests for a tenant share one
//! AssumeRole. When STS fails while the cached credentials are still valid, they keep being served.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use thiserror::Error;

use crate::identity::clock::Clock;
use crate::identity::ids::TenantId;
use crate::isolation::policy::{
    platform_session_policy, scoped_session_policy, PlatformAccess, PolicyError, Scope,
    TableLocation, TenantTables, PLATFORM_ACCESS_TAG_KEY, TENANT_TAG_KEY,
};

/// Refresh credentials this long before they expire, so no request runs on nearly-expired ones.
pub const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// After a failed refresh (STS down or slow), serve the still-valid cached credentials and wait this
/// long before asking STS again, so an STS outage does not add its timeout to every request.
pub const REFRESH_RETRY_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, Error)]
pub enum CredentialsError {
    #[error("STS is unavailable or throttling: {0}")]
    StsUnavailable(String),
    #[error("STS refused AssumeRole: {0}")]
    StsRefused(String),
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

/// What AssumeRole needs, all read once in `main`.
#[derive(Debug, Clone)]
pub struct CredentialSettings {
    pub role_arn: String,
    /// The role an operator path's sessions assume ([`Scope::Operator`]: the tenant-access role's
    /// policy refuses record writes; this one's does not, and only the operator functions' roles may
    /// assume it). `None`: `role_arn` (local stacks, where no IAM is evaluated).
    pub operator_role_arn: Option<String>,
    pub table: TableLocation,
    /// 900 to 3,600 seconds.
    pub duration_seconds: i32,
    /// What this function's sessions of the platform's partition may do (its role's trust demands
    /// the matching session tag): every other tenant's sessions are not affected.
    pub platform_access: PlatformAccess,
}

#[derive(Debug)]
struct Cached<C> {
    value: C,
    /// The placement the credentials' session policy names: another placement needs new ones.
    tables: TenantTables,
    expires: SystemTime,
    /// Set after a failed refresh: no new attempt before this time.
    next_attempt: Option<SystemTime>,
}

/// One tenant's slot: an async lock, so concurrent first requests wait for one AssumeRole.
type Slot<C> = Arc<tokio::sync::Mutex<Option<Cached<C>>>>;

/// The per-container cache of tenant credentials, each kept with the `C` built from them.
pub struct TenantCredentials<C> {
    sts: aws_sdk_sts::Client,
    settings: CredentialSettings,
    clock: Arc<dyn Clock>,
    // One async lock per tenant and scope: concurrent first requests wait for one AssumeRole instead
    // of racing, and an operator's session never replaces (nor serves) a tenant route's.
    entries: Mutex<HashMap<(TenantId, Scope), Slot<C>>>,
}

impl<C: Clone> TenantCredentials<C> {
    pub fn new(
        sts: aws_sdk_sts::Client,
        settings: CredentialSettings,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            sts,
            settings,
            clock,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub fn settings(&self) -> &CredentialSettings {
        &self.settings
    }

    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.clock.now_millis())
    }

    /// The cached `C` for `tenant` placed in `tables` in `scope`, or one built by `build` from fresh
    /// credentials, assuming the role only when nothing fresh is cached for that placement.
    pub async fn get(
        &self,
        tenant: &TenantId,
        tables: &TenantTables,
        scope: Scope,
        build: impl FnOnce(Credentials) -> C,
    ) -> Result<C, CredentialsError> {
        let slot = {
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            entries.entry((tenant.clone(), scope)).or_default().clone()
        };
        let mut cached = slot.lock().await;
        let now = self.now();
        if let Some(c) = cached.as_ref().filter(|c| c.tables == *tables) {
            let fresh = now + REFRESH_BEFORE_EXPIRY < c.expires;
            let backing_off = c.next_attempt.is_some_and(|t| now < t) && now < c.expires;
            if fresh || backing_off {
                return Ok(c.value.clone());
            }
        }
        match self.assume(tenant, tables, scope).await {
            Ok((credentials, expires)) => {
                // STS's expiry is wall-clock time; their freshness is judged on the injected clock,
                // like every other age here, so the expiry is kept as a lifetime from now.
                let lifetime = expires
                    .duration_since(SystemTime::now())
                    .unwrap_or_default();
                let expires = self.now() + lifetime;
                let value = build(credentials);
                *cached = Some(Cached {
                    value: value.clone(),
                    tables: tables.clone(),
                    expires,
                    next_attempt: None,
                });
                Ok(value)
            }
            // The refresh failed (STS down or slow, or refusing: a role or trust-policy change), but
            // the cached credentials are still valid: keep serving on them, and do not ask STS again
            // for a while. A refusal is logged as an error: it will not heal by itself.
            Err(e) => match cached.as_mut() {
                Some(c) if now < c.expires && c.tables == *tables => {
                    match &e {
                        CredentialsError::StsUnavailable(_) => {
                            tracing::warn!(error = %e, tenant = %tenant, "STS refresh failed; serving cached credentials")
                        }
                        _ => {
                            tracing::error!(error = %e, tenant = %tenant, "STS refused the refresh; serving cached credentials until they expire")
                        }
                    }
                    c.next_attempt = Some(now + REFRESH_RETRY_AFTER);
                    Ok(c.value.clone())
                }
                _ => Err(e),
            },
        }
    }

    async fn assume(
        &self,
        tenant: &TenantId,
        tables: &TenantTables,
        scope: Scope,
    ) -> Result<(Credentials, SystemTime), CredentialsError> {
        let out = assume_role_request(&self.sts, &self.settings, tenant, tables, scope)?
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
                    CredentialsError::StsUnavailable(format!("{e:?}"))
                } else {
                    CredentialsError::StsRefused(format!("{e:?}"))
                }
            })?;
        // The session policy and tags travel inside the session token, whose size STS limits apart
        // from the policy's 2,048 characters: its share is the only warning real AWS gives before
        // it refuses a session (the emulators answer none).
        if let Some(used) = out
            .session_token_utilization()
            .filter(|used| *used >= TOKEN_UTILIZATION_WARN_PERCENT)
        {
            tracing::warn!(tenant = %tenant, ?scope, session_token_percent = used, "a session's token is near STS's size limit (its session policy and tags)");
        }
        let creds = out
            .credentials()
            .ok_or_else(|| CredentialsError::StsRefused("no credentials in the answer".into()))?;
        let expires = SystemTime::try_from(*creds.expiration())
            .unwrap_or_else(|_| SystemTime::now() + Duration::from_secs(900));
        let credentials = Credentials::new(
            creds.access_key_id(),
            creds.secret_access_key(),
            Some(creds.session_token().to_owned()),
            Some(expires),
            "pooltable-tenant-sts",
        );
        Ok((credentials, expires))
    }
}

/// The share of STS's session-token size limit (percent) from which a session is warned of.
const TOKEN_UTILIZATION_WARN_PERCENT: i32 = 80;

/// The AssumeRole for `tenant` in `scope`: its session policy (the first layer scoping the
/// credentials) and its `TenantId` session tag (which the role's own policy is written against, the
/// second), of the tenant-access role or, for an operator path, the tenant-operator role.
pub fn assume_role_request(
    sts: &aws_sdk_sts::Client,
    settings: &CredentialSettings,
    tenant: &TenantId,
    tables: &TenantTables,
    scope: Scope,
) -> Result<aws_sdk_sts::operation::assume_role::builders::AssumeRoleFluentBuilder, CredentialsError>
{
    let tag = aws_sdk_sts::types::Tag::builder()
        .key(TENANT_TAG_KEY)
        .value(tenant.as_str())
        .build()
        .map_err(|e| CredentialsError::StsRefused(format!("session tag: {e}")))?;
    let role_arn = match (scope, &settings.operator_role_arn) {
        (Scope::Operator, Some(operator_role)) => operator_role,
        _ => &settings.role_arn,
    };
    let narrowed = (tenant.as_str() == TenantId::PLATFORM)
        .then(|| settings.platform_access.tag())
        .flatten();
    let (policy, narrowed) = match narrowed {
        Some(value) => (
            platform_session_policy(&settings.table, settings.platform_access)?,
            Some(
                aws_sdk_sts::types::Tag::builder()
                    .key(PLATFORM_ACCESS_TAG_KEY)
                    .value(value)
                    .build()
                    .map_err(|e| CredentialsError::StsRefused(format!("session tag: {e}")))?,
            ),
        ),
        None => (
            scoped_session_policy(tenant, &settings.table, tables, scope)?,
            None,
        ),
    };
    let mut request = sts
        .assume_role()
        .role_arn(role_arn)
        .role_session_name(role_session_name(tenant))
        .policy(policy)
        .tags(tag)
        .duration_seconds(settings.duration_seconds);
    if let Some(narrowed) = narrowed {
        request = request.tags(narrowed);
    }
    Ok(request)
}

/// AWS error codes that mean "try again later": throttling, and the services' own 5xx. STS and
/// DynamoDB share most of them; the store layer classifies DynamoDB errors with this list too.
pub fn is_retryable_code(code: Option<&str>) -> bool {
    matches!(
        code,
        Some(
            "ProvisionedThroughputExceededException"
                | "ThrottlingException"
                | "RequestLimitExceeded"
                | "InternalServerError"
                | "InternalFailure"
                | "ServiceUnavailable"
                | "TransactionInProgressException"
                | "Throttling"
                | "ThrottledException"
                | "IDPCommunicationError"
        )
    )
}

/// `pooltable-<tenant>`, cut to STS's 64-character limit. It names the session in CloudTrail; the
/// policy, not this name, is what scopes access.
pub fn role_session_name(tenant: &TenantId) -> String {
    let mut name = format!("pooltable-{tenant}");
    name.truncate(64);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sts() -> aws_sdk_sts::Client {
        let config = aws_sdk_sts::Config::builder()
            .behavior_version(aws_sdk_sts::config::BehaviorVersion::latest())
            .region(aws_sdk_sts::config::Region::new("us-east-1"))
            .build();
        aws_sdk_sts::Client::from_conf(config)
    }

    fn settings() -> CredentialSettings {
        let role_arn = "arn:aws:iam::123456789012:role/pooltable-test-tenant-access";
        CredentialSettings {
            platform_access: PlatformAccess::All,
            role_arn: role_arn.into(),
            operator_role_arn: Some(
                "arn:aws:iam::123456789012:role/pooltable-test-tenant-operator".into(),
            ),
            table: TableLocation::from_role_arn(role_arn, "us-east-1", "pooltable-test").unwrap(),
            duration_seconds: 900,
        }
    }

    #[test]
    fn assume_role_carries_the_tenant_tag_and_the_session_policy() {
        // GIVEN tenant acme-1
        let tenant = TenantId::parse("acme-1").unwrap();
        // WHEN its AssumeRole is built
        let pooled = TenantTables::pooled("pooltable-test");
        let request =
            assume_role_request(&sts(), &settings(), &tenant, &pooled, Scope::Tenant).unwrap();
        let input = request.as_input();
        // THEN it carries exactly one session tag, TenantId = acme-1, and the tenant's session policy
        let tags = input.get_tags().as_deref().unwrap();
        assert_eq!(tags.len(), 1);
        assert_eq!((tags[0].key(), tags[0].value()), ("TenantId", "acme-1"));
        assert_eq!(
            input.get_policy().as_deref(),
            Some(
                crate::isolation::policy::session_policy(&tenant, &settings().table)
                    .unwrap()
                    .as_str()
            )
        );
        assert_eq!(
            input.get_role_session_name().as_deref(),
            Some("pooltable-acme-1")
        );
        assert!(input.get_transitive_tag_keys().is_none());
        assert_eq!(
            input.get_role_arn().as_deref(),
            Some(settings().role_arn.as_str())
        );
    }

    /// The settings of a function whose platform sessions are narrowed to `access`, and its
    /// AssumeRole for a session of the platform's partition.
    fn platform_session_request(
        access: PlatformAccess,
    ) -> (
        CredentialSettings,
        aws_sdk_sts::operation::assume_role::builders::AssumeRoleFluentBuilder,
    ) {
        let settings = CredentialSettings {
            platform_access: access,
            ..settings()
        };
        let pooled = TenantTables::pooled("pooltable-test");
        let request = assume_role_request(
            &sts(),
            &settings,
            &TenantId::platform(),
            &pooled,
            Scope::Tenant,
        )
        .unwrap();
        (settings, request)
    }

    #[test]
    fn a_narrowed_function_tags_its_platform_sessions_and_sends_their_narrowed_policy_only() {
        let pooled = TenantTables::pooled("pooltable-test");
        // (the patterns, written with the key builders: `TENANT#_platform#USAGE#*`, …)
        let pattern = |prefix: String| format!("{prefix}*");
        let platform = TenantId::platform();
        let usage = (
            vec!["dynamodb:UpdateItem"],
            pattern(crate::identity::keys::usage_counter_pk_prefix(&platform)),
        );
        for (access, tag, statements) in [
            (PlatformAccess::Usage, "usage", vec![usage.clone()]),
            (
                PlatformAccess::Read,
                "read",
                vec![
                    (
                        vec![
                            "dynamodb:GetItem",
                            "dynamodb:Query",
                            "dynamodb:ConditionCheckItem",
                        ],
                        pattern(crate::identity::keys::tenant_prefix(&platform)),
                    ),
                    usage.clone(),
                ],
            ),
            (
                PlatformAccess::ImportsDue,
                "imports-due",
                vec![
                    (
                        vec!["dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                        pattern(crate::identity::keys::import_due_pk_prefix()),
                    ),
                    usage.clone(),
                ],
            ),
        ] {
            // GIVEN a function whose platform sessions are narrowed to `access`
            // WHEN it asks for a session of the platform's partition
            let (settings, request) = platform_session_request(access);
            let input = request.as_input();
            // THEN the session carries the PlatformAccess tag beside its TenantId, and a policy of
            // only those actions on only those keys
            let tags: Vec<(&str, &str)> = input
                .get_tags()
                .as_deref()
                .unwrap()
                .iter()
                .map(|t| (t.key(), t.value()))
                .collect();
            assert_eq!(
                tags,
                [("TenantId", "_platform"), ("PlatformAccess", tag)],
                "{access:?}"
            );
            let policy: serde_json::Value =
                serde_json::from_str(input.get_policy().as_deref().unwrap()).unwrap();
            let sent: Vec<(serde_json::Value, serde_json::Value)> = policy["Statement"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    (
                        s["Action"].clone(),
                        s["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"].clone(),
                    )
                })
                .collect();
            let expected: Vec<(serde_json::Value, serde_json::Value)> = statements
                .iter()
                .map(|(actions, keys)| (serde_json::json!(actions), serde_json::json!([keys])))
                .collect();
            assert_eq!(sent, expected, "{access:?}");
            // AND a tenant's session from the same function is not narrowed
            let tenant = TenantId::parse("acme-1").unwrap();
            let request =
                assume_role_request(&sts(), &settings, &tenant, &pooled, Scope::Tenant).unwrap();
            assert_eq!(request.as_input().get_tags().as_deref().unwrap().len(), 1);
        }
    }

    #[test]
    fn the_import_producers_list_statement_names_the_only_attributes_it_may_write() {
        // GIVEN the import producer's narrowed settings
        // WHEN it asks for a session of the platform's partition
        let (_, request) = platform_session_request(PlatformAccess::ImportsDue);
        // THEN its list statement names the keys' attributes and the listing's, never the
        // driver's note of an import's close; the usage statement names none
        let policy: serde_json::Value =
            serde_json::from_str(request.as_input().get_policy().as_deref().unwrap()).unwrap();
        let per_statement = |operator: &str, key: &str| -> Vec<serde_json::Value> {
            let statements = policy["Statement"].as_array().unwrap().iter();
            statements
                .map(|s| s["Condition"][operator][key].clone())
                .collect()
        };
        let listing = serde_json::json!(["PK", "SK", "catalog", "kind", "tenantId", "createdAtMs"]);
        let attributes = per_statement("ForAllValues:StringEquals", "dynamodb:Attributes");
        assert_eq!(attributes, [listing, serde_json::Value::Null]);
        // AND it asks for nothing back (an entry names another tenant's import and its counts)
        let return_values = per_statement("StringEqualsIfExists", "dynamodb:ReturnValues");
        assert_eq!(
            return_values,
            [serde_json::json!(["NONE"]), serde_json::Value::Null]
        );
    }

    #[test]
    fn an_operators_assume_role_takes_the_tenant_operator_role() {
        // GIVEN tenant acme-1, and an operator path acting on it
        let tenant = TenantId::parse("acme-1").unwrap();
        let pooled = TenantTables::pooled("pooltable-test");
        // WHEN its AssumeRole is built
        let request =
            assume_role_request(&sts(), &settings(), &tenant, &pooled, Scope::Operator).unwrap();
        // THEN it assumes the tenant-operator role, with the same tag
        let input = request.as_input();
        assert_eq!(
            input.get_role_arn().as_deref(),
            settings().operator_role_arn.as_deref()
        );
        let tags = input.get_tags().as_deref().unwrap();
        assert_eq!((tags[0].key(), tags[0].value()), ("TenantId", "acme-1"));
    }
}
