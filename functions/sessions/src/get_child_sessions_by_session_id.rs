//! getChildSessionsBySessionId: `GET /sessions/{sessionId}/children?limit=&cursor=` → `{items, nextCursor}`,
//! newest child first; 404 when the session does not exist (or is expired, or is another tenant's).
//!
//! One Query of the session's item collection per page: `PK` = the session and
//! `begins_with(SK, TENANT#t#C)`, descending. That prefix covers exactly the collection's two kinds,
//! `CUSTOMER#` (the root) and `CHILD#`, and since `CUSTOMER` sorts after `CHILD`, the root comes first
//! in descending order: the first page proves the parent exists in the same request that lists its
//! children. Later pages start after a child and hold children only, so each also reads the root,
//! concurrently (2 Queries): a cursor page of an expired or unknown parent answers 404 as well.

use lambda_http::{Body, Request, Response};
use shared::identity::ids::SessionId;
use shared::identity::keys::{parse_child_sk, session_pk};
use shared::service::http::path_session_id;
use shared::service::paging::{partition_page, PartitionList};
use shared::store::client::scoped::TenantDb;
use shared::{ApiError, App};

use crate::model::session_from_item;
use crate::store;

pub const ROUTE: &str = "get-child-sessions-by-session-id";

/// A session's children: its collection's `CHILD#` items.
const CHILDREN: PartitionList<SessionId> = PartitionList {
    route: ROUTE,
    of: |req| path_session_id(req, "sessionId"),
    belongs: |t, parent, pk, sk| pk == session_pk(t, parent) && parse_child_sk(t, sk).is_ok(),
};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let read = |db: TenantDb, parent: SessionId, limit, start| async move {
        let now = app.clock.now_seconds();
        store::children_page(&db, &parent, limit, start, now)
            .await?
            .ok_or_else(|| ApiError::NotFound("No such session.".into()))
    };
    partition_page(app, &req, CHILDREN, read, session_from_item).await
}
