//! The keys of metering and replay: usage counters, quota windows and idempotency records. Their
//! partitions are fixed spaces (`USAGE`, `RATE`) or named by the record (`IDEMPOTENCY`).

use super::*;
use crate::identity::entities::{spaces, RATE, USAGE};

/// `TENANT#t#USAGE#<shard>`: one of the tenant's usage counter partitions.
pub fn usage_counter_pk(tenant: &TenantId, shard: u32) -> String {
    USAGE.key(tenant, shard)
}

/// `TENANT#t#USAGE#`: what every partition of `tenant`'s usage counters starts with (the keys
/// every function may write in the platform's partition: the platform's account of pulls).
pub fn usage_counter_pk_prefix(tenant: &TenantId) -> String {
    USAGE.prefix(tenant)
}

/// `TENANT#t#USAGE#<YYYY-MM-DD>#<route>#<shard>`: a route's counter of one day, on one shard.
pub fn usage_counter_sk(tenant: &TenantId, date: &str, route: &str, shard: u32) -> String {
    USAGE.key(tenant, format_args!("{date}#{route}#{shard}"))
}

/// The lowest and highest counter sort key of days `from` to `to` (inclusive). `~` sorts after
/// every character a route name or shard can hold.
pub fn usage_counter_sk_bounds(tenant: &TenantId, from: &str, to: &str) -> (String, String) {
    (
        USAGE.key(tenant, format_args!("{from}#")),
        USAGE.key(tenant, format_args!("{to}#~")),
    )
}

/// `TENANT#t#RATE#<shard>`: one of the tenant's quota window partitions.
pub fn quota_window_pk(tenant: &TenantId, shard: u32) -> String {
    RATE.key(tenant, shard)
}

/// `TENANT#t#RATE#`: what every partition of `tenant`'s quota windows starts with.
pub fn quota_window_pk_prefix(tenant: &TenantId) -> String {
    RATE.prefix(tenant)
}

/// `TENANT#t#RATE#<epoch second>#<shard>`: the window of one second, on one shard.
pub fn quota_window_sk(tenant: &TenantId, second: u64, shard: u32) -> String {
    RATE.key(tenant, format_args!("{second}#{shard}"))
}

/// Whether `pk` is one of `tenant`'s usage counter or quota window partitions.
pub fn is_metering_pk(tenant: &TenantId, pk: &str) -> bool {
    [&USAGE, &RATE]
        .into_iter()
        .any(|space| space.strip(tenant, pk).is_ok())
}

/// The second a quota window's sort key names.
pub fn parse_quota_window_second(sk: &str) -> Option<u64> {
    sk.rsplit('#').nth(1)?.parse().ok()
}

/// `TENANT#t#IDEMPOTENCY#<route>#<key>` (`PK` = `SK`): the stored answer of one idempotency key.
/// `key` is a validated `Idempotency-Key` (no `#`).
pub fn idempotency_record_key(
    tenant: &TenantId,
    route: &str,
    key: impl std::fmt::Display,
) -> String {
    spaces::IDEMPOTENCY.key(tenant, format_args!("{route}#{key}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::fixtures::acme;

    #[test]
    fn golden_metering_keys() {
        let t = acme();
        assert_eq!(usage_counter_pk(&t, 3), "TENANT#acme#USAGE#3");
        assert_eq!(
            usage_counter_sk(&t, "2026-11-21", "get-product", 3),
            "TENANT#acme#USAGE#2026-11-21#get-product#3"
        );
        assert_eq!(quota_window_pk(&t, 2), "TENANT#acme#RATE#2");
        let window = quota_window_sk(&t, 1_795_240_800, 2);
        assert_eq!(window, "TENANT#acme#RATE#1795240800#2");
        assert_eq!(parse_quota_window_second(&window), Some(1_795_240_800));
        assert_eq!(
            idempotency_record_key(&t, "create-order", "order-2026-11-22_a"),
            "TENANT#acme#IDEMPOTENCY#create-order#order-2026-11-22_a"
        );
    }
}
