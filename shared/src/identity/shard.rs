//! Write sharding: `shard = fnv1a64(entityId) mod shardCount`.
//!
//! FNV-1a (64-bit, offset basis 0xcbf29ce484222325, prime 0x100000001b3) over the id's UTF-8 bytes is
//! fixed by specification, so the suffix is the same in every process, version and CPU architecture.
//! `std`'s `DefaultHasher` is randomly seeded per process and must never be used for this.

pub const MIN_SHARDS: u32 = 1;
/// The most shards a tenant in the pool has: a list page queries every shard, and the pool's
/// tenants share its partitions.
pub const MAX_SHARDS: u32 = 100;
/// The most shards a tenant in its own table has: the largest tenants, whose load no 100 shards
/// carry (`pooltable plan` places them there), alone on their table's partitions.
pub const MAX_OWN_TABLE_SHARDS: u32 = 256;

/// The most shards a tenant may have where it is: in its own table, or in the pool.
pub const fn max_shards(own_table: bool) -> u32 {
    if own_table {
        MAX_OWN_TABLE_SHARDS
    } else {
        MAX_SHARDS
    }
}
pub const DEFAULT_SHARDS: u32 = 4;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET_BASIS, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(FNV_PRIME)
    })
}

/// The shard (0-based) of `entity_id` among `shard_count` shards.
pub fn shard_for(entity_id: &str, shard_count: u32) -> u32 {
    (fnv1a64(entity_id.as_bytes()) % u64::from(shard_count.max(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    /// Values computed by an independent implementation (Python), not by this code.
    fn golden_shard_suffixes() {
        let golden = [
            ("sku-1", 4, 0),
            ("sku-2", 4, 1),
            ("product-000042", 16, 5),
            ("emp-7", 16, 13),
            ("a", 100, 96),
            ("anything", 1, 0),
        ];
        for (id, count, shard) in golden {
            assert_eq!(shard_for(id, count), shard, "{id} over {count}");
        }
    }
}
