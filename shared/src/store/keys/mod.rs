//! A key per tenant: each tenant's 256-bit data key, wrapped by a KMS key and kept in the key table
//! (never in the pool, so no copy of the pool holds it), unwrapped once per tenant per container per
//! period ([`TenantKeys`], a bounded cache), and the sealing of an item's document attributes under
//! it ([`seal_item`], [`open_item`]). Offboarding deletes the tenant's wrapped keys ([`TenantKeys::shred`]):
//! whatever they sealed, in the live table or any copy of it, opens with no key the platform holds.

mod cache;
mod table;

pub use crate::isolation::vault::TenantKey;
pub use crate::store::client::sealed::{
    email_segment, is_sealed, open_item, seal_item, stored_form, KEY_VERSION, PLAIN, SEALED,
};
pub use cache::{
    KeySettings, KeyVersions, TenantKeys, DEFAULT_KEY_CACHE_SECONDS, REFUSAL_MEMO_MS,
    ROTATION_MARGIN_MS,
};
pub use table::{KeyRow, Shredded};
