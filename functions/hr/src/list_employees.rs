//! listEmployees: `GET /employees?limit=&cursor=` → `{items, nextCursor}` in id order: a parallel
//! scatter-gather over the tenant's HR shards, `begins_with(SK, TENANT#t#EMPLOYEE#)`.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::service::http::{json_response, page_limit, query_param};
use shared::store::scatter::{gather, Fanout};
use shared::{ApiError, App};

use crate::{view_from_item, Employee, PageBody, EMPLOYEES};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let limit = page_limit(&req)?;
    let cursor = query_param(&req, "cursor");
    let db = app.db(&caller.tenant).await?;
    let shards = app.shards.shard_count(&db).await?;
    let page = gather(
        &db,
        EMPLOYEES,
        shards,
        limit,
        cursor.as_deref(),
        Fanout::Parallel,
    )
    .await?;
    let items = page
        .items
        .into_iter()
        .map(view_from_item::<Employee>)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json_response(
        StatusCode::OK,
        &PageBody {
            items,
            next_cursor: page.next_cursor,
        },
    ))
}
