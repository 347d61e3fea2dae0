//! Everything a function builds once per container, in `main`: configuration from the environment,
//! the AWS clients, the tenant credential cache and the clock.

use std::sync::Arc;

use aws_config::SdkConfig;

use crate::identity::clock::{Clock, SystemClock};
use crate::identity::cursor::CursorKeys;
use crate::identity::ids::TenantId;
use crate::isolation::claims::{caller, check_execution_tenant, Caller};
use crate::isolation::credentials::CredentialSettings;
use crate::isolation::policy::TableLocation;
use crate::service::error::ApiError;
use crate::service::metrics::MetricsSink;
use crate::service::signing::SigningKeys;
use crate::store::client::meter::note_tenant;
use crate::store::client::pages::PageCache;
use crate::store::client::scoped::{TenantClients, TenantDb};
use crate::store::keys::TenantKeys;
use crate::store::quota::limiter::RateLimiter;
use crate::store::quota::usage::UsageMeter;
use crate::store::tenancy::placement::tables_of;
use crate::store::tenancy::read_cache::ReadCache;
use crate::store::tenancy::tenants::{Limits, TenantDirectory, TenantRecord, TenantStatus};
use incarnations::Incarnations;

mod config;
mod incarnations;
mod keys;
mod metering;
mod operator;
pub use config::{
    env_var, env_var_or, https_client, lambda_sdk_config, load_sdk_config, running_in_aws_lambda,
    running_in_sam_local, ConfigError, KeySource, ListCacheSettings, Settings,
    DEFAULT_CREDENTIALS_SECONDS, DEFAULT_SESSION_TTL_SECONDS, DRY_RUN_SECONDS,
};

/// 403 unless the caller is an operator (scope `pooltable/admin` or group `platform-admin`).
pub fn require_operator(caller: &Caller) -> Result<(), ApiError> {
    if caller.operator {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!(
            "This route needs the OAuth scope {} or membership of the group {}.",
            crate::isolation::claims::OPERATOR_SCOPE,
            crate::isolation::claims::OPERATOR_GROUP
        )))
    }
}

/// What every handler borrows.
pub struct App {
    pub settings: Settings,
    pub tenants: TenantClients,
    /// Tenant records (tier, limits, shard count), cached per container.
    pub directory: TenantDirectory,
    /// This container's side of the tier quota.
    pub limiter: RateLimiter,
    /// This container's usage counts not yet written.
    pub usage: UsageMeter,
    /// Single-item reads, when `READ_CACHE_MS` turns the cache on.
    pub read_cache: ReadCache,
    pub clock: Arc<dyn Clock>,
    /// Where this container's EMF metrics lines go (stdout in Lambda).
    pub metrics: MetricsSink,
    /// The cursor and import signing keys ([`Self::cursor_keys`]).
    pub signing: SigningKeys,
    /// Each tenant's data key, when tenants are keyed ([`keys`]).
    pub keys: Option<Arc<TenantKeys>>,
    /// The `createdAt` of each tenant record this container counted for.
    incarnations: Incarnations,
}

impl App {
    /// Reads the environment and builds the clients. Called once, in `main`.
    pub async fn from_env() -> Result<Self, ConfigError> {
        let settings = Settings::from_env()?;
        let sdk = lambda_sdk_config()?;
        let app = Self::new(settings, &sdk, Arc::new(SystemClock))?;
        // A container that cannot read its keys fails at start, loudly, not on its first cursor.
        app.signing.refresh(app.clock.now_millis()).await?;
        Ok(app)
    }

    pub fn new(
        settings: Settings,
        sdk: &SdkConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ConfigError> {
        let region = sdk
            .region()
            .map(|r| r.to_string())
            .ok_or(ConfigError::Missing("AWS_REGION"))?;
        let table =
            TableLocation::from_role_arn(&settings.tenant_role_arn, &region, &settings.table_name)?;
        let tenants = TenantClients::new(
            aws_sdk_sts::Client::new(sdk),
            aws_sdk_dynamodb::config::Builder::from(sdk).build(),
            CredentialSettings {
                role_arn: settings.tenant_role_arn.clone(),
                operator_role_arn: settings.tenant_operator_role_arn.clone(),
                platform_access: settings.platform_access,
                table,
                duration_seconds: settings.credentials_seconds,
            },
            clock.clone(),
        )
        .with_max_in_flight(settings.max_in_flight);
        let signing = match &settings.signing {
            KeySource::Secret(source) => {
                SigningKeys::from_secret(aws_sdk_secretsmanager::Client::new(sdk), source.clone())
            }
            KeySource::Fixed(keys) => SigningKeys::fixed(keys.clone()),
        };
        let keys = keys::from_settings(&settings, sdk, clock.clone());
        Ok(Self::with_clients(settings, tenants, clock)
            .with_signing(signing)
            .with_tenant_keys(keys))
    }

    /// An `App` over clients built elsewhere (tests build theirs with fault injection).
    pub fn with_clients(settings: Settings, tenants: TenantClients, clock: Arc<dyn Clock>) -> Self {
        let directory =
            TenantDirectory::new(clock.clone(), tenants.record_reader(), tenants.table_name());
        let read_cache = ReadCache::new(settings.read_cache_ms);
        let list_cache = settings.list_cache.clone();
        // A secret needs a client: `App::new` builds it (or a test, with `with_signing`).
        let signing = match &settings.signing {
            KeySource::Fixed(keys) => SigningKeys::fixed(keys.clone()),
            KeySource::Secret(_) => SigningKeys::none(),
        };
        Self {
            settings,
            tenants,
            directory,
            limiter: RateLimiter::default(),
            usage: UsageMeter::default(),
            read_cache,
            clock,
            metrics: MetricsSink::from_env(),
            signing,
            keys: None,
            incarnations: Incarnations::default(),
        }
        .with_list_cache(list_cache)
    }

    /// This `App` with the list-page cache on for `list_cache`'s tiers (or off, with `None`), before
    /// any tenant client is built.
    pub fn with_list_cache(self, list_cache: Option<ListCacheSettings>) -> Self {
        let pages = list_cache
            .as_ref()
            .map(|c| Arc::new(PageCache::new(c.staleness_ms, self.clock.clone())));
        let tenants = self.tenants.with_page_cache(pages);
        Self {
            tenants,
            settings: Settings {
                list_cache,
                ..self.settings
            },
            ..self
        }
    }

    /// This `App` with its signing keys from `signing`.
    pub fn with_signing(self, signing: SigningKeys) -> Self {
        Self { signing, ..self }
    }

    /// The signing keys this container holds now; 503 when a secret was never read.
    pub fn cursor_keys(&self) -> Result<Arc<CursorKeys>, ApiError> {
        self.signing.current().ok_or_else(|| {
            ApiError::Unavailable("The signing keys are unavailable; retry later.".into())
        })
    }

    /// This `App` with its metrics lines sent to `sink` (tests keep them in memory).
    pub fn with_metrics(self, sink: MetricsSink) -> Self {
        Self {
            metrics: sink,
            ..self
        }
    }

    /// Emits an EMF line of `values` (counts) outside a request, with `properties`.
    pub fn emit_event(&self, values: &[(&str, f64)], properties: &[(&str, &str)]) {
        self.metrics.emit(crate::service::metrics::event_line(
            &self.metrics.publisher,
            self.clock.now_millis(),
            values,
            properties,
        ));
    }

    /// The name of `tenant`'s tier from the cached record (`none` without one).
    pub async fn tier_name(&self, tenant: &TenantId) -> &'static str {
        match self.directory.record(tenant).await {
            Ok(Some(record)) => record.tier.as_str(),
            _ => "none",
        }
    }

    /// Adds an interceptor to every tenant client (tests count requests and inject faults with it).
    pub fn with_dynamodb_interceptor(
        self,
        interceptor: aws_sdk_dynamodb::config::SharedInterceptor,
    ) -> Self {
        Self {
            tenants: self.tenants.with_interceptor(interceptor),
            ..self
        }
    }

    /// The verified caller of `req` (401/403 when there is none).
    pub fn caller(&self, req: &lambda_http::Request) -> Result<Caller, ApiError> {
        use lambda_http::RequestExt;
        let who = caller(req, self.settings.auth)?;
        let execution_tenant = req
            .lambda_context_ref()
            .and_then(|c| c.tenant_id.as_deref());
        if let Err(e) = check_execution_tenant(&who, execution_tenant) {
            // An alarm, not a client error: in tenant isolation mode the front door maps the
            // tenant from the same claim, so a mismatch means it is misconfigured or bypassed.
            tracing::error!(
                alarm = "tenant_environment_mismatch",
                execution_tenant,
                claimed_tenant = %who.tenant,
                "refused a request for another tenant than this execution environment's"
            );
            return Err(e.into());
        }
        note_tenant(&who.tenant);
        Ok(who)
    }

    /// The caller of `req` when it verifies, without logging: the runtime uses it to decide the
    /// quota before the handler runs, and the handler verifies (and reports) the caller itself.
    pub fn verified_caller(&self, req: &lambda_http::Request) -> Option<Caller> {
        use lambda_http::RequestExt;
        let who = caller(req, self.settings.auth).ok()?;
        let execution_tenant = req
            .lambda_context_ref()
            .and_then(|c| c.tenant_id.as_deref());
        check_execution_tenant(&who, execution_tenant).ok()?;
        Some(who)
    }

    /// Why `who` is refused before any route runs: its tenant is suspended or being offboarded, or
    /// has no record while `who` is no operator. An operator's own tenant may have no record only
    /// while it was never onboarded (operators onboard tenants, their own included, before any
    /// exists): once it has been offboarded, a report of that is in the platform's partition, and its
    /// operators are refused like its users, so offboarding never grants more than suspension. When
    /// that cannot be read, the operator is refused (fails closed). `None` also when the record
    /// cannot be read: the route's own `App::db` decides then.
    ///
    /// A refused tenant's counts held by this container are dropped, so none of them is written
    /// into a later tenant of the same id.
    pub async fn refusal(&self, who: &Caller) -> Option<ApiError> {
        match self.require_active(&who.tenant).await {
            // An operator's power comes with its own tenant's standing: when that cannot be read
            // (a throttle, a timeout past the cache), the operator is refused, never admitted.
            Err(unreadable) if who.operator => match unreadable {
                ApiError::Forbidden(_) => Box::pin(self.refused_operator(who, unreadable)).await,
                _ => Some(ApiError::Unavailable(
                    "This operator's tenant record cannot be read now; operator actions wait \
                     for it. Retry later."
                        .into(),
                )),
            },
            Err(refused @ ApiError::Forbidden(_)) => {
                self.forget_counts(&who.tenant);
                Some(refused)
            }
            _ => None,
        }
    }

    /// [`Self::refusal`] of an operator whose tenant is refused: `None` only when its tenant has no
    /// record and was never offboarded (operators bootstrapping).
    async fn refused_operator(&self, who: &Caller, refused: ApiError) -> Option<ApiError> {
        self.forget_counts(&who.tenant);
        let unrecorded = matches!(self.directory.record(&who.tenant).await, Ok(None));
        if !unrecorded {
            return Some(refused);
        }
        match self.operators_tenant_was_offboarded(&who.tenant).await {
            false => None,
            true => Some(ApiError::Forbidden(
                "This operator's tenant was offboarded: its operators act on no tenant.".into(),
            )),
        }
    }

    /// 403 unless `caller` is an operator ([`require_operator`]) whose own tenant may act now
    /// ([`Self::refusal`]: its tenant active, or never onboarded); 503 when its tenant's record cannot
    /// be read. Every operator route calls it, so an operator's power fails closed in the handler
    /// too, not only in the runtime's admission.
    pub async fn require_operator(&self, caller: &Caller) -> Result<(), ApiError> {
        require_operator(caller)?;
        match self.refusal(caller).await {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }

    /// Whether `tenant` was offboarded (true also when that cannot be read: the caller refuses).
    /// Read with the function's own credentials through a client that can read nothing but one
    /// tenant id's reports ([`crate::isolation::guard::report_reader`]): most functions may not
    /// assume the tenant-access role for the platform's partition at all.
    async fn operators_tenant_was_offboarded(&self, tenant: &TenantId) -> bool {
        let reports = TenantDb {
            client: crate::isolation::guard::report_reader(&self.tenants.record_reader()),
            tenant: TenantId::platform(),
            table: self.tenants.table_name().into(),
            record_table: self.tenants.table_name().into(),
            max_in_flight: 1,
            pages: None,
            walk_sizes: None,
            puller: None,
            own_table_manager: None,
            key: None,
        };
        crate::store::lifecycle::offboarding::ever_offboarded(&reports, tenant)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "offboarding reports unreadable: refusing an operator without a tenant record");
                true
            })
    }

    /// Drops every count this container holds for `tenant` and has not written (usage, quota
    /// window): the tenant is refused, so they could only land in a later tenant of the same id.
    pub fn forget_counts(&self, tenant: &TenantId) {
        self.usage.forget(tenant);
        self.limiter.forget(tenant);
        if let Some(pages) = self.tenants.page_cache() {
            pages.forget_tenant(tenant);
        }
    }

    /// The limits in force for `tenant`: its record's (cached for
    /// [`crate::store::tenancy::tenants::RECORD_TTL_SECONDS`]), the basic tier's when it has no record.
    pub async fn limits(&self, tenant: &TenantId) -> Result<Limits, ApiError> {
        let record = self.directory.record(tenant).await?;
        Ok(record.map_or(Limits::UNONBOARDED, |r| r.limits()))
    }

    /// 403 when `tenant` has no record (never onboarded, or offboarded), is suspended or is being
    /// offboarded; 503 while it is being restored (by its record, cached for [`crate::store::tenancy::tenants::RECORD_TTL_SECONDS`], read
    /// without the tenant's credentials; an absence is trusted for a second).
    pub async fn require_active(&self, tenant: &TenantId) -> Result<(), ApiError> {
        self.active_record(tenant).await.map(drop)
    }

    /// [`App::require_active`], with the record.
    async fn active_record(&self, tenant: &TenantId) -> Result<Arc<TenantRecord>, ApiError> {
        let record = self.directory.onboarded_record(tenant).await?;
        let Some(record) = record else {
            return Err(ApiError::Forbidden("This tenant is not onboarded.".into()));
        };
        match record.status {
            TenantStatus::Suspended => Err(ApiError::Forbidden("This tenant is suspended.".into())),
            TenantStatus::Offboarding => Err(ApiError::Forbidden(
                "This tenant is being offboarded.".into(),
            )),
            TenantStatus::Restoring => Err(ApiError::Unavailable(
                "This tenant's data is being restored; its requests are served again when the \
                 restore ends."
                    .into(),
            )),
            TenantStatus::Active => Ok(record),
        }
    }

    /// The scoped client for `tenant`; 403 when the tenant is suspended, before any credentials are
    /// vended.
    pub async fn db(&self, tenant: &TenantId) -> Result<TenantDb, ApiError> {
        // A cold tenant's key is fetched beside its record's read, not after it.
        let (record, ()) = tokio::join!(self.active_record(tenant), self.warm_key(tenant));
        let record = record?;
        let tables = tables_of(&self.tenants, Some(&record), self.clock.now_seconds());
        let scope = self.settings.tenant_scope;
        // The credentials and the key side by side: a cold tenant waits for the slower, not both.
        let (db, key) = tokio::join!(
            self.tenants.for_tenant(tenant, &tables, scope),
            self.tenant_key(tenant, Some(&record.created_at))
        );
        let mut db = db?;
        db.key = key?;
        db.pages = self.page_cache_for(&record);
        note_backfill(&db, &record);
        Ok(db)
    }

    /// What a tenant route starts from, read in the order every one of them answers: the caller
    /// verified (401/403), then what `parse` takes from the request (path ids, query, body, checks
    /// of them: 400 on bad input), and only then the caller's scoped client ([`Self::db`]), so a bad
    /// request costs no DynamoDB request. The caller's tenant is the client's (`db.tenant`).
    pub async fn tenant_request<P>(
        &self,
        req: &lambda_http::Request,
        parse: impl FnOnce(&lambda_http::Request) -> Result<P, ApiError>,
    ) -> Result<(P, TenantDb), ApiError> {
        let caller = self.caller(req)?;
        let parsed = parse(req)?;
        let db = self.db(&caller.tenant).await?;
        Ok((parsed, db))
    }

    /// The list-page cache, when it is on.
    pub fn page_cache(&self) -> Option<&Arc<PageCache>> {
        self.tenants.page_cache()
    }

    /// The list-page cache, when it is on and serves the tenant's tier.
    fn page_cache_for(&self, record: &TenantRecord) -> Option<Arc<PageCache>> {
        let list_cache = self.settings.list_cache.as_ref()?;
        list_cache
            .tiers
            .contains(&record.tier)
            .then(|| self.tenants.page_cache().cloned())
            .flatten()
    }
}

pub(super) fn no_such_tenant() -> ApiError {
    ApiError::NotFound("No such tenant.".into())
}

/// Tells the pull under `db` (while a move's writes have moved) what the backfill has walked past,
/// by `record`'s checkpoint: those items are not asked for in the source again.
pub(super) fn note_backfill(db: &TenantDb, record: &TenantRecord) {
    if let Some(puller) = &db.puller {
        puller.set_passed(crate::store::lifecycle::moving::passed(&db.tenant, record));
    }
}
