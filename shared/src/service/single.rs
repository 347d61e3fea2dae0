//! The one way a route answers a single thing of the caller's tenant named by its request: 200 with
//! it, or 404. Items of the write-sharded kinds, which live on a computed shard, go through
//! `service::sharded::get_by_id` instead.

use std::future::Future;

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;

use crate::service::app::App;
use crate::service::error::ApiError;
use crate::service::http::json_response;
use crate::store::client::scoped::TenantDb;

/// 200 with what `read(db, id)` finds for the id `of` takes from the request (with the caller's
/// scoped client, made once the request is checked: [`App::tenant_request`]), or 404 with
/// `not_found` when it finds nothing.
pub async fn get_one<I, T, F>(
    app: &App,
    req: &Request,
    of: impl FnOnce(&Request) -> Result<I, ApiError>,
    read: impl FnOnce(TenantDb, I) -> F,
    not_found: &str,
) -> Result<Response<Body>, ApiError>
where
    F: Future<Output = Result<Option<T>, ApiError>>,
    T: Serialize,
{
    let (id, db) = app.tenant_request(req, of).await?;
    let found = read(db, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(not_found.to_owned()))?;
    Ok(json_response(StatusCode::OK, &found))
}
