//! Opaque pagination cursors. A cursor carries a DynamoDB `LastEvaluatedKey`, bound to the tenant and
//! the route that made it. Decoding checks both, and checks that every key value has this tenant's
//! prefix and the shape the route expects, so a cursor can only ever move within the caller's own
//! data. Anything else, including a cursor that was edited, answers 400.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use serde::{Deserialize, Serialize};

use thiserror::Error;

use crate::identity::ids::TenantId;
use crate::identity::keys::{tenant_prefix, PK, SK};

pub use crate::identity::keys::Key;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    v: u8,
    /// tenant
    t: String,
    /// route
    r: String,
    /// position: one `LastEvaluatedKey`, or several (one per shard)
    k: BTreeMap<String, BTreeMap<String, String>>,
    /// positions (shards) that are exhausted
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    d: BTreeSet<String>,
}

/// Where a multi-position listing (one position per shard) stands.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Positions {
    /// Named positions with a key to continue after.
    pub keys: BTreeMap<String, Key>,
    /// Named positions that are exhausted.
    pub done: BTreeSet<String>,
}

/// A cursor that is not one this API made for this tenant and request. The service layer answers it
/// with 400 naming the `cursor` parameter.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("cursor is invalid, expired or was made for another request")]
pub struct InvalidCursor;

fn invalid() -> InvalidCursor {
    InvalidCursor
}

/// Encodes positions (named, e.g. `"0"` for a single Query) of `route` for `tenant`.
pub fn encode(tenant: &TenantId, route: &str, positions: &Positions) -> String {
    let k = positions
        .keys
        .iter()
        .map(|(name, key)| {
            let strings = key
                .iter()
                .filter_map(|(attr, v)| v.as_s().ok().map(|s| (attr.clone(), s.clone())))
                .collect();
            (name.clone(), strings)
        })
        .collect();
    let env = Envelope {
        v: 1,
        t: tenant.to_string(),
        r: route.to_owned(),
        k,
        d: positions.done.clone(),
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&env).unwrap_or_default())
}

/// Encodes the single `LastEvaluatedKey` of a one-Query route.
pub fn encode_single(tenant: &TenantId, route: &str, key: &Key) -> String {
    let positions = Positions {
        keys: BTreeMap::from([("0".to_owned(), key.clone())]),
        done: BTreeSet::new(),
    };
    encode(tenant, route, &positions)
}

/// Decodes a cursor of `route` for `tenant`. `shape_ok` checks each position's keys for the route.
pub fn decode(
    tenant: &TenantId,
    route: &str,
    raw: &str,
    shape_ok: impl Fn(&str, &str, &str) -> bool,
) -> Result<Positions, InvalidCursor> {
    if raw.len() > 8 * 1024 {
        return Err(invalid());
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(raw)
        .map_err(|_| invalid())?;
    let env: Envelope = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    if env.v != 1
        || env.t != tenant.as_str()
        || env.r != route
        || (env.k.is_empty() && env.d.is_empty())
    {
        return Err(invalid());
    }
    let prefix = tenant_prefix(tenant);
    let mut out = Positions::default();
    for (name, key) in env.k {
        let (Some(pk), Some(sk)) = (key.get(PK), key.get(SK)) else {
            return Err(invalid());
        };
        if key.len() != 2
            || !pk.starts_with(&prefix)
            || !sk.starts_with(&prefix)
            || !shape_ok(&name, pk, sk)
            || env.d.contains(&name)
        {
            return Err(invalid());
        }
        let key = key
            .into_iter()
            .map(|(a, v)| (a, AttributeValue::S(v)))
            .collect();
        out.keys.insert(name, key);
    }
    out.done = env.d;
    Ok(out)
}

/// Decodes the cursor of a one-Query route.
pub fn decode_single(
    tenant: &TenantId,
    route: &str,
    raw: &str,
    shape_ok: impl Fn(&str, &str) -> bool,
) -> Result<Key, InvalidCursor> {
    let mut positions = decode(tenant, route, raw, |_, pk, sk| shape_ok(pk, sk))?;
    if !positions.done.is_empty() {
        return Err(invalid());
    }
    match (positions.keys.remove("0"), positions.keys.is_empty()) {
        (Some(key), true) => Ok(key),
        _ => Err(invalid()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(raw: &str) -> TenantId {
        TenantId::parse(raw).unwrap()
    }

    fn key(pk: &str, sk: &str) -> Key {
        Key::from([
            (PK.into(), AttributeValue::S(pk.into())),
            (SK.into(), AttributeValue::S(sk.into())),
        ])
    }

    #[test]
    fn a_cursor_round_trips_for_its_tenant_and_route() {
        let k = key("TENANT#a#SESSION#1", "TENANT#a#CUSTOMER#c");
        let c = encode_single(&t("a"), "r", &k);
        assert_eq!(decode_single(&t("a"), "r", &c, |_, _| true).unwrap(), k);
    }

    #[test]
    fn another_tenant_route_or_tampered_cursor_is_400() {
        let k = key("TENANT#a#SESSION#1", "TENANT#a#CUSTOMER#c");
        let c = encode_single(&t("a"), "r", &k);
        assert_eq!(
            decode_single(&t("b"), "r", &c, |_, _| true).unwrap_err(),
            InvalidCursor
        );
        assert_eq!(
            decode_single(&t("a"), "other", &c, |_, _| true).unwrap_err(),
            InvalidCursor
        );
        assert_eq!(
            decode_single(&t("a"), "r", &c, |_, _| false).unwrap_err(),
            InvalidCursor
        );
        let mut tampered = c.clone();
        tampered.insert(3, 'x');
        assert_eq!(
            decode_single(&t("a"), "r", &tampered, |_, _| true).unwrap_err(),
            InvalidCursor
        );
        // A hand-made cursor naming tenant a but carrying tenant b's key is refused too.
        let forged = encode_single(
            &t("a"),
            "r",
            &key("TENANT#b#SESSION#1", "TENANT#a#CUSTOMER#c"),
        );
        assert_eq!(
            decode_single(&t("a"), "r", &forged, |_, _| true).unwrap_err(),
            InvalidCursor
        );
    }
}
