//! Every read and write of this crate's routes, through `shared::store`: the handlers parse the
//! request, call one of these, and shape the answer. Each function's requests are the ones routes.yaml
//! documents for its route (`tests/tests/all/request_counts.rs` counts them).
//!
//! A write that an `Idempotency-Key` records takes the key's record (`record`) as its transaction's
//! last action.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use shared::identity::entities::{ORDER, USER};
use shared::identity::ids::{EntityId, TenantId};
use shared::identity::keys::{
    order_date_bounds, order_key, order_month_sk, user_key, Key, EXPIRES_AT, GSI1, PK, SK,
};

/// The profile's and the email item's attribute that holds the email.
const EMAIL: &str = "email";
/// The email item's and the transfer code's attribute that names their user.
const USER_ID: &str = "userId";
/// A transfer code's attribute naming the request that redeemed it.
const REDEEMED_BY: &str = "redeemedBy";
use shared::store::client::entity::Entity;
use shared::store::client::error::StoreError;
use shared::store::client::expr::{absent, attr, either, exists, num, Condition};
use shared::store::client::query::{string_attr, Item};
use shared::store::client::scoped::TenantDb;
use shared::store::client::transact::TransactError;
use shared::store::client::write::Write;
use shared::store::erasures::{not_erased, not_erasing, ERASING_SINCE};
use shared::store::keys::{open_item, SEALED};
use shared::store::quota::usage::RouteUsage;
use shared::store::scatter::{gather, GatheredPage, Listing, Order, PageAsk, SortRange};

use crate::error::{internal, Error};
use crate::model::{
    self, EmailOwner, IntegrationItem, IntegrationToken, NewOrder, NewTransferCode, TransferItem,
    User, UserWithOrders,
};
use crate::values::{Date, Email, Month, TransferCode};

/// Attempts of a profile write that a concurrent change of the profile or its email cancelled.
const SAVE_USER_ATTEMPTS: u32 = 5;

/// What [`save_user`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    Created,
    Updated,
}

/// Writes user `id`'s profile (`user`) and makes `email` its own. One consistent GetItem of the
/// profile (its current email), then one TransactWriteItems:
/// - Put the profile, on condition it does not exist (new user) or its email is still the one read;
/// - Put the email item, on condition it does not exist or is already this user's;
/// - when the email changes: Delete the old email item, on condition it is this user's.
///
/// A taken email cancels the transaction on the email item: [`Error::EmailTaken`], nothing written.
/// A concurrent change of the same profile is retried on a fresh read, a few times, then
/// [`Error::UserChanged`].
pub async fn save_user(
    db: &TenantDb,
    id: &EntityId,
    email: &Email,
    user: &User,
) -> Result<Saved, Error> {
    let t = &db.tenant;
    let key = db.key.as_deref();
    let profile_key = User::key(t, id);
    let segment = email.segment(key);
    let new_email_key = segment.key(t);
    let profile = db.entity_item(id, user)?;
    let email_item = db.entity_item(&segment, &EmailOwner::of(user))?;
    let mine = || attr(USER_ID).equal(id.as_str());
    // A keyed tenant's emails are under their digest; one keyed online may still hold an email item
    // under the plain email (`store::lifecycle::keying` moves them): it is checked and moved too.
    let plain_too = |email: &Email| key.is_some().then(|| email.plain_segment());

    for attempt in 0..SAVE_USER_ATTEMPTS {
        if attempt > 0 {
            // Jittered backoff so racing writers do not collide again in lockstep.
            let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0]) % 20;
            tokio::time::sleep(Duration::from_millis(10 * u64::from(attempt) + jitter)).await;
        }
        let (current, sealed) = profile_before_save(db, profile_key.clone()).await?;
        let old_email = current.as_ref().and_then(|i| string_attr(i, EMAIL));
        let profile_unchanged = match (&current, &old_email, sealed) {
            (None, _, _) => absent(),
            (Some(_), Some(_), Some(bytes)) => attr(SEALED).equal(bytes),
            (Some(_), Some(old), None) => attr(EMAIL).equal(old.as_str()),
            (Some(_), None, _) => return Err(internal("stored profile has no email").into()),
        };
        let mut actions = vec![
            db.put_item(profile.clone())
                .when(profile_unchanged.and(not_erasing()))
                .action()?,
            db.put_item(email_item.clone())
                .when(either(absent(), mine()))
                .action()?,
        ];
        // The plain email item, while there can be one: not another user's (index 2 is the taken
        // email's too), and deleted, so that the keying's move of it never overwrites this write.
        let taken_plain = actions.len();
        if let Some(plain) = plain_too(email) {
            let delete = db
                .delete_entity::<EmailOwner>(&plain)
                .when(either(absent(), mine()));
            actions.push(delete.action()?);
        }
        if let Some(old) = old_email.as_deref() {
            let old = Email::parse(old).map_err(internal)?;
            let old_segment = old.segment(key);
            if old_segment.key(t) != new_email_key {
                let delete = match key {
                    // A keyed tenant's old item may be at either segment, or already moved.
                    Some(_) => db
                        .delete_entity::<EmailOwner>(&old_segment)
                        .when(either(absent(), mine())),
                    None => db.delete_entity::<EmailOwner>(&old_segment).when(mine()),
                };
                actions.push(delete.action()?);
                if let Some(plain) = plain_too(&old) {
                    let delete = db
                        .delete_entity::<EmailOwner>(&plain)
                        .when(either(absent(), mine()));
                    actions.push(delete.action()?);
                }
            }
        }
        // An erased user's id is not used again (`crate::erasure`).
        let erasure_check = actions.len();
        actions.push(not_erased(db, USER.kind, id)?);
        match db.transact_items(actions).await {
            Ok(()) if current.is_some() => return Ok(Saved::Updated),
            Ok(()) => return Ok(Saved::Created),
            Err(e) if e.failed_at(1) => return Err(Error::EmailTaken),
            Err(e) if key.is_some() && e.failed_at(taken_plain) => return Err(Error::EmailTaken),
            Err(e) if e.failed_at(erasure_check) => return Err(Error::UserErased),
            // The profile or the old email item changed since the read: read again.
            Err(TransactError::ConditionFailed { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::UserChanged)
}

/// The stored profile a save replaces, opened, and its sealed bytes when it is sealed: a sealed
/// profile is conditioned on them (a fresh nonce on every write: any change since the read fails
/// it), a plain one on its email. `UserErased` once its erasure has begun: it is not written again.
async fn profile_before_save(
    db: &TenantDb,
    profile_key: Key,
) -> Result<(Option<Item>, Option<Vec<u8>>), Error> {
    let current = db
        .get(profile_key)
        .consistent()
        .project(&[EMAIL, ERASING_SINCE])
        .stored()
        .await?;
    if current
        .as_ref()
        .is_some_and(|i| i.contains_key(ERASING_SINCE))
    {
        return Err(Error::UserErased);
    }
    let sealed = match current.as_ref().and_then(|i| i.get(SEALED)) {
        Some(AttributeValue::B(bytes)) => Some(bytes.as_ref().to_vec()),
        _ => None,
    };
    let current = current
        .map(|i| open_item(db.key.as_deref(), i))
        .transpose()?;
    Ok((current, sealed))
}

/// User `id`'s profile and its `recent` newest order summaries, or `None` when there is no profile:
/// one Query of the user's collection, descending, `Limit` `recent + 1`. The profile's SK sorts
/// after every summary's, so it comes first.
pub async fn user_with_recent_orders(
    db: &TenantDb,
    id: &EntityId,
    recent: usize,
) -> Result<Option<UserWithOrders>, StoreError> {
    let partition = user_key(&db.tenant, id);
    let page = db
        .query_partition(&partition)
        .descending()
        .page(recent as u32 + 1, None)
        .await?;
    model::user_with_orders(&partition, page.items, recent)
}

/// The owner of `email` (case-insensitive), if any: one GetItem of its uniqueness item.
pub async fn find_user_by_email(
    db: &TenantDb,
    email: &Email,
) -> Result<Option<EmailOwner>, StoreError> {
    let found = db
        .read_entity::<EmailOwner>(&email.segment(db.key.as_deref()))
        .await?;
    match (found, &db.key) {
        // A tenant keyed online may still hold it under the plain email, until its keying moves it.
        (None, Some(_)) => db.read_entity::<EmailOwner>(&email.plain_segment()).await,
        (found, _) => Ok(found),
    }
}

/// The transaction action that checks user `user` exists and no erasure of it has begun (orders
/// and transfer codes need one).
fn user_exists(db: &TenantDb, user: &EntityId) -> Result<TransactWriteItem, StoreError> {
    db.check_item(User::key(&db.tenant, user), exists().and(not_erasing()))
        .action()
}

/// Writes `order` whole, its date index over `shards` shards, in one TransactWriteItems:
/// ConditionCheck the user's profile exists ([`Error::NoSuchUser`]), Put the header on condition it
/// does not exist ([`Error::OrderExists`]), Put the summary in the user's collection, Put the date
/// index item, with an id the client `chosen` ConditionCheck it was never an erased order's
/// ([`Error::OrderErased`]), one Put per line item, and `record` last.
pub async fn place_order(
    db: &TenantDb,
    shards: u32,
    order: &NewOrder,
    chosen: bool,
    record: Option<TransactWriteItem>,
) -> Result<(), Error> {
    let items = model::order_items(&db.tenant, db.key.as_deref(), order, shards)?;
    let mut actions = vec![
        user_exists(db, &order.user)?,
        db.put_item(items.header).when(absent()).action()?,
        db.put_item(items.summary).action()?,
        db.put_item(items.date_index).action()?,
    ];
    // An id the client chose may be an erased order's: its erasure record would make a restore drop
    // the new order as the erased one. Checked here, not read before: an erasure writes its records
    // before it deletes the order, so this transaction sees the header or the record, never neither.
    // (A generated id is new: never an erased order's.)
    let erasure_check = chosen.then_some(actions.len());
    if chosen {
        actions.push(not_erased(db, ORDER.kind, &order.id)?);
    }
    for line in items.lines {
        actions.push(db.put_item(line).action()?);
    }
    actions.extend(record);
    match db.transact_items(actions).await {
        Ok(()) => Ok(()),
        Err(e) if e.failed_at(0) => Err(Error::NoSuchUser),
        Err(e) if erasure_check.is_some_and(|i| e.failed_at(i)) => Err(Error::OrderErased),
        Err(e) if e.failed_at(1) => Err(Error::OrderExists),
        Err(e) => Err(e.into()),
    }
}

/// Order `id` with its line items, or `None`: one Query of the order's partition (the header sorts
/// first), following `LastEvaluatedKey`.
pub async fn order(db: &TenantDb, id: &EntityId) -> Result<Option<model::Order>, StoreError> {
    let partition = order_key(&db.tenant, id);
    let items = db.query_partition(&partition).all().await?;
    model::order_from_items(&partition, items)
}

/// The orders of `t` dated `from` to `to`, over `shards` write shards, as one scatter-gather listing
/// (`route` names it in its cursors): one group of `shards` GSI1 partitions per month, newest month
/// first, each queried `SK = :part AND PK BETWEEN :lo AND :hi`, descending.
pub fn order_listing(route: &str, t: &TenantId, from: Date, to: Date, shards: u32) -> Listing {
    let (lo, hi) = order_date_bounds(t, from, to);
    Listing {
        route: format!("{route}:{from}:{to}"),
        index: Some(GSI1),
        partition_attr: SK,
        sort_attr: PK,
        range: SortRange::Between(lo, hi),
        order: Order::Descending,
        groups: Month::newest_first(from, to)
            .into_iter()
            .map(|month| (0..shards).map(|s| order_month_sk(t, month, s)).collect())
            .collect(),
        consistent: false,
    }
}

/// `page` of `listing` (an [`order_listing`]), its partitions read concurrently.
pub async fn list_orders(
    db: &TenantDb,
    listing: &Listing,
    page: PageAsk<'_>,
) -> Result<GatheredPage, StoreError> {
    gather(db, listing, page).await
}

/// Stores a new transfer code in one TransactWriteItems: ConditionCheck the user's profile exists
/// ([`Error::NoSuchUser`]), Put the code on condition it does not exist ([`Error::CodeNotStored`]),
/// and `record` last. DynamoDB's errors carry no key values, so logging them never logs the code.
pub async fn store_transfer_code(
    db: &TenantDb,
    code: &NewTransferCode,
    record: Option<TransactWriteItem>,
) -> Result<(), Error> {
    let mut actions = vec![
        user_exists(db, &code.user)?,
        db.put_entity(&code.code, &TransferItem::from(code))?
            .when(absent())
            .action()?,
    ];
    actions.extend(record);
    db.transact_items(actions).await.map_err(|e| match e {
        e if e.failed_at(0) => Error::NoSuchUser,
        TransactError::ConditionFailed { .. } => Error::CodeNotStored,
        other => other.into(),
    })
}

/// The one conditional update that redeems `code`: it marks it redeemed by this request (a random
/// nonce, so that an SDK retry of an attempt whose answer was lost passes the condition again), on
/// condition it exists, is unexpired at `now` and was not redeemed by another request.
fn redeem_update(db: &TenantDb, code: &TransferCode, now: u64) -> Write {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let unredeemed: Condition = either(
        attr(REDEEMED_BY).attribute_not_exists(),
        attr(REDEEMED_BY).equal(nonce.as_str()),
    );
    db.update_item(
        TransferItem::key(&db.tenant, code),
        attr(REDEEMED_BY).set(nonce.as_str()),
    )
    .when(exists())
    .when(attr(EXPIRES_AT).greater_than(num(now)))
    .when(unredeemed)
}

/// The user of `code` while it can be redeemed at `now` (exists, unexpired, not redeemed), else
/// `None`: one consistent GetItem.
pub async fn redeemable_transfer_code_user(
    db: &TenantDb,
    code: &TransferCode,
    now: u64,
) -> Result<Option<String>, StoreError> {
    let Some(current) = db.read_entity_consistent::<TransferItem>(code).await? else {
        return Ok(None);
    };
    let redeemable = current.expires_at > now && current.redeemed_by.is_none();
    Ok(Some(current.user_id).filter(|_| redeemable))
}

/// Redeems `code` of user `user_id` (as [`redeemable_transfer_code_user`] read it) in one
/// TransactWriteItems: the conditional update that marks it redeemed by this request
/// ([`redeem_update`]), a ConditionCheck that its user is still there and no erasure of it has
/// begun, and `record` last. [`Error::CodeNotRedeemable`], nothing written, when it was redeemed
/// or expired since the read, or its user is gone: a code made before its user's erasure outlives
/// it (it is not found from the user) but never hands out the erased user's id.
pub async fn redeem_transfer_code(
    db: &TenantDb,
    code: &TransferCode,
    user_id: &str,
    now: u64,
    record: Option<TransactWriteItem>,
) -> Result<(), Error> {
    let user =
        EntityId::parse(user_id).map_err(|_| internal("a transfer code's userId is not an id"))?;
    let mut actions = vec![
        redeem_update(db, code, now).action()?,
        user_exists(db, &user)?,
    ];
    actions.extend(record);
    db.transact_items(actions).await.map_err(|e| match e {
        e if e.failed_at(0) || e.failed_at(1) => Error::CodeNotRedeemable,
        other => other.into(),
    })
}

/// Stores `token` for `service`, replacing any previous one: one PutItem, at `updated_ms`.
pub async fn save_integration_token(
    db: &TenantDb,
    service: &EntityId,
    token: &IntegrationToken,
    updated_ms: u64,
) -> Result<(), StoreError> {
    let item = db.entity_item(service, &IntegrationItem::new(service, token, updated_ms))?;
    shared::store::client::items::put(db, item).await
}

/// The token of `service` unless it has expired at `now` (TTL deletion lags expiry): one GetItem.
pub async fn integration_token(
    db: &TenantDb,
    service: &EntityId,
    now: u64,
) -> Result<Option<IntegrationToken>, StoreError> {
    let stored = db.read_entity::<IntegrationItem>(service).await?;
    Ok(stored
        .filter(|item| item.expires_at > now)
        .map(IntegrationToken::from))
}

/// The metered usage of `db`'s tenant from `from` to `to`, per day and route: 8 Queries, one per
/// counter shard, concurrently (`shared::store::quota::usage`).
pub async fn usage(
    db: &TenantDb,
    from: Date,
    to: Date,
) -> Result<BTreeMap<String, BTreeMap<String, RouteUsage>>, StoreError> {
    shared::store::quota::usage::read(db, &from.to_string(), &to.to_string()).await
}
