//! The erasure of one user: every item of its own deleted, and recorded for good
//! (`shared::store::erasures`), so that no later restore of the tenant brings any of it back. The
//! store side of `erase-user`, beside `store.rs`: the handler parses, this reads and writes.
//!
//! Its items: the profile and its order summaries (the user's partition), its email item, and each
//! of its orders' header and line items (the order's partition) and date index entry. What it will
//! delete is read first and counted: the report the route answers, kept in the user's erasure
//! record, so a retry answers the same. Before that read, the profile is fenced (`erasingSince`):
//! every write that needs the user is conditioned on the fence's absence, so nothing of the user's
//! is written between the read and the deletes (an order placed, an email changed). The records are written first, so an erasure interrupted
//! part way is already honoured by a restore, and finished by a retry: each order's summary (what
//! leads a retry to the order) is deleted after the order's other items, and every order found
//! has its record written again, as first dated, by each retry.

use std::collections::BTreeMap;

use serde::Serialize;
use shared::identity::entities::{EMAIL, ORDER, ORDER_DATE, ORDER_SUMMARY, USER};
use shared::identity::ids::EntityId;
use shared::identity::keys::{order_date_pk, order_key, primary_key, table_key, user_key, SK};
use shared::store::client::error::StoreError;
use shared::store::client::expr::{absent, attr, either, exists};
use shared::store::client::query::{string_attr, Item};
use shared::store::client::scoped::TenantDb;
use shared::store::client::transact::TransactError;
use shared::store::erasures::{
    erasure, erasure_put, not_erasing, ERASED_AT, ERASING_SINCE, REPORT,
};

use crate::error::{internal, Error};
use crate::model::User;
use crate::values::Email;
use shared::store::client::entity::Entity;

/// The most actions of one transaction.
const ACTIONS_PER_TRANSACTION: usize = 100;

/// An erasure's transactions of one phase over many partitions in flight at once, and its orders
/// read at once.
const TRANSACTIONS_AT_ONCE: usize = 8;
const ORDERS_READ_AT_ONCE: usize = 16;

/// What an erasure deleted, by kind: the route's answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ErasureReport<'a> {
    user_id: &'a str,
    erased_at: &'a str,
    deleted: BTreeMap<&'static str, u64>,
    deleted_total: u64,
}

/// One item to delete, the kind it is counted under, and whether it is an email item (deleted
/// only while it is still the user's, if it is there: a keyed tenant's may be at its digest's key
/// or, until its online encryption moves it, at the plain email's, and one run cut off may have
/// deleted it already).
struct Doomed {
    key: Item,
    kind: &'static str,
    email: bool,
    /// A keyed tenant's email item is looked for at both of its keys: one is counted.
    counted: bool,
}

/// Erases user `id` at `erased_at`: the report (JSON) the route answers, as first answered when it
/// was erased before; `None` when there is no such user and none was erased.
pub async fn erase_user(
    db: &TenantDb,
    id: &EntityId,
    erased_at: &str,
) -> Result<Option<String>, Error> {
    let recorded = erasure(db, USER.kind, id).await?;
    // The fence first: once it is on the profile, no write that needs the user commits (an order, a
    // transfer code, a change of its email), so what the read below finds is all there is.
    // (A fence whose answer was lost may be on: this run's value is taken off, if it is there.)
    let fenced_here = match fence(db, id, erased_at).await {
        Ok(fenced_here) => fenced_here,
        Err(e) => {
            unfence(db, id, erased_at).await;
            return Err(e);
        }
    };
    let mut committed = false;
    let erased = erase_fenced(db, id, erased_at, recorded.as_ref(), &mut committed).await;
    // Failed before anything was deleted or recorded: the fence this run set goes too, so that a
    // failure writes nothing (a run cut off later leaves it for the retry that finishes the
    // erasure; another erasure's fence is that one's to take off).
    if erased.is_err()
        && !committed
        && recorded.is_none()
        && fenced_here
        && !recorded_since(db, id).await
    {
        unfence(db, id, erased_at).await;
    }
    erased
}

/// Whether user `id`'s erasure record is there now, or cannot be told (a failed read keeps the
/// fence). A transaction whose every answer was lost (the SDK's retries each lost theirs) may have
/// committed the records: the erasure has begun, and its fence stays for the retry that finishes it.
async fn recorded_since(db: &TenantDb, id: &EntityId) -> bool {
    !matches!(erasure(db, USER.kind, id).await, Ok(None))
}

/// [`erase_user`] behind its fence, `committed` set once one of its transactions is.
async fn erase_fenced(
    db: &TenantDb,
    id: &EntityId,
    erased_at: &str,
    recorded: Option<&Item>,
    committed: &mut bool,
) -> Result<Option<String>, Error> {
    let (doomed, orders) = doomed(db, id).await?;
    let report = match recorded {
        Some(record) => string_attr(record, REPORT)
            .ok_or_else(|| internal("an erasure record without its report"))?,
        None if doomed.is_empty() => return Ok(None),
        None => report(id, erased_at, &doomed)?,
    };
    // A retry dates what it writes as the first run did, so each record it writes again is
    // byte for byte the one there (an interruption may have cut the records' transactions too).
    let mut records = Vec::new();
    let erased_at = match recorded {
        Some(record) => string_attr(record, ERASED_AT).unwrap_or_else(|| erased_at.to_owned()),
        None => {
            records.push(erasure_put(db, USER.kind, id, erased_at, Some(&report))?);
            erased_at.to_owned()
        }
    };
    for order in &orders {
        records.push(erasure_put(db, ORDER.kind, order, &erased_at, None)?);
    }
    let mine = || attr("userId").equal(id.as_str());
    let (mut profile, mut order_items, mut summaries) = (Vec::new(), Vec::new(), Vec::new());
    for item in doomed {
        let phase = match item.kind {
            k if k == EMAIL.stored_as || k == USER.stored_as => &mut profile,
            k if k == ORDER_SUMMARY.stored_as => &mut summaries,
            _ => &mut order_items,
        };
        let delete = db.delete_item(item.key);
        // Gone already is fine (a run cut off after deleting it, before the profile went): an
        // email item another user holds now is not, and the erasure reads again (409).
        let delete = match item.email {
            true => delete.when(either(absent(), mine())),
            false => delete,
        };
        phase.push(delete.action()?);
    }
    // In order: the records first, so a restore honours the erasure before anything is gone; the
    // email and the profile; each order's items; the summaries last, so a retry after an
    // interruption finds, through the user's partition, every order not wholly gone. Each phase's
    // transactions run side by side (a user of thousands of orders is erased within the function's
    // timeout); a user whose erasure fits one transaction is erased in one, atomically.
    // The records and the orders' items are spread over partitions of their own; the profile and
    // the summaries share the user's partition, whose deletes go one transaction at a time (eight
    // of 100 at once would pass a partition's 1,000 write units a second).
    let phases = [
        (records, TRANSACTIONS_AT_ONCE),
        (profile, 1),
        (order_items, TRANSACTIONS_AT_ONCE),
        (summaries, 1),
    ];
    let phases: Vec<(Vec<_>, usize)> = match phases.iter().map(|p| p.0.len()).sum::<usize>() {
        n if n <= ACTIONS_PER_TRANSACTION => {
            vec![(phases.into_iter().flat_map(|p| p.0).collect(), 1)]
        }
        _ => phases.into_iter().collect(),
    };
    for (phase, at_once) in phases {
        commit_side_by_side(db, phase, at_once, committed).await?;
    }
    Ok(Some(report))
}

/// Commits `actions` in transactions of [`ACTIONS_PER_TRANSACTION`], `at_once` at a time;
/// `committed` set once one of them is. Every transaction is tried before an error is answered, so
/// a retry finds as little as possible left.
async fn commit_side_by_side(
    db: &TenantDb,
    actions: Vec<aws_sdk_dynamodb::types::TransactWriteItem>,
    at_once: usize,
    committed: &mut bool,
) -> Result<(), Error> {
    use futures::StreamExt;
    let mut actions = actions.into_iter().peekable();
    let mut batches = Vec::new();
    while actions.peek().is_some() {
        batches.push(
            actions
                .by_ref()
                .take(ACTIONS_PER_TRANSACTION)
                .collect::<Vec<_>>(),
        );
    }
    let outcomes: Vec<_> = futures::stream::iter(batches.into_iter().map(|b| db.transact_items(b)))
        .buffer_unordered(at_once)
        .collect()
        .await;
    let mut failed = None;
    for outcome in outcomes {
        match outcome {
            Ok(()) => *committed = true,
            // The email item moved to another user since the read: read again.
            Err(TransactError::ConditionFailed { .. }) => failed = Some(Error::UserChanged),
            Err(e) => failed = failed.or(Some(e.into())),
        }
    }
    failed.map_or(Ok(()), Err)
}

/// Fences user `id`'s profile, if it is there, against every write that needs the user
/// (`store::erasures::not_erasing`): `erasingSince`, kept plain, until the profile is deleted.
/// `true` when this call set it; `false` when there is no profile (gone already: a run cut off
/// after deleting it; or no such user) or a fence is on already (another erasure's, or a run's
/// cut off), which is left as it is.
async fn fence(db: &TenantDb, id: &EntityId, since: &str) -> Result<bool, Error> {
    let fenced = db
        .update_item(User::key(&db.tenant, id), attr(ERASING_SINCE).set(since))
        .when(exists().and(not_erasing()))
        .send(db)
        .await;
    match fenced {
        Ok(_) => Ok(true),
        Err(TransactError::ConditionFailed { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Takes this run's fence (set `since`) off user `id`'s profile; a failure leaves it (logged): the
/// user then waits for the erasure asked again, as after a run cut off later.
async fn unfence(db: &TenantDb, id: &EntityId, since: &str) {
    let unfenced = db
        .update_item(User::key(&db.tenant, id), attr(ERASING_SINCE).remove())
        .when(attr(ERASING_SINCE).equal(since))
        .send(db)
        .await;
    if let Err(TransactError::Store(e)) = unfenced {
        tracing::warn!(user = %id, error = %e, "an erasure that failed could not take its fence off: the user waits for the erasure asked again");
    }
}

/// The report of an erasure of `doomed`.
fn report(id: &EntityId, erased_at: &str, doomed: &[Doomed]) -> Result<String, Error> {
    let mut deleted = BTreeMap::new();
    for item in doomed.iter().filter(|d| d.counted) {
        *deleted.entry(item.kind).or_insert(0) += 1;
    }
    let report = ErasureReport {
        user_id: id.as_str(),
        erased_at,
        deleted_total: deleted.values().sum(),
        deleted,
    };
    serde_json::to_string(&report).map_err(|e| internal(e.to_string()).into())
}

/// Every item of user `id` there is now (consistent reads), its email item and profile first, and
/// its orders' ids. One Query of the user's partition, and per order one of the order's partition
/// and one of its date index entry's.
async fn doomed(db: &TenantDb, id: &EntityId) -> Result<(Vec<Doomed>, Vec<EntityId>), Error> {
    use futures::StreamExt;
    let t = &db.tenant;
    let partition = user_key(t, id);
    let collection = db.query_partition(&partition).consistent().all().await?;
    let mut doomed = Vec::new();
    let mut orders = Vec::new();
    let mut last = Vec::new();
    for item in collection {
        let doom = |kind, email| Doomed {
            key: table_key(&item),
            kind,
            email,
            counted: true,
        };
        if string_attr(&item, SK).as_deref() == Some(partition.as_str()) {
            if let Some(email) = string_attr(&item, "email") {
                let email = Email::parse(&email).map_err(internal)?;
                let keyed = db.key.is_some();
                let segments = [
                    Some(email.segment(db.key.as_deref())),
                    keyed.then(|| email.plain_segment()),
                ];
                for (i, segment) in segments.into_iter().flatten().enumerate() {
                    let key = segment.key(t);
                    last.push(Doomed {
                        key: primary_key(key.clone(), key),
                        kind: EMAIL.stored_as,
                        email: true,
                        counted: i == 0,
                    });
                }
            }
            last.push(doom(USER.stored_as, false));
            continue;
        }
        // The summary after its order's items: while any of them is left, a retry finds it.
        if let Some(order) = string_attr(&item, "orderId") {
            let order = EntityId::parse(&order).map_err(internal)?;
            orders.push((order, string_attr(&item, "date")));
        }
        doomed.push(doom(ORDER_SUMMARY.stored_as, false));
    }
    // Each order's items, read side by side (two Queries an order).
    let read = orders
        .iter()
        .cloned()
        .map(|(order, date)| async move { order_items(db, &order, date).await });
    let items: Vec<_> = futures::stream::iter(read)
        .buffered(ORDERS_READ_AT_ONCE)
        .collect()
        .await;
    for order in items {
        last.extend(order?);
    }
    // The email and the profile first, after the records: a retry after an interruption finds what
    // is left through the user's partition (the profile, the summaries).
    last.extend(doomed);
    Ok((last, orders.into_iter().map(|(order, _)| order).collect()))
}

/// Order `order`'s header and line items (its partition), and its date index entry on `date`.
async fn order_items(
    db: &TenantDb,
    order: &EntityId,
    date: Option<String>,
) -> Result<Vec<Doomed>, StoreError> {
    let t = &db.tenant;
    let pk = order_key(t, order);
    let mut items: Vec<Doomed> = db
        .query_partition(&pk)
        .consistent()
        .all()
        .await?
        .iter()
        .map(|item| Doomed {
            key: table_key(item),
            kind: match string_attr(item, SK) == Some(pk.clone()) {
                true => ORDER.stored_as,
                false => shared::identity::entities::ORDER_LINE.stored_as,
            },
            email: false,
            counted: true,
        })
        .collect();
    if let Some(date) = date {
        let entry = db
            .query_partition(&order_date_pk(t, &date, order))
            .consistent()
            .all()
            .await?;
        items.extend(entry.iter().map(|item| Doomed {
            key: table_key(item),
            kind: ORDER_DATE.stored_as,
            email: false,
            counted: true,
        }));
    }
    Ok(items)
}
