//! Scatter-gather over a tenant's write shards.
//!
//! A list queries every shard concurrently (tokio futures on the same task, not threads), follows each
//! shard's `LastEvaluatedKey`, merges in sort-key (= id) order and returns one page behind one cursor.
//! The cursor holds each shard's own position: the last item *returned* from it, or "exhausted", so
//! across pages every item appears exactly once. A page asks each shard for at most `limit` items:
//! the page's items could all come from one shard, and no shard can contribute more than `limit`.
//!
//! The reference implementation this replaces read only each shard's first page, skipped the last
//! suffix (`range(1, N)`), and ran with unscoped credentials; here every shard `0..N` is read to the
//! end through the tenant's scoped client.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use futures::future::try_join_all;

use crate::cursor::{self, Key, Positions};
use crate::error::ApiError;
use crate::ids::TenantId;
use crate::keys::{entity_sk_prefix, parse_entity_sk, parse_shard_pk, shard_pk, PK, SK};
use crate::query::{string_attr, Item};
use crate::scoped::TenantDb;

/// What is listed: items of `kind` in the tenant's `partition` shards.
#[derive(Debug, Clone, Copy)]
pub struct ShardedList<'a> {
    /// The partition space, e.g. `PRODUCT` or `HR`.
    pub partition: &'a str,
    /// The kind in the sort key, e.g. `PRODUCT`, `EMPLOYEE`, `DEPARTMENT`.
    pub kind: &'a str,
    /// The route name the cursor is bound to.
    pub route: &'a str,
}

pub struct GatheredPage {
    pub items: Vec<Item>,
    pub next_cursor: Option<String>,
}

/// How the shards are queried: concurrently (production) or one after another (benchmark reference).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fanout {
    Parallel,
    Sequential,
}

/// What one shard answered: items in SK order after the start, and whether the shard has no more.
pub struct ShardRead {
    pub shard: u32,
    pub items: Vec<Item>,
    pub exhausted: bool,
}

/// Where shard reads come from: DynamoDB in production, memory in the pagination property test.
pub trait ShardSource {
    fn tenant(&self) -> &TenantId;
    /// Up to `want` items of `shard` after `start`, in SK order.
    fn read(
        &self,
        shard: u32,
        want: u32,
        start: Option<Key>,
    ) -> impl std::future::Future<Output = Result<ShardRead, ApiError>>;
}

/// A tenant's shards in DynamoDB, read through its scoped client.
pub struct DynamoShards<'a> {
    pub db: &'a TenantDb,
    pub list: ShardedList<'a>,
}

impl ShardSource for DynamoShards<'_> {
    fn tenant(&self) -> &TenantId {
        &self.db.tenant
    }

    fn read(
        &self,
        shard: u32,
        want: u32,
        start: Option<Key>,
    ) -> impl std::future::Future<Output = Result<ShardRead, ApiError>> {
        read_shard(self.db, self.list, shard, want, start)
    }
}

/// One page of the listing, starting at `cursor`.
pub async fn gather(
    db: &TenantDb,
    list: ShardedList<'_>,
    shard_count: u32,
    limit: u32,
    cursor: Option<&str>,
    fanout: Fanout,
) -> Result<GatheredPage, ApiError> {
    gather_from(
        &DynamoShards { db, list },
        list,
        shard_count,
        limit,
        cursor,
        fanout,
    )
    .await
}

/// [`gather`] over any [`ShardSource`].
pub async fn gather_from<S: ShardSource>(
    source: &S,
    list: ShardedList<'_>,
    shard_count: u32,
    limit: u32,
    cursor: Option<&str>,
    fanout: Fanout,
) -> Result<GatheredPage, ApiError> {
    let t = source.tenant();
    let positions = match cursor {
        None => Positions::default(),
        Some(raw) => cursor::decode(t, list.route, raw, |name, pk, sk| {
            let Ok(shard) = name.parse::<u32>() else {
                return false;
            };
            shard < shard_count
                && parse_shard_pk(t, list.partition, pk) == Ok(shard)
                && parse_entity_sk(t, list.kind, sk).is_ok()
        })?,
    };
    if positions
        .done
        .iter()
        .any(|d| d.parse::<u32>().map_or(true, |s| s >= shard_count))
    {
        return Err(ApiError::bad_request(
            "cursor",
            "cursor is invalid, expired or was made for another request",
        ));
    }

    let open: Vec<u32> = (0..shard_count)
        .filter(|s| !positions.done.contains(&s.to_string()))
        .collect();
    let read = |shard: u32| {
        let start = positions.keys.get(&shard.to_string()).cloned();
        source.read(shard, limit, start)
    };
    let reads: Vec<ShardRead> = match fanout {
        Fanout::Parallel => try_join_all(open.iter().map(|s| read(*s))).await?,
        Fanout::Sequential => {
            let mut out = Vec::with_capacity(open.len());
            for s in &open {
                out.push(read(*s).await?);
            }
            out
        }
    };

    // Merge: every shard's items are already in SK order; take the `limit` smallest overall.
    let mut merged: Vec<(String, u32, Item)> = reads
        .iter()
        .flat_map(|r| {
            r.items
                .iter()
                .map(move |i| (string_attr(i, SK).unwrap_or_default(), r.shard, i.clone()))
        })
        .collect();
    merged.sort_by(|a, b| a.0.cmp(&b.0));
    merged.truncate(limit as usize);

    let mut next = Positions {
        keys: BTreeMap::new(),
        done: positions.done.clone(),
    };
    for r in &reads {
        let taken: Vec<&(String, u32, Item)> = merged.iter().filter(|m| m.1 == r.shard).collect();
        let name = r.shard.to_string();
        if r.exhausted && taken.len() == r.items.len() {
            next.done.insert(name);
        } else if let Some(last) = taken.last() {
            next.keys.insert(name, position_after(&last.2));
        } else if let Some(previous) = positions.keys.get(&name) {
            next.keys.insert(name, previous.clone());
        }
    }
    let all_done = next.done.len() as u32 == shard_count;
    Ok(GatheredPage {
        items: merged.into_iter().map(|(_, _, item)| item).collect(),
        next_cursor: (!all_done).then(|| cursor::encode(t, list.route, &next)),
    })
}

fn position_after(item: &Item) -> Key {
    [PK, SK]
        .into_iter()
        .filter_map(|k| item.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect()
}

/// Up to `want` items of one shard after `start`, following `LastEvaluatedKey`.
async fn read_shard(
    db: &TenantDb,
    list: ShardedList<'_>,
    shard: u32,
    want: u32,
    start: Option<Key>,
) -> Result<ShardRead, ApiError> {
    let t = &db.tenant;
    let mut items = Vec::new();
    let mut start = start;
    loop {
        let out = db
            .client
            .query()
            .table_name(&*db.table)
            .key_condition_expression("PK = :pk AND begins_with(SK, :kind)")
            .expression_attribute_values(
                ":pk",
                AttributeValue::S(shard_pk(t, list.partition, shard)),
            )
            .expression_attribute_values(":kind", AttributeValue::S(entity_sk_prefix(t, list.kind)))
            .limit((want - items.len() as u32) as i32)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(ApiError::from_dynamodb)?;
        items.extend(out.items.unwrap_or_default());
        let lek = out.last_evaluated_key.filter(|k| !k.is_empty());
        match lek {
            None => {
                return Ok(ShardRead {
                    shard,
                    items,
                    exhausted: true,
                })
            }
            Some(_) if items.len() as u32 >= want => {
                return Ok(ShardRead {
                    shard,
                    items,
                    exhausted: false,
                })
            }
            Some(k) => start = Some(k),
        }
    }
}
