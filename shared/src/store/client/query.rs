//! Paging over Queries whose items can be expired. `Limit` applies before a filter, so one Query can
//! come back short, or empty, only because expired items were filtered out. [`live_page`] keeps
//! querying, in growing rounds, until the page is full or the collection ends, and stops after a
//! fixed budget of rounds so that a run of expired items (TTL deletion lags by up to 48 hours) never
//! makes one request's work unbounded.

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::cursor::Key;
use crate::identity::keys::{table_key, EXPIRES_AT, PK};
use crate::isolation::vault::TenantKey;
use crate::store::client::error::StoreError;
use crate::store::client::expr::{key, Expression, KeyCondition};
use crate::store::client::scoped::TenantDb;
use crate::store::client::sealed::{open_item, open_items, with_sealing};

pub type Item = std::collections::HashMap<String, AttributeValue>;

/// Queries one page may send. Rounds grow ×8 up to [`MAX_ROUND_ITEMS`], so the budget evaluates up to
/// about 5,600 items (1 + 8 + 64 + 512 + 1,000 × 5) for a one-item read.
pub const MAX_ROUNDS: u32 = 8;
/// The largest `Limit` of one round (DynamoDB's 1 MB page bound comes first for large items).
pub const MAX_ROUND_ITEMS: u32 = 1000;

/// A Query of a tenant's table: its key condition typed, its index, order, consistency and projection
/// chosen here; it is sent by the paging below ([`Query::page`], [`Query::live_page`],
/// [`Query::first_live`], [`Query::all`]). Started from the scoped client ([`TenantDb::query`]).
#[derive(Clone)]
pub struct Query {
    sdk: QueryFluentBuilder,
    key: Option<KeyCondition>,
    projection: Vec<String>,
    /// The tenant's key, which opens the sealed items read ([`super::sealed`]).
    opener: Option<Arc<TenantKey>>,
    on_index: bool,
}

impl TenantDb {
    /// A Query of this tenant's table under `key`.
    pub fn query(&self, key: KeyCondition) -> Query {
        Query {
            sdk: self.sdk_query(),
            key: Some(key),
            projection: Vec::new(),
            opener: self.key.clone(),
            on_index: false,
        }
    }

    /// A Query of the whole table partition `pk`.
    pub fn query_partition(&self, pk: &str) -> Query {
        self.query(key(PK).equal(pk))
    }
}

impl Query {
    /// A Query `store` built on the SDK's builder itself (its key condition set).
    pub(crate) fn sdk_built(sdk: QueryFluentBuilder) -> Self {
        Self {
            sdk,
            key: None,
            projection: Vec::new(),
            opener: None,
            on_index: false,
        }
    }

    /// On global secondary index `index` (its key condition names the index's keys). A projection
    /// there asks only for what the index projects: nothing is added to it for opening.
    pub fn on_index(mut self, index: &str) -> Self {
        self.sdk = self.sdk.index_name(index);
        self.on_index = true;
        self
    }

    /// Newest (highest sort key) first.
    pub fn descending(mut self) -> Self {
        self.sdk = self.sdk.scan_index_forward(false);
        self
    }

    /// Strongly consistent (the table only).
    pub fn consistent(mut self) -> Self {
        self.sdk = self.sdk.consistent_read(true);
        self
    }

    /// Only these attributes of each item.
    pub fn project(mut self, names: &[&str]) -> Self {
        self.projection = names.iter().map(|n| (*n).to_owned()).collect();
        self
    }

    /// The SDK's request: the key condition and projection assembled into one [`Expression`] (a
    /// projection of the table takes what opening a sealed item needs).
    fn sdk(self) -> QueryFluentBuilder {
        let Some(key) = self.key else {
            return self.sdk;
        };
        let mut expression = Expression::builder().with_key_condition(key);
        if !self.projection.is_empty() {
            let projection = match self.on_index {
                true => self.projection,
                false => with_sealing(self.projection),
            };
            expression = expression.with_projection(projection);
        }
        expression.build().to_query_fluent_builder(self.sdk)
    }

    /// The opened form of what this Query read.
    fn opened(opener: Option<&TenantKey>, mut page: Page) -> Result<Page, StoreError> {
        page.items = open_items(opener, page.items)?;
        Ok(page)
    }

    /// One request's page: at most `limit` items from `start`.
    pub async fn page(self, limit: u32, start: Option<Key>) -> Result<Page, StoreError> {
        let opener = self.opener.clone();
        let out = self
            .sdk()
            .limit(limit as i32)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        let page = Page {
            items: out.items.unwrap_or_default(),
            next: out.last_evaluated_key.filter(|k| !k.is_empty()),
            requests: 1,
        };
        Self::opened(opener.as_deref(), page)
    }

    /// [`live_page`] of this Query.
    pub async fn live_page(
        self,
        want: u32,
        start: Option<Key>,
        now_seconds: u64,
    ) -> Result<Page, StoreError> {
        let opener = self.opener.clone();
        let page = live_page(self.sdk(), want, start, now_seconds).await?;
        Self::opened(opener.as_deref(), page)
    }

    /// [`first_live`] of this Query.
    pub async fn first_live(self, now_seconds: u64) -> Result<Option<Item>, StoreError> {
        let opener = self.opener.clone();
        let item = first_live(self.sdk(), now_seconds).await?;
        item.map(|i| open_item(opener.as_deref(), i)).transpose()
    }

    /// Every item this Query matches, following `LastEvaluatedKey` to the end (small, bounded
    /// collections: a session with its children, an order with its lines).
    pub async fn all(self) -> Result<Vec<Item>, StoreError> {
        let opener = self.opener.clone();
        let items = self.sdk().into_paginator().items().send();
        let items = items.try_collect().await.map_err(StoreError::from_sdk)?;
        open_items(opener.as_deref(), items)
    }
}

pub struct Page {
    pub items: Vec<Item>,
    /// Where the next page starts; `None` when the collection is exhausted.
    pub next: Option<Key>,
    /// DynamoDB requests this page took (for logs and request-count tests).
    pub requests: u32,
}

/// Runs `query` (key condition already set), keeping items whose `expiresAt` is after `now_seconds`,
/// until `want` items are kept, the collection ends, or [`MAX_ROUNDS`] Queries were sent.
///
/// The first round asks for exactly `want` (with no expired items ahead, the common case, that is one
/// Query whose `LastEvaluatedKey` is the last item). Each later round asks for 8 times more, up to
/// [`MAX_ROUND_ITEMS`]; a round that brings more live items than needed is cut, and the cursor is then
/// the last item kept, so nothing is skipped. When the budget runs out first, the page is short and
/// its cursor is where evaluation stopped: the one case where a page may be short before the end.
async fn live_page(
    query: QueryFluentBuilder,
    want: u32,
    start: Option<Key>,
    now_seconds: u64,
) -> Result<Page, StoreError> {
    let query = query
        .filter_expression("#live_exp > :live_now")
        .expression_attribute_names("#live_exp", EXPIRES_AT)
        .expression_attribute_values(":live_now", AttributeValue::N(now_seconds.to_string()));
    let mut items: Vec<Item> = Vec::new();
    let mut start = start;
    let mut round = want.max(1);
    for requests in 1..=MAX_ROUNDS {
        let remaining = want - items.len() as u32;
        let out = query
            .clone()
            .limit(round.max(remaining) as i32)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        let lek = out.last_evaluated_key.filter(|k| !k.is_empty());
        let mut found = out.items.unwrap_or_default();
        if found.len() as u32 > remaining {
            // More live items than the page needs: keep what fits, resume after the last one kept.
            found.truncate(remaining as usize);
            items.extend(found);
            let next = items.last().map(table_key);
            return Ok(Page {
                items,
                next,
                requests,
            });
        }
        items.extend(found);
        match lek {
            None => {
                return Ok(Page {
                    items,
                    next: None,
                    requests,
                })
            }
            Some(key) if items.len() as u32 >= want => {
                return Ok(Page {
                    items,
                    next: Some(table_key(&key)),
                    requests,
                })
            }
            Some(key) => start = Some(key),
        }
        round = round.saturating_mul(8).min(MAX_ROUND_ITEMS);
    }
    // Budget spent: a short page, resuming where evaluation stopped.
    Ok(Page {
        items,
        next: start.as_ref().map(table_key),
        requests: MAX_ROUNDS,
    })
}

/// The first live item `query` finds, if any: a single-item read through a Query (one request in the
/// common case). When the budget of [`live_page`] runs out before a live item or the end, the answer
/// is unknown: 503, never a false 404.
async fn first_live(
    query: QueryFluentBuilder,
    now_seconds: u64,
) -> Result<Option<Item>, StoreError> {
    let page = live_page(query, 1, None, now_seconds).await?;
    match (page.items.into_iter().next(), page.next) {
        (Some(item), _) => Ok(Some(item)),
        (None, None) => Ok(None),
        (None, Some(_)) => Err(StoreError::Unavailable(
            "Too many expired items to skip in one request; retry later.".into(),
        )),
    }
}

/// A string attribute of an item.
pub fn string_attr(item: &Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

/// A numeric attribute of an item.
pub fn u64_attr(item: &Item, name: &str) -> Option<u64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
}

/// Whether `item` is still live at `now_seconds` (TTL deletion lags by up to 48 hours).
pub fn is_live(item: &Item, now_seconds: u64) -> bool {
    u64_attr(item, EXPIRES_AT).is_some_and(|e| e > now_seconds)
}

/// Writes `item` unless an item with its key already exists: `Ok(true)` when written, `Ok(false)`
/// when another item holds the key. If the SDK retried an attempt that had in fact succeeded (its
/// answer lost, say to a timeout), the retry finds exactly `item`: that counts as written, so a
/// create is idempotent under retries instead of answering a spurious 409.
pub async fn put_if_absent(
    db: &crate::store::client::scoped::TenantDb,
    item: Item,
) -> Result<bool, StoreError> {
    put_unless(db, item, None).await
}

/// [`put_if_absent`], where an item no longer [`is_live`] at `now_seconds` counts as absent:
/// DynamoDB's TTL deletes an expired item up to days late, and until then it must not answer for a
/// key that has ended.
pub async fn put_unless_live(
    db: &crate::store::client::scoped::TenantDb,
    item: Item,
    now_seconds: u64,
) -> Result<bool, StoreError> {
    put_unless(db, item, Some(now_seconds)).await
}

async fn put_unless(
    db: &crate::store::client::scoped::TenantDb,
    item: Item,
    expired_before: Option<u64>,
) -> Result<bool, StoreError> {
    use aws_sdk_dynamodb::operation::put_item::PutItemError;
    use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
    let mut put = db
        .client
        .put_item()
        .table_name(&*db.table)
        .set_item(Some(item.clone()))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
    put = match expired_before {
        None => put.condition_expression("attribute_not_exists(PK)"),
        Some(now) => put
            .condition_expression("attribute_not_exists(PK) OR #exp <= :now")
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_values(":now", AttributeValue::N(now.to_string())),
    };
    match put.send().await {
        Ok(_) => Ok(true),
        Err(e) => match e.as_service_error() {
            Some(PutItemError::ConditionalCheckFailedException(c)) => Ok(c.item() == Some(&item)),
            _ => Err(StoreError::from_sdk(e)),
        },
    }
}
