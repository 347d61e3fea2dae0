//! A key per tenant in a test's world ([`Harness::keyed`]): the test's own key table and platform
//! KMS key on moto, and the fault layer in the key path that enforces KMS key states
//! ([`EnforcedKeyStates`]), since moto's KMS decrypts under a disabled key.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use futures::future::BoxFuture;
use shared::identity::ids::TenantId;
use shared::isolation::vault::{KeyVault, KmsVault, NewDataKey, TenantKey, VaultError};
use shared::service::app::load_sdk_config;
use shared::store::keys::{KeySettings, TenantKeys, DEFAULT_KEY_CACHE_SECONDS};

pub use crate::harness::TestKeys;
use crate::Harness;

/// KMS as moto serves it, with the one thing moto leaves out: a key that is not `Enabled` refuses.
/// Before each GenerateDataKey or Decrypt it reads the key's state from moto (DescribeKey: the
/// state moto keeps for DisableKey, EnableKey, ScheduleKeyDeletion and CancelKeyDeletion), and
/// refuses with the error KMS documents for that state (`DisabledException` for a disabled key,
/// `KMSInvalidStateException` for one pending deletion or otherwise unusable) before the call
/// would go out. Faithful because the state is moto's own, set by the real KMS calls a test makes;
/// only the enforcement is added, and it is what KMS does for these operations.
///
/// With `outage` set, KMS is unreachable: every call fails as a refused connection does
/// ([`VaultError::Unavailable`]), whatever the key's state.
pub struct EnforcedKeyStates {
    /// Reads a key's state for the test (what AWS KMS itself would enforce; moto does not): never
    /// judged, unlike `inner`'s client, which makes the function's own calls.
    kms: aws_sdk_kms::Client,
    inner: KmsVault,
    outage: Arc<AtomicBool>,
    /// GenerateDataKey answers this many milliseconds late by this clock (KMS throttling it
    /// through the SDK's retries), when set.
    slow_to_make: Option<(Arc<crate::TestClock>, u64)>,
}

impl EnforcedKeyStates {
    pub fn new(kms: aws_sdk_kms::Client, outage: Arc<AtomicBool>) -> Self {
        let judged = kms.config().to_builder().interceptor(crate::judge::Judged);
        let inner = KmsVault::new(aws_sdk_kms::Client::from_conf(judged.build()));
        Self {
            kms,
            inner,
            outage,
            slow_to_make: None,
        }
    }

    async fn usable(&self, kms_key: &str) -> Result<(), VaultError> {
        if self.outage.load(Ordering::SeqCst) {
            return Err(VaultError::Unavailable("KMS: connection refused".into()));
        }
        let described = self
            .kms
            .describe_key()
            .key_id(kms_key)
            .send()
            .await
            .map_err(|e| VaultError::Unavailable(format!("DescribeKey: {e:?}")))?;
        let state = described.key_metadata.and_then(|m| m.key_state);
        match state {
            Some(aws_sdk_kms::types::KeyState::Enabled) => Ok(()),
            Some(aws_sdk_kms::types::KeyState::Disabled) => {
                Err(VaultError::Refused("DisabledException".into()))
            }
            _ => Err(VaultError::Refused("KMSInvalidStateException".into())),
        }
    }
}

impl KeyVault for EnforcedKeyStates {
    fn generate<'a>(
        &'a self,
        kms_key: &'a str,
        tenant: &'a TenantId,
        version: u32,
    ) -> BoxFuture<'a, Result<NewDataKey, VaultError>> {
        Box::pin(async move {
            self.usable(kms_key).await?;
            let made = self.inner.generate(kms_key, tenant, version).await;
            if let Some((clock, late_ms)) = &self.slow_to_make {
                clock.advance_millis(*late_ms);
            }
            made
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
            self.usable(kms_key).await?;
            self.inner.unwrap(kms_key, wrapped, tenant, version).await
        })
    }
}

impl TestKeys {
    /// The key table `<table>-keys` of `h`'s table (template.yaml's `TenantKeysTable`) and a
    /// platform key, made on DynamoDB Local and moto's KMS.
    pub async fn make(h: &Harness) -> Self {
        let sdk = load_sdk_config().await;
        let table = format!("{}-keys", h.table);
        let def = devtools::key_table_from_template(&devtools::default_template_path())
            .expect("template.yaml defines the key table");
        devtools::create_table(&h.admin, &table, &def)
            .await
            .expect("create the key table");
        let mut keys = TestKeys {
            kms: aws_sdk_kms::Client::new(&sdk),
            platform_key: String::new(),
            table,
            outage: Arc::default(),
        };
        keys.platform_key = keys
            .new_kms_key(&format!("pooltable test keys of {}", h.table))
            .await;
        keys
    }

    /// A container's key cache over these keys, behind [`EnforcedKeyStates`].
    pub fn tenant_keys(&self, h: &Harness) -> TenantKeys {
        self.tenant_keys_on(h, h.admin.clone())
    }

    /// [`TestKeys::tenant_keys`], reading the key table through `client` (one with `h`'s fault
    /// layer, to throttle it).
    pub fn tenant_keys_on(&self, h: &Harness, client: aws_sdk_dynamodb::Client) -> TenantKeys {
        let settings = self.settings();
        let vault = EnforcedKeyStates::new(self.kms.clone(), self.outage.clone());
        TenantKeys::new(&settings, client, Arc::new(vault), h.clock.clone())
    }

    /// [`TestKeys::tenant_keys`], whose KMS answers GenerateDataKey `late_ms` late by `h`'s clock.
    pub fn tenant_keys_slow_to_make(&self, h: &Harness, late_ms: u64) -> TenantKeys {
        let mut vault = EnforcedKeyStates::new(self.kms.clone(), self.outage.clone());
        vault.slow_to_make = Some((h.clock.clone(), late_ms));
        TenantKeys::new(
            &self.settings(),
            h.admin.clone(),
            Arc::new(vault),
            h.clock.clone(),
        )
    }

    /// A container's key settings in this world.
    fn settings(&self) -> KeySettings {
        KeySettings {
            table: self.table.clone(),
            kms_key_id: self.platform_key.clone(),
            cache_seconds: DEFAULT_KEY_CACHE_SECONDS,
        }
    }

    /// The key table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// A new KMS key on moto (a tenant's own, for BYOK): its ARN.
    pub async fn new_kms_key(&self, description: &str) -> String {
        self.kms
            .create_key()
            .description(description)
            .send()
            .await
            .expect("create a KMS key on moto")
            .key_metadata
            .map(|m| m.arn.unwrap_or(m.key_id))
            .expect("a key's metadata")
    }

    /// Every key the stack still holds: each row of the key table, unwrapped by KMS (moto's, which
    /// unwraps under any key state: the most a stack holding these rows could open).
    pub async fn every_key(&self, admin: &aws_sdk_dynamodb::Client) -> Vec<TenantKey> {
        let rows = admin
            .scan()
            .table_name(&self.table)
            .send()
            .await
            .expect("scan the key table")
            .items
            .unwrap_or_default();
        let vault = KmsVault::new(self.kms.clone());
        let mut keys = Vec::new();
        for row in rows {
            let s = |name: &str| match row.get(name) {
                Some(AttributeValue::S(s)) => s.clone(),
                Some(AttributeValue::N(n)) => n.clone(),
                _ => panic!("key row without {name}: {row:?}"),
            };
            let Some(AttributeValue::B(wrapped)) = row.get("wrapped") else {
                panic!("key row without its wrapped key: {row:?}");
            };
            let tenant = TenantId::parse(&s("tenantId")).unwrap();
            let version: u32 = s("version").parse().unwrap();
            let kms_key = s("kmsKeyId");
            let bytes = vault
                .unwrap(&kms_key, wrapped.as_ref(), &tenant, version)
                .await
                .expect("moto unwraps a stored key");
            keys.push(TenantKey::new(tenant, version, bytes, kms_key).unwrap());
        }
        keys
    }

    /// `tenant`'s keys the stack still holds ([`Self::every_key`]), each version.
    pub async fn keys_of(
        &self,
        admin: &aws_sdk_dynamodb::Client,
        tenant: &TenantId,
    ) -> Vec<TenantKey> {
        let every = self.every_key(admin).await;
        every.into_iter().filter(|k| &k.tenant == tenant).collect()
    }

    /// Disables (`false`) or enables the KMS key `key` on moto.
    pub async fn set_enabled(&self, key: &str, enabled: bool) {
        // moto 5 takes only the key id here, not its ARN.
        let key = key.rsplit('/').next().unwrap_or(key);
        let result = match enabled {
            true => self
                .kms
                .enable_key()
                .key_id(key)
                .send()
                .await
                .err()
                .map(|e| format!("{e:?}")),
            false => self
                .kms
                .disable_key()
                .key_id(key)
                .send()
                .await
                .err()
                .map(|e| format!("{e:?}")),
        };
        assert_eq!(result, None, "change the key's state on moto");
    }
}

impl Harness {
    /// This world with a key per tenant, as deployed: the key table `<table>-keys` (template.yaml's
    /// `TenantKeysTable`) and a platform key made on moto's KMS, behind [`EnforcedKeyStates`].
    /// Tenants onboarded after this are keyed; their products are sealed.
    pub async fn keyed(mut self) -> Self {
        let keys = TestKeys::make(&self).await;
        let tenant_keys = keys.tenant_keys(&self);
        self.app = self.app.with_tenant_keys(Some(tenant_keys));
        self.keys = Some(keys);
        self
    }

    /// Another container on this keyed world: its own `App` and key cache, the same key table and
    /// platform key.
    pub async fn another_keyed_container(&self) -> Self {
        let mut other = self.another_container().await;
        let keys = self.test_keys().clone();
        let tenant_keys = keys.tenant_keys(&other);
        other.app = other.app.with_tenant_keys(Some(tenant_keys));
        other.keys = Some(keys);
        other
    }

    /// Onboards `tenant` (standard tier, on `shards` shards) with its data key wrapped by a KMS key
    /// of its own, which it may disable (BYOK): that key's id.
    pub async fn onboard_with_own_key(&self, tenant: &str, shards: u32) -> String {
        let own_key = self
            .test_keys()
            .new_kms_key(&format!("{tenant}'s own key"))
            .await;
        let body = serde_json::json!({"tenantId": tenant, "tier": "standard",
            "shardCount": shards, "kmsKeyArn": own_key});
        let r = self.operator().onboard_tenant(body).await;
        assert_eq!(r.status, 201, "{}", r.body);
        own_key
    }

    /// The keyed world's key parts ([`Self::keyed`]).
    pub fn test_keys(&self) -> &TestKeys {
        self.keys
            .as_ref()
            .expect("a keyed harness (Harness::keyed)")
    }
}

/// Every attribute of `item` as text, for a check that no plaintext is left.
pub fn item_text(item: &HashMap<String, AttributeValue>) -> String {
    format!("{item:?}")
}
