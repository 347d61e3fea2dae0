//! Bulk imports through SQS. `POST /imports` checks every item, sends the items to the import queue
//! in signed messages of up to [`ITEMS_PER_MESSAGE`] and answers 202; the consumer, on the queue's
//! event source mapping (whose `MaximumConcurrency` bounds the write rate), writes each item with
//! the tenant's scoped credentials, in one transaction with the item's marker
//! (`shared::store::imports`); `GET /imports/{id}` counts the markers.
//!
//! A message names its tenant in the `tenant` message attribute, and carries an HMAC of that tenant
//! and its body (`signature`), made with the deployment's signing key for [`SIGNING_DOMAIN`]. The
//! consumer trusts nothing else: a message that anyone with `sqs:SendMessage` wrote straight to the
//! queue cannot name another tenant, or change an item, without the key.

pub mod consume;
// @generated begin: `pooltable gen` writes the route modules from routes.yaml
pub mod create_import;
pub mod get_import;
// @generated end

use serde::{Deserialize, Serialize};
use shared::identity::cursor::CursorKeys;
use shared::identity::entities;
use shared::identity::ids::{EntityId, TenantId};
use shared::service::http::Text;

/// What a message signature is for (see `CursorKeys::sign_for`).
pub const SIGNING_DOMAIN: &str = "pooltable-import-message-v1";
/// The message attribute naming the tenant.
pub const TENANT_ATTRIBUTE: &str = "tenant";
/// The message attribute holding the signature.
pub const SIGNATURE_ATTRIBUTE: &str = "signature";
/// The message attribute of a copy the consumer sent back on the queue: its generation (the
/// producer's message is generation 0). Not signed: it only names which copy a delivery is.
pub const COPY_ATTRIBUTE: &str = "copy";
/// The most items one import takes.
pub const MAX_ITEMS: usize = 1000;
/// The most items one message carries: SQS bills and throttles per message, and 25 small items
/// still make a small message. An item is marked on its own, so a message is never all or nothing.
pub const ITEMS_PER_MESSAGE: usize = 25;
/// The most bytes of items one message carries: sealed and in base64 they grow by a third, which
/// keeps a message well under SQS's 256 KiB limit (a 64 KB document may go alone).
pub const MESSAGE_BYTES: usize = 160 * 1024;
/// What a message's sealed items are for (the sealing's additional data starts with it).
pub const SEALING_DOMAIN: &str = "pooltable-import-items-v1";

/// What can be imported: each is a declared entity kind importable by this name
/// (`shared::identity::entities::EntityKind::import_as`), and every kind a re-sharding moves is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ImportKind {
    Products,
    Departments,
    Employees,
}

impl ImportKind {
    pub const ALL: [Self; 3] = [Self::Products, Self::Departments, Self::Employees];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Products => "products",
            Self::Departments => "departments",
            Self::Employees => "employees",
        }
    }

    /// The entity kind it writes (its tombstones are under its `kind`).
    pub fn entity(self) -> &'static str {
        match self {
            Self::Products => entities::PRODUCT.kind,
            Self::Departments => entities::DEPARTMENT.kind,
            Self::Employees => entities::EMPLOYEE.kind,
        }
    }

    /// One item of the request, read as this kind's (a 400 names `path`, `items[3]`), and checked.
    pub fn item(self, raw: serde_json::Value, path: &str) -> Result<ImportItem, shared::ApiError> {
        let invalid = |e: serde_json::Error| {
            shared::ApiError::bad_request(path, format!("Invalid item: {e}"))
        };
        let item = match self {
            Self::Products => ImportItem::Product(serde_json::from_value(raw).map_err(invalid)?),
            Self::Departments => {
                ImportItem::Department(serde_json::from_value(raw).map_err(invalid)?)
            }
            Self::Employees => ImportItem::Employee(serde_json::from_value(raw).map_err(invalid)?),
        };
        item.check(path)?;
        Ok(item)
    }
}

/// One product of an import.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProductItem {
    pub product_id: EntityId,
    pub document: serde_json::Value,
}

/// One department of an import: `PUT /departments/{departmentId}`'s body, with its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DepartmentItem {
    pub department_id: EntityId,
    pub name: Text,
}

/// One employee of an import: `PUT /employees/{employeeId}`'s body, with its id. Its department
/// must exist when the import is accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmployeeItem {
    pub employee_id: EntityId,
    pub name: Text,
    pub department_id: EntityId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<Text>,
}

/// One item of an import, of any kind. Serialized as its kind's fields alone, so a product item's
/// bytes (and an import's fingerprint, and a message of an earlier version) are what they were
/// before imports took other kinds; read back by its fields, which no two kinds share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ImportItem {
    Product(ProductItem),
    Department(DepartmentItem),
    Employee(EmployeeItem),
}

impl ImportItem {
    /// The id it is written under: two items of one import with the same id are one write.
    pub fn id(&self) -> &EntityId {
        match self {
            Self::Product(p) => &p.product_id,
            Self::Department(d) => &d.department_id,
            Self::Employee(e) => &e.employee_id,
        }
    }

    pub fn kind(&self) -> ImportKind {
        match self {
            Self::Product(_) => ImportKind::Products,
            Self::Department(_) => ImportKind::Departments,
            Self::Employee(_) => ImportKind::Employees,
        }
    }

    /// Checks what its fields' types do not (a 400 names `path`): a product's document as
    /// `PUT /products` checks it, and that every string is one a queue message can carry.
    pub fn check(&self, path: &str) -> Result<(), shared::ApiError> {
        match self {
            Self::Product(p) => {
                let document = format!("{path}.document");
                products::check_product(&p.document, &document)?;
                check_sendable(&p.document, &document)
            }
            Self::Department(d) => sendable_text(&d.name, &format!("{path}.name")),
            Self::Employee(e) => {
                sendable_text(&e.name, &format!("{path}.name"))?;
                match &e.email {
                    Some(email) => sendable_text(email, &format!("{path}.email")),
                    None => Ok(()),
                }
            }
        }
    }
}

fn sendable_text(text: &Text, path: &str) -> Result<(), shared::ApiError> {
    check_sendable(&serde_json::Value::String(text.0.clone()), path)
}

/// One item of a message: its position in the request (0-based), and the item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageItem {
    pub index: u32,
    #[serde(flatten)]
    pub item: ImportItem,
}

/// The body of one message: some items of one import.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImportMessage {
    pub import_id: EntityId,
    pub kind: ImportKind,
    /// When the import was accepted (epoch ms): the items are writes of that moment, so they never
    /// replace a product written later, and a message older than the import's markers is refused.
    pub issued_at: u64,
    /// The tenant record's `createdAt` when the import was accepted: a tenant offboarded and
    /// onboarded again under the same id has another, and gets none of its predecessor's items.
    pub tenant_since: String,
    /// The items (`[MessageItem]` as JSON), sealed with the tenant's import key
    /// (`shared::store::imports::message_key`) for [`sealing_context`]: offboarding destroys the
    /// key, so nothing readable of the tenant stays on the queue or its dead-letter queue.
    pub sealed_items: String,
    /// The version of the tenant's key the import key derives from; absent: the tenant's stored
    /// import key (a tenant without a key of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_version: Option<u32>,
}

/// The additional data items are sealed with: they open only for this tenant and import.
pub fn sealing_context(tenant: &TenantId, import: &EntityId) -> String {
    format!("{SEALING_DOMAIN}\n{tenant}\n{import}")
}

/// `items`, sealed under `key` for `tenant`'s import `import`.
pub fn seal_items(
    key: &[u8],
    tenant: &TenantId,
    import: &EntityId,
    items: &[MessageItem],
) -> Result<String, shared::ApiError> {
    let plain = serde_json::to_vec(items)
        .map_err(|e| shared::ApiError::Internal(format!("serialize items: {e}")))?;
    shared::identity::sealing::seal(key, &sealing_context(tenant, import), &plain)
        .map_err(|e| shared::ApiError::Internal(e.to_string()))
}

/// The items [`seal_items`] sealed, when `key` opens them for this tenant and import.
pub fn open_items(
    key: &[u8],
    tenant: &TenantId,
    import: &EntityId,
    sealed: &str,
) -> Option<Vec<MessageItem>> {
    let plain = shared::identity::sealing::open(key, &sealing_context(tenant, import), sealed)?;
    serde_json::from_slice(&plain).ok()
}

/// Checks that every string of `value` (keys included) holds only characters SQS takes in a
/// message (`#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF`), `path` naming it in
/// a 400: JSON allows control characters and U+FFFE/U+FFFF in strings, and SQS refuses them.
pub fn check_sendable(value: &serde_json::Value, path: &str) -> Result<(), shared::ApiError> {
    use serde_json::Value;
    let sendable = |text: &str| {
        text.chars().all(|c| {
            matches!(c, '\u{9}' | '\u{A}' | '\u{D}' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
        })
    };
    let refused = || {
        shared::ApiError::bad_request(
            path,
            "holds a control character, U+FFFE or U+FFFF, which a queue message cannot carry",
        )
    };
    match value {
        Value::String(text) if !sendable(text) => Err(refused()),
        Value::Object(map) => map.iter().try_for_each(|(k, v)| {
            if sendable(k) {
                check_sendable(v, path)
            } else {
                Err(refused())
            }
        }),
        Value::Array(items) => items.iter().try_for_each(|v| check_sendable(v, path)),
        _ => Ok(()),
    }
}

/// The signature of a message for `tenant` with `body`.
pub fn sign(keys: &CursorKeys, tenant: &TenantId, body: &str) -> String {
    keys.sign_for(SIGNING_DOMAIN, &signed_text(tenant, body))
}

/// Whether `signature` is [`sign`]'s for `tenant` and `body`.
pub fn verify(keys: &CursorKeys, tenant: &TenantId, body: &str, signature: &str) -> bool {
    keys.verify_for(SIGNING_DOMAIN, &signed_text(tenant, body), signature)
}

/// A tenant id never holds a newline, so the tenant and body cannot be re-split another way.
fn signed_text(tenant: &TenantId, body: &str) -> String {
    format!("{tenant}\n{body}")
}

/// The import queue, for the producer (and the consumer's deferrals): built once per container, in
/// `main`.
#[derive(Debug, Clone)]
pub struct ImportQueue {
    pub client: aws_sdk_sqs::Client,
    pub url: String,
}

impl ImportQueue {
    /// `IMPORT_QUEUE_URL`, and a client with the function's own credentials.
    pub fn from_env() -> Result<Self, shared::service::app::ConfigError> {
        use shared::service::app::{env_var, lambda_sdk_config};
        let url = env_var("IMPORT_QUEUE_URL")?;
        let client = aws_sdk_sqs::Client::new(&lambda_sdk_config()?);
        Ok(Self { client, url })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> CursorKeys {
        CursorKeys::new(&[7; 32], None).unwrap()
    }

    #[test]
    fn a_signature_binds_the_tenant_and_the_body() {
        // GIVEN a message signed for acme
        let acme = TenantId::parse("acme").unwrap();
        let globex = TenantId::parse("globex").unwrap();
        let body = r#"{"importId":"i","items":[]}"#;
        let signature = sign(&keys(), &acme, body);
        // THEN it holds for acme and this body only
        assert!(verify(&keys(), &acme, body, &signature));
        assert!(!verify(&keys(), &globex, body, &signature));
        assert!(!verify(
            &keys(),
            &acme,
            r#"{"importId":"i","index":1}"#,
            &signature
        ));
    }

    #[test]
    fn a_message_item_reads_back_as_its_kind_and_a_products_bytes_are_unchanged() {
        // GIVEN a product item as messages carried it before imports took other kinds
        let product = r#"{"index":3,"productId":"p-1","document":{"name":"lamp"}}"#;
        let read: MessageItem = serde_json::from_str(product).unwrap();
        // THEN it reads as a product and is written back byte for byte
        assert_eq!(read.item.kind(), ImportKind::Products);
        assert_eq!(serde_json::to_string(&read).unwrap(), product);
        // AND a department and an employee read back as theirs, by their fields
        for (text, kind) in [
            (
                r#"{"index":0,"departmentId":"eng","name":"Engineering"}"#,
                ImportKind::Departments,
            ),
            (
                r#"{"index":1,"employeeId":"e-1","name":"Ada","departmentId":"eng"}"#,
                ImportKind::Employees,
            ),
            (
                r#"{"index":2,"employeeId":"e-2","name":"Bo","departmentId":"eng","email":"b@x"}"#,
                ImportKind::Employees,
            ),
        ] {
            let read: MessageItem = serde_json::from_str(text).unwrap();
            assert_eq!(read.item.kind(), kind, "{text}");
            assert_eq!(serde_json::to_string(&read).unwrap(), text);
        }
        // AND an item with a field of no kind reads as none
        assert!(serde_json::from_str::<MessageItem>(
            r#"{"index":0,"departmentId":"eng","name":"E","extra":1}"#
        )
        .is_err());
    }

    #[test]
    fn only_what_sqs_takes_is_sendable() {
        assert!(check_sendable(&serde_json::json!({"a": "tab\tnew\nline ü 😀"}), "d").is_ok());
        for bad in ["\u{1}", "\u{FFFE}", "\u{FFFF}", "\u{1F}"] {
            assert!(
                check_sendable(&serde_json::json!({"a": bad}), "d").is_err(),
                "{bad:?}"
            );
            assert!(
                check_sendable(&serde_json::json!({ bad: 1 }), "d").is_err(),
                "{bad:?}"
            );
            assert!(
                check_sendable(&serde_json::json!([[bad]]), "d").is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn golden_message_body_with_its_items_sealed_for_its_tenant_and_import() {
        let (tenant, import) = (
            TenantId::parse("acme").unwrap(),
            EntityId::parse("imp-1").unwrap(),
        );
        let items = vec![MessageItem {
            index: 3,
            item: ImportItem::Product(ProductItem {
                product_id: EntityId::parse("p-1").unwrap(),
                document: serde_json::json!({"name": "lamp"}),
            }),
        }];
        let key = [5u8; 32];
        let message = ImportMessage {
            import_id: import.clone(),
            kind: ImportKind::Products,
            issued_at: 1_795_154_400_000,
            tenant_since: "2026-11-20T06:00:00Z".into(),
            sealed_items: seal_items(&key, &tenant, &import, &items).unwrap(),
            key_version: None,
        };
        let body = serde_json::to_string(&message).unwrap();
        assert!(body.starts_with(
            r#"{"importId":"imp-1","kind":"products","issuedAt":1795154400000,"tenantSince":"2026-11-20T06:00:00Z","sealedItems":""#
        ));
        assert!(!body.contains("lamp"), "{body}");
        assert_eq!(
            open_items(&key, &tenant, &import, &message.sealed_items),
            Some(items)
        );
        // another tenant's or import's context does not open them
        let other = TenantId::parse("globex").unwrap();
        assert_eq!(
            open_items(&key, &other, &import, &message.sealed_items),
            None
        );
        assert_eq!(
            sealing_context(&tenant, &import),
            "pooltable-import-items-v1\nacme\nimp-1"
        );
    }
}
