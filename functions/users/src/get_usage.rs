//! getUsage: `GET /usage?from=YYYY-MM-DD&to=YYYY-MM-DD` → the caller's daily call counts per route,
//! the read and write capacity units those calls consumed (table and GSI1), the throttled attempts,
//! and the calls refused by the tier quota.
//!
//! Every tenant API call is metered by `shared::service::runtime` (UpdateItem `ADD` on one of 8 counter shards,
//! concurrently with the call itself). Reading sums the shards: 8 Queries, concurrently, for any range
//! of up to 13 months (`crate::store::usage`).

use std::collections::BTreeMap;

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;
use shared::service::http::json_response;
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

use crate::{date_range, store};

const MAX_MONTHS: usize = 13;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Day {
    date: String,
    /// Calls per route.
    routes: BTreeMap<String, u64>,
    /// Capacity units per route.
    capacity_units: BTreeMap<String, Units>,
    /// DynamoDB attempts answered with a throttling error, per route.
    throttles: BTreeMap<String, u64>,
    /// Calls refused by the tier quota (429), per route; not in `routes`.
    limited: BTreeMap<String, u64>,
}

#[derive(Serialize)]
struct Units {
    read: f64,
    write: f64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    from: String,
    to: String,
    days: Vec<Day>,
}

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let db = app.db(&caller.tenant).await?;
    usage_response(&db, &req).await
}

/// The usage of `db`'s tenant over the request's `from`–`to` range: what `GET /usage` answers a
/// tenant, and `GET /tenants/{tenantId}/usage` an operator.
pub async fn usage_response(db: &TenantDb, req: &Request) -> Result<Response<Body>, ApiError> {
    let (from, to) = date_range(req, MAX_MONTHS)?;
    let days = store::usage(db, from, to).await?;
    Ok(json_response(
        StatusCode::OK,
        &Usage {
            from: from.to_string(),
            to: to.to_string(),
            days: days
                .into_iter()
                .map(|(date, routes)| Day {
                    date,
                    capacity_units: routes
                        .iter()
                        .map(|(route, u)| {
                            let units = Units {
                                read: u.read_milli_units as f64 / 1000.0,
                                write: u.write_milli_units as f64 / 1000.0,
                            };
                            (route.clone(), units)
                        })
                        .collect(),
                    throttles: routes
                        .iter()
                        .map(|(r, u)| (r.clone(), u.throttles))
                        .collect(),
                    limited: routes.iter().map(|(r, u)| (r.clone(), u.limited)).collect(),
                    routes: routes.into_iter().map(|(r, u)| (r, u.calls)).collect(),
                })
                .collect(),
        },
    ))
}
