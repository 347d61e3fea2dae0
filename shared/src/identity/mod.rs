//! Layer 1, identity and keys: validated ids, the key scheme and its parsers, shard assignment,
//! cursors and the clock. Depends on nothing else in this crate.

pub mod clock;
pub mod cursor;
pub mod entities;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod ids;
pub mod keys;
pub mod sealing;
pub mod shard;
