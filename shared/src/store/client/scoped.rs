//! Tenant-scoped DynamoDB clients: one per tenant per container, built on that tenant's STS
//! credentials (`isolation::credentials`), and carrying the [`TenantKeyGuard`] and the request meter.

use std::sync::Arc;

use aws_sdk_dynamodb::config::SharedInterceptor;
use aws_sdk_dynamodb::operation::delete_item::builders::DeleteItemFluentBuilder;
use aws_sdk_dynamodb::operation::get_item::builders::GetItemFluentBuilder;
use aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::TransactWriteItem;

use crate::identity::clock::Clock;
use crate::identity::ids::TenantId;
use crate::identity::keys::{tenant_record_key, ItemKey};
use crate::isolation::credentials::{CredentialSettings, TenantCredentials};
use crate::isolation::guard::{OwnTableGuard, RecordReadGuard, SourceReadGuard, TenantKeyGuard};
use crate::isolation::policy::{own_table_name, Moving, Scope, TenantTables};
use crate::isolation::vault::TenantKey;
use crate::store::client::error::StoreError;
use crate::store::client::meter::RequestMetering;
use crate::store::client::pages::{PageCache, PageCacheInvalidation};
use crate::store::client::pull::{MoveSight, Puller, PullingHttpClient, RetryConflicts, Touches};
use crate::store::client::transact::{transact, TransactError};
use crate::store::client::walk_sizes::WalkSizes;

/// How many DynamoDB requests one API request may have in flight at once, unless
/// `DYNAMODB_MAX_IN_FLIGHT` says otherwise: a 64-shard listing runs in waves of this many.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 16;

/// The attempt timeout of a moving tenant's requests, which carry their pulls
/// ([`crate::store::client::pull`]); the container's is 3 s.
pub const PULLING_ATTEMPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(6);

/// A DynamoDB client that can only touch one tenant's keys, plus what requests need to address it.
#[derive(Debug, Clone)]
pub struct TenantDb {
    pub(crate) client: aws_sdk_dynamodb::Client,
    pub tenant: TenantId,
    /// The table of the tenant's items: the pool, or its own table (its placement).
    pub table: Arc<str>,
    /// The table of the tenant's record: always the pool.
    pub record_table: Arc<str>,
    /// The fan-out budget: the most requests a scatter-gather sends at once for one API request.
    pub max_in_flight: usize,
    /// The list-page cache, when this tenant's tier has it ([`crate::store::client::pages`]).
    pub pages: Option<Arc<PageCache>>,
    /// The container's walk partition sizes ([`crate::store::client::walk_sizes`]).
    pub walk_sizes: Option<Arc<WalkSizes>>,
    /// While a move runs: the pull under this client's requests ([`crate::store::client::pull`]).
    pub puller: Option<Arc<Puller>>,
    /// An operator path's session only: a client of the same credentials that may change and delete
    /// the tenant's own table and nothing else ([`OwnTableGuard`]; IAM: the tenant-operator role,
    /// only when the table's `tenant` tag is this tenant).
    pub own_table_manager: Option<aws_sdk_dynamodb::Client>,
    /// The tenant's data key, when it has one ([`crate::store::keys`]): its items' document
    /// attributes are sealed under it. Set by the service layer after the key is checked.
    pub key: Option<Arc<TenantKey>>,
}

/// A TenantDb method starting a request on one item: its table and key set, the rest the caller's.
macro_rules! item_request {
    ($(#[$doc:meta])* $name:ident, $operation:ident, $builder:ty) => {
        $(#[$doc])*
        pub(crate) fn $name(&self, pk: impl Into<String>, sk: impl Into<String>) -> $builder {
            let key = ItemKey { pk: pk.into(), sk: sk.into() };
            self.client.$operation().table_name(&*self.table).set_key(Some(key.to_key()))
        }
    };
}

impl TenantDb {
    /// The SDK's Query on this tenant's table, for `store`'s own requests; the key condition is
    /// still to set. Everyone else starts from [`TenantDb::query`].
    pub(crate) fn sdk_query(&self) -> QueryFluentBuilder {
        self.client.query().table_name(&*self.table)
    }

    /// The SDK client under this scoped client, its guard and meter included: for the tests that
    /// send what a compromised handler could (the guard must refuse it) and the benchmark's floor.
    /// Production code never holds it (`shared/tests/one_way.rs` fails on a use outside `store`).
    pub fn sdk_client(&self) -> &aws_sdk_dynamodb::Client {
        &self.client
    }

    /// `tenant`'s items in `table` read through `client` as it is: an operator's tool on the
    /// operator's own credentials (`pooltable tenants usage`), where IAM, not a guard, bounds it.
    pub fn on_client(client: aws_sdk_dynamodb::Client, tenant: TenantId, table: &str) -> TenantDb {
        TenantDb {
            client,
            tenant,
            table: Arc::from(table),
            record_table: Arc::from(table),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            pages: None,
            walk_sizes: None,
            puller: None,
            own_table_manager: None,
            key: None,
        }
    }

    /// The client that changes and deletes this tenant's own table: an operator path's session's
    /// ([`TenantDb::own_table_manager`]); a tenant route's session has none.
    pub fn own_table_manager(&self) -> Result<&aws_sdk_dynamodb::Client, StoreError> {
        self.own_table_manager.as_ref().ok_or_else(|| {
            StoreError::Internal(format!(
                "an own table of {} is managed on an operator path's session only",
                self.tenant
            ))
        })
    }

    /// This client addressing the table of the tenant's record (the pool) as its table: for a
    /// write of the record through a helper that writes `table`.
    pub fn for_record(&self) -> TenantDb {
        TenantDb {
            table: self.record_table.clone(),
            ..self.clone()
        }
    }

    /// This client addressing `table` as its table (a move's source, which its credentials reach).
    pub fn on_table(&self, table: &str) -> TenantDb {
        TenantDb {
            table: Arc::from(table),
            ..self.clone()
        }
    }

    item_request!(
        /// A GetItem of the item at `pk`, `sk` on this tenant's table.
        sdk_get_at, get_item, GetItemFluentBuilder
    );
    item_request!(
        /// An UpdateItem of the item at `pk`, `sk` on this tenant's table; what it sets is the caller's.
        sdk_update_at, update_item, UpdateItemFluentBuilder
    );
    item_request!(
        /// A DeleteItem of the item at `pk`, `sk` on this tenant's table.
        sdk_delete_at, delete_item, DeleteItemFluentBuilder
    );

    /// Sends `actions` as one transaction on this client ([`transact`]: conflicts retried, the
    /// cancellation read).
    pub async fn transact_items(
        &self,
        actions: Vec<TransactWriteItem>,
    ) -> Result<(), TransactError> {
        transact(
            self.client
                .transact_write_items()
                .set_transact_items(Some(actions)),
        )
        .await
    }

    /// The SDK's PutItem on this tenant's table, for `store`'s own requests; the item is still to give.
    pub(crate) fn sdk_put(&self) -> PutItemFluentBuilder {
        self.client.put_item().table_name(&*self.table)
    }
}

/// The per-container cache of tenant-scoped clients.
pub struct TenantClients {
    credentials: TenantCredentials<TenantDb>,
    dynamodb: aws_sdk_dynamodb::Config,
    table_name: Arc<str>,
    extra_interceptors: Vec<SharedInterceptor>,
    max_in_flight: usize,
    pages: Option<Arc<PageCache>>,
    walk_sizes: Arc<WalkSizes>,
    clock: Arc<dyn Clock>,
}

impl TenantClients {
    pub fn new(
        sts: aws_sdk_sts::Client,
        dynamodb: aws_sdk_dynamodb::Config,
        settings: CredentialSettings,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            table_name: Arc::from(settings.table.table_name.as_str()),
            credentials: TenantCredentials::new(sts, settings, clock.clone()),
            dynamodb,
            extra_interceptors: Vec::new(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            pages: None,
            walk_sizes: Arc::default(),
            clock,
        }
    }

    /// Turns the list-page cache on (or off, with `None`): every tenant client built from now on
    /// drops its tenant's pages when it writes; [`TenantClients::page_cache`] hands it to the
    /// tenants whose tier has it. Only before any tenant client is built (clients are cached with
    /// their credentials): the `App` sets it when it is made.
    pub fn with_page_cache(mut self, pages: Option<Arc<PageCache>>) -> Self {
        self.pages = pages;
        self
    }

    pub fn page_cache(&self) -> Option<&Arc<PageCache>> {
        self.pages.as_ref()
    }

    /// Sets the fan-out budget of every tenant client built from now on (at least 1).
    pub fn with_max_in_flight(mut self, max_in_flight: usize) -> Self {
        self.max_in_flight = max_in_flight.max(1);
        self
    }

    /// Adds an interceptor to every tenant client built from now on (request counting, fault injection).
    pub fn with_interceptor(mut self, interceptor: SharedInterceptor) -> Self {
        self.extra_interceptors.push(interceptor);
        self
    }

    pub fn table_name(&self) -> &str {
        &self.table_name
    }

    /// A client on the function's own credentials (its execution role), not a tenant's, that can
    /// only read tenant records ([`RecordReadGuard`]): the tenant directory reads a record, and so a
    /// suspension, without vending the tenant credentials.
    pub fn record_reader(&self) -> aws_sdk_dynamodb::Client {
        self.client(self.dynamodb.to_builder().interceptor(RecordReadGuard))
    }

    /// A client of `config`, with the interceptors every client carries (a test's counters, faults).
    fn client(&self, mut config: aws_sdk_dynamodb::config::Builder) -> aws_sdk_dynamodb::Client {
        for extra in &self.extra_interceptors {
            config.push_interceptor(extra.clone());
        }
        aws_sdk_dynamodb::Client::from_conf(config.build())
    }

    /// A reader of `tenant`'s items in another table (`table`: a restore's source), on the function's
    /// own credentials, that can only read the tenant's keys ([`SourceReadGuard`]). IAM allows the
    /// functions that restore to read only tables under the pool's name and `-restore-`.
    pub fn source_reader(&self, tenant: &TenantId, table: &str) -> TenantDb {
        let config = self
            .dynamodb
            .to_builder()
            .interceptor(SourceReadGuard::new(tenant.clone()))
            .interceptor(RequestMetering);
        TenantDb {
            client: self.client(config),
            tenant: tenant.clone(),
            table: Arc::from(table),
            // The source's own copy of the record (its shard count, its tenant's identity).
            record_table: Arc::from(table),
            max_in_flight: self.max_in_flight,
            pages: None,
            walk_sizes: None,
            puller: None,
            own_table_manager: None,
            key: None,
        }
    }

    /// The client on the function's own credentials, with no guard: table management only (a
    /// point-in-time restore's scratch table). Never for items.
    pub fn table_manager(&self) -> aws_sdk_dynamodb::Client {
        self.client(self.dynamodb.to_builder())
    }

    /// The placement of a tenant in the pool.
    pub fn pooled(&self) -> TenantTables {
        TenantTables::pooled(&self.table_name)
    }

    /// The placement of a tenant in its own table `table`.
    pub fn own(&self, table: &str) -> TenantTables {
        TenantTables::own(table, &self.table_name)
    }

    /// `config` with the pull of `tenant`'s move (`store::client::pull`): every attempt from
    /// `writesMoveAt` on goes to the target and pulls first. The pulls go out on a client of
    /// `pulls`: the same credentials and meter, and `config`'s guard but a reader's (whose pulls
    /// write what its reads touch).
    fn pulling(
        &self,
        config: aws_sdk_dynamodb::config::Builder,
        pulls: aws_sdk_dynamodb::config::Builder,
        tenant: &TenantId,
        tables: &TenantTables,
        moving: &Moving,
    ) -> (aws_sdk_dynamodb::config::Builder, Option<Arc<Puller>>) {
        let Some(http) = self.dynamodb.http_client() else {
            // Every client here is built on the container's HTTP client (`service::app`).
            return (config, None);
        };
        let (source, target) = match moving.pull {
            true => (moving.other.clone(), tables.items.clone()),
            false => (tables.items.clone(), moving.other.clone()),
        };
        let sight = MoveSight {
            source,
            target,
            writes_move_at: moving.writes_move_at,
            record_key: tenant_record_key(tenant),
            clock: self.clock.clone(),
        };
        let config = config.retry_classifier(RetryConflicts);
        let puller = Arc::new(Puller::new(
            self.client(pulls.retry_classifier(RetryConflicts)),
            &sight,
            moving.settled_at,
        ));
        // An attempt carries its pull: it may take longer than one request (the pulls' own requests
        // keep the container's timeouts), still inside the operation's 8 s.
        let timeouts = aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
            .connect_timeout(std::time::Duration::from_secs(2))
            .operation_attempt_timeout(PULLING_ATTEMPT_TIMEOUT)
            .operation_timeout(std::time::Duration::from_secs(8))
            .build();
        let config = config
            .timeout_config(timeouts)
            .http_client(PullingHttpClient::new(http, puller.clone()))
            .interceptor(Touches::new(tables.items.clone(), sight));
        (config, Some(puller))
    }

    /// The scoped client for `tenant` placed in `tables` (from its record:
    /// `store::tenancy::placement`), assuming the tenant role only when no fresh credentials are
    /// cached for that placement.
    pub async fn for_tenant(
        &self,
        tenant: &TenantId,
        tables: &TenantTables,
        scope: Scope,
    ) -> Result<TenantDb, StoreError> {
        let platform_access = self.credentials.settings().platform_access;
        let db = self
            .credentials
            .get(tenant, tables, scope, |credentials| {
                // The client of a session guarded as `guarded`: the route's in `scope`; the pull's
                // as a tenant route's, whose writes a reader's pull needs (`Scope::Reader`).
                let configured = |guarded: Scope| {
                    let mut config = self
                        .dynamodb
                        .to_builder()
                        .credentials_provider(credentials.clone())
                        .interceptor(
                            TenantKeyGuard::placed(tenant.clone(), tables.clone(), guarded)
                                .narrowed(platform_access),
                        )
                        .interceptor(RequestMetering);
                    if let Some(pages) = &self.pages {
                        config = config
                            .interceptor(PageCacheInvalidation::new(pages.clone(), tenant.clone()));
                    }
                    config
                };
                let mut config = configured(scope);
                let mut puller = None;
                if let Some(moving) = &tables.moving {
                    let pulls = match scope {
                        Scope::Reader => configured(Scope::Tenant),
                        _ => config.clone(),
                    };
                    (config, puller) = self.pulling(config, pulls, tenant, tables, moving);
                }
                let own_table_manager = match scope {
                    Scope::Operator => own_table_name(&self.table_name, tenant).map(|own| {
                        self.client(
                            self.dynamodb
                                .to_builder()
                                .credentials_provider(credentials.clone())
                                .interceptor(OwnTableGuard::new(tenant.clone(), own)),
                        )
                    }),
                    Scope::Tenant | Scope::Reader => None,
                };
                TenantDb {
                    client: self.client(config),
                    tenant: tenant.clone(),
                    table: tables.items.clone(),
                    record_table: tables.record.clone(),
                    max_in_flight: self.max_in_flight,
                    pages: None,
                    walk_sizes: Some(self.walk_sizes.clone()),
                    puller,
                    own_table_manager,
                    key: None,
                }
            })
            .await?;
        Ok(db)
    }
}
