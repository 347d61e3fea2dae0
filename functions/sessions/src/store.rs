//! Every read and write of the session store, through `shared::store`. The handlers parse and
//! answer; the requests (and their counts, in routes.yaml) are here.

use lambda_http::http::StatusCode;
use shared::identity::ids::{EntityId, SessionId, TenantId};
use shared::identity::keys::{
    child_sk, customer_sk, customer_sk_prefix, parse_customer_sk, primary_key,
    session_collection_sk_prefix, session_pk, Key, EXPIRES_AT, GSI1, PK, SK,
};
use shared::service::idempotent::{self, Recorder};
use shared::store::client::error::StoreError;
use shared::store::client::expr::{absent, attr, either, exists, key, num};
use shared::store::client::query::{string_attr, u64_attr, Item, Page, Query};
use shared::store::client::scoped::TenantDb;
use shared::store::client::sealed::stored_form;
use shared::store::client::transact::TransactError;
use shared::ApiError;

use crate::model::{Session, SessionItem, MAX_CHILDREN};

/// A root session's count of its children.
const CHILD_COUNT: &str = "childCount";

/// A customer's sessions on GSI1 (partition = the customer), newest first: session ids are UUIDv7
/// from the clock, so GSI1's sort key (the session's `PK`) orders them by time.
fn customer_sessions(db: &TenantDb, t: &TenantId, customer: &EntityId) -> Query {
    db.query(key(SK).equal(customer_sk(t, customer)))
        .on_index(GSI1)
        .descending()
}

/// A session's root item: `PK` = the session, `SK` begins with the tenant's customer prefix (the
/// root's `SK` holds its customer, so it cannot be a GetItem).
fn root_session_query(db: &TenantDb, t: &TenantId, session: &SessionId) -> Query {
    db.query(
        key(PK)
            .equal(session_pk(t, session))
            .and(key(SK).begins_with(customer_sk_prefix(t))),
    )
}

/// One page of a customer's live sessions, newest first (1 Query in the common case).
pub async fn customer_sessions_page(
    db: &TenantDb,
    customer: &EntityId,
    limit: u32,
    start: Option<Key>,
    now: u64,
) -> Result<Page, StoreError> {
    customer_sessions(db, &db.tenant, customer)
        .live_page(limit, start, now)
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
    fn query(&self, db: &TenantDb) -> Query {
        let t = &db.tenant;
        match self {
            Self::Newest(customer) => customer_sessions(db, t, customer),
            Self::Root(session) => root_session_query(db, t, session),
            Self::OfCustomer(customer, session) => db
                .query(
                    key(SK)
                        .equal(customer_sk(t, customer))
                        .and(key(PK).equal(session_pk(t, session))),
                )
                .on_index(GSI1),
            Self::Child(child) => db.query(key(SK).equal(child_sk(t, child))).on_index(GSI1),
        }
    }
}

/// The live session `lookup` finds: 1 Query, paging on past expired items.
pub async fn live_session(
    db: &TenantDb,
    lookup: &Lookup,
    now: u64,
) -> Result<Option<Item>, StoreError> {
    lookup.query(db).first_live(now).await
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
        .query(
            key(PK)
                .equal(session_pk(t, parent))
                .and(key(SK).begins_with(session_collection_sk_prefix(t))),
        )
        .descending();
    if start.is_some() {
        let (page, root) = futures::try_join!(
            query.live_page(limit, start, now),
            root_session_query(db, t, parent).first_live(now)
        )?;
        return Ok(root.map(|_| page));
    }
    // The first page also carries the root, so it asks for one more item.
    let mut page = query.live_page(limit + 1, None, now).await?;
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
    let parent = db
        .get(primary_key(session_pk(t, parent), customer_sk(t, customer)))
        .project(&[EXPIRES_AT])
        .consistent()
        .item()
        .await?;
    Ok(parent
        .and_then(|i| u64_attr(&i, EXPIRES_AT))
        .filter(|e| *e > now))
}

/// The session as stored: its attributes plus its catalog entry, sealed under the tenant's key
/// when it has one.
fn stored_item(session: &SessionItem, db: &TenantDb) -> Result<Item, ApiError> {
    let mut item = serde_dynamo::to_item(session)
        .map_err(|e| ApiError::Internal(format!("serialize session: {e}")))?;
    shared::store::client::items::enlist(&db.tenant, &mut item);
    Ok(stored_form(db.key.as_deref(), item)?)
}

/// Puts a root session, never over another (1 conditional PutItem, or with a recorder one
/// TransactWriteItems with the key's record). `false` when one with its key exists.
pub async fn put_root(
    db: &TenantDb,
    session: &SessionItem,
    recorder: Option<&Recorder<'_>>,
) -> Result<bool, ApiError> {
    let item = stored_item(session, db)?;
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
    let child_put = db
        .put_item(stored_item(child, db)?)
        .when(absent())
        .action()?;
    let under_limit = either(
        attr(CHILD_COUNT).attribute_not_exists(),
        attr(CHILD_COUNT).less_than(num(MAX_CHILDREN.into())),
    );
    let parent_update = db
        .update_item(
            primary_key(session_pk(t, parent), customer_sk(t, customer)),
            attr(CHILD_COUNT).add(num(1)),
        )
        .when(exists())
        .when(attr(EXPIRES_AT).greater_than(num(now)))
        .when(under_limit)
        .old_on_failure()
        .action()?;
    let mut actions = vec![child_put, parent_update];
    if let Some(recorder) = recorder {
        actions.push(recorder.record(StatusCode::CREATED, &Session::from(child.clone()))?);
    }
    db.transact_items(actions)
        .await
        .map_err(ChildNotAdded::Refused)
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

impl From<StoreError> for ChildNotAdded {
    fn from(e: StoreError) -> Self {
        Self::Api(e.into())
    }
}

/// A session's whole collection, root and children, read consistently (1 Query: at most 100 items).
pub async fn session_collection(
    db: &TenantDb,
    session: &SessionId,
) -> Result<Vec<Item>, StoreError> {
    db.query_partition(&session_pk(&db.tenant, session))
        .project(&[PK, SK, CHILD_COUNT, EXPIRES_AT])
        .consistent()
        .all()
        .await
}

/// Deletes every item of a session's collection in one transaction, the root's delete conditioned
/// on the child count read. `Ok(false)` when the collection changed since it was read.
pub async fn delete_collection(
    db: &TenantDb,
    root: &Item,
    collection: &[Item],
) -> Result<bool, ApiError> {
    let key_of = |item: &Item| -> Result<Key, ApiError> {
        match (string_attr(item, PK), string_attr(item, SK)) {
            (Some(pk), Some(sk)) => Ok(primary_key(pk, sk)),
            _ => Err(ApiError::Internal("item without keys in a session".into())),
        }
    };
    let children = collection.len() as u64 - 1;
    let mut actions = Vec::with_capacity(collection.len());
    for item in collection {
        let mut delete = db.delete_item(key_of(item)?).when(exists());
        if std::ptr::eq(item, root) {
            let counted = u64_attr(root, CHILD_COUNT).unwrap_or(0);
            if counted != children {
                tracing::warn!(counted, children, "child count and collection disagree");
            }
            delete = delete.when(either(
                attr(CHILD_COUNT).attribute_not_exists(),
                attr(CHILD_COUNT).equal(num(counted)),
            ));
        }
        actions.push(delete.action()?);
    }
    match db.transact_items(actions).await {
        Ok(()) => Ok(true),
        // An item was added, removed or changed since the read: read again.
        Err(TransactError::ConditionFailed { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}
