//! The one way a route pages a single partition (or one index partition): the request's `limit`
//! and `cursor`, the cursor checked (signed, bound to the tenant and the route, and naming an item
//! the listing can hold), one page read by the route's store from where the cursor points, and the
//! `{items, nextCursor}` answer. Lists over several partitions go through `store::scatter` instead.

use std::future::Future;

use lambda_http::{Body, Request, Response};
use serde::Serialize;

use crate::identity::cursor;
use crate::identity::ids::TenantId;
use crate::identity::keys::Key;
use crate::service::app::App;
use crate::service::error::ApiError;
use crate::service::http::{page_limit, page_response, query_param, PageCursor};
use crate::store::client::query::{Item, Page};
use crate::store::client::scoped::TenantDb;

/// Which list a page is of: one per tenant and path id `I` (a department, a customer, a session).
pub struct PartitionList<I> {
    /// The route the cursor is bound to.
    pub route: &'static str,
    /// The list's id, from the request's path (400 when it is malformed).
    pub of: fn(&Request) -> Result<I, ApiError>,
    /// Whether a cursor's `PK` and `SK` are an item the tenant's list of that id can hold (a cursor
    /// of another partition, even one signed for this route, is refused).
    pub belongs: fn(&TenantId, &I, &str, &str) -> bool,
}

/// Answers one page of `list`: `read(db, id, limit, start)` reads it with the caller's scoped
/// client (`start` is `None` on the first page), `view` turns each item into what the route
/// returns. The request is checked whole (caller, id, limit, cursor) before the client is made, so
/// a bad one costs no DynamoDB request.
pub async fn partition_page<I, R, F, V>(
    app: &App,
    req: &Request,
    list: PartitionList<I>,
    read: R,
    view: impl Fn(Item) -> Result<V, ApiError>,
) -> Result<Response<Body>, ApiError>
where
    R: FnOnce(TenantDb, I, u32, Option<Key>) -> F,
    F: Future<Output = Result<Page, ApiError>>,
    V: Serialize,
{
    let caller = app.caller(req)?;
    let t = &caller.tenant;
    let id = (list.of)(req)?;
    let limit = page_limit(req)?;
    let keys = app.cursor_keys()?;
    let belongs = |pk: &str, sk: &str| (list.belongs)(t, &id, pk, sk);
    let start = query_param(req, "cursor")?
        .map(|raw| cursor::decode(&keys, t, list.route, &raw, belongs))
        .transpose()?;
    let db = app.db(t).await?;
    let page = read(db, id, limit, start).await?;
    let next_cursor = page.next.map(|k| cursor::encode(&keys, t, list.route, &k));
    let cursor = PageCursor {
        keys: &keys,
        tenant: t,
        route: list.route,
    };
    page_response(page.items, next_cursor, view, cursor)
}
