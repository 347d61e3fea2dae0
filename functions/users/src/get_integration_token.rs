//! getIntegrationToken: `GET /integrations/{service}/token` → 200 `{service, token, expiresAt}`, or
//! 404 when there is none or it has expired.
//!
//! One GetItem of `TENANT#t#INTEGRATION#<service>` (`crate::store::integration_token`). TTL deletion lags expiry by up to 48 hours, so
//! the item's `expiresAt` is compared with the clock and an expired token is not found. Tokens are
//! never logged.

use lambda_http::{Body, Request, Response};
use shared::identity::ids::EntityId;
use shared::service::http::path_entity_id;
use shared::service::single::get_one;
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

use crate::store;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let read = |db: TenantDb, service: EntityId| async move {
        Ok(store::integration_token(&db, &service, app.clock.now_seconds()).await?)
    };
    let of = |req: &Request| path_entity_id(req, "service");
    get_one(app, &req, of, read, "No live token for this service.").await
}
