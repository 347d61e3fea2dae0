//! Opaque, signed pagination cursors. A cursor carries one position (a DynamoDB key: where the next
//! page starts after), bound to the tenant and the route that made it, and an HMAC-SHA-256 over all
//! of it. Decoding checks the signature first (the current key, then the previous one, so cursors in
//! flight survive a key rotation), then the tenant and route, then that every key value has this
//! tenant's prefix and the shape the route expects. A cursor can therefore only ever move within the
//! caller's own data, and an edited cursor, even one that still parses, answers 400.
//!
//! Wire form: `base64url(JSON envelope) "." base64url(HMAC-SHA-256(key, base64url(JSON envelope)))`.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use thiserror::Error;

use crate::identity::ids::TenantId;
use crate::identity::keys::{tenant_prefix, PK, SK};

pub use crate::identity::keys::Key;

/// The longest cursor accepted. A cursor holds one position, so the longest one this API makes
/// (64-character tenant, 128-character ids) is about 700 bytes; 1 KB keeps every list URL far below
/// API Gateway's 10 KB request line, even for a garbage cursor percent-encoded.
pub const MAX_CURSOR_BYTES: usize = 1024;
/// The longest export cursor accepted: an export position can be any item's key, the longest an
/// email uniqueness item's (two 332-character key values), about 1.1 KB as a cursor.
pub const MAX_EXPORT_CURSOR_BYTES: usize = 2048;
/// The shortest signing key accepted: 256 bits.
pub const MIN_KEY_BYTES: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// The keys cursors and import messages are signed with: `current` signs and verifies; during a
/// rotation, `previous` still verifies what the old key signed, and `next` already verifies what
/// the new key signs, before this function signs with it. Functions are not switched at one
/// moment, so a rotation is two deployments: first `next` = the new key everywhere, then `current`
/// = the new key and `previous` = the old one. In either order of functions, whatever one signs
/// another verifies.
#[derive(Clone)]
pub struct CursorKeys {
    current: Vec<u8>,
    previous: Option<Vec<u8>>,
    next: Option<Vec<u8>>,
}

impl std::fmt::Debug for CursorKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKeys(redacted)")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("a cursor signing key must be at least {MIN_KEY_BYTES} bytes")]
pub struct WeakCursorKey;

impl CursorKeys {
    pub fn new(current: &[u8], previous: Option<&[u8]>) -> Result<Self, WeakCursorKey> {
        let strong = |k: &[u8]| k.len() >= MIN_KEY_BYTES;
        if !strong(current) || previous.is_some_and(|p| !strong(p)) {
            return Err(WeakCursorKey);
        }
        Ok(Self {
            current: current.to_vec(),
            previous: previous.map(<[u8]>::to_vec),
            next: None,
        })
    }

    /// The current key alone: what a container keeps when it has not been able to confirm its
    /// verify-only keys for too long (a retired key must not verify forever).
    pub fn current_only(&self) -> Self {
        Self {
            current: self.current.clone(),
            previous: None,
            next: None,
        }
    }

    /// These keys, with `next` verifying too (the first step of a rotation).
    pub fn with_next(self, next: &[u8]) -> Result<Self, WeakCursorKey> {
        if next.len() < MIN_KEY_BYTES {
            return Err(WeakCursorKey);
        }
        Ok(Self {
            next: Some(next.to_vec()),
            ..self
        })
    }

    /// HMAC accepts a key of any length, so `None` never happens; it is handled, not unwrapped,
    /// because this runs on every list request.
    fn mac(key: &[u8], payload: &str) -> Option<HmacSha256> {
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).ok()?;
        mac.update(payload.as_bytes());
        Some(mac)
    }

    fn sign(&self, payload: &str) -> String {
        Self::mac(&self.current, payload)
            .map(|mac| URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
            .unwrap_or_default()
    }

    fn verify(&self, payload: &str, signature: &[u8]) -> bool {
        std::iter::once(&self.current)
            .chain(self.previous.as_ref())
            .chain(self.next.as_ref())
            .filter_map(|key| Self::mac(key, payload))
            .any(|mac| mac.verify_slice(signature).is_ok())
    }
}

impl CursorKeys {
    /// A signature of `payload` for the purpose `domain` (such as `pooltable-import-message-v1`),
    /// base64url. The signed text is `domain`, a newline, then `payload`; a cursor signs base64url
    /// text, which never holds a newline, so a message signature can never pass as a cursor's, nor
    /// one domain's as another's.
    pub fn sign_for(&self, domain: &str, payload: &str) -> String {
        self.sign(&format!("{domain}\n{payload}"))
    }

    /// Whether `signature` is [`Self::sign_for`]`(domain, payload)` under the current key or, during
    /// a rotation, the previous or the next one. Compared in constant time.
    pub fn verify_for(&self, domain: &str, payload: &str, signature: &str) -> bool {
        let Ok(signature) = URL_SAFE_NO_PAD.decode(signature) else {
            return false;
        };
        self.verify(&format!("{domain}\n{payload}"), &signature)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    v: u8,
    /// tenant
    t: String,
    /// route
    r: String,
    /// position: the key's string attributes
    k: BTreeMap<String, String>,
}

/// A cursor that is not one this API made for this tenant and request. The service layer answers it
/// with 400 naming the `cursor` parameter.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("cursor is invalid, expired or was made for another request")]
pub struct InvalidCursor;

/// The cursor for the position `key` of `route`, for `tenant`.
pub fn encode(keys: &CursorKeys, tenant: &TenantId, route: &str, key: &Key) -> String {
    let env = Envelope {
        v: 2,
        t: tenant.to_string(),
        r: route.to_owned(),
        k: key
            .iter()
            .filter_map(|(attr, v)| v.as_s().ok().map(|s| (attr.clone(), s.clone())))
            .collect(),
    };
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&env).unwrap_or_default());
    let signature = keys.sign(&payload);
    format!("{payload}.{signature}")
}

/// The route a cursor of `tenant` was made for, once its signature verifies: the route is signed
/// with the position, so it may carry parameters the server reads back (a walk continued in id
/// order carries how far it had walked). Decode the position with [`decode`] and that route.
pub fn signed_route(
    keys: &CursorKeys,
    tenant: &TenantId,
    raw: &str,
) -> Result<String, InvalidCursor> {
    Ok(verified_envelope(keys, tenant, raw, MAX_CURSOR_BYTES)?.r)
}

/// The envelope of `raw`, once its size, signature (current key, then previous) and tenant check.
fn verified_envelope(
    keys: &CursorKeys,
    tenant: &TenantId,
    raw: &str,
    max_bytes: usize,
) -> Result<Envelope, InvalidCursor> {
    if raw.len() > max_bytes {
        return Err(InvalidCursor);
    }
    let (payload, signature) = raw.split_once('.').ok_or(InvalidCursor)?;
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| InvalidCursor)?;
    if !keys.verify(payload, &signature) {
        return Err(InvalidCursor);
    }
    let bytes = URL_SAFE_NO_PAD.decode(payload).map_err(|_| InvalidCursor)?;
    let env: Envelope = serde_json::from_slice(&bytes).map_err(|_| InvalidCursor)?;
    if env.v != 2 || env.t != tenant.as_str() {
        return Err(InvalidCursor);
    }
    Ok(env)
}

/// Decodes a cursor of `route` for `tenant`; `shape_ok(pk, sk)` checks its key for the route.
pub fn decode(
    keys: &CursorKeys,
    tenant: &TenantId,
    route: &str,
    raw: &str,
    shape_ok: impl Fn(&str, &str) -> bool,
) -> Result<Key, InvalidCursor> {
    decode_bounded(keys, tenant, route, raw, MAX_CURSOR_BYTES, shape_ok)
}

/// [`decode`], for a route whose cursors may be up to `max_bytes` long.
pub fn decode_bounded(
    keys: &CursorKeys,
    tenant: &TenantId,
    route: &str,
    raw: &str,
    max_bytes: usize,
    shape_ok: impl Fn(&str, &str) -> bool,
) -> Result<Key, InvalidCursor> {
    let env = verified_envelope(keys, tenant, raw, max_bytes)?;
    if env.r != route || env.k.len() != 2 {
        return Err(InvalidCursor);
    }
    let prefix = tenant_prefix(tenant);
    let (Some(pk), Some(sk)) = (env.k.get(PK), env.k.get(SK)) else {
        return Err(InvalidCursor);
    };
    if !pk.starts_with(&prefix) || !sk.starts_with(&prefix) || !shape_ok(pk, sk) {
        return Err(InvalidCursor);
    }
    Ok(env
        .k
        .into_iter()
        .map(|(a, v)| (a, AttributeValue::S(v)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::fixtures::tenant as t;
    use crate::identity::keys::primary_key;

    /// Whether `raw` is refused as `tenant`'s cursor of `route` (its key shape accepted).
    fn refused(keys: &CursorKeys, tenant: &str, route: &str, raw: &str) -> bool {
        decode(keys, &t(tenant), route, raw, |_, _| true) == Err(InvalidCursor)
    }

    fn keys(current: u8, previous: Option<u8>) -> CursorKeys {
        CursorKeys::new(
            &[current; 32],
            previous.map(|p| [p; 32]).as_ref().map(|p| &p[..]),
        )
        .unwrap()
    }

    #[test]
    fn a_signature_holds_for_its_domain_and_payload_only() {
        // GIVEN a payload signed for one purpose, during a key rotation
        let signed = keys(1, None).sign_for("import", "{\"a\":1}");
        let rotated = keys(2, Some(1));
        // THEN it verifies under the previous key, for the same domain and payload only
        assert!(rotated.verify_for("import", "{\"a\":1}", &signed));
        assert!(!rotated.verify_for("other", "{\"a\":1}", &signed));
        assert!(!rotated.verify_for("import", "{\"a\":2}", &signed));
        assert!(!keys(3, None).verify_for("import", "{\"a\":1}", &signed));
        assert!(!rotated.verify_for("import", "{\"a\":1}", "not base64!"));
    }

    #[test]
    fn a_cursor_round_trips_for_its_tenant_and_route() {
        let k = primary_key("TENANT#a#SESSION#1", "TENANT#a#CUSTOMER#c");
        let c = encode(&keys(1, None), &t("a"), "r", &k);
        assert_eq!(
            decode(&keys(1, None), &t("a"), "r", &c, |_, _| true).unwrap(),
            k
        );
    }

    #[test]
    fn another_tenant_route_shape_or_tampered_cursor_is_invalid() {
        let ks = keys(1, None);
        let k = primary_key("TENANT#a#SESSION#1", "TENANT#a#CUSTOMER#c");
        let c = encode(&ks, &t("a"), "r", &k);
        assert!(refused(&ks, "b", "r", &c));
        assert!(refused(&ks, "a", "other", &c));
        assert_eq!(
            decode(&ks, &t("a"), "r", &c, |_, _| false),
            Err(InvalidCursor)
        );
        let mut tampered = c.clone();
        tampered.insert(3, 'x');
        assert!(refused(&ks, "a", "r", &tampered));
        // A hand-made cursor naming tenant a but carrying tenant b's key is refused too.
        let forged = encode(
            &ks,
            &t("a"),
            "r",
            &primary_key("TENANT#b#SESSION#1", "TENANT#a#CUSTOMER#c"),
        );
        assert!(refused(&ks, "a", "r", &forged));
    }

    #[test]
    fn an_edited_cursor_that_still_parses_is_invalid() {
        // GIVEN a valid cursor, and the same envelope with another (well-formed) position
        let ks = keys(1, None);
        let c = encode(
            &ks,
            &t("a"),
            "r",
            &primary_key("TENANT#a#P#1", "TENANT#a#P#x"),
        );
        let (_, signature) = c.split_once('.').unwrap();
        let edited = URL_SAFE_NO_PAD.encode(
            serde_json::json!({"v": 2, "t": "a", "r": "r", "k": {"PK": "TENANT#a#P#1", "SK": "TENANT#a#P#y"}})
                .to_string(),
        );
        // WHEN the edited payload is sent with the old signature, or with none
        // THEN both are refused
        let with_old = format!("{edited}.{signature}");
        assert!(refused(&ks, "a", "r", &with_old));
        assert!(refused(&ks, "a", "r", &edited));
    }

    #[test]
    fn a_rotation_keeps_cursors_in_flight_and_drops_them_once_the_old_key_is_retired() {
        let k = primary_key("TENANT#a#P#1", "TENANT#a#P#x");
        let before = encode(&keys(1, None), &t("a"), "r", &k);
        // during the rotation: new key current, old key previous
        assert_eq!(
            decode(&keys(2, Some(1)), &t("a"), "r", &before, |_, _| true),
            Ok(k.clone())
        );
        // after it: the old key is gone
        assert!(refused(&keys(2, None), "a", "r", &before));
        // a key that never signed it does not verify it
        assert!(refused(&keys(3, Some(4)), "a", "r", &before));
    }

    #[test]
    fn the_longest_cursor_this_api_makes_fits_the_limit() {
        let t = t(&"t".repeat(64));
        let id = "i".repeat(128);
        let k = primary_key(
            format!("TENANT#{t}#DEPARTMENT#{id}#MEMBERS"),
            format!("TENANT#{t}#ORDERDATE#2026-12-31#{id}"),
        );
        let c = encode(
            &keys(1, None),
            &t,
            "list-tenant-orders:2025-01-01:2026-12-31",
            &k,
        );
        assert!(c.len() <= MAX_CURSOR_BYTES, "{} bytes", c.len());
        let long = "x".repeat(MAX_CURSOR_BYTES + 1);
        assert!(refused(&keys(1, None), &t.to_string(), "r", &long));
    }

    #[test]
    fn short_keys_are_refused() {
        assert_eq!(CursorKeys::new(&[0; 31], None).unwrap_err(), WeakCursorKey);
        assert_eq!(
            CursorKeys::new(&[0; 32], Some(&[0; 8])).unwrap_err(),
            WeakCursorKey
        );
    }

    #[test]
    fn a_rotation_in_two_steps_verifies_in_either_order_of_functions() {
        let (old, new) = ([1u8; 32], [2u8; 32]);
        let before = CursorKeys::new(&old, None).unwrap();
        // step 1, everywhere: the new key verifies, the old one still signs
        let step1 = CursorKeys::new(&old, None)
            .unwrap()
            .with_next(&new)
            .unwrap();
        // step 2: the new key signs, the old one still verifies
        let step2 = CursorKeys::new(&new, Some(&old)).unwrap();
        let sign = |k: &CursorKeys| k.sign_for("d", "payload");
        for (signer, verifier) in [
            (&before, &step1),
            (&step1, &step1),
            (&step2, &step1),
            (&step1, &step2),
            (&before, &step2),
        ] {
            assert!(verifier.verify_for("d", "payload", &sign(signer)));
        }
        // AND a key that skipped step 1 is not known to a function still before the rotation
        assert!(!before.verify_for("d", "payload", &sign(&step2)));
        assert_eq!(
            CursorKeys::new(&old, None)
                .unwrap()
                .with_next(&[0; 8])
                .unwrap_err(),
            WeakCursorKey
        );
    }
}
