//! The session store: AWS's session-management schema, tenant-scoped, on one table and the inverted
//! `GSI1`. One module per access pattern; each binary in `src/bin` serves one of them.
//!
//! Their keys are built in `shared::identity::keys`; the key table (generated from it) is in
//! `docs/key-scheme.md`.

pub mod model;
pub mod store;
// @generated begin: `pooltable gen` writes the route modules from routes.yaml
pub mod create_session;
pub mod expire_session;
pub mod get_child_sessions_by_session_id;
pub mod get_last_login_time_by_customer_id;
pub mod get_session_by_child_session_id;
pub mod get_session_by_session_id;
pub mod get_session_id_by_customer_id;
pub mod get_sessions_by_customer_id;
// @generated end

use lambda_http::{Body, Request, Response};
use serde::Serialize;
use shared::identity::ids::TenantId;
use shared::service::single::get_one;
use shared::store::client::query::Item;
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

/// `GET` of one session: 200 with `view` of the live session `lookup` (made from the request) finds,
/// or 404 with `not_found`. One Query ([`store::live_session`]).
pub async fn get_live_session<V: Serialize>(
    app: &App,
    req: &Request,
    lookup: impl FnOnce(&Request) -> Result<store::Lookup, ApiError>,
    view: impl FnOnce(&TenantId, Item) -> Result<V, ApiError>,
    not_found: &str,
) -> Result<Response<Body>, ApiError> {
    let read = |db: TenantDb, lookup| async move {
        let found = store::live_session(&db, &lookup, app.clock.now_seconds()).await?;
        found.map(|item| view(&db.tenant, item)).transpose()
    };
    get_one(app, req, lookup, read, not_found).await
}
