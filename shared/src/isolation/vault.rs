//! The key vault: where a tenant's data key is made and unwrapped. In AWS it is KMS
//! ([`KmsVault`]): a KMS key (the platform's, or one the tenant owns) wraps each tenant's 256-bit
//! data key, under an encryption context that names the tenant and the key's version, so a wrapped
//! key copied to another tenant does not unwrap. A disabled key, a revoked grant or a key pending
//! deletion is [`VaultError::Refused`]: the tenant's data cannot be read until the key is usable
//! again. The vault is a trait so that a test can put a layer in the key path (moto's KMS does not
//! enforce key states).

use std::collections::HashMap;

use aws_sdk_kms::error::ProvideErrorMetadata;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use futures::future::BoxFuture;
use thiserror::Error;

use crate::identity::ids::TenantId;
use crate::identity::sealing::KEY_BYTES;

/// Why the vault gave no key.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum VaultError {
    /// The KMS key refuses: disabled, pending deletion, its grant revoked, or access denied. The
    /// tenant's key is revoked until its owner makes it usable again.
    #[error("the tenant's KMS key refuses: {0}")]
    Refused(String),
    /// KMS did not answer, or throttled: try again.
    #[error("KMS is unavailable: {0}")]
    Unavailable(String),
    /// KMS answered with a key that is not one (a bug, or a wrapped key not made here).
    #[error("{0}")]
    Malformed(String),
}

/// One tenant's data key, in memory only: the version that seals (`version`), and the tenant's other
/// versions, which still open what they sealed. Keys rotate by version without rewriting an item.
pub struct TenantKey {
    pub tenant: TenantId,
    pub version: u32,
    /// The KMS key that wraps it.
    pub kms_key: String,
    bytes: Vec<u8>,
    /// Every version known, by number (this one included).
    versions: std::collections::BTreeMap<u32, Vec<u8>>,
}

impl std::fmt::Debug for TenantKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantKey")
            .field("tenant", &self.tenant)
            .field("version", &self.version)
            .field("kms_key", &self.kms_key)
            .finish_non_exhaustive()
    }
}

impl TenantKey {
    pub fn new(
        tenant: TenantId,
        version: u32,
        bytes: Vec<u8>,
        kms_key: String,
    ) -> Result<Self, VaultError> {
        if bytes.len() != KEY_BYTES {
            return Err(VaultError::Malformed(format!(
                "a data key of {tenant} is {} bytes, not {KEY_BYTES}",
                bytes.len()
            )));
        }
        Ok(Self {
            tenant,
            version,
            kms_key,
            versions: std::collections::BTreeMap::from([(version, bytes.clone())]),
            bytes,
        })
    }

    /// This key, also knowing `others` (the tenant's other versions) for opening what they sealed.
    pub fn knowing(mut self, others: impl IntoIterator<Item = TenantKey>) -> Self {
        for other in others {
            self.versions.entry(other.version).or_insert(other.bytes);
        }
        self
    }

    /// The bytes of the version that seals.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes of `version`, when known.
    pub fn bytes_of(&self, version: u32) -> Option<&[u8]> {
        self.versions.get(&version).map(Vec::as_slice)
    }

    /// The bytes keyed digests are made with: the first version's. A digest stands in an item's key
    /// (an email's), which no rotation can rewrite, so it never changes with the sealing version.
    pub fn digest_bytes(&self) -> &[u8] {
        self.versions
            .values()
            .next()
            .map_or(self.bytes.as_slice(), Vec::as_slice)
    }

    /// The versions known, oldest first.
    pub fn versions(&self) -> Vec<u32> {
        self.versions.keys().copied().collect()
    }

    /// The highest version known: an item sealed under a higher one was sealed by a container
    /// that met a version this one has not met yet.
    pub fn newest(&self) -> u32 {
        self.versions
            .keys()
            .next_back()
            .copied()
            .unwrap_or(self.version)
    }
}

/// A data key just made: its plaintext (kept only in memory) and its wrapped form (stored).
pub struct NewDataKey {
    pub plaintext: Vec<u8>,
    pub wrapped: Vec<u8>,
    /// The ARN of the KMS key that wrapped it.
    pub kms_key: String,
}

/// What a data key is bound to: the tenant and the key's version.
pub fn encryption_context(tenant: &TenantId, version: u32) -> HashMap<String, String> {
    HashMap::from([
        ("pooltable:tenant".to_owned(), tenant.to_string()),
        ("pooltable:keyVersion".to_owned(), version.to_string()),
    ])
}

/// Makes and unwraps tenants' data keys.
pub trait KeyVault: Send + Sync {
    /// A new 256-bit data key for `tenant`'s key `version`, wrapped under the KMS key `kms_key`.
    fn generate<'a>(
        &'a self,
        kms_key: &'a str,
        tenant: &'a TenantId,
        version: u32,
    ) -> BoxFuture<'a, Result<NewDataKey, VaultError>>;

    /// The plaintext of a data key [`Self::generate`] made.
    fn unwrap<'a>(
        &'a self,
        kms_key: &'a str,
        wrapped: &'a [u8],
        tenant: &'a TenantId,
        version: u32,
    ) -> BoxFuture<'a, Result<Vec<u8>, VaultError>>;
}

/// The vault in AWS: KMS, on the function's own role.
#[derive(Debug, Clone)]
pub struct KmsVault {
    kms: aws_sdk_kms::Client,
}

impl KmsVault {
    pub fn new(kms: aws_sdk_kms::Client) -> Self {
        Self { kms }
    }
}

/// KMS's answer, as a [`VaultError`]: the codes KMS gives for a key that is not usable
/// (`DisabledException`, `KMSInvalidStateException`, `AccessDeniedException`,
/// `InvalidGrantTokenException`, `NotFoundException`, `IncorrectKeyException`,
/// `InvalidCiphertextException`) refuse; anything else is unavailability.
fn vault_error<E: ProvideErrorMetadata + std::fmt::Debug>(
    error: aws_sdk_kms::error::SdkError<E>,
) -> VaultError {
    const REFUSALS: [&str; 7] = [
        "DisabledException",
        "KMSInvalidStateException",
        "AccessDeniedException",
        "InvalidGrantTokenException",
        "NotFoundException",
        "IncorrectKeyException",
        "InvalidCiphertextException",
    ];
    match error.as_service_error().and_then(|e| e.code()) {
        Some(code) if REFUSALS.contains(&code) => VaultError::Refused(code.to_owned()),
        Some(code) => VaultError::Unavailable(code.to_owned()),
        None => VaultError::Unavailable(format!("{error:?}")),
    }
}

impl KeyVault for KmsVault {
    fn generate<'a>(
        &'a self,
        kms_key: &'a str,
        tenant: &'a TenantId,
        version: u32,
    ) -> BoxFuture<'a, Result<NewDataKey, VaultError>> {
        Box::pin(async move {
            let out = self
                .kms
                .generate_data_key()
                .key_id(kms_key)
                .key_spec(DataKeySpec::Aes256)
                .set_encryption_context(Some(encryption_context(tenant, version)))
                .send()
                .await
                .map_err(vault_error)?;
            match (out.plaintext, out.ciphertext_blob) {
                (Some(plaintext), Some(wrapped)) => Ok(NewDataKey {
                    plaintext: plaintext.into_inner(),
                    wrapped: wrapped.into_inner(),
                    kms_key: out.key_id.unwrap_or_else(|| kms_key.to_owned()),
                }),
                _ => Err(VaultError::Unavailable(
                    "GenerateDataKey answered without a key".into(),
                )),
            }
        })
    }

    fn unwrap<'a>(
        &'a self,
        kms_key: &'a str,
        wrapped: &'a [u8],
        tenant: &'a TenantId,
        version: u32,
    ) -> BoxFuture<'a, Result<Vec<u8>, VaultError>> {
        Box::pin(async move {
            let out = self
                .kms
                .decrypt()
                .key_id(kms_key)
                .ciphertext_blob(Blob::new(wrapped))
                .set_encryption_context(Some(encryption_context(tenant, version)))
                .send()
                .await
                .map_err(vault_error)?;
            out.plaintext
                .map(Blob::into_inner)
                .ok_or_else(|| VaultError::Unavailable("Decrypt answered without a key".into()))
        })
    }
}
