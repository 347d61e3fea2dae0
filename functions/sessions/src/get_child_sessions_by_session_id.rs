//! getChildSessionsBySessionId: `GET /sessions/{sessionId}/children?limit=&cursor=` → `{items, nextCursor}`,
//! newest child first; 404 when the session does not exist (or is expired, or is another tenant's).
//!
//! One Query of the session's item collection per page: `PK` = the session and
//! `begins_with(SK, TENANT#t#C)`, descending. That prefix covers exactly the collection's two kinds,
//! `CUSTOMER#` (the root) and `CHILD#`, and since `CUSTOMER` sorts after `CHILD`, the root comes first
//! in descending order: the first page proves the parent exists in the same request that lists its
//! children. Later pages start after a child and hold children only, so each also reads the root,
//! concurrently (2 Queries): a cursor page of an expired or unknown parent answers 404 as well.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::{Body, Request, Response};
use shared::identity::cursor;
use shared::identity::keys::{
    parse_child_sk, parse_customer_sk, session_collection_sk_prefix, session_pk, SK,
};
use shared::service::http::{page_limit, path_session_id, query_param};
use shared::store::client::query::{first_live, live_page, string_attr};
use shared::{ApiError, App};

use crate::model::{root_session_query, session_page_response};

pub const ROUTE: &str = "get-child-sessions-by-session-id";

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let t = &caller.tenant;
    let parent = path_session_id(&req, "sessionId")?;
    let limit = page_limit(&req)?;
    let partition = session_pk(t, &parent);
    let keys = app.cursor_keys()?;
    let start = query_param(&req, "cursor")
        .map(|raw| {
            cursor::decode(&keys, t, ROUTE, &raw, |pk, sk| {
                pk == partition && parse_child_sk(t, sk).is_ok()
            })
        })
        .transpose()?;
    let first_page = start.is_none();
    let db = app.db(t).await?;
    let query = db
        .query()
        .key_condition_expression("PK = :pk AND begins_with(SK, :collection)")
        .expression_attribute_values(":pk", AttributeValue::S(partition.clone()))
        .expression_attribute_values(
            ":collection",
            AttributeValue::S(session_collection_sk_prefix(t)),
        )
        .scan_index_forward(false);
    // The first page also carries the root, so it asks for one more item.
    let want = if first_page { limit + 1 } else { limit };
    let now = app.clock.now_seconds();
    let mut page = if first_page {
        live_page(query, want, start, now).await?
    } else {
        let (page, root) = futures::try_join!(
            live_page(query, want, start, now),
            first_live(root_session_query(&db, t, &parent), now)
        )?;
        if root.is_none() {
            return Err(ApiError::NotFound("No such session.".into()));
        }
        page
    };
    if first_page {
        let is_root = page
            .items
            .first()
            .and_then(|i| string_attr(i, SK))
            .is_some_and(|sk| parse_customer_sk(t, &sk).is_ok());
        if !is_root {
            return Err(ApiError::NotFound("No such session.".into()));
        }
        page.items.remove(0);
    }
    session_page_response(&keys, t, ROUTE, page)
}
