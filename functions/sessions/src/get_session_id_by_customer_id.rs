//! getSessionIdByCustomerId: `GET /customers/{customerId}/sessions/{sessionId}` → 200 or 404.
//!
//! One Query on GSI1 with both keys: partition = the customer (`SK`), sort = the session (`PK`).
//! It answers "does this customer own this live session?".

use lambda_http::{Body, Request, Response};
use shared::identity::ids::TenantId;
use shared::service::http::{path_entity_id, path_session_id};
use shared::{ApiError, App};

use crate::get_live_session;
use crate::model::session_from_item;
use crate::store::Lookup;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let lookup = |req: &Request| {
        let customer = path_entity_id(req, "customerId")?;
        Ok(Lookup::OfCustomer(
            customer,
            path_session_id(req, "sessionId")?,
        ))
    };
    let view = |_: &TenantId, item| session_from_item(item);
    let not_found = "No such session for this customer.";
    get_live_session(app, &req, lookup, view, not_found).await
}
