//! getSessionsByCustomerId: `GET /customers/{customerId}/sessions?limit=&cursor=` → `{items, nextCursor}`.
//!
//! Query on GSI1 (partition = the customer), newest first, paged. Expired sessions are skipped
//! without shortening the page. The cursor is bound to the tenant, this route and this customer.

use lambda_http::{Body, Request, Response};
use shared::identity::cursor;
use shared::identity::keys::{customer_sk, parse_session_pk};
use shared::service::http::{page_limit, path_entity_id, query_param};
use shared::store::client::query::live_page;
use shared::{ApiError, App};

use crate::model::{customer_sessions_query, session_page_response};

pub const ROUTE: &str = "get-sessions-by-customer-id";

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let customer = path_entity_id(&req, "customerId")?;
    let limit = page_limit(&req)?;
    let partition = customer_sk(t, &customer);
    let keys = app.cursor_keys()?;
    let start = query_param(&req, "cursor")
        .map(|raw| {
            cursor::decode(&keys, t, ROUTE, &raw, |pk, sk| {
                sk == partition && parse_session_pk(t, pk).is_ok()
            })
        })
        .transpose()?;
    let db = app.db(t).await?;
    let query = customer_sessions_query(&db, t, &customer);
    let page = live_page(query, limit, start, app.clock.now_seconds()).await?;
    session_page_response(&keys, t, ROUTE, page)
}
