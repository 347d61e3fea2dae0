use super::*;
use crate::identity::entities::PRODUCTS;
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{kind, sharded_entity_key, KeySpace};

fn acme() -> TenantId {
    TenantId::parse("acme").unwrap()
}

/// The product partition of shard `n`.
fn shard(n: u32) -> String {
    PRODUCTS.key(&acme(), n)
}

fn keys(layout: Layout) -> Keys {
    let t = acme();
    let id = EntityId::parse("product-000042").unwrap();
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
    let stable = keys(Layout::Stable(16));
    assert_eq!(pk(&stable.write), shard(5));
    assert_eq!(stable.other, None);

    let announced = keys(Layout::Migrating {
        from: 4,
        to: 16,
        writes_moved: false,
    });
    assert_eq!(pk(&announced.write), shard(1));
    assert_eq!(pk(announced.other.as_ref().unwrap()), shard(5));

    let moving = keys(Layout::Migrating {
        from: 4,
        to: 16,
        writes_moved: true,
    });
    assert_eq!(pk(&moving.write), shard(5));
    assert_eq!(pk(moving.other.as_ref().unwrap()), shard(1));

    let same_shard = keys(Layout::Migrating {
        from: 16,
        to: 8,
        writes_moved: true,
    });
    assert_eq!(pk(&same_shard.write), shard(5));
    assert_eq!(same_shard.other, None);
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
