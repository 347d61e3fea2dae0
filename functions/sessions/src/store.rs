//! Every read and write of the session store, through `shared::store`. The handlers parse and
//! answer; the requests (and their counts, in routes.yaml) are here.

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use lambda_http::http::StatusCode;
use shared::identity::ids::{EntityId, SessionId, TenantId};
use shared::identity::keys::{
    child_sk, customer_sk, customer_sk_prefix, parse_customer_sk, session_collection_sk_prefix,
    session_pk, Key, GSI1, PK, SK,
};
use shared::service::idempotent::{self, Recorder};
use shared::store::client::error::StoreError;
use shared::store::client::query::{
    all_pages, first_live, live_page, string_attr, u64_attr, Item, Page,
};
use shared::store::client::scoped::TenantDb;
use shared::store::client::transact::{transact, TransactError};
use shared::ApiError;

use crate::model::{Session, SessionItem, MAX_CHILDREN};

/// A customer's sessions on GSI1 (partition = the customer), newest first: session ids are UUIDv7
/// from the clock, so GSI1's sort key (the session's `PK`) orders them by time.
fn customer_sessions(db: &TenantDb, t: &TenantId, customer: &EntityId) -> QueryFluentBuilder {
    db.query()
        .index_name(GSI1)
        .key_condition_expression("SK = :customer")
        .expression_attribute_values(":customer", AttributeValue::S(customer_sk(t, customer)))
        .scan_index_forward(false)
}

/// A session's root item: `PK` = the session, `SK` begins with the tenant's customer prefix (the
/// root's `SK` holds its customer, so it cannot be a GetItem).
fn root_session_query(db: &TenantDb, t: &TenantId, session: &SessionId) -> QueryFluentBuilder {
    db.query()
        .key_condition_expression("PK = :pk AND begins_with(SK, :root)")
        .expression_attribute_values(":pk", AttributeValue::S(session_pk(t, session)))
        .expression_attribute_values(":root", AttributeValue::S(customer_sk_prefix(t)))
}

/// One page of a customer's live sessions, newest first (1 Query in the common case).
pub async fn customer_sessions_page(
    db: &TenantDb,
    customer: &EntityId,
    limit: u32,
    start: Option<Key>,
    now: u64,
) -> Result<Page, StoreError> {
    live_page(
        customer_sessions(db, &db.tenant, customer),
        limit,
        start,
        now,
    )
    .await
}

/// How a route finds one session.
pub enum Lookup {
    /// A customer's newest, on GSI1.
    Newest(EntityId),
    /// A root session, in its collection.
    Root(SessionId),
    /// Session `.1` of customer `.0`, on GSI1 with both keys.
    OfCustomer(EntityId, SessionId),
    /// A child session, on GSI1 by its own key.
    Child(SessionId),
}

impl Lookup {
    /// The Query that finds it.
    fn query(&self, db: &TenantDb) -> QueryFluentBuilder {
        let t = &db.tenant;
        match self {
            Self::Newest(customer) => customer_sessions(db, t, customer),
            Self::Root(session) => root_session_query(db, t, session),
            Self::OfCustomer(customer, session) => db
                .query()
                .index_name(GSI1)
                .key_condition_expression("SK = :customer AND PK = :session")
                .expression_attribute_values(
                    ":customer",
                    AttributeValue::S(customer_sk(t, customer)),
                )
                .expression_attribute_values(":session", AttributeValue::S(session_pk(t, session))),
            Self::Child(child) => db
                .query()
                .index_name(GSI1)
                .key_condition_expression("SK = :child")
                .expression_attribute_values(":child", AttributeValue::S(child_sk(t, child))),
        }
    }
}

/// The live session `lookup` finds: 1 Query, paging on past expired items.
pub async fn live_session(
    db: &TenantDb,
    lookup: &Lookup,
    now: u64,
) -> Result<Option<Item>, StoreError> {
    first_live(lookup.query(db), now).await
}

/// One page of a session's live children, newest first; `None` when the session does not exist
/// (or expired). One Query of the session's collection: `begins_with(SK, TENANT#t#C)` covers its
/// two kinds, `CUSTOMER#` (the root) and `CHILD#`, and since `CUSTOMER` sorts after `CHILD` the root
/// comes first in descending order, so the first page proves the parent exists in the same request.
/// Later pages start after a child and hold children only, so each also reads the root,
/// concurrently (2 Queries).
pub async fn children_page(
    db: &TenantDb,
    parent: &SessionId,
    limit: u32,
    start: Option<Key>,
    now: u64,
) -> Result<Option<Page>, StoreError> {
    let t = &db.tenant;
    let query = db
        .query()
        .key_condition_expression("PK = :pk AND begins_with(SK, :collection)")
        .expression_attribute_values(":pk", AttributeValue::S(session_pk(t, parent)))
        .expression_attribute_values(
            ":collection",
            AttributeValue::S(session_collection_sk_prefix(t)),
        )
        .scan_index_forward(false);
    if start.is_some() {
        let (page, root) = futures::try_join!(
            live_page(query, limit, start, now),
            first_live(root_session_query(db, t, parent), now)
        )?;
        return Ok(root.map(|_| page));
    }
    // The first page also carries the root, so it asks for one more item.
    let mut page = live_page(query, limit + 1, None, now).await?;
    let is_root = page
        .items
        .first()
        .and_then(|i| string_attr(i, SK))
        .is_some_and(|sk| parse_customer_sk(t, &sk).is_ok());
    if !is_root {
        return Ok(None);
    }
    page.items.remove(0);
    Ok(Some(page))
}

/// The `expiresAt` of a live root session of `customer` (1 consistent GetItem): a child is capped
/// at it, so it never outlives its parent.
pub async fn live_parent_expiry(
    db: &TenantDb,
    parent: &SessionId,
    customer: &EntityId,
    now: u64,
) -> Result<Option<u64>, StoreError> {
    let t = &db.tenant;
    let out = db
        .get_at(session_pk(t, parent), customer_sk(t, customer))
        .projection_expression("expiresAt")
        .consistent_read(true)
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(out
        .item
        .and_then(|i| u64_attr(&i, "expiresAt"))
        .filter(|e| *e > now))
}

/// The session as stored: its attributes plus its catalog entry.
fn stored_item(session: &SessionItem, t: &TenantId) -> Result<Item, ApiError> {
    let mut item = serde_dynamo::to_item(session)
        .map_err(|e| ApiError::Internal(format!("serialize session: {e}")))?;
    shared::store::client::items::enlist(t, &mut item);
    Ok(item)
}

/// Puts a root session, never over another (1 conditional PutItem, or with a recorder one
/// TransactWriteItems with the key's record). `false` when one with its key exists.
pub async fn put_root(
    db: &TenantDb,
    session: &SessionItem,
    recorder: Option<&Recorder<'_>>,
) -> Result<bool, ApiError> {
    let item = stored_item(session, &db.tenant)?;
    let view = Session::from(session.clone());
    idempotent::put_new(db, item, recorder, StatusCode::CREATED, &view).await
}

/// Puts a child session into its parent's collection (1 TransactWriteItems): the child, and an
/// update of the parent that is also its existence check (present, unexpired, same customer,
/// under the child limit) and counts the child; with a recorder, the key's record as a third action.
pub async fn put_child(
    db: &TenantDb,
    child: &SessionItem,
    parent: &SessionId,
    customer: &EntityId,
    now: u64,
    recorder: Option<&Recorder<'_>>,
) -> Result<(), ChildNotAdded> {
    let t = &db.tenant;
    let put = Put::builder()
        .table_name(&*db.table)
        .set_item(Some(stored_item(child, t)?))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let parent_update = Update::builder()
        .table_name(&*db.table)
        .key(PK, AttributeValue::S(session_pk(t, parent)))
        .key(SK, AttributeValue::S(customer_sk(t, customer)))
        .update_expression("ADD childCount :one")
        .condition_expression(
            "attribute_exists(PK) AND expiresAt > :now AND (attribute_not_exists(childCount) OR childCount < :max)",
        )
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
        .expression_attribute_values(":max", AttributeValue::N(MAX_CHILDREN.to_string()))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut request = db
        .client
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().put(put).build())
        .transact_items(TransactWriteItem::builder().update(parent_update).build());
    if let Some(recorder) = recorder {
        request = request
            .transact_items(recorder.record(StatusCode::CREATED, &Session::from(child.clone()))?);
    }
    transact(request).await.map_err(ChildNotAdded::Refused)
}

/// Why [`put_child`] wrote nothing.
pub enum ChildNotAdded {
    /// The transaction was refused or failed.
    Refused(TransactError),
    /// The request could not be built.
    Api(ApiError),
}

impl From<ApiError> for ChildNotAdded {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

/// A session's whole collection, root and children, read consistently (1 Query: at most 100 items).
pub async fn session_collection(
    db: &TenantDb,
    session: &SessionId,
) -> Result<Vec<Item>, StoreError> {
    let query = db
        .query_partition(&session_pk(&db.tenant, session))
        .projection_expression("PK, SK, childCount, expiresAt")
        .consistent_read(true);
    all_pages(query).await
}

/// Deletes every item of a session's collection in one transaction, the root's delete conditioned
/// on the child count read. `Ok(false)` when the collection changed since it was read.
pub async fn delete_collection(
    db: &TenantDb,
    root: &Item,
    collection: &[Item],
) -> Result<bool, ApiError> {
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
