//! Moving what a request touches out of the source table, before the request goes out.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::query::QueryInput;
use aws_sdk_dynamodb::Client;
use futures::StreamExt;

use super::{MoveSight, Touch};
use crate::identity::clock::Clock;
use crate::identity::keys::{ItemKey, PK};
use crate::store::client::error::StoreError;
use crate::store::client::query::Item;
use crate::store::client::relocate::{
    relocate_checked, relocate_together, Place, Relocated, TOGETHER,
};

mod shorter;

/// Sends of one pull's relocation while the item keeps changing in the source, or another
/// container's transaction holds it (each after a pause of 10 ms, doubling, at most 200 ms).
const RELOCATION_ATTEMPTS: u32 = 8;
/// Relocations one pull runs at once.
const IN_FLIGHT: usize = 8;
/// Entries the memory of what is gone from the source holds before it starts again (about 100
/// bytes each): a container serving a huge tenant through a long move asks again, never errs.
const MEMORY_LIMIT: usize = 100_000;

/// Whether the move's backfill has walked past an item (`store::lifecycle::moving::passed`): from
/// the record's checkpoint as this container last read it, so never ahead of the backfill.
pub type Passed = Arc<dyn Fn(&ItemKey) -> bool + Send + Sync>;

/// Pulls items from `from` into `to` for one tenant's client while its move runs.
pub struct Puller {
    /// The tenant's client (its credentials, guard and meter) on the plain HTTP client.
    client: Client,
    from: Arc<str>,
    to: Arc<str>,
    /// From then on nothing writes `from`: what is found gone stays gone.
    settled_at: u64,
    /// The tenant's record stays in the pool whatever moves: never read or written on a shorter way.
    record_key: String,
    clock: Arc<dyn Clock>,
    /// Partitions (`PK`) and items (`PK`, NUL, `SK`) found gone from `from` since `settled_at`.
    gone: Mutex<HashSet<String>>,
    /// What the backfill has walked past, as this container last read the record: gone from
    /// `from` (the backfill starts only once nothing writes there).
    passed: Mutex<Option<Passed>>,
    /// One pull of an item at a time: the items being pulled, by name.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for Puller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Puller")
            .field("from", &self.from)
            .field("to", &self.to)
            .field("settled_at", &self.settled_at)
            .finish_non_exhaustive()
    }
}

fn item_name(key: &ItemKey) -> String {
    format!("{}\u{0}{}", key.pk, key.sk)
}

impl Puller {
    /// The puller of the move `sight` sees, on `client`; nothing writes the source from `settled_at`.
    pub fn new(client: Client, sight: &MoveSight, settled_at: u64) -> Self {
        Self {
            client,
            from: sight.source.clone(),
            to: sight.target.clone(),
            settled_at,
            record_key: sight.record_key.clone(),
            clock: sight.clock.clone(),
            gone: Mutex::default(),
            passed: Mutex::default(),
            locks: Mutex::default(),
        }
    }

    /// Sets what the backfill has walked past (`None`: nothing known).
    pub fn set_passed(&self, passed: Option<Passed>) {
        *self.passed.lock().unwrap_or_else(|e| e.into_inner()) = passed;
    }

    fn is_passed(&self, key: &ItemKey) -> bool {
        let passed = self
            .passed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        passed.is_some_and(|passed| passed(key))
    }

    /// Moves what `touch` names out of the source.
    pub async fn pull(&self, touch: &Touch) -> Result<(), StoreError> {
        match touch {
            Touch::Keys(keys) => {
                let pulls = futures::stream::iter(keys.iter().cloned().map(|k| self.pull_item(k)))
                    .buffer_unordered(IN_FLIGHT)
                    .collect::<Vec<_>>()
                    .await;
                pulls.into_iter().collect()
            }
            Touch::Query(query) => self.pull_window(query).await,
        }
    }

    fn is_gone(&self, names: &[&str]) -> bool {
        let gone = self.gone.lock().unwrap_or_else(|e| e.into_inner());
        names.iter().any(|n| gone.contains(*n))
    }

    /// Remembers `name` as gone from the source, when it was found so once nothing could still
    /// write there (`checked_at`, epoch seconds, is when the read was sent).
    fn found_gone(&self, name: String, checked_at: u64) {
        if checked_at < self.settled_at {
            return;
        }
        let mut gone = self.gone.lock().unwrap_or_else(|e| e.into_inner());
        if gone.len() >= MEMORY_LIMIT {
            gone.clear();
        }
        gone.insert(name);
    }

    /// Moves `item` (as read from the source). One pull of an item at a time in this container (a
    /// second waits, then reads the source again: the first has usually moved it). While a write
    /// reaches the item in the source (a request admitted just before writes moved), or another
    /// container's pull or the backfill holds it in a transaction, it reads anew and tries again, so
    /// that write is carried, never dropped.
    async fn relocate(&self, mut item: Item) -> Result<(), StoreError> {
        let Some(key) = ItemKey::from_key(&item) else {
            return Ok(());
        };
        let name = item_name(&key);
        let lock = ItemLock::take(self, name);
        let _held = match lock.0.try_lock() {
            Ok(held) => held,
            Err(_) => {
                let held = lock.0.lock().await;
                match self.read_source(&key).await? {
                    Some(now) => item = now,
                    None => return Ok(()),
                }
                held
            }
        };
        let to = Place {
            table: &self.to,
            pk: None,
        };
        for attempt in 0..RELOCATION_ATTEMPTS {
            match relocate_checked(&self.client, &self.from, &item, to, true).await {
                Ok(Relocated::Moved | Relocated::NotMoved) => return Ok(()),
                Ok(Relocated::Changed) | Err(StoreError::Contended(_)) => {}
                Err(e) => return Err(e),
            }
            if attempt + 1 == RELOCATION_ATTEMPTS {
                break;
            }
            let backoff = (10u64 << attempt).min(200);
            tokio::time::sleep(std::time::Duration::from_millis(backoff)).await;
            match self.read_source(&key).await? {
                Some(now) => item = now,
                None => return Ok(()),
            }
        }
        Err(StoreError::Contended(
            "an item kept changing in the source while it was pulled".into(),
        ))
    }

    /// The item at `key` in the source, read consistently (none when the source is gone).
    async fn read_source(&self, key: &ItemKey) -> Result<Option<Item>, StoreError> {
        self.read(&self.from, key).await
    }

    /// The item at `key` in `table`, read consistently (none when `table` is the source and the
    /// move has deleted it).
    async fn read(&self, table: &str, key: &ItemKey) -> Result<Option<Item>, StoreError> {
        let found = self
            .client
            .get_item()
            .table_name(table)
            .set_key(Some(key.to_key()))
            .consistent_read(true)
            .send()
            .await;
        match found {
            Ok(out) => Ok(out.item),
            Err(e) if table == &*self.from && source_is_gone(&e) => Ok(None),
            Err(e) => Err(StoreError::from_sdk(e)),
        }
    }

    async fn pull_item(&self, key: ItemKey) -> Result<(), StoreError> {
        let name = item_name(&key);
        if self.is_gone(&[&key.pk, &name]) || self.is_passed(&key) {
            return Ok(());
        }
        let checked_at = self.clock.now_seconds();
        let found = self.read_source(&key).await?;
        if let Some(item) = found {
            // Relocated now, or by another pull or the backfill since it was read: gone either way.
            self.relocate(item).await?;
        }
        self.found_gone(name, checked_at);
        Ok(())
    }

    /// Moves `items` (as read from the source), [`TOGETHER`] to a transaction; a group whose
    /// transaction cannot commit as read (an item changed, moved, or held by another transaction)
    /// is moved one by one.
    async fn relocate_all(&self, items: &[Item]) -> Result<(), StoreError> {
        for group in items.chunks(TOGETHER) {
            if !relocate_together(&self.client, &self.from, &self.to, group).await? {
                let one_by_one =
                    futures::stream::iter(group.iter().cloned().map(|item| self.relocate(item)))
                        .buffer_unordered(IN_FLIGHT)
                        .collect::<Vec<_>>()
                        .await;
                one_by_one.into_iter().collect::<Result<(), _>>()?;
            }
        }
        Ok(())
    }

    /// Moves the source's items in the window `query` reads, of the table or of an index: the same
    /// key condition, start, order and limit, without its filter or projection. The target's page
    /// is drawn from the same window: once the source's first `limit` items of it are in the
    /// target, any item still in the source comes after the page's end. An index holds keys, maybe
    /// not whole items: each is pulled by its key. A whole partition of the table found empty from
    /// its start is remembered.
    async fn pull_window(&self, query: &QueryInput) -> Result<(), StoreError> {
        let whole_partition = whole_partition_of(query);
        if whole_partition.is_some_and(|pk| self.is_gone(&[pk])) {
            return Ok(());
        }
        // A partition of the table the backfill has walked whole: its last possible key is passed.
        let partition = (query.index_name().is_none())
            .then(|| partition_of(query))
            .flatten();
        let passed_whole = |pk: &str| {
            self.is_passed(&ItemKey {
                pk: pk.to_owned(),
                sk: char::MAX.to_string(),
            })
        };
        if partition.is_some_and(passed_whole) {
            return Ok(());
        }
        let condition = query.key_condition_expression().unwrap_or_default();
        let used = |placeholder: &str| mentions(condition, placeholder);
        let names = used_only(query.expression_attribute_names(), &used);
        let values = used_only(query.expression_attribute_values(), &used);
        let checked_at = self.clock.now_seconds();
        let found = self
            .client
            .query()
            .table_name(&*self.from)
            .set_index_name(query.index_name().map(str::to_owned))
            .key_condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .set_exclusive_start_key(query.exclusive_start_key().cloned())
            .set_scan_index_forward(query.scan_index_forward())
            .set_limit(query.limit())
            .set_consistent_read(query.index_name().is_none().then_some(true))
            .send()
            .await;
        let items = match found {
            Ok(out) => out.items.unwrap_or_default(),
            Err(e) if source_is_gone(&e) => return Ok(()),
            Err(e) => return Err(StoreError::from_sdk(e)),
        };
        if items.is_empty() {
            if let Some(pk) = whole_partition {
                self.found_gone(pk.to_owned(), checked_at);
            }
            return Ok(());
        }
        if query.index_name().is_none() {
            // The table's items are whole: relocated as read.
            return self.relocate_all(&items).await;
        }
        let keys: Vec<ItemKey> = items.iter().filter_map(ItemKey::from_key).collect();
        Box::pin(self.pull(&Touch::Keys(keys))).await
    }
}

/// The partition a Query of the table reads whole from its start (`PK = :name`, nothing more, no
/// start key), if it is one.
fn whole_partition_of(q: &QueryInput) -> Option<&str> {
    let condition = q.key_condition_expression()?;
    if q.exclusive_start_key().is_some() || condition.contains(" AND ") {
        return None;
    }
    partition_of(q)
}

/// The partition a Query of the table names (`PK = :name` before any `AND`).
fn partition_of(q: &QueryInput) -> Option<&str> {
    if q.index_name().is_some() {
        return None;
    }
    let condition = q.key_condition_expression()?;
    let first = condition.split(" AND ").next()?;
    let (attribute, name) = first.split_once('=')?;
    let attribute = attribute.trim();
    let attribute = match attribute.starts_with('#') {
        true => q.expression_attribute_names()?.get(attribute)?.as_str(),
        false => attribute,
    };
    if attribute != PK {
        return None;
    }
    q.expression_attribute_values()?
        .get(name.trim())?
        .as_s()
        .ok()
        .map(String::as_str)
}

/// The entries of `map` whose placeholder `used` accepts; `None` when none is (DynamoDB refuses an
/// empty map).
fn used_only<V: Clone>(
    map: Option<&HashMap<String, V>>,
    used: &impl Fn(&str) -> bool,
) -> Option<HashMap<String, V>> {
    let kept: HashMap<String, V> = map?
        .iter()
        .filter(|(k, _)| used(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// The lock of one item's pulls in a [`Puller`], dropped from its map when the last pull that holds
/// or waits for it ends (also when that pull's request is cancelled mid-way).
struct ItemLock<'a> {
    lock: Arc<tokio::sync::Mutex<()>>,
    name: String,
    puller: &'a Puller,
}

impl<'a> ItemLock<'a> {
    fn take(puller: &'a Puller, name: String) -> (Arc<tokio::sync::Mutex<()>>, Self) {
        let mut locks = puller.locks.lock().unwrap_or_else(|e| e.into_inner());
        let lock = locks.entry(name.clone()).or_default().clone();
        (lock.clone(), Self { lock, name, puller })
    }
}

impl Drop for ItemLock<'_> {
    fn drop(&mut self) {
        let mut locks = self.puller.locks.lock().unwrap_or_else(|e| e.into_inner());
        // The map's, this guard's and its caller's copy: nobody else holds or waits for it.
        if Arc::strong_count(&self.lock) <= 3 {
            locks.remove(&self.name);
        }
    }
}

/// Whether `expression` names `placeholder` (`:v` or `#n`) as a whole token.
fn mentions(expression: &str, placeholder: &str) -> bool {
    expression.match_indices(placeholder).any(|(at, _)| {
        let next = expression[at + placeholder.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The source table no longer exists: the move deleted it at its end, and holds nothing there.
fn source_is_gone<E, R>(e: &SdkError<E, R>) -> bool
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata,
{
    e.as_service_error()
        .is_some_and(|s| s.code() == Some("ResourceNotFoundException"))
}

#[cfg(test)]
mod tests {
    use super::mentions;

    #[test]
    fn a_placeholder_is_mentioned_only_as_a_whole_token() {
        assert!(mentions("#p = :pk AND begins_with(SK, :s)", ":pk"));
        assert!(mentions("#p = :pk AND begins_with(SK, :s)", ":s"));
        assert!(!mentions("#p = :pk2", ":pk"));
        assert!(!mentions("#p = :pk", ":p"));
    }
}
