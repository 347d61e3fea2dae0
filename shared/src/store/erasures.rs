//! Erasures: a user erased, with every item of its own, at its tenant's request, and recorded for
//! good (`TENANT#t#ERASED#USER#<u>`, and one record per order of the user:
//! `TENANT#t#ERASED#ORDER#<o>`), so that a later restore of the tenant re-applies it: a restore
//! never puts back an item an erasure reaches ([`without_erased`]), whatever point in time or copy
//! it restores from. The records are the machinery's own, not the routes' entities: a restore
//! leaves them as they are now (`identity::entities::restored`), an offboarding deletes them with
//! everything else. They hold no personal data: ids, a time and the counts of what was deleted.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};

use crate::identity::entities::{ORDER, USER};
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{erasure_key, id_in_partition, order_key, primary_key, user_key, PK};
use crate::store::client::error::StoreError;
use crate::store::client::expr::{absent, attr, either, Condition};
use crate::store::client::items::enlist;
use crate::store::client::query::{string_attr, Item};
use crate::store::client::scoped::TenantDb;
pub use crate::store::client::sealed::ERASING_SINCE;

/// The `kind` attribute of an erasure record.
pub const ERASURE: &str = "ERASURE";
/// An erasure record's attribute holding the answer its route gave (the user's record only).
pub const REPORT: &str = "report";
/// An erasure record's attribute holding when it was erased (RFC 3339).
pub const ERASED_AT: &str = "erasedAt";

/// What an item of a user's names: the user (its partition, or a `userId`) and an order (its
/// partition, or an `orderId`).
const OWNERS: [(&str, &str); 2] = [(USER.kind, "userId"), (ORDER.kind, "orderId")];

/// Whether user `id`'s profile is there and no erasure of it has begun (one consistent GetItem):
/// a user erased, being erased, or not there (a restore to before it) is not.
pub async fn user_present(db: &TenantDb, id: &EntityId) -> Result<bool, StoreError> {
    let key = user_key(&db.tenant, id);
    let profile = db
        .get(primary_key(key.clone(), key))
        .consistent()
        .item()
        .await?;
    Ok(profile.is_some_and(|p| !p.contains_key(ERASING_SINCE)))
}

/// The erasure record of `kind` `id` (a consistent read), when it was erased.
pub async fn erasure(db: &TenantDb, kind: &str, id: &EntityId) -> Result<Option<Item>, StoreError> {
    let key = erasure_key(&db.tenant, kind, id);
    db.get(primary_key(key.clone(), key))
        .consistent()
        .item()
        .await
}

/// The Put of `kind` `id`'s erasure record, erased at `erased_at` (RFC 3339), with the route's
/// answer `report` (the user's record). The user's record is put only where none is, or where this
/// run put it (an SDK retry of a commit whose answer was lost): of two erasures of a user at once
/// (its two routes), the second fails its condition and is asked again, then answers the first's
/// report, where both put theirs and the last one's stood.
pub fn erasure_put(
    db: &TenantDb,
    kind: &str,
    id: &EntityId,
    erased_at: &str,
    report: Option<&str>,
) -> Result<TransactWriteItem, StoreError> {
    let key = erasure_key(&db.tenant, kind, id);
    let mut item: Item = primary_key(key.clone(), key);
    let text = |s: &str| AttributeValue::S(s.to_owned());
    item.insert("kind".into(), text(ERASURE));
    item.insert("tenantId".into(), text(db.tenant.as_str()));
    item.insert("erasedKind".into(), text(kind));
    item.insert("erasedId".into(), text(id.as_str()));
    item.insert(ERASED_AT.into(), text(erased_at));
    if let Some(report) = report {
        item.insert(REPORT.into(), text(report));
    }
    enlist(&db.tenant, &mut item);
    let put = db.put_item(item);
    match report {
        Some(_) => put
            .when(either(absent(), attr(ERASED_AT).equal(erased_at)))
            .action(),
        None => put.action(),
    }
}

/// No erasure of the user whose profile this is has begun: what every write that needs the user
/// (its profile's change, an order, a transfer code, an integration token) holds the profile to.
/// An erasure sets it first (`ERASING_SINCE`), then reads what it deletes: a write committed before
/// the fence is in that read, and none commits after it.
pub fn not_erasing() -> Condition {
    attr(ERASING_SINCE).attribute_not_exists()
}

/// A ConditionCheck that `kind` `id` (a user, an order) was never erased: a write that would make it
/// again sends it (an erased id is not reused, so no restore can mistake new items for the erased
/// ones'). In the write's own transaction, so an erasure committing its record meanwhile cancels it.
pub fn not_erased(
    db: &TenantDb,
    kind: &str,
    id: &EntityId,
) -> Result<TransactWriteItem, StoreError> {
    let key = erasure_key(&db.tenant, kind, id);
    db.check_item(primary_key(key.clone(), key), absent())
        .action()
}

/// The users and orders `item` of `tenant` belongs to.
fn owners(tenant: &TenantId, item: &Item) -> Vec<(&'static str, String)> {
    let pk = string_attr(item, PK).unwrap_or_default();
    OWNERS
        .iter()
        .flat_map(|(kind, attribute)| {
            let in_partition = id_in_partition(tenant, kind, &pk).map(str::to_owned);
            [in_partition, string_attr(item, attribute)]
                .into_iter()
                .flatten()
                .map(move |id| (*kind, id))
        })
        .collect()
}

/// `items` (a page of a restore's `source`) without those an erasure recorded in `live` reaches: an
/// erased user's profile, order summaries and email item, and its orders' headers, line items and
/// date index entries. One consistent GetItem per user or order the page names, once each.
///
/// A line item names only its order, and an order the erasure never saw (one a restore had taken
/// away when the user was erased) has no record of its own: such an item is the user's when its
/// order's header in `source` names an erased user (the page's header, summary or date entry of
/// the order, else one more GetItem of the header, in the source).
pub async fn without_erased(
    live: &TenantDb,
    source: &TenantDb,
    items: Vec<Item>,
) -> Result<Vec<Item>, StoreError> {
    let mut erased: HashMap<(&'static str, String), bool> = HashMap::new();
    // The user of each order an item of the page names both of (its header, summary or date
    // entry): no read of its header for its line items.
    let mut order_users: HashMap<String, Option<String>> = HashMap::new();
    for item in &items {
        let owners = owners(&live.tenant, item);
        let of = |kind: &str| owners.iter().find(|(k, _)| *k == kind).map(|(_, id)| id);
        if let (Some(order), Some(user)) = (of(ORDER.kind), of(USER.kind)) {
            order_users.insert(order.clone(), Some(user.clone()));
        }
    }
    let mut kept = Vec::with_capacity(items.len());
    for item in items {
        let mut owners = owners(&live.tenant, &item);
        if !owners.iter().any(|(kind, _)| *kind == USER.kind) {
            if let Some((_, order)) = owners.iter().find(|(kind, _)| *kind == ORDER.kind) {
                let order = order.clone();
                if !order_users.contains_key(&order) {
                    let user = order_user(source, &order).await?;
                    order_users.insert(order.clone(), user);
                }
                owners.extend(order_users[&order].clone().map(|user| (USER.kind, user)));
            }
        }
        let mut reached = false;
        for owner in owners {
            if !erased.contains_key(&owner) {
                let found = match EntityId::parse(&owner.1) {
                    Ok(id) => erasure(live, owner.0, &id).await?.is_some(),
                    Err(_) => false,
                };
                erased.insert(owner.clone(), found);
            }
            reached |= erased[&owner];
        }
        if !reached {
            kept.push(item);
        }
    }
    Ok(kept)
}

/// The user order `order`'s header in `db` names, if the header is there.
async fn order_user(db: &TenantDb, order: &str) -> Result<Option<String>, StoreError> {
    let Ok(id) = EntityId::parse(order) else {
        return Ok(None);
    };
    let key = order_key(&db.tenant, &id);
    // As stored: a keyed tenant's header is sealed, and the source's reader holds no key
    // (`userId` is never sealed).
    let header = db
        .get(primary_key(key.clone(), key))
        .consistent()
        .project(&["userId"])
        .stored()
        .await?;
    Ok(header.and_then(|header| string_attr(&header, "userId")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::keys::{email_key, order_key, order_line_sk, user_key, SK};

    #[test]
    fn an_item_belongs_to_the_user_and_order_its_keys_or_attributes_name() {
        let t = TenantId::parse("acme").unwrap();
        let id = |s: &str| EntityId::parse(s).unwrap();
        let text = |s: String| AttributeValue::S(s);
        let profile = Item::from([
            (PK.to_owned(), text(user_key(&t, &id("u-1")))),
            (SK.to_owned(), text(user_key(&t, &id("u-1")))),
        ]);
        assert_eq!(owners(&t, &profile), [("USER", "u-1".to_owned())]);
        let email = Item::from([
            (PK.to_owned(), text(email_key(&t, "ada@example.com"))),
            ("userId".to_owned(), text("u-1".into())),
        ]);
        assert_eq!(owners(&t, &email), [("USER", "u-1".to_owned())]);
        let line = Item::from([
            (PK.to_owned(), text(order_key(&t, &id("o-9")))),
            (
                SK.to_owned(),
                text(order_line_sk(&t, &id("o-9"), &id("l-1"))),
            ),
            ("orderId".to_owned(), text("o-9".into())),
        ]);
        assert_eq!(
            owners(&t, &line),
            [("ORDER", "o-9".to_owned()), ("ORDER", "o-9".to_owned())]
        );
    }
}
