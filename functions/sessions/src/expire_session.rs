//! expireSession: `DELETE /sessions/{sessionId}` → 204 or 404.
//!
//! Reads the session's item collection (one Query; it holds at most 100 items), then removes the root
//! and every child in one TransactWriteItems, so no state ever has the parent gone and a child left.
//! More than 100 cannot happen: `create-session` refuses a 100th child (see `MAX_CHILDREN`). The
//! root's delete is conditioned on the child count read, so a child created concurrently cancels the
//! transaction instead of being orphaned; it is then retried on a fresh read.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem};
use lambda_http::{Body, Request, Response};
use shared::identity::keys::{parse_customer_sk, session_pk, PK, SK};
use shared::service::http::{no_content, path_session_id};
use shared::store::client::query::{all_pages, is_live, string_attr, u64_attr, Item};
use shared::store::client::scoped::TenantDb;
use shared::store::client::transact::{transact, TransactError};
use shared::{ApiError, App};

const ATTEMPTS: usize = 3;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let id = path_session_id(&req, "sessionId")?;
    let db = app.db(&caller.tenant).await?;
    let pk = session_pk(&caller.tenant, &id);
    for _ in 0..ATTEMPTS {
        let collection = read_collection(&db, &pk).await?;
        let root = collection
            .iter()
            .find(|i| {
                string_attr(i, SK).is_some_and(|sk| parse_customer_sk(&caller.tenant, &sk).is_ok())
            })
            .filter(|root| is_live(root, app.clock.now_seconds()))
            .ok_or_else(|| ApiError::NotFound("No such session.".into()))?;
        if remove_all(&db, root, &collection).await? {
            return Ok(no_content());
        }
    }
    Err(ApiError::Conflict(
        "The session changed while it was being expired; retry.".into(),
    ))
}

async fn read_collection(db: &TenantDb, pk: &str) -> Result<Vec<Item>, ApiError> {
    let query = db
        .query_partition(pk)
        .projection_expression("PK, SK, childCount, expiresAt")
        .consistent_read(true);
    Ok(all_pages(query).await?)
}

/// One transaction deleting every item. `Ok(false)` when the collection changed under us.
async fn remove_all(db: &TenantDb, root: &Item, collection: &[Item]) -> Result<bool, ApiError> {
    let key_of = |item: &Item| -> Result<(String, String), ApiError> {
        match (string_attr(item, PK), string_attr(item, SK)) {
            (Some(pk), Some(sk)) => Ok((pk, sk)),
            _ => Err(ApiError::Internal("item without keys in a session".into())),
        }
    };
    let children = collection.len() as u64 - 1;
    let mut request = db.client.transact_write_items();
    for item in collection {
        let (pk, sk) = key_of(item)?;
        let is_root = std::ptr::eq(item, root);
        let mut delete = Delete::builder()
            .table_name(&*db.table)
            .key(PK, AttributeValue::S(pk))
            .key(SK, AttributeValue::S(sk));
        delete = if is_root {
            let counted = u64_attr(root, "childCount").unwrap_or(0);
            if counted != children {
                tracing::warn!(counted, children, "child count and collection disagree");
            }
            delete
                .condition_expression("attribute_exists(PK) AND (attribute_not_exists(childCount) OR childCount = :n)")
                .expression_attribute_values(":n", AttributeValue::N(counted.to_string()))
        } else {
            delete.condition_expression("attribute_exists(PK)")
        };
        let delete = delete
            .build()
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        request = request.transact_items(TransactWriteItem::builder().delete(delete).build());
    }
    match transact(request).await {
        Ok(()) => Ok(true),
        // An item was added, removed or changed since the read: read again.
        Err(TransactError::ConditionFailed { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}
