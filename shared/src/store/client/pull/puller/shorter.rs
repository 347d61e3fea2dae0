//! The shorter ways of a moving tenant's single-item read and replacing put, once nothing writes
//! the source (`movesStartAt`): answered from where the item is, without a pull first.

use super::{item_name, ItemLock, Puller, RELOCATION_ATTEMPTS};
use crate::identity::keys::ItemKey;
use crate::store::client::error::StoreError;
use crate::store::client::items::put_returning_old;
use crate::store::client::meter::{charge_own, metered_apart, put_units};
use crate::store::client::query::Item;
use crate::store::client::relocate::{replace_moving, Relocated};

/// The longest a read or a put on the shorter ways ([`Puller::read_either`],
/// [`Puller::put_either`]) may take: the same as the moving client's operation timeout, which
/// bounds a pull on the usual way.
const SHORTER_WAY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(8);

impl Puller {
    /// A single item's read, answered without moving it: once nothing writes the source
    /// (`movesStartAt`), the item is the target's copy if there is one, else the source's, so both
    /// are read at once and nothing is relocated on the read's path (the backfill moves it later).
    /// Neither found: an item moved between the two reads is in the target, which is read again.
    /// `None` when the read is the client's own (before `movesStartAt`, the tenant's record, or an
    /// item known to be out of the source): send it as usual.
    ///
    /// One order is not linearizable, and only where a request in flight when writes moved wrote the
    /// source after its item was pulled (a stale copy beside the target's, which the next pull or
    /// the backfill drops): the source read returns that copy, a delete then removes both, and the
    /// target read finds nothing, so the read answers the stale copy.
    pub async fn read_either(&self, key: &ItemKey) -> Option<Result<Option<Item>, StoreError>> {
        let name = item_name(key);
        let checked_at = self.clock.now_seconds();
        if self.sent_as_usual(key, &name, checked_at) {
            return None;
        }
        let both = async {
            // The source's read is the move's (the platform's), as a pull is: the tenant pays the
            // one read it would make were it not moving.
            let (in_target, in_source) = tokio::join!(
                self.read(&self.to, key),
                Box::pin(metered_apart(self.read_source(key)))
            );
            if let Ok(None) = in_source {
                self.found_gone(name, checked_at);
            }
            match (in_target?, in_source) {
                (Some(item), _) => Ok(Some(item)),
                (None, Ok(None)) => self.read(&self.to, key).await,
                (None, found) => found,
            }
        };
        Some(within_time(both).await)
    }

    /// A put that replaces the item at its key, once nothing writes the source: `Some(old)` is the
    /// item it replaced, wherever that was. An item still in the source is replaced there and
    /// moved in one transaction ([`replace_moving`]), not pulled and then written (three round
    /// trips become two); an item out of it is put in the target. `None` as for
    /// [`Self::read_either`].
    pub async fn put_either(&self, new: &Item) -> Option<Result<Option<Item>, StoreError>> {
        let key = ItemKey::from_key(new)?;
        let name = item_name(&key);
        let checked_at = self.clock.now_seconds();
        if self.sent_as_usual(&key, &name, checked_at) {
            return None;
        }
        Some(within_time(self.put_settled(key, name, checked_at, new)).await)
    }

    async fn put_settled(
        &self,
        key: ItemKey,
        name: String,
        checked_at: u64,
        new: &Item,
    ) -> Result<Option<Item>, StoreError> {
        let (lock, _entry) = ItemLock::take(self, name.clone());
        let _held = lock.lock().await;
        // The reads of the source and the relocating transactions are the move's (the platform's,
        // as a pull is), also when one loses to the backfill; the tenant pays its put alone.
        for attempt in 0..RELOCATION_ATTEMPTS {
            let Some(old) = Box::pin(metered_apart(self.read_source(&key))).await? else {
                // Out of the source for good: the target's answer is the whole truth.
                self.found_gone(name, checked_at);
                return self.put_target(new).await;
            };
            // (Boxed, as the reads: metering apart nests the work in a scope of its own, and every
            // put's future holds this one, moving or not.)
            let replaced = Box::pin(metered_apart(replace_moving(
                &self.client,
                &self.from,
                &old,
                new,
                &self.to,
            )))
            .await;
            match replaced {
                Ok(Relocated::Moved) => {
                    charge_own(put_units(new));
                    self.found_gone(name, checked_at);
                    return Ok(Some(old));
                }
                // A newer item in the target (the source's copy was dropped), or moved or deleted
                // since it was read: the target holds the truth now. When it holds exactly `new`,
                // this call's own transaction committed and its answer was lost (resent after
                // `TransactionInProgressException`): it replaced `old`.
                Ok(Relocated::NotMoved) => {
                    self.found_gone(name, checked_at);
                    let replaced = self.put_target(new).await?;
                    return Ok(match replaced.as_ref() == Some(new) {
                        true => Some(old),
                        false => replaced,
                    });
                }
                Ok(Relocated::Changed) | Err(StoreError::Contended(_)) => {}
                Err(e) => return Err(e),
            }
            if attempt + 1 < RELOCATION_ATTEMPTS {
                let backoff = (10u64 << attempt).min(200);
                tokio::time::sleep(std::time::Duration::from_millis(backoff)).await;
            }
        }
        Err(StoreError::Contended(
            "an item kept changing in the source while it was written".into(),
        ))
    }

    /// Puts `new` in the target: the item it replaced there.
    async fn put_target(&self, new: &Item) -> Result<Option<Item>, StoreError> {
        put_returning_old(&self.client, &self.to, new).await
    }

    /// Whether `key`'s requests go as the client sends them, with no read of both tables: before
    /// `movesStartAt` (a request admitted earlier may still write the source), or once the item is
    /// known to be out of the source.
    fn sent_as_usual(&self, key: &ItemKey, name: &str, checked_at: u64) -> bool {
        checked_at < self.settled_at
            || key.pk == self.record_key
            || self.is_gone(&[&key.pk, name])
            || self.is_passed(key)
    }
}

/// `work`, failed as unavailable (503, retried by the client) when it outlasts
/// [`SHORTER_WAY_TIMEOUT`].
async fn within_time<T>(
    work: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(SHORTER_WAY_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::Unavailable(
                "a moving tenant's item could not be reached in time".into(),
            ))
        })
}
