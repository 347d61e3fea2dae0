//! The scoped clients of operator routes: a tenant's items read, changed or placed by an operator,
//! at the tables its record names at the moment of the call.

use std::sync::Arc;

use crate::identity::ids::TenantId;
use crate::isolation::policy::{Scope, TenantTables};
use crate::service::error::ApiError;
use crate::store::client::scoped::TenantDb;
use crate::store::tenancy::placement::tables_of;
use crate::store::tenancy::tenants::{TenantRecord, TenantStatus};

use super::{no_such_tenant, note_backfill, App};

impl App {
    /// The scoped client for `tenant` for an operator's read of it (its record, usage or export),
    /// also while it is suspended: a tenant route's session, which never writes the record. 404 when
    /// it has no record. Only for operator routes, after [`require_operator`].
    pub async fn db_for_operator(&self, tenant: &TenantId) -> Result<TenantDb, ApiError> {
        self.operator_db(tenant, self.settings.tenant_scope)
            .await?
            .ok_or_else(no_such_tenant)
    }

    /// The scoped client for an operator path that changes `tenant`'s record (its tier or status, a
    /// re-sharding, a move, a restore): an operator's session ([`Scope::Operator`]). 404 when it
    /// has no record.
    pub async fn db_to_change(&self, tenant: &TenantId) -> Result<TenantDb, ApiError> {
        self.operator_db(tenant, Scope::Operator)
            .await?
            .ok_or_else(no_such_tenant)
    }

    /// The scoped client for `tenant` in `scope` for an operator's action on it, placed where its
    /// record says now; `None` when it has no record (never onboarded, or offboarded): no
    /// credentials are vended for a tenant that does not exist. The platform's partition has no
    /// record and is always placed in the pool.
    pub async fn operator_db(
        &self,
        tenant: &TenantId,
        scope: Scope,
    ) -> Result<Option<TenantDb>, ApiError> {
        Ok(self.operator_db_of(tenant, scope).await?.map(|(db, _)| db))
    }

    /// [`Self::operator_db`], with the record it was placed by (`None` for the platform's partition).
    async fn operator_db_of(
        &self,
        tenant: &TenantId,
        scope: Scope,
    ) -> Result<Option<(TenantDb, Option<Arc<TenantRecord>>)>, ApiError> {
        // Read now, not from the cache: an operator's action (a re-sharding, an export, an
        // offboarding) must address the tables the record names at this moment.
        let record = match tenant.as_str() == TenantId::PLATFORM {
            true => None,
            false => match self.directory.record_now(tenant).await? {
                Some(record) => Some(record),
                None => return Ok(None),
            },
        };
        let tables = tables_of(&self.tenants, record.as_deref(), self.clock.now_seconds());
        let db = self.tenants.for_tenant(tenant, &tables, scope).await?;
        if let Some(record) = &record {
            note_backfill(&db, record);
        }
        Ok(Some((db, record)))
    }

    /// The scoped client for an operator's change of `tenant`'s items in its name (an erasure), with
    /// the tenant's key as its own requests have it: a tenant route's session, served while the tenant
    /// is suspended too (a customer's erasure is owed whatever the tenant's standing). 404 when it
    /// has no record; 409 while it is being offboarded (every item of it goes); 503 while it is being
    /// restored, as its own requests; 403 when its key is revoked.
    pub async fn db_for_operator_in_tenants_name(
        &self,
        tenant: &TenantId,
    ) -> Result<TenantDb, ApiError> {
        let scope = self.settings.tenant_scope;
        let (mut db, record) = self
            .operator_db_of(tenant, scope)
            .await?
            .ok_or_else(no_such_tenant)?;
        let record = record.ok_or_else(no_such_tenant)?;
        match record.status {
            TenantStatus::Offboarding => {
                return Err(ApiError::Conflict(
                    "This tenant is being offboarded: every item of it is being deleted.".into(),
                ))
            }
            TenantStatus::Restoring => {
                return Err(ApiError::Unavailable(
                    "This tenant's data is being restored; try again when the restore ends.".into(),
                ))
            }
            TenantStatus::Active | TenantStatus::Suspended => {}
        }
        db.key = self.tenant_key(tenant, Some(&record.created_at)).await?;
        Ok(db)
    }

    /// An operator's session for `tenant` in the tables `tables`, whatever the record says
    /// (onboarding a tenant, in its own table from the start, writes its record before it exists).
    pub async fn db_placed(
        &self,
        tenant: &TenantId,
        tables: &TenantTables,
    ) -> Result<TenantDb, ApiError> {
        Ok(self
            .tenants
            .for_tenant(tenant, tables, Scope::Operator)
            .await?)
    }
}
