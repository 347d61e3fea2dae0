//! Idempotency records: what a keyed create answered, kept 24 hours, so that the same
//! `Idempotency-Key` with the same request gets the same answer, and exactly one effect.
//!
//! Their keys are built in `shared::identity::keys`; the key table (generated from it) is in
//! `docs/key-scheme.md`.
//!
//! The record is written in the same TransactWriteItems as the effect it describes (as its last
//! action, on condition that no live record holds the key), so an effect without its record, or a
//! record without its effect, never exists. It holds a SHA-256 of the request (method, route, path
//! parameters, body), the answer's status and body, and `expiresAt` (TTL; also checked on read, since
//! TTL deletion lags). A keyed tenant's record is sealed under its key (`store::client::sealed`):
//! the answer repeats the effect's data. Only its keys, kind, tenant and `expiresAt` stay plain.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use sha2::{Digest, Sha256};

use crate::identity::entities::spaces;
use crate::identity::ids::{IdempotencyKey, TenantId};
use crate::identity::keys::{KeySpace, EXPIRES_AT, PK, SK};
use crate::store::client::error::StoreError;
use crate::store::client::query::{string_attr, u64_attr};
use crate::store::client::scoped::TenantDb;
use crate::store::client::sealed::{open_item, seal_item};

/// How long a key's answer is kept and replayed.
pub const RECORD_TTL_SECONDS: u64 = 24 * 3600;

/// `TENANT#t#IDEMPOTENCY#<route>#<key>`.
pub fn record_key(t: &TenantId, route: &str, key: &IdempotencyKey) -> String {
    crate::identity::keys::idempotency_record_key(t, route, key)
}

/// The SHA-256 (hex) of what identifies a request: its method, route, path parameters and body.
pub fn fingerprint(method: &str, route: &str, path: &[(&str, &str)], body: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(method.as_bytes());
    hash.update(b"\n");
    hash.update(route.as_bytes());
    for (name, value) in path {
        hash.update(format!("\n{name}={value}").as_bytes());
    }
    hash.update(b"\n\n");
    hash.update(body);
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A stored answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    /// The headers the route's contract documents for this answer (a 202's `Location`), replayed
    /// with it. Stored as the map attribute `headers` when there are any.
    pub headers: BTreeMap<String, String>,
}

/// What the store knows of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// No live record: the request runs.
    Nothing,
    /// The same request was answered: replay this.
    Same(Answer),
    /// The key was used for a different request.
    Different,
}

/// One keyed request of one tenant's route.
pub struct Idempotency<'a> {
    pub db: &'a TenantDb,
    pub pk: String,
    pub fingerprint: String,
    pub now_seconds: u64,
}

impl Idempotency<'_> {
    /// What an earlier request with this key left (a consistent read; expired records are ignored).
    pub async fn recorded(&self) -> Result<Recorded, StoreError> {
        let out = self
            .db
            .client
            .get_item()
            .table_name(&*self.db.table)
            .key(PK, AttributeValue::S(self.pk.clone()))
            .key(SK, AttributeValue::S(self.pk.clone()))
            .consistent_read(true)
            .send()
            .await
            .map_err(StoreError::from_sdk)?;
        let Some(item) = out
            .item
            .filter(|i| u64_attr(i, EXPIRES_AT).is_some_and(|e| e > self.now_seconds))
        else {
            return Ok(Recorded::Nothing);
        };
        let item = open_item(self.db.key.as_deref(), item)?;
        if string_attr(&item, "requestHash").as_deref() != Some(self.fingerprint.as_str()) {
            return Ok(Recorded::Different);
        }
        let status = u64_attr(&item, "status").and_then(|s| u16::try_from(s).ok());
        match (status, string_attr(&item, "body")) {
            (Some(status), Some(body)) => {
                let headers = match item.get("headers") {
                    Some(AttributeValue::M(m)) => m
                        .iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_s().ok()?.clone())))
                        .collect(),
                    _ => BTreeMap::new(),
                };
                Ok(Recorded::Same(Answer {
                    status,
                    body,
                    headers,
                }))
            }
            _ => Err(StoreError::Internal(
                "idempotency record without an answer".into(),
            )),
        }
    }

    /// The transaction action that records `answer` for this key: put last in the effect's
    /// transaction, on condition that no live record holds the key.
    pub fn record(&self, answer: &Answer) -> Result<TransactWriteItem, StoreError> {
        let mut item = crate::store::client::query::Item::from([
            (PK.into(), AttributeValue::S(self.pk.clone())),
            (SK.into(), AttributeValue::S(self.pk.clone())),
            (
                "kind".into(),
                AttributeValue::S(spaces::IDEMPOTENCY.segment().into()),
            ),
            (
                "tenantId".into(),
                AttributeValue::S(self.db.tenant.to_string()),
            ),
            (
                "requestHash".into(),
                AttributeValue::S(self.fingerprint.clone()),
            ),
            (
                "status".into(),
                AttributeValue::N(answer.status.to_string()),
            ),
            ("body".into(), AttributeValue::S(answer.body.clone())),
            (
                EXPIRES_AT.into(),
                AttributeValue::N((self.now_seconds + RECORD_TTL_SECONDS).to_string()),
            ),
        ]);
        if !answer.headers.is_empty() {
            let headers = answer
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), AttributeValue::S(v.clone())))
                .collect();
            item.insert("headers".into(), AttributeValue::M(headers));
        }
        crate::store::client::items::enlist(&self.db.tenant, &mut item);
        // The answer repeats what the effect wrote (an order, a session's state, a transfer code):
        // a keyed tenant's is sealed as its items are.
        if let Some(key) = self.db.key.as_deref() {
            item = seal_item(key, item)?;
        }
        let put = Put::builder()
            .table_name(&*self.db.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(PK) OR #exp <= :now")
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_values(":now", AttributeValue::N(self.now_seconds.to_string()))
            .build()?;
        Ok(TransactWriteItem::builder().put(put).build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::fixtures::acme;

    #[test]
    fn golden_record_key_and_fingerprint() {
        let t = acme();
        let k = IdempotencyKey::parse("order-2026-11-22_a").unwrap();
        assert!(record_key(&t, "create-order", &k).ends_with("#create-order#order-2026-11-22_a"));
        let a = fingerprint(
            "POST",
            "/users/{userId}/orders",
            &[("userId", "u-1")],
            b"{}",
        );
        assert_eq!(a.len(), 64);
        assert_ne!(
            a,
            fingerprint(
                "POST",
                "/users/{userId}/orders",
                &[("userId", "u-2")],
                b"{}"
            )
        );
        assert_ne!(
            a,
            fingerprint(
                "POST",
                "/users/{userId}/orders",
                &[("userId", "u-1")],
                b"{ }"
            )
        );
    }
}
