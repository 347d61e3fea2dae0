//! listTenantOrders: `GET /orders?from=YYYY-MM-DD&to=YYYY-MM-DD&limit=&cursor=` → `{items,
//! nextCursor}`: the tenant's orders dated `from` to `to` (inclusive), newest first.
//!
//! Index: every order has a date index item whose `SK` (its GSI1 partition) is
//! `TENANT#t#ORDERS#<YYYY-MM>#<fnv(orderId) mod N>` and whose `PK` (its GSI1 sort key) is
//! `TENANT#t#ORDERDATE#<YYYY-MM-DD>#<orderId>`. Partitioning by month bounds a partition's size, and
//! the N write shards (N = the tenant's shard count) keep a big tenant's order writes of one month
//! from landing on one hot GSI1 partition.
//!
//! The list runs on the shared scatter-gather (`shared::store::scatter`): one group of N partitions
//! per month, newest month first, each partition queried `SK = :part AND PK BETWEEN :lo AND :hi`,
//! descending. A page reads the newest month's N partitions (about twice each one's share of the
//! page), and opens an older month only once the newer one is read to the end, so a page costs about
//! N Queries plus N per month it crosses, never months × N. The cursor is one position (the last
//! order returned), whatever N and the range.
//!
//! A range may span at most 24 months (400 otherwise). Cursors are bound to the tenant, this route
//! and the exact `from`/`to`; any other or edited cursor answers 400 (`cursor`).

use lambda_http::{Body, Request, Response};
use shared::identity::ids::TenantId;
use shared::service::http::{page_limit, page_response, query_param, PageCursor, MAX_PAGE_BYTES};
use shared::store::scatter::{Listing, PageAsk};
use shared::{ApiError, App};

use crate::{date_range, store, view_from_item, Date, OrderSummary};
use shared::store::keys::open_item;

pub const ROUTE: &str = "list-tenant-orders";
/// The longest range, in calendar months touched.
pub const MAX_MONTHS: usize = 24;

/// The orders of `t` dated `from` to `to`, over `shards` write shards, as one scatter-gather listing
/// (`crate::store::order_listing`).
pub fn listing(t: &TenantId, from: Date, to: Date, shards: u32) -> Listing {
    store::order_listing(ROUTE, t, from, to, shards)
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| {
        let range = date_range(req, MAX_MONTHS)?;
        Ok((range, page_limit(req)?, query_param(req, "cursor")?))
    };
    let (((from, to), limit, cursor), db) = app.tenant_request(&req, parse).await?;
    let t = &db.tenant;
    let shards = app.directory.order_shards(&db).await?;
    let listing = listing(t, from, to, shards);
    let keys = &*app.cursor_keys()?;
    let ask = PageAsk::new(keys, limit, cursor.as_deref()).within_bytes(MAX_PAGE_BYTES);
    let page = store::list_orders(&db, &listing, ask).await?;
    let key = db.key.as_deref();
    let view = |item| Ok(view_from_item::<OrderSummary>(open_item(key, item)?)?);
    let cursor = PageCursor {
        keys,
        tenant: t,
        route: &listing.route,
    };
    page_response(page.items, page.next_cursor, view, cursor)
}
