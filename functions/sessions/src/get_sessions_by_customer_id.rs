//! getSessionsByCustomerId: `GET /customers/{customerId}/sessions?limit=&cursor=` → `{items, nextCursor}`.
//!
//! Query on GSI1 (partition = the customer), newest first, paged. Expired sessions are skipped
//! without shortening the page. The cursor is bound to the tenant, this route and this customer.

use lambda_http::{Body, Request, Response};
use shared::identity::ids::EntityId;
use shared::identity::keys::{customer_sk, parse_session_pk};
use shared::service::http::path_entity_id;
use shared::service::paging::{partition_page, PartitionList};
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

use crate::model::session_from_item;
use crate::store;

pub const ROUTE: &str = "get-sessions-by-customer-id";

/// A customer's sessions: its GSI1 partition, keyed by the sessions' `PK`.
const CUSTOMER_SESSIONS: PartitionList<EntityId> = PartitionList {
    route: ROUTE,
    of: |req| path_entity_id(req, "customerId"),
    belongs: |t, customer, pk, sk| {
        sk == customer_sk(t, customer) && parse_session_pk(t, pk).is_ok()
    },
};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let read = |db: TenantDb, customer: EntityId, limit, start| async move {
        let now = app.clock.now_seconds();
        Ok(store::customer_sessions_page(&db, &customer, limit, start, now).await?)
    };
    partition_page(app, &req, CUSTOMER_SESSIONS, read, session_from_item).await
}
