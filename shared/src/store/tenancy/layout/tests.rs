use super::*;
use crate::identity::entities::PRODUCTS;
use crate::identity::fixtures::{acme, id};
use crate::identity::keys::{kind, sharded_entity_key, KeySpace};

/// The product partition of shard `n`.
fn shard(n: u32) -> String {
    PRODUCTS.key(&acme(), n)
}

fn keys(layout: Layout) -> Keys {
    let t = acme();
    let id = id("product-000042");
    Keys::of(layout, |n| {
        sharded_entity_key(&t, kind::PRODUCT, kind::PRODUCT, &id, n)
    })
}

fn pk(key: &Key) -> &str {
    key["PK"].as_s().unwrap()
}

#[test]
fn a_stable_layout_has_one_key_and_a_migration_two_until_they_coincide() {
    // product-000042 is on shard 5 of 16 (golden), 42's hash mod 4 is 1, mod 8 is 5.
    let migrating = |from, to, writes_moved| Layout::Migrating {
        from,
        to,
        writes_moved,
    };
    // (layout, the write key's shard, the other key's shard)
    let cases = [
        (Layout::Stable(16), 5, None),
        (migrating(4, 16, false), 1, Some(5)),
        (migrating(4, 16, true), 5, Some(1)),
        // both layouts put it on shard 5
        (migrating(16, 8, true), 5, None),
    ];
    for (layout, write, other) in cases {
        let k = keys(layout);
        assert_eq!(pk(&k.write), shard(write), "{layout:?}");
        assert_eq!(
            k.other.as_ref().map(pk),
            other.map(shard).as_deref(),
            "{layout:?}"
        );
    }
}

#[test]
fn reads_prefer_the_new_layout_in_both_phases() {
    for writes_moved in [false, true] {
        let layout = Layout::Migrating {
            from: 4,
            to: 16,
            writes_moved,
        };
        let k = keys(layout);
        let (new, old) = k.new_and_old(layout);
        assert_eq!(pk(new), shard(5));
        assert_eq!(pk(old.unwrap()), shard(1));
    }
}
