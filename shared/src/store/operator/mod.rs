//! Table-wide tools of the operator, on the operator's own credentials (never a tenant's, never a
//! function's): the catalog backfill and loading an export. `pooltable` calls them.

mod catalog;
mod load;

pub use catalog::{backfill_catalog, Backfilled};
pub use load::put_all;
