//! getSessionsByCustomerId: `GET /customers/{customerId}/sessions?limit=&cursor=` → `{items, nextCursor}`.
//!
//! Query on GSI1 (partition = the customer), newest first, paged. Expired sessions are skipped
//! without shortening the page. The cursor is bound to the tenant, this route and this customer.

use lambda_http::{Body, Request, Response};
use shared::identity::keys::{customer_sk, parse_session_pk};
use shared::service::http::path_entity_id;
use shared::service::paging::{partition_page, PartitionList};
use shared::{ApiError, App};

use crate::model::session_from_item;
use crate::store;

pub const ROUTE: &str = "get-sessions-by-customer-id";

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let customer = path_entity_id(&req, "customerId")?;
    let partition = customer_sk(t, &customer);
    let list = PartitionList {
        tenant: t,
        route: ROUTE,
        belongs: |pk: &str, sk: &str| sk == partition && parse_session_pk(t, pk).is_ok(),
    };
    let read = |limit, start| async move {
        let db = app.db(t).await?;
        let now = app.clock.now_seconds();
        Ok(store::customer_sessions_page(&db, &customer, limit, start, now).await?)
    };
    partition_page(app, &req, list, read, session_from_item).await
}
