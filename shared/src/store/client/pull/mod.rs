//! Pulling a moving tenant's items: while a move between placements runs
//! (`store::lifecycle::moving`), every attempt sent from `writesMoveAt` on goes to the target table
//! and first moves what it touches out of the source, so it finds every item where it now is, and
//! its conditions hold as they would on one table.
//!
//! It sits under every route, not in them: the tenant's client carries an interceptor
//! ([`Touches`]) that reads, from the typed request, what it touches, sends each attempt made from
//! `writesMoveAt` on to the target (renaming the source in the body of a request admitted before),
//! and makes reads of the table consistent; and an HTTP layer ([`PullingHttpClient`]) that, before
//! the attempt goes out, pulls what it touches ([`Puller`]):
//! - an item named by its key (a read, a write, a delete, each item of a transaction): that item;
//! - a Query, of the table or of an index: the source's items in the same window (the same key
//!   condition, start, order and limit, no filter), so no item the target's page should hold is
//!   left behind.
//!
//! A pull is the relocation of `store::client::relocate`: a newer item in the target is never
//! overwritten, a deleted one never comes back, and the source's copy is deleted only if no write
//! reached it since it was read. Once no request can still be writing the source (`movesStartAt`),
//! what a container found gone from the source stays gone, and it asks no more; nor for what the
//! backfill has walked past (the record's checkpoint, as the container last read it). Windows of an
//! index are asked for every time. Clients of tenants with no move have neither layer: a pull
//! costs nothing outside a move.

mod conflicts;
mod connector;
mod puller;
mod touches;

pub use conflicts::RetryConflicts;
pub use connector::PullingHttpClient;
pub use puller::{Passed, Puller};
pub use touches::{MoveSight, Touch, Touches};
