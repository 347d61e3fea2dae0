//! listTenantOrders: `GET /orders?from=YYYY-MM-DD&to=YYYY-MM-DD&limit=&cursor=` → `{items,
//! nextCursor}`: the tenant's orders dated `from` to `to` (inclusive), newest first.
//!
//! Index: every order has a date index item whose `SK` (its GSI1 partition) is
//! `TENANT#t#ORDERS#<YYYY-MM>#<fnv(orderId) mod N>` and whose `PK` (its GSI1 sort key) is
//! `TENANT#t#ORDERDATE#<YYYY-MM-DD>#<orderId>`. Partitioning by month bounds a partition's size, and
//! the N write shards (N = the tenant's shard count) keep a big tenant's order writes of one month
//! from landing on one hot GSI1 partition.
//!
//! A page sends one GSI1 Query per (month in the range × shard) partition that is not exhausted yet,
//! all concurrently on this task (`try_join_all`), each `SK = :part AND PK BETWEEN :lo AND :hi`,
//! descending, `Limit` = the page limit, following its own `LastEvaluatedKey` if a 1 MB page comes
//! back short. It merges newest first (by the GSI1 sort key, descending: date, then orderId) and keeps
//! the `limit` newest. The cursor holds every partition's position (the last item returned from it,
//! or "exhausted"; a month whose N partitions are all exhausted is recorded once), so across pages
//! each order appears exactly once.
//!
//! Cost: up to months × N Queries per page (each at least 0.5 RCU, eventually consistent); for a
//! 3-month range and N = 4, 12 Queries per page. Months already read to the end cost nothing more.
//! A range may span at most 24 months (400 otherwise). The cursor grows with the number of
//! partitions that have a position (about 180 bytes each) and shared::identity::cursor caps it at 8 KB, so
//! tenants with a large N (above about 20) should list narrow ranges.
//!
//! Cursors are bound to the tenant, this route and the exact `from`/`to`; any other or edited cursor
//! answers 400 (`cursor`).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use aws_sdk_dynamodb::types::AttributeValue;
use futures::future::try_join_all;
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::identity::cursor::{self, Key, Positions};
use shared::identity::keys::{GSI1, PK, SK};
use shared::service::http::{json_response, page_limit, query_param};
use shared::store::query::{string_attr, Item};
use shared::store::scoped::TenantDb;
use shared::{ApiError, App};

use crate::{
    order_date_bounds, order_month_sk, parse_order_date_pk, view_from_item, Date, Month,
    OrderSummary, PageBody,
};

pub const ROUTE: &str = "list-tenant-orders";
/// The longest range, in calendar months touched.
pub const MAX_MONTHS: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Partition {
    month: Month,
    shard: u32,
}

impl Partition {
    fn name(self) -> String {
        format!("{}/{}", self.month, self.shard)
    }
}

struct Read {
    partition: Partition,
    items: Vec<Item>,
    exhausted: bool,
}

fn date_param(req: &Request, name: &str) -> Result<Date, ApiError> {
    let raw = query_param(req, name).ok_or_else(|| {
        ApiError::bad_request(
            name,
            format!("query parameter {name} is required (YYYY-MM-DD)"),
        )
    })?;
    Date::parse(&raw).map_err(|rule| ApiError::bad_request(name, format!("{name} {rule}")))
}

fn invalid_cursor() -> ApiError {
    ApiError::bad_request(
        "cursor",
        "cursor is invalid, expired or was made for another request",
    )
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let from = date_param(&req, "from")?;
    let to = date_param(&req, "to")?;
    if from > to {
        return Err(ApiError::bad_request("from", "from must not be after to"));
    }
    let months = Month::newest_first(from, to);
    if months.len() > MAX_MONTHS {
        return Err(ApiError::bad_request(
            "to",
            format!("the range may span at most {MAX_MONTHS} calendar months"),
        ));
    }
    let limit = page_limit(&req)?;
    let raw_cursor = query_param(&req, "cursor");
    let db = app.db(t).await?;
    let shards = app.shards.shard_count(&db).await?;
    let route = format!("{ROUTE}:{from}:{to}");

    let partitions: Vec<Partition> = months
        .iter()
        .flat_map(|&month| (0..shards).map(move |shard| Partition { month, shard }))
        .collect();
    let by_name: BTreeMap<String, Partition> = partitions.iter().map(|p| (p.name(), *p)).collect();
    let month_names: BTreeMap<String, Month> = months.iter().map(|m| (m.to_string(), *m)).collect();

    let positions = match raw_cursor.as_deref() {
        None => Positions::default(),
        Some(raw) => cursor::decode(t, &route, raw, |name, pk, sk| {
            let Some(p) = by_name.get(name) else {
                return false;
            };
            sk == order_month_sk(t, p.month, p.shard)
                && parse_order_date_pk(t, pk)
                    .is_ok_and(|(d, _)| d.month() == p.month && from <= d && d <= to)
        })?,
    };
    // Exhausted partitions: `YYYY-MM/s`, or `YYYY-MM` for all N of a month.
    let mut done: HashSet<Partition> = HashSet::new();
    for name in &positions.done {
        if let Some(p) = by_name.get(name) {
            done.insert(*p);
        } else if let Some(m) = month_names.get(name) {
            done.extend((0..shards).map(|shard| Partition { month: *m, shard }));
        } else {
            return Err(invalid_cursor());
        }
    }
    if positions
        .keys
        .keys()
        .any(|name| by_name.get(name).is_some_and(|p| done.contains(p)))
    {
        return Err(invalid_cursor());
    }

    let (lo, hi) = order_date_bounds(t, from, to);
    let open: Vec<Partition> = partitions
        .iter()
        .copied()
        .filter(|p| !done.contains(p))
        .collect();
    let reads: Vec<Read> = try_join_all(open.iter().map(|p| {
        let start = positions.keys.get(&p.name()).cloned();
        read_partition(&db, *p, &lo, &hi, limit, start)
    }))
    .await?;

    // Merge: each partition's items are newest first; keep the `limit` newest overall.
    let mut merged: Vec<(String, usize, Item)> = reads
        .iter()
        .enumerate()
        .flat_map(|(r, read)| {
            read.items
                .iter()
                .map(move |i| (string_attr(i, PK).unwrap_or_default(), r, i.clone()))
        })
        .collect();
    merged.sort_by(|a, b| b.0.cmp(&a.0));
    merged.truncate(limit as usize);

    let mut next_keys: BTreeMap<String, Key> = BTreeMap::new();
    for (r, read) in reads.iter().enumerate() {
        let name = read.partition.name();
        let taken = merged.iter().filter(|m| m.1 == r).count();
        if read.exhausted && taken == read.items.len() {
            done.insert(read.partition);
        } else if let Some(last) = merged.iter().rfind(|m| m.1 == r) {
            next_keys.insert(name, position_of(&last.2));
        } else if let Some(previous) = positions.keys.get(&name) {
            next_keys.insert(name, previous.clone());
        }
    }
    let next_cursor = (done.len() < partitions.len()).then(|| {
        let mut done_names = BTreeSet::new();
        for m in &months {
            let month_done: Vec<Partition> = (0..shards)
                .map(|shard| Partition { month: *m, shard })
                .filter(|p| done.contains(p))
                .collect();
            if month_done.len() as u32 == shards {
                done_names.insert(m.to_string());
            } else {
                done_names.extend(month_done.into_iter().map(Partition::name));
            }
        }
        cursor::encode(
            t,
            &route,
            &Positions {
                keys: next_keys,
                done: done_names,
            },
        )
    });
    let items = merged
        .into_iter()
        .map(|(_, _, item)| view_from_item::<OrderSummary>(item))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json_response(
        StatusCode::OK,
        &PageBody { items, next_cursor },
    ))
}

fn position_of(item: &Item) -> Key {
    [PK, SK]
        .into_iter()
        .filter_map(|k| item.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect()
}

/// Up to `want` orders of one partition after `start`, newest first, following `LastEvaluatedKey`.
async fn read_partition(
    db: &TenantDb,
    partition: Partition,
    lo: &str,
    hi: &str,
    want: u32,
    start: Option<Key>,
) -> Result<Read, ApiError> {
    let t = &db.tenant;
    let mut items = Vec::new();
    let mut start = start;
    loop {
        let out = db
            .client
            .query()
            .table_name(&*db.table)
            .index_name(GSI1)
            .key_condition_expression("SK = :part AND PK BETWEEN :lo AND :hi")
            .expression_attribute_values(
                ":part",
                AttributeValue::S(order_month_sk(t, partition.month, partition.shard)),
            )
            .expression_attribute_values(":lo", AttributeValue::S(lo.to_owned()))
            .expression_attribute_values(":hi", AttributeValue::S(hi.to_owned()))
            .scan_index_forward(false)
            .limit((want - items.len() as u32) as i32)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(ApiError::from_dynamodb)?;
        items.extend(out.items.unwrap_or_default());
        match out.last_evaluated_key.filter(|k| !k.is_empty()) {
            None => {
                return Ok(Read {
                    partition,
                    items,
                    exhausted: true,
                })
            }
            Some(_) if items.len() as u32 >= want => {
                return Ok(Read {
                    partition,
                    items,
                    exhausted: false,
                })
            }
            Some(k) => start = Some(position_of(&k)),
        }
    }
}
