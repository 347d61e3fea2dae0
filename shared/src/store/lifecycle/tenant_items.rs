//! Every item of one tenant, in pages, without a Scan: what export and offboarding read.
//!
//! A tenant's items live in two kinds of partitions:
//! - **fixed** ones, known from the tenant record and constants: the product and HR write shards
//!   (`shard_count` of each), the usage counter shards, the quota window shards, and the record;
//! - **id-named** ones (a session, a user, an order, an email, a code, a token, an idempotency key,
//!   a department's members), each item of which carries its catalog entry
//!   ([`crate::identity::keys::catalog_key`]): one of [`CATALOG_SHARDS`] partitions of the catalog
//!   index (`GSI2`, keys only), sorted by `PK`.
//!
//! The walk visits the fixed partitions, then the catalog partitions (each id-named partition it
//! names, once, read whole from the table with consistent reads), then the record last, so that an
//! offboarding that deletes as it walks keeps its checkpoint in the record until the end. A position
//! is the last item returned (`PK`, `SK`): the source it belongs to follows from its `PK`, so a
//! position needs nothing else, and a walk resumed from it neither skips nor repeats an item.
//!
//! The catalog index is eventually consistent: an item written a moment before a walk may be missed
//! by it. Offboarding therefore starts deleting only once no request of the tenant can still be
//! writing ([`crate::store::lifecycle::offboarding::DELETION_DELAY_SECONDS`]), and export documents it.

use aws_sdk_dynamodb::types::AttributeValue;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde_json::{Map, Value};

use crate::identity::ids::TenantId;
use crate::identity::keys::{
    catalog_key, catalog_shard_key, shard_pk, tenant_prefix, tenant_record_key, ItemKey, CATALOG,
    CATALOG_INDEX, CATALOG_SHARDS, PK, SK,
};
use crate::store::client::error::StoreError;
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
use crate::store::client::size::approximate_bytes;

/// Distinct partitions one catalog Query asks for (keys only: about 100 bytes each).
const CATALOG_PAGE: i32 = 100;

/// Where a walk reads next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// One partition, read whole.
    Partition(String),
    /// One catalog partition: every id-named partition it lists, read whole, in `PK` order.
    Catalog(String),
    /// The tenant record: one item, in the record's table (the pool, whatever the placement).
    Record(String),
}

/// Whether the walk ends with the tenant record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordInWalk {
    Included,
    /// Offboarding deletes the record last, by itself: it holds the checkpoint.
    Excluded,
}

/// The sources of `tenant`'s items, in walk order.
pub fn sources(
    tenant: &TenantId,
    shard_count: u32,
    window_shards: u32,
    record: RecordInWalk,
) -> Vec<Source> {
    use crate::identity::entities::{Partitions, FIXED_SPACES};
    // The fixed spaces in their declared order (products, HR, usage counters, quota windows), then
    // the catalog, then the record.
    let fixed = FIXED_SPACES
        .into_iter()
        .flat_map(|space| {
            let count = match space.partitions {
                Partitions::TenantShards => shard_count,
                Partitions::Constant(n) => n,
                Partitions::QuotaWindows => window_shards,
                Partitions::Record => 0,
            };
            (0..count).map(move |s| shard_pk(tenant, space.kind, s))
        })
        .map(Source::Partition);
    let catalog = (0..CATALOG_SHARDS).map(|s| Source::Catalog(catalog_shard_key(tenant, s)));
    let record =
        (record == RecordInWalk::Included).then(|| Source::Record(tenant_record_key(tenant)));
    fixed.chain(catalog).chain(record).collect()
}

/// The last item a page returned: where the next page starts, just after it.
pub type Position = ItemKey;

/// The position of `item`: its keys.
pub fn position_of(item: &Item) -> Option<Position> {
    match (item.get(PK), item.get(SK)) {
        (Some(AttributeValue::S(pk)), Some(AttributeValue::S(sk))) => Some(Position {
            pk: pk.clone(),
            sk: sk.clone(),
        }),
        _ => None,
    }
}

/// How much one page may hold, and for how long it may read. A page holds at least one item.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub items: usize,
    /// About the bytes of the items as JSON ([`approximate_bytes`]).
    pub bytes: usize,
    /// Once past, the page ends after the partition being read (a tenant of many small partitions
    /// costs a Query each; a page must end well within the function's timeout).
    pub until: Option<std::time::Instant>,
}

#[derive(Debug, Default)]
pub struct Page {
    pub items: Vec<Item>,
    /// Where the next page starts; `None` when the walk is complete.
    pub next: Option<Position>,
}

/// A position that belongs to none of the sources (a forged or stale checkpoint).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the position is not one of this tenant's partitions")]
pub struct UnknownPosition;

/// The index of the source `position` was read from. A fixed partition's key never has a catalog
/// entry and a catalog entry never names a fixed partition ([`catalog_key`]), so at most one source
/// matches.
pub fn source_of(
    tenant: &TenantId,
    sources: &[Source],
    position: &Position,
) -> Result<usize, UnknownPosition> {
    let catalog = catalog_key(tenant, &position.pk);
    sources
        .iter()
        .position(|s| match s {
            Source::Partition(pk) | Source::Record(pk) => *pk == position.pk,
            Source::Catalog(c) => Some(c) == catalog.as_ref(),
        })
        .ok_or(UnknownPosition)
}

/// The page of the walk over `sources` that starts just after `after` (at the start when `None`).
/// `after` must come from this walk ([`source_of`]): check a position from outside first.
pub async fn page(
    db: &TenantDb,
    sources: &[Source],
    after: Option<&Position>,
    budget: Budget,
) -> Result<Page, StoreError> {
    let mut fill = Fill {
        items: Vec::new(),
        bytes: 0,
        budget,
    };
    let (first, mut resume) = match after {
        None => (0, None),
        Some(p) => (
            source_of(&db.tenant, sources, p).map_err(|e| StoreError::Internal(e.to_string()))?,
            Some(p.clone()),
        ),
    };
    for source in &sources[first..] {
        let resume = resume.take();
        let state = match source {
            Source::Partition(pk) => fill.partition(db, pk, resume.map(|p| p.sk)).await?,
            Source::Catalog(catalog) => fill.catalog(db, catalog, resume).await?,
            Source::Record(pk) => fill.record(db, pk, resume.is_some()).await?,
        };
        if state == PageState::Full {
            let next = fill.items.last().and_then(position_of);
            return Ok(Page {
                items: fill.items,
                next,
            });
        }
    }
    Ok(Page {
        items: fill.items,
        next: None,
    })
}

/// Whether a page can take more after a source or partition was read into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PageState {
    /// It ends here; the next page starts after its last item.
    Full,
    Open,
}

struct Fill {
    items: Vec<Item>,
    bytes: usize,
    budget: Budget,
}

impl Fill {
    /// Adds `item` unless the page is full.
    fn take(&mut self, item: Item) -> PageState {
        let size = approximate_bytes(&item);
        let full = self.items.len() >= self.budget.items
            || (!self.items.is_empty() && self.bytes + size > self.budget.bytes);
        if full {
            return PageState::Full;
        }
        self.bytes += size;
        self.items.push(item);
        PageState::Open
    }

    /// Whether the page's time is up (it holds something, and its deadline has passed).
    fn out_of_time(&self) -> bool {
        !self.items.is_empty()
            && self
                .budget
                .until
                .is_some_and(|until| std::time::Instant::now() >= until)
    }

    /// Reads partition `pk` (after `after_sk`) into the page.
    /// The record (a GetItem of the record's table: a tenant in its own table may not query the
    /// pool), unless the walk is already past it.
    async fn record(
        &mut self,
        db: &TenantDb,
        pk: &str,
        past: bool,
    ) -> Result<PageState, StoreError> {
        if past {
            return Ok(PageState::Open);
        }
        if self.out_of_time() {
            return Ok(PageState::Full);
        }
        let out = db
            .client
            .get_item()
            .table_name(&*db.record_table)
            .consistent_read(true)
            .key(PK, AttributeValue::S(pk.to_owned()))
            .key(SK, AttributeValue::S(pk.to_owned()))
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        match out.item {
            Some(item) => Ok(self.take(item)),
            None => Ok(PageState::Open),
        }
    }

    async fn partition(
        &mut self,
        db: &TenantDb,
        pk: &str,
        after_sk: Option<String>,
    ) -> Result<PageState, StoreError> {
        if self.out_of_time() {
            return Ok(PageState::Full);
        }
        let mut query = db
            .client
            .query()
            .table_name(&*db.table)
            .consistent_read(true)
            .expression_attribute_values(":pk", AttributeValue::S(pk.to_owned()));
        query = match after_sk {
            Some(sk) => query
                .key_condition_expression("PK = :pk AND SK > :after")
                .expression_attribute_values(":after", AttributeValue::S(sk)),
            None => query.key_condition_expression("PK = :pk"),
        };
        let mut start = None;
        loop {
            let room = self.budget.items.saturating_sub(self.items.len()).max(1);
            let out = query
                .clone()
                .limit(room.min(1000) as i32)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(StoreError::from_sdk)?;
            for item in out.items.unwrap_or_default() {
                if self.take(item) == PageState::Full {
                    return Ok(PageState::Full);
                }
            }
            match out.last_evaluated_key.filter(|k| !k.is_empty()) {
                Some(lek) if self.items.len() < self.budget.items => start = Some(lek),
                // More items, and the page is full: the next page resumes after its last item.
                Some(_) => return Ok(PageState::Full),
                None => return Ok(PageState::Open),
            }
        }
    }

    /// Reads every partition catalog partition `catalog` lists, in `PK` order, resuming inside
    /// `resume`'s partition when given.
    async fn catalog(
        &mut self,
        db: &TenantDb,
        catalog: &str,
        resume: Option<Position>,
    ) -> Result<PageState, StoreError> {
        let mut after_pk = None;
        if let Some(p) = resume {
            if self.partition(db, &p.pk, Some(p.sk)).await? == PageState::Full {
                return Ok(PageState::Full);
            }
            after_pk = Some(p.pk);
        }
        loop {
            let listed = catalog_partitions(db, catalog, after_pk.as_deref()).await?;
            let Some(last) = listed.last_entry else {
                return Ok(PageState::Open);
            };
            for pk in listed.partitions {
                if self.partition(db, &pk, None).await? == PageState::Full {
                    return Ok(PageState::Full);
                }
            }
            after_pk = Some(last);
        }
    }
}

/// One Query's worth of a catalog partition.
struct Listed {
    /// The distinct id-named partitions it names, in order (the tenant's own only).
    partitions: Vec<String>,
    /// The `PK` of the last entry read, counted or not: where the next Query starts. `None` when
    /// the catalog partition has nothing more.
    last_entry: Option<String>,
}

/// The id-named partitions catalog partition `catalog` lists after `after_pk`: one Query of the
/// catalog index (several entries of one partition come back side by side, as the index sorts by
/// `PK`). Only the tenant's own partitions count: an entry for any other key is skipped (the guard
/// refuses writing one; this is the second line).
async fn catalog_partitions(
    db: &TenantDb,
    catalog: &str,
    after_pk: Option<&str>,
) -> Result<Listed, StoreError> {
    let mut query = db
        .client
        .query()
        .table_name(&*db.table)
        .index_name(CATALOG_INDEX)
        .expression_attribute_names("#catalog", CATALOG)
        .expression_attribute_values(":catalog", AttributeValue::S(catalog.to_owned()))
        .limit(CATALOG_PAGE);
    query = match after_pk {
        Some(pk) => query
            .key_condition_expression("#catalog = :catalog AND PK > :after")
            .expression_attribute_values(":after", AttributeValue::S(pk.to_owned())),
        None => query.key_condition_expression("#catalog = :catalog"),
    };
    let out = query.send().await.map_err(StoreError::from_sdk)?;
    let prefix = tenant_prefix(&db.tenant);
    let mut listed = Listed {
        partitions: Vec::new(),
        last_entry: None,
    };
    for entry in out.items.unwrap_or_default() {
        if let Some(AttributeValue::S(pk)) = entry.get(PK) {
            if pk.starts_with(&prefix) && listed.partitions.last() != Some(pk) {
                listed.partitions.push(pk.clone());
            }
            listed.last_entry = Some(pk.clone());
        }
    }
    Ok(listed)
}

/// An item in DynamoDB JSON (`{"PK": {"S": "…"}, "n": {"N": "1"}, …}`), the format of DynamoDB's
/// own exports: every type survives a round trip.
pub fn item_to_json(item: &Item) -> Value {
    Value::Object(
        item.iter()
            .map(|(name, value)| (name.clone(), value_to_json(value)))
            .collect(),
    )
}

fn value_to_json(value: &AttributeValue) -> Value {
    let typed = |t: &str, v: Value| Value::Object(Map::from_iter([(t.to_owned(), v)]));
    let strings = |l: &[String]| Value::Array(l.iter().cloned().map(Value::String).collect());
    match value {
        AttributeValue::S(s) => typed("S", Value::String(s.clone())),
        AttributeValue::N(n) => typed("N", Value::String(n.clone())),
        AttributeValue::B(b) => typed("B", Value::String(BASE64.encode(b.as_ref()))),
        AttributeValue::Bool(b) => typed("BOOL", Value::Bool(*b)),
        AttributeValue::Null(n) => typed("NULL", Value::Bool(*n)),
        AttributeValue::M(m) => typed(
            "M",
            Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), value_to_json(v)))
                    .collect(),
            ),
        ),
        AttributeValue::L(l) => typed("L", Value::Array(l.iter().map(value_to_json).collect())),
        AttributeValue::Ss(l) => typed("SS", strings(l)),
        AttributeValue::Ns(l) => typed("NS", strings(l)),
        AttributeValue::Bs(l) => typed(
            "BS",
            Value::Array(
                l.iter()
                    .map(|b| Value::String(BASE64.encode(b.as_ref())))
                    .collect(),
            ),
        ),
        // The SDK's catch-all for types newer than this code: kept visible, never silently lost.
        _ => typed("UNKNOWN", Value::Null),
    }
}

/// A line of DynamoDB JSON that is not an item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an item in DynamoDB JSON: {0}")]
pub struct NotAnItem(pub String);

/// The item a DynamoDB JSON object holds ([`item_to_json`]'s inverse).
pub fn item_from_json(json: &Value) -> Result<Item, NotAnItem> {
    let object = json
        .as_object()
        .ok_or_else(|| NotAnItem("an item is a JSON object".into()))?;
    object
        .iter()
        .map(|(name, value)| Ok((name.clone(), value_from_json(value)?)))
        .collect()
}

fn value_from_json(json: &Value) -> Result<AttributeValue, NotAnItem> {
    let bad = |what: &str| NotAnItem(format!("{what}: {json}"));
    let (tag, value) = json
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next())
        .ok_or_else(|| bad("a value is an object with one type tag"))?;
    let text = || {
        value
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| bad("not a string"))
    };
    let texts = || {
        value
            .as_array()
            .ok_or_else(|| bad("not a list"))?
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| bad("not a string"))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let bytes = |s: String| {
        BASE64
            .decode(s)
            .map(aws_sdk_dynamodb::primitives::Blob::new)
            .map_err(|_| bad("not base64"))
    };
    Ok(match tag.as_str() {
        "S" => AttributeValue::S(text()?),
        "N" => AttributeValue::N(text()?),
        "B" => AttributeValue::B(bytes(text()?)?),
        "BOOL" => AttributeValue::Bool(value.as_bool().ok_or_else(|| bad("not a boolean"))?),
        "NULL" => AttributeValue::Null(value.as_bool().ok_or_else(|| bad("not a boolean"))?),
        "M" => AttributeValue::M(item_from_json(value)?),
        "L" => AttributeValue::L(
            value
                .as_array()
                .ok_or_else(|| bad("not a list"))?
                .iter()
                .map(value_from_json)
                .collect::<Result<_, _>>()?,
        ),
        "SS" => AttributeValue::Ss(texts()?),
        "NS" => AttributeValue::Ns(texts()?),
        "BS" => AttributeValue::Bs(texts()?.into_iter().map(bytes).collect::<Result<_, _>>()?),
        _ => return Err(bad("unknown type tag")),
    })
}

#[cfg(test)]
mod tests;
