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

/// Which list a page is of, and what its cursor may name.
pub struct PartitionList<'a, B> {
    pub tenant: &'a TenantId,
    /// The route the cursor is bound to.
    pub route: &'a str,
    /// Whether a cursor's `PK` and `SK` are an item this list can hold (a cursor of another
    /// partition, even one signed for this route, is refused).
    pub belongs: B,
}

/// Answers one page of `list`: `read(limit, start)` reads it (`start` is `None` on the first
/// page), `view` turns each item into what the route returns.
pub async fn partition_page<B, R, F, V>(
    app: &App,
    req: &Request,
    list: PartitionList<'_, B>,
    read: R,
    view: impl Fn(Item) -> Result<V, ApiError>,
) -> Result<Response<Body>, ApiError>
where
    B: Fn(&str, &str) -> bool,
    R: FnOnce(u32, Option<Key>) -> F,
    F: Future<Output = Result<Page, ApiError>>,
    V: Serialize,
{
    let limit = page_limit(req)?;
    let keys = app.cursor_keys()?;
    let start = query_param(req, "cursor")
        .map(|raw| cursor::decode(&keys, list.tenant, list.route, &raw, &list.belongs))
        .transpose()?;
    let page = read(limit, start).await?;
    let next_cursor = page
        .next
        .map(|k| cursor::encode(&keys, list.tenant, list.route, &k));
    let cursor = PageCursor {
        keys: &keys,
        tenant: list.tenant,
        route: list.route,
    };
    page_response(page.items, next_cursor, view, cursor)
}
