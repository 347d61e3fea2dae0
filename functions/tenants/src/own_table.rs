//! A tenant's own table made, or taken from an operator, for an onboarding or a move
//! (`shared::store::tenancy::placement::create_own_table`), with the tenant walk as the check that a
//! table taken holds nothing under the tenant's keys.

use shared::identity::ids::TenantId;
use shared::isolation::policy::Scope;
use shared::store::client::error::StoreError;
use shared::store::lifecycle::moving::sources;
use shared::store::lifecycle::tenant_items::{self, Budget};
use shared::store::tenancy::placement::create_own_table;
use shared::store::tenancy::tenants::TenantRecord;
use shared::{ApiError, App};

/// Makes `tenant`'s own table `name`, or takes the one an operator made when it has the pool's
/// keys and indexes and is empty: 409 naming it otherwise. Whether it holds an item under the
/// tenant's keys is read through the walk of what a move of `record` carries, consistently, on an
/// operator session placed in that table: DynamoDB's item count lags writes by hours, and a move
/// would take such an item for the tenant's own and drop the one it replaces. `manager` is the
/// tenant's operator session's table manager.
pub(crate) async fn make_or_take(
    app: &App,
    manager: &aws_sdk_dynamodb::Client,
    tenant: &TenantId,
    name: &str,
    record: &TenantRecord,
) -> Result<(), ApiError> {
    // Boxed: the walk's future is large, and every route's dispatch would carry it inline.
    let holds = Box::pin(async {
        let placed = app.tenants.own(name);
        let db = app
            .tenants
            .for_tenant(tenant, &placed, Scope::Operator)
            .await?;
        let first = Budget {
            items: 1,
            bytes: usize::MAX,
            until: None,
        };
        let page = tenant_items::page(&db, &sources(tenant, record), None, first).await?;
        let first_key = page.items.first().and_then(tenant_items::position_of);
        Ok::<_, StoreError>(first_key.map(|key| key.pk))
    });
    let pool = app.tenants.table_name();
    let client = app.tenants.table_manager();
    create_own_table(&client, manager, pool, name, tenant, holds).await?;
    Ok(())
}
