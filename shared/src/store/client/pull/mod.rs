//! Pulling a moving tenant's items: while a move between placements runs and writes have moved
//! (`store::lifecycle::moving`), every request that touches the target table first moves what it
//! touches out of the source table, so it finds every item where it now is, and its conditions hold
//! as they would on one table.
//!
//! It sits under every route, not in them: the tenant's client carries an interceptor
//! ([`Touches`]) that reads, from the typed request, what it touches in the target, and an HTTP layer
//! ([`PullingHttpClient`]) that, before the request goes out, pulls it ([`Puller`]):
//! - an item named by its key (a read, a write, a delete, each item of a transaction or a batch):
//!   that item;
//! - a Query of the table: its whole partition;
//! - a Query of an index: the source's items in the same window of the same index (the same key
//!   condition, start and limit, no filter), so no item the target's page should hold is left behind.
//!
//! A pull is the relocation of `store::client::relocate`: a newer item in the target is never
//! overwritten, a deleted one never comes back. Once no request can still be writing the source
//! (`movesStartAt`), what a container found gone from the source stays gone, and it asks no more.
//! What the backfill has walked past (the record's checkpoint, as the container last read it) is
//! not asked for either. Clients of tenants with no move have neither layer: a pull costs nothing
//! outside a move.

mod connector;
mod puller;
mod touches;

pub use connector::PullingHttpClient;
pub use puller::{Passed, Puller};
pub use touches::{MoveSight, Touch, Touches};
