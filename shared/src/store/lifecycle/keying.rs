//! Online encryption of an existing tenant (issue 59): a tenant onboarded before it had a key gets
//! one, and its items of the sealed kinds (`EntityKind::sealed`: products, employees, departments,
//! users' profiles, orders, integration tokens) and its recorded answers (idempotency records, which
//! repeat their effects' data) are sealed in place, and its email uniqueness items
//! move from the plain email to its keyed digest (`store::keys::email_segment`), sealed, while it is served, exactly once, resumably, and
//! driven with nobody calling (the lifecycle driver's list). The walk is the tenant walk's (the
//! fixed partitions, then the catalog), the record left out.
//!
//! - **Start** ([`begin`]): the walk is recorded (`keyMade` false: no key is made for a start
//!   refused), then the key is made (`store::keys::TenantKeys::create`) and the walk's start counted
//!   from its making ([`postpone`]: `keyMade` true); a call that finds `keyMade` false does both
//!   again (a retry takes the key there). From the key's making a container that meets the key
//!   seals every write; one that cached the tenant's absence of a key keeps writing plain items
//!   until its cache period ends, and a request admitted just before then may send its plain write
//!   up to the longest a function runs later, so the walk starts only after both ([`seals_from`]:
//!   the period, that timeout and [`SETTLE_SECONDS`] after the key's making).
//! - **Each step** ([`step`]): the next page of the shards (at most [`ITEMS_PER_STEP`] items) after
//!   the checkpoint, each plain item of a sealed kind put back sealed on condition that it is
//!   there and unchanged (its `updatedAtMs`, or every attribute), and the checkpoint, in one transaction: a page is sealed whole
//!   or not at all, and a write meanwhile (itself sealed) cancels it, to be read again. A sealed
//!   item is passed over, so a step run twice seals nothing twice.
//! - **End** ([`finish`]): the import key the tenant sealed its queued messages with before is
//!   retired, sealed under its data key, and the record loses its `keying`.
//! - **Other operations** change where items are: a re-sharding or a restore started while the walk
//!   waits, and the walk starts again from the first item ([`layout_of`]); sealed items cost it only
//!   their read.

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use dynamodb_expression::value::Value;

use crate::identity::clock::rfc3339;
use crate::identity::entities::spaces;
use crate::identity::entities::{self, EMAIL};
use crate::identity::ids::TenantId;
use crate::identity::keys::{email_key, table_key, ItemKey, KeySpace, EXPIRES_AT, PK, SK};
use crate::isolation::vault::TenantKey;
use crate::store::client::error::StoreError;
use crate::store::client::expr::{absent, attr, either, num, Condition};
use crate::store::client::items::enlist;
use crate::store::client::query::{string_attr, u64_attr, Item};
use crate::store::client::scoped::TenantDb;
use crate::store::client::sealed::PLAIN;
use crate::store::client::transact::TransactError;
use crate::store::imports::retire_plain_key;
use crate::store::keys::{email_segment, is_sealed, seal_item};
use crate::store::lifecycle::resharding::Step;
use crate::store::lifecycle::tenant_items::{self, Budget, RecordInWalk};
use crate::store::tenancy::layout::UPDATED_AT_MS;
use crate::store::tenancy::tenants::{
    record_key, record_update, send_record_update, value, Keying, TenantRecord, TenantStatus,
    LONGEST_FUNCTION_TIMEOUT_SECONDS,
};

/// Items one step walks: each a Put in its transaction, beside the checkpoint.
pub const ITEMS_PER_STEP: usize = 25;

/// Seconds past the key cache's period before the walk seals: clock skew between containers.
pub const SETTLE_SECONDS: u64 = 5;

/// What a walk's position is of: the shard count, the re-sharding generation and the last restore.
pub fn layout_of(record: &TenantRecord) -> String {
    let restored = record
        .last_restore
        .as_ref()
        .map_or("", |r| r.requested_at.as_str());
    format!("{}/{}/{restored}", record.shard_count, record.reshardings)
}

/// Starts sealing `db`'s tenant's items at `now_ms`, its key made, asked by an operator of
/// `requested_by`; containers cache keys for `cache_seconds`. `Raced` when another operation runs,
/// one already did start, or the tenant is not active.
pub async fn begin(
    db: &TenantDb,
    record: &TenantRecord,
    requested_by: &TenantId,
    now_ms: u64,
    cache_seconds: u64,
) -> Result<Step, StoreError> {
    let state = Keying {
        requested_at: rfc3339(now_ms),
        requested_by: requested_by.to_string(),
        seals_from: seals_from(now_ms, cache_seconds),
        key_made: false,
        walked_layout: layout_of(record),
        position: None,
        steps: 0,
        sealed: 0,
    };
    let update = record_update(db)
        .update_expression("SET #k = :k")
        .condition_expression(
            "attribute_exists(PK) AND attribute_not_exists(#k) AND attribute_not_exists(#m) \
             AND attribute_not_exists(#restore) AND attribute_not_exists(#move) AND #state = :active",
        )
        .expression_attribute_names("#k", "keying")
        .expression_attribute_names("#m", "migration")
        .expression_attribute_names("#restore", "restore")
        .expression_attribute_names("#move", "move")
        .expression_attribute_names("#state", "status")
        .expression_attribute_values(":k", state.to_attribute()?)
        .expression_attribute_values(":active", value(TenantStatus::Active)?);
    Ok(Step::from(send_record_update(update).await?))
}

/// The epoch second from which a walk may seal when the tenant's key is made at `now_ms`:
/// containers cache keys for `cache_seconds`, so by then every one has let go of its cached absence,
/// and a request admitted on that absence (its key is fixed for the request) has ended: it may be
/// sent as late as the longest a function runs after the view's last moment.
pub fn seals_from(now_ms: u64, cache_seconds: u64) -> u64 {
    now_ms / 1000 + waits_seconds(cache_seconds)
}

/// How long after the key's making the walk waits, when containers cache keys for `cache_seconds`
/// ([`seals_from`]).
pub fn waits_seconds(cache_seconds: u64) -> u64 {
    cache_seconds + LONGEST_FUNCTION_TIMEOUT_SECONDS + SETTLE_SECONDS
}

/// Counts the walk's start from a key made (or found) by now: `sealsFrom` becomes `seals_from`
/// (the keying wait from now: [`seals_from`]) unless it is later already, and `keyMade` true. The start records the
/// walk before it makes the key, and a key made late (the start failed before it, or KMS was slow)
/// may have been cached as absent by containers until its making, which then write plain items for
/// a period. `Raced` when another call changed the walk first.
pub async fn postpone(db: &TenantDb, state: &Keying, seals_from: u64) -> Result<Step, StoreError> {
    let update = record_update(db)
        .update_expression("SET #k.#from = :from, #k.#made = :made")
        .condition_expression("#k.#steps = :steps AND #k.#at = :at")
        .expression_attribute_names("#k", "keying")
        .expression_attribute_names("#from", "sealsFrom")
        .expression_attribute_names("#made", "keyMade")
        .expression_attribute_names("#steps", "steps")
        .expression_attribute_names("#at", "requestedAt")
        .expression_attribute_values(
            ":from",
            AttributeValue::N(seals_from.max(state.seals_from).to_string()),
        )
        .expression_attribute_values(":made", AttributeValue::Bool(true))
        .expression_attribute_values(":steps", AttributeValue::N(state.steps.to_string()))
        .expression_attribute_values(":at", AttributeValue::S(state.requested_at.clone()));
    Ok(Step::from(send_record_update(update).await?))
}

/// What a [`step`] did.
#[derive(Debug)]
pub enum Walked {
    /// A page sealed and the checkpoint moved: the state as it now is.
    Stepped(Box<Keying>),
    /// Nothing is left after the checkpoint: [`finish`].
    Done,
    /// Another step committed first, or an item of the page changed since it was read.
    Raced,
}

/// Whether `item` is of a kind sealed under its tenant's key, or a recorded answer (which repeats
/// its effect's data), and not sealed yet (a plain-email item is moved, and sealed there, instead).
fn to_seal(item: &Item) -> bool {
    !is_sealed(item)
        && !plain_email(item)
        && string_attr(item, "kind").is_some_and(|k| entities::sealed(&k) || recorded_answer(&k))
}

/// Whether `kind` is an idempotency record's (`store::idempotency`).
fn recorded_answer(kind: &str) -> bool {
    kind == spaces::IDEMPOTENCY.segment()
}

/// What a plain item's sealing is conditioned on: that it is still there and unchanged since the
/// page read it. That is its `updatedAtMs` where it has one, else every attribute as read (an
/// order's items, a profile and an email item carry none): a write meanwhile, or a deletion (an
/// erasure), cancels the step, so the walk never brings back an old version or a deleted item.
fn unchanged(item: &Item) -> Result<Condition, StoreError> {
    let there = attr(PK).attribute_exists();
    if let Some(ms) = u64_attr(item, UPDATED_AT_MS) {
        return Ok(there.and(attr(UPDATED_AT_MS).equal(num(ms))));
    }
    // A recorded answer is written once in its life, and replaced only once it has expired, by a
    // record that expires later: its `expiresAt` tells it apart (its body may be up to 400 KB, too
    // much to compare in an expression).
    if string_attr(item, "kind").is_some_and(|k| recorded_answer(&k)) {
        let expires_at = u64_attr(item, EXPIRES_AT)
            .ok_or_else(|| StoreError::Internal("a recorded answer with no expiresAt".into()))?;
        return Ok(there.and(attr(EXPIRES_AT).equal(num(expires_at))));
    }
    // (`updatedAtMs` is one of them: absent as read, it must stay so, below.)
    let mut condition = there;
    for (name, value) in item.iter().filter(|(n, _)| *n != PK && *n != SK) {
        let value = Value::try_from(value.clone())
            .map_err(|e| StoreError::Internal(format!("an attribute {name} as a value: {e}")))?;
        let same = match value {
            Value::Scalar(scalar) => attr(name).equal(scalar),
            // The kinds without `updatedAtMs` hold scalars only; a set, map or list is compared by
            // its size (an expression takes no document as an operand).
            Value::Set(_) | Value::Map(_) | Value::List(_) => {
                let count = match value_len(item.get(name)) {
                    Some(n) => n,
                    None => continue,
                };
                Condition::from(attr(name).size().equal(num(count)))
            }
        };
        condition = condition.and(same);
    }
    // An attribute added since the read goes unseen by the comparison above, and the sealed copy
    // would drop it. What a write adds to such an item in place is plain (`sealed::PLAIN`: the
    // attributes conditions read and updates change): a profile's erasure fence
    // (`ERASING_SINCE`), a transfer code's redeemer, a root session's first child count. Each
    // one absent as read must be absent still.
    for name in PLAIN.iter().filter(|n| !item.contains_key(**n)) {
        condition = condition.and(attr(name).attribute_not_exists());
    }
    Ok(condition)
}

/// The number of elements of a set, map or list attribute.
fn value_len(value: Option<&AttributeValue>) -> Option<u64> {
    let n = match value? {
        AttributeValue::M(m) => m.len(),
        AttributeValue::L(l) => l.len(),
        AttributeValue::Ss(s) => s.len(),
        AttributeValue::Ns(s) => s.len(),
        AttributeValue::Bs(s) => s.len(),
        _ => return None,
    };
    Some(n as u64)
}

/// One step of the walk of `state` on `record`'s layout, sealing under `key` (module docs).
pub async fn step(
    db: &TenantDb,
    record: &TenantRecord,
    state: &Keying,
    key: &TenantKey,
) -> Result<Walked, StoreError> {
    let layout = layout_of(record);
    let after = state
        .position
        .as_ref()
        .filter(|_| state.walked_layout == layout);
    // The write shards (products, HR), then every id-named partition (the catalog: emails).
    let sources = tenant_items::sources(&db.tenant, record.shard_count, 0, RecordInWalk::Excluded);
    let budget = Budget {
        items: ITEMS_PER_STEP,
        bytes: 3 * 1024 * 1024,
        until: None,
    };
    let page = tenant_items::page(db, &sources, after, budget).await?;
    let Some(last) = page.items.last().and_then(item_key) else {
        return Ok(Walked::Done);
    };
    let mut actions = Vec::new();
    let mut sealed = 0;
    for item in page.items.iter().filter(|i| to_seal(i)) {
        let put = db
            .put_item(seal_item(key, item.clone())?)
            .when(unchanged(item)?);
        actions.push(put.action()?);
        sealed += 1;
    }
    for item in page.items.iter().filter(|i| plain_email(i)) {
        actions.extend(move_email(db, key, item)?);
        sealed += 1;
    }
    let next = Keying {
        steps: state.steps + 1,
        sealed: state.sealed + sealed,
        position: Some(last),
        walked_layout: layout,
        ..state.clone()
    };
    actions.push(checkpoint(db, state, &next)?);
    match db.transact_items(actions).await {
        Ok(()) => Ok(Walked::Stepped(Box::new(next))),
        Err(TransactError::ConditionFailed { .. }) => Ok(Walked::Raced),
        Err(TransactError::Store(e)) => Err(e),
    }
}

/// Whether `item` is an email uniqueness item under the plain email (`TENANT#t#EMAIL#<email>`):
/// an email holds `@`, a digest never does.
fn plain_email(item: &Item) -> bool {
    string_attr(item, "kind").as_deref() == Some(EMAIL.stored_as)
        && string_attr(item, PK).is_some_and(|pk| pk.contains('@'))
}

/// The move of a plain email item to its keyed digest's key ([`email_segment`]), sealed: the Put
/// there (unless another user's is there), and the Delete of the plain one on condition it still
/// names the same user. A keyed container's write of the user deletes the plain item, so a write
/// since the page was read cancels the move rather than being overwritten by it.
fn move_email(
    db: &TenantDb,
    key: &TenantKey,
    item: &Item,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let (Some(email), Some(user)) = (string_attr(item, "email"), string_attr(item, "userId"))
    else {
        return Err(StoreError::Internal(
            "an email item without its email or user".into(),
        ));
    };
    let hashed = email_key(&db.tenant, email_segment(key, &email.to_ascii_lowercase()));
    let mut moved = item.clone();
    moved.insert(PK.into(), AttributeValue::S(hashed.clone()));
    moved.insert(SK.into(), AttributeValue::S(hashed));
    enlist(&db.tenant, &mut moved);
    let moved = seal_item(key, moved)?;
    let plain = table_key(item);
    let mine = || attr("userId").equal(user.as_str());
    Ok(vec![
        db.put_item(moved).when(either(absent(), mine())).action()?,
        db.delete_item(plain).when(mine()).action()?,
    ])
}

fn item_key(item: &Item) -> Option<ItemKey> {
    Some(ItemKey {
        pk: string_attr(item, PK)?,
        sk: string_attr(item, SK)?,
    })
}

/// The record's update to `next`, on condition that no other step committed since `state`.
fn checkpoint(
    db: &TenantDb,
    state: &Keying,
    next: &Keying,
) -> Result<TransactWriteItem, StoreError> {
    let update = Update::builder()
        .table_name(&*db.record_table)
        .set_key(Some(record_key(&db.tenant)))
        .update_expression("SET #k = :next")
        // Never once an offboarding has begun: its lanes may be past the partition an item is
        // moved into (an email item, to its digest's key), which would outlive the tenant.
        .condition_expression("#k.#steps = :steps AND attribute_not_exists(#o)")
        .expression_attribute_names("#k", "keying")
        .expression_attribute_names("#steps", "steps")
        .expression_attribute_names("#o", "offboarding")
        .expression_attribute_values(":next", next.to_attribute()?)
        .expression_attribute_values(":steps", AttributeValue::N(state.steps.to_string()))
        .build()?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// Ends the walk of `state`, which found nothing left: the tenant's plain import key, if it has one,
/// is retired under `key` ([`retire_plain_key`]), then the record loses its `keying`. A failure
/// between the two leaves the walk to end again, which retires nothing twice.
pub async fn finish(db: &TenantDb, state: &Keying, key: &TenantKey) -> Result<Step, StoreError> {
    retire_plain_key(db, &db.tenant, key).await?;
    let update = record_update(db)
        .update_expression("REMOVE #k")
        .condition_expression("#k.#steps = :steps")
        .expression_attribute_names("#k", "keying")
        .expression_attribute_names("#steps", "steps")
        .expression_attribute_values(":steps", AttributeValue::N(state.steps.to_string()));
    Ok(Step::from(send_record_update(update).await?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::client::sealed::ERASING_SINCE;

    const FENCED_SINCE: &str = "2026-12-02T00:00:00Z";

    fn profile(fenced: bool) -> Item {
        let text = |s: &str| AttributeValue::S(s.to_owned());
        let mut item = Item::from([
            // The keys are left out of the comparison: any will do.
            (PK.to_owned(), text("a profile's key")),
            (SK.to_owned(), text("a profile's key")),
            ("kind".to_owned(), text("USER")),
            ("email".to_owned(), text("a@example.com")),
        ]);
        if fenced {
            item.insert(ERASING_SINCE.to_owned(), text(FENCED_SINCE));
        }
        item
    }

    #[test]
    fn a_profile_read_without_a_fence_is_rewritten_only_while_none_is_set() -> Result<(), StoreError>
    {
        // GIVEN a profile the walk read with no erasure's fence on it
        // WHEN the walk conditions its sealed rewrite
        let condition = unchanged(&profile(false))?.to_string();
        // THEN a fence set since the read cancels the rewrite (which would drop the fence)
        assert!(
            condition.contains(&format!("attribute_not_exists({ERASING_SINCE})")),
            "{condition}"
        );
        Ok(())
    }

    #[test]
    fn a_profile_read_with_a_fence_is_rewritten_only_while_that_fence_is_on(
    ) -> Result<(), StoreError> {
        // GIVEN a profile the walk read fenced
        // WHEN the walk conditions its sealed rewrite
        let condition = unchanged(&profile(true))?.to_string();
        // THEN the fence is compared as read (taken off or replaced since, the rewrite is
        // cancelled), and its absence is not asked
        assert!(
            condition.contains(ERASING_SINCE) && condition.contains(FENCED_SINCE),
            "{condition}"
        );
        assert!(
            !condition.contains(&format!("attribute_not_exists({ERASING_SINCE})")),
            "{condition}"
        );
        Ok(())
    }

    #[test]
    fn an_item_is_rewritten_only_while_nothing_updated_in_place_was_added_to_it(
    ) -> Result<(), StoreError> {
        // GIVEN a transfer code read before its redemption, and a root session before its first
        // child (neither carries `updatedAtMs`)
        let text = |s: &str| AttributeValue::S(s.to_owned());
        let code = Item::from([
            (PK.to_owned(), text("a code's key")),
            (SK.to_owned(), text("a code's key")),
            ("kind".to_owned(), text("TRANSFER_CODE")),
            ("userId".to_owned(), text("u-1")),
        ]);
        // WHEN the walk conditions its sealed rewrite
        let condition = unchanged(&code)?.to_string();
        // THEN every plain attribute it lacked must still be absent: a redeemer or a child count
        // added since cancels the rewrite (which would drop it); those it had are compared
        for name in PLAIN.iter().filter(|n| !code.contains_key(**n)) {
            assert!(
                condition.contains(&format!("attribute_not_exists({name})")),
                "{name}: {condition}"
            );
        }
        for name in ["redeemedBy", "childCount", "updatedAtMs"] {
            assert!(PLAIN.contains(&name), "{name} is written in place");
        }
        assert!(
            !condition.contains("attribute_not_exists(userId)"),
            "{condition}"
        );
        Ok(())
    }
}
