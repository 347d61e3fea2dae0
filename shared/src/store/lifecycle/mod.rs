//! What walks or changes a whole tenant: the tenant walk (`tenant_items`), re-sharding, moves between
//! placements, offboarding,
//! the lifecycle driver's queue (`driving`), write pacing, and the lifecycle events outbox.

pub mod driving;
pub mod events;
pub mod keying;
pub mod lanes;
pub mod moving;
pub mod offboarding;
pub mod pacing;
pub mod relocating;
pub mod requests;
pub mod resharding;
pub mod restoring;
pub mod tenant_items;
