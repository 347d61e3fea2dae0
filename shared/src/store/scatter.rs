//! Scatter-gather over a tenant's write shards.
//!
//! A list queries every shard concurrently (tokio futures on the same task, not threads), follows each
//! shard's `LastEvaluatedKey`, merges in sort-key (= id) order and returns one page behind one cursor.
//! Because the merge emits items in one global id order, one key says where every shard stands: the
//! last item returned. The next page starts every shard just after that sort key (as its
//! `ExclusiveStartKey`, with the shard's own `PK`), so across pages every item appears exactly once
//! and the cursor stays the same small size at 1 shard or 100. (A cursor holding one position per
//! shard grew with the shard count: with 36-character ids it passed the 8 KB cursor limit, and API
//! Gateway's 10 KB request line, at about 45 shards.)
//!
//! Items are spread over shards by a hash of their id, so a page of `limit` items holds about
//! `limit / shards` from each. The first round asks every open shard for about twice its fair share
//! ([`first_round_want`]) instead of a whole page each, so a 16-shard page of 100 reads about 256
//! items, not 1,600 (Query cost is per item read). The merge only emits an item once every shard that
//! still has items has shown one at or after it; a shard whose buffer runs dry first is read again,
//! for the rest of the page, so the result is exact whatever the distribution, and a skewed page
//! costs one more round trip, never a wrong or short page.
//!
//! The reference implementation this replaces read only each shard's first page, skipped the last
//! suffix (`range(1, N)`), and ran with unscoped credentials; here every shard `0..N` is read to the
//! end through the tenant's scoped client.

use std::collections::VecDeque;

use aws_sdk_dynamodb::types::AttributeValue;
use futures::future::try_join_all;

use crate::identity::cursor::{self, Key};
use crate::identity::ids::TenantId;
use crate::identity::keys::{entity_sk_prefix, parse_entity_sk, parse_shard_pk, shard_pk, PK, SK};
use crate::store::error::StoreError;
use crate::store::query::{string_attr, Item};
use crate::store::scoped::TenantDb;

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
    ) -> impl std::future::Future<Output = Result<ShardRead, StoreError>>;
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
    ) -> impl std::future::Future<Output = Result<ShardRead, StoreError>> {
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
) -> Result<GatheredPage, StoreError> {
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
) -> Result<GatheredPage, StoreError> {
    let t = source.tenant();
    // The last sort key returned, from the shard that returned it (so the key has a valid shape).
    let after: Option<String> = match cursor {
        None => None,
        Some(raw) => {
            let key = cursor::decode_single(t, list.route, raw, |pk, sk| {
                parse_shard_pk(t, list.partition, pk).is_ok_and(|s| s < shard_count)
                    && parse_entity_sk(t, list.kind, sk).is_ok()
            })?;
            key.get(SK).and_then(|v| v.as_s().ok()).cloned()
        }
    };
    let mut lanes: Vec<Lane> = (0..shard_count)
        .map(|shard| Lane {
            shard,
            buffer: VecDeque::new(),
            resume: after.as_ref().map(|sk| {
                Key::from([
                    (
                        PK.to_owned(),
                        AttributeValue::S(shard_pk(t, list.partition, shard)),
                    ),
                    (SK.to_owned(), AttributeValue::S(sk.clone())),
                ])
            }),
            exhausted: false,
        })
        .collect();

    let all: Vec<usize> = (0..lanes.len()).collect();
    let first = first_round_want(limit, lanes.len());
    refill(source, &mut lanes, &all, first, fanout).await?;

    let mut items: Vec<Item> = Vec::with_capacity(limit as usize);
    let mut last_emitted: Option<Key> = None;
    while (items.len() as u32) < limit {
        // A shard with more items but none buffered could hold the next smallest: read it first.
        let dry: Vec<usize> = lanes
            .iter()
            .enumerate()
            .filter(|(_, l)| l.buffer.is_empty() && !l.exhausted)
            .map(|(i, _)| i)
            .collect();
        if !dry.is_empty() {
            refill(source, &mut lanes, &dry, limit - items.len() as u32, fanout).await?;
            continue;
        }
        let Some(lane) = lanes
            .iter_mut()
            .filter(|l| !l.buffer.is_empty())
            .min_by(|a, b| a.buffer[0].0.cmp(&b.buffer[0].0))
        else {
            break; // every shard is exhausted and emptied
        };
        if let Some((_, item)) = lane.buffer.pop_front() {
            last_emitted = Some(position_after(&item));
            items.push(item);
        }
    }

    let all_done = lanes.iter().all(|l| l.exhausted && l.buffer.is_empty());
    Ok(GatheredPage {
        items,
        next_cursor: match (all_done, last_emitted) {
            (false, Some(last)) => Some(cursor::encode_single(t, list.route, &last)),
            _ => None,
        },
    })
}

/// How many items the first round asks each of `open` shards for: twice the fair share plus two,
/// never more than the page. With ids hashed over shards the share is binomial, so this covers
/// all but a small fraction of pages in one round (16 shards, page 100: 16 each).
pub fn first_round_want(limit: u32, open: usize) -> u32 {
    let open = (open as u32).max(1);
    (2 * limit.div_ceil(open) + 2).min(limit)
}

/// One open shard during a page: what was read and not yet emitted, and where to read on from.
struct Lane {
    shard: u32,
    buffer: VecDeque<(String, Item)>,
    /// The key after which the next read starts: the last item read, or the cursor's position.
    resume: Option<Key>,
    exhausted: bool,
}

/// Reads up to `want` more items into each lane in `which`, all at once or one after another.
async fn refill<S: ShardSource>(
    source: &S,
    lanes: &mut [Lane],
    which: &[usize],
    want: u32,
    fanout: Fanout,
) -> Result<(), StoreError> {
    let read = |i: usize| source.read(lanes[i].shard, want, lanes[i].resume.clone());
    let reads: Vec<ShardRead> = match fanout {
        Fanout::Parallel => try_join_all(which.iter().map(|i| read(*i))).await?,
        Fanout::Sequential => {
            let mut out = Vec::with_capacity(which.len());
            for i in which {
                out.push(read(*i).await?);
            }
            out
        }
    };
    for (i, r) in which.iter().zip(reads) {
        let lane = &mut lanes[*i];
        if r.items.is_empty() && !r.exhausted {
            // A read that neither returns items nor ends the shard would loop forever.
            return Err(StoreError::Internal(format!(
                "shard {} returned no items and no end",
                lane.shard
            )));
        }
        lane.exhausted = r.exhausted;
        if let Some(last) = r.items.last() {
            lane.resume = Some(position_after(last));
        }
        lane.buffer.extend(
            r.items
                .into_iter()
                .map(|item| (string_attr(&item, SK).unwrap_or_default(), item)),
        );
    }
    Ok(())
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
) -> Result<ShardRead, StoreError> {
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
            .map_err(StoreError::from_sdk)?;
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
