//! The signing keys of cursors and import messages, from a secret store.
//!
//! In AWS the keys live in one Secrets Manager secret (`SIGNING_KEYS_SECRET_ARN`), a JSON object
//! `{"current": …, "previous": …, "next": …}` (each at least 32 bytes, or empty): `current` signs
//! and verifies, `previous` and `next` only verify. A container reads it once when it starts and
//! again when its copy is older than `SIGNING_KEYS_REFRESH_SECONDS` (default 300), so a rotation
//! reaches every container within that time without a deployment. A failed re-read keeps the keys
//! and is tried again after 30 s; after [`STALE_AFTER_REFRESHES`] intervals without a successful
//! read, the container keeps `current` alone. Nothing secret is in a
//! function's environment: `lambda:GetFunctionConfiguration` shows the secret's ARN only, and
//! reading it takes `secretsmanager:GetSecretValue` on exactly that secret, which only the
//! functions' roles have.
//!
//! **A rotation in three steps**, each waiting at least the refresh interval plus the longest
//! function timeout before the next, so every container has it: (1) `next` = the new key (it
//! verifies before anything signs with it); (2) `current` = the new key, `previous` = the old one,
//! `next` empty; (3) once the import queues have drained (up to 14 days), `previous` empty. In
//! either order of containers, what one signs another verifies (`tests/tests/all/signing_keys.rs`).
//!
//! Without a secret (local runs, tests), `CURSOR_SIGNING_KEY`, `CURSOR_SIGNING_KEY_PREVIOUS` and
//! `CURSOR_SIGNING_KEY_NEXT` give fixed keys.

use std::sync::{Arc, RwLock};

use serde::Deserialize;
use thiserror::Error;

use crate::identity::cursor::CursorKeys;

/// How often a container reads the secret again when `SIGNING_KEYS_REFRESH_SECONDS` is not set.
pub const DEFAULT_REFRESH_SECONDS: u64 = 300;

/// After a failed re-read, how long a container keeps its keys before it tries again: one request
/// in that time waits on the secret store, not every request.
pub const RETRY_AFTER_FAILURE_SECONDS: u64 = 30;

/// Refresh intervals without a successful read after which a container drops its verify-only keys
/// (`previous`, `next`) and signs and verifies with `current` alone: a key retired meanwhile must
/// not verify forever in a container cut off from the store.
pub const STALE_AFTER_REFRESHES: u64 = 12;

#[derive(Debug, Error)]
pub enum SigningError {
    #[error("the signing keys secret could not be read: {0}")]
    Unavailable(String),
    #[error("the signing keys secret is malformed: {0}")]
    Malformed(String),
}

/// The secret's JSON.
#[derive(Deserialize)]
struct SecretKeys {
    current: String,
    #[serde(default)]
    previous: String,
    #[serde(default)]
    next: String,
}

impl std::fmt::Debug for SecretKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKeys(redacted)")
    }
}

/// Parses the secret's JSON into keys.
pub fn keys_from_secret(json: &str) -> Result<CursorKeys, SigningError> {
    let parsed: SecretKeys =
        serde_json::from_str(json).map_err(|e| SigningError::Malformed(e.to_string()))?;
    let some = |k: &str| (!k.is_empty()).then(|| k.as_bytes().to_vec());
    let keys = CursorKeys::new(parsed.current.as_bytes(), some(&parsed.previous).as_deref())
        .map_err(|e| SigningError::Malformed(format!("current or previous: {e}")))?;
    match some(&parsed.next) {
        Some(next) => keys
            .with_next(&next)
            .map_err(|e| SigningError::Malformed(format!("next: {e}"))),
        None => Ok(keys),
    }
}

/// Where a container's keys come from.
#[derive(Debug, Clone)]
pub struct SecretSource {
    /// The secret's ARN (or name).
    pub id: String,
    pub refresh_seconds: u64,
}

/// A container's signing keys: fixed, or a secret's, read again when stale.
pub struct SigningKeys {
    /// The keys, and when they were read (or a failed re-read was last tried).
    keys: RwLock<Option<(Arc<CursorKeys>, u64)>>,
    source: Option<(aws_sdk_secretsmanager::Client, SecretSource)>,
    /// One read of the secret at a time; the others use the keys they have.
    reading: tokio::sync::Mutex<()>,
    /// When the secret was last read successfully (epoch ms).
    read_at_ms: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for SigningKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKeys(redacted)")
    }
}

impl SigningKeys {
    /// Keys that never change (from the environment).
    pub fn fixed(keys: CursorKeys) -> Self {
        Self {
            keys: RwLock::new(Some((Arc::new(keys), u64::MAX))),
            source: None,
            reading: tokio::sync::Mutex::new(()),
            read_at_ms: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// No keys at all (a secret source without a client): every use is 503.
    pub fn none() -> Self {
        Self {
            keys: RwLock::new(None),
            source: None,
            reading: tokio::sync::Mutex::new(()),
            read_at_ms: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Keys read from `source` with `client`, on the first [`Self::refresh`].
    pub fn from_secret(client: aws_sdk_secretsmanager::Client, source: SecretSource) -> Self {
        Self {
            keys: RwLock::new(None),
            source: Some((client, source)),
            reading: tokio::sync::Mutex::new(()),
            read_at_ms: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The keys this container holds (`None` only before a secret was first read).
    pub fn current(&self) -> Option<Arc<CursorKeys>> {
        self.lock_read().as_ref().map(|(k, _)| k.clone())
    }

    /// Replaces the keys (tests hold a container in a rotation's step this way).
    pub fn set(&self, keys: CursorKeys, now_ms: u64) {
        *self.keys.write().unwrap_or_else(|p| p.into_inner()) = Some((Arc::new(keys), now_ms));
    }

    /// Reads the secret again when this container's copy is older than the refresh interval (or
    /// it has none). A failed read keeps the keys it has (and fails only when there are none).
    pub async fn refresh(&self, now_ms: u64) -> Result<(), SigningError> {
        let Some((client, source)) = &self.source else {
            return Ok(());
        };
        let fresh = |held: &Option<(Arc<CursorKeys>, u64)>| {
            held.as_ref().is_some_and(|(_, at)| {
                now_ms.saturating_sub(*at) < source.refresh_seconds.saturating_mul(1000)
            })
        };
        if fresh(&self.lock_read()) {
            return Ok(());
        }
        let _one = self.reading.lock().await;
        if fresh(&self.lock_read()) {
            return Ok(());
        }
        let read = async {
            // A short budget: a request waits on this read, and a failure keeps the keys.
            let out = client
                .get_secret_value()
                .secret_id(&source.id)
                .customize()
                .config_override(
                    aws_sdk_secretsmanager::config::Config::builder().timeout_config(
                        aws_config::timeout::TimeoutConfig::builder()
                            .operation_timeout(std::time::Duration::from_secs(2))
                            .build(),
                    ),
                )
                .send()
                .await
                .map_err(|e| {
                    SigningError::Unavailable(
                        aws_sdk_secretsmanager::error::DisplayErrorContext(&e).to_string(),
                    )
                })?;
            keys_from_secret(out.secret_string().unwrap_or_default())
        };
        match read.await {
            Ok(keys) => {
                self.set(keys, now_ms);
                self.read_at_ms
                    .store(now_ms, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            Err(e) => match self.current() {
                Some(held) => {
                    let refresh_ms = source.refresh_seconds.saturating_mul(1000);
                    let unconfirmed_ms = now_ms
                        .saturating_sub(self.read_at_ms.load(std::sync::atomic::Ordering::Relaxed));
                    let held = if unconfirmed_ms >= refresh_ms.saturating_mul(STALE_AFTER_REFRESHES)
                    {
                        tracing::error!(error = %e, "the signing keys secret has not been readable for too long: verifying with the current key alone");
                        Arc::new(held.current_only())
                    } else {
                        tracing::warn!(error = %e, "the signing keys secret could not be read again; keeping the keys this container has");
                        held
                    };
                    // Tried again after a short while, not by every request meanwhile.
                    let retry_ms = RETRY_AFTER_FAILURE_SECONDS
                        .saturating_mul(1000)
                        .min(refresh_ms);
                    let as_of = now_ms.saturating_sub(refresh_ms).saturating_add(retry_ms);
                    *self.keys.write().unwrap_or_else(|p| p.into_inner()) = Some((held, as_of));
                    Ok(())
                }
                None => Err(e),
            },
        }
    }

    fn lock_read(&self) -> std::sync::RwLockReadGuard<'_, Option<(Arc<CursorKeys>, u64)>> {
        self.keys.read().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::entities::{PRODUCT, PRODUCTS};
    use crate::identity::keys::KeySpace;

    #[test]
    fn a_secret_holds_current_and_optionally_previous_and_next() {
        let k = |c: char| c.to_string().repeat(32);
        let keys = keys_from_secret(
            &serde_json::json!({"current": k('a'), "previous": "", "next": k('c')}).to_string(),
        )
        .unwrap();
        let next = keys_from_secret(&serde_json::json!({"current": k('c')}).to_string()).unwrap();
        let t = crate::identity::ids::TenantId::parse("acme").unwrap();
        let key = crate::identity::keys::Key::from([
            (
                "PK".to_owned(),
                aws_sdk_dynamodb::types::AttributeValue::S(PRODUCTS.key(&t, 0)),
            ),
            (
                "SK".to_owned(),
                aws_sdk_dynamodb::types::AttributeValue::S(PRODUCT.key(&t, "p")),
            ),
        ]);
        // what the next key signs, the holder of `next` verifies
        let signed = crate::identity::cursor::encode(&next, &t, "r", &key);
        assert!(crate::identity::cursor::decode(&keys, &t, "r", &signed, |_, _| true).is_ok());
        // a key shorter than 32 bytes, or no current key, is refused
        assert!(keys_from_secret(r#"{"current": "short"}"#).is_err());
        assert!(keys_from_secret(r#"{"previous": "x"}"#).is_err());
    }
}
