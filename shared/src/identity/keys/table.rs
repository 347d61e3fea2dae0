//! The key table, made by the builders themselves: one row per kind of item, its `PK` and `SK` as
//! the builders write them for a sample tenant (`acme`, 4 shards). `pooltable gen` renders it into
//! `docs/key-scheme.md` and ARCHITECTURE, and `gen --check` fails when a key's bytes change: the
//! golden test of every key family.

use super::*;
use crate::identity::entities::{DEPARTMENT, EMPLOYEE, HR, PRODUCT, PRODUCTS, USER};
use crate::identity::ids::{EntityId, SessionId};

/// One row of the key table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    pub item: &'static str,
    pub pk: String,
    pub sk: String,
    /// What the item's GSI1 partition (its `SK`) serves, or a note.
    pub serves: &'static str,
}

/// The sample tenant's shard count in the table.
pub const SAMPLE_SHARDS: u32 = 4;

fn id(raw: &str) -> EntityId {
    EntityId::parse(raw).expect("a sample id is valid")
}

fn sharded(space: &str, kind: &str, raw: &str) -> (String, String) {
    let t = sample_tenant();
    let key = sharded_entity_key(&t, space, kind, &id(raw), SAMPLE_SHARDS);
    let s = |name: &str| match key.get(name) {
        Some(aws_sdk_dynamodb::types::AttributeValue::S(v)) => v.clone(),
        _ => String::new(),
    };
    (s(PK), s(SK))
}

fn sample_tenant() -> TenantId {
    TenantId::parse("acme").expect("a sample tenant is valid")
}

/// Every kind of item the table holds, in the order the docs show them.
pub fn key_table() -> Vec<KeyRow> {
    let t = sample_tenant();
    let session = SessionId::parse("0190f1b2-3c4d-7e5f-8a6b-7c8d9e0f1a2b").expect("valid");
    let child = SessionId::parse("0190f1b2-3c4d-7e5f-8a6b-7c8d9e0f1a2c").expect("valid");
    let row = |item, pk: String, sk: String, serves| KeyRow {
        item,
        pk,
        sk,
        serves,
    };
    let same = |item, key: String, serves| KeyRow {
        item,
        pk: key.clone(),
        sk: key,
        serves,
    };
    let (product_pk, product_sk) = sharded(PRODUCTS.kind, PRODUCT.kind, "p-1");
    let (employee_pk, employee_sk) = sharded(HR.kind, EMPLOYEE.kind, "e-7");
    let (department_pk, department_sk) = sharded(HR.kind, DEPARTMENT.kind, "eng");
    let order = id("o-9");
    vec![
        row(
            "root session",
            session_pk(&t, &session),
            customer_sk(&t, &id("cust-42")),
            "a customer's sessions, by session id (= time)",
        ),
        row(
            "child session",
            session_pk(&t, &session),
            child_sk(&t, &child),
            "child → parent",
        ),
        same("tenant record", tenant_record_key(&t), ""),
        row(
            "product",
            product_pk,
            product_sk,
            "`PK`: `fnv1a64(id) mod N` of the tenant's N shards",
        ),
        row(
            "employee",
            employee_pk,
            employee_sk,
            "in the HR shards, like departments",
        ),
        row("department", department_pk, department_sk, ""),
        row(
            "membership",
            department_members_pk(&t, &id("eng")),
            entity_sk(&t, EMPLOYEE.kind, &id("e-7")),
            "a department's employees",
        ),
        same("user profile", user_key(&t, &id("u-1")), ""),
        same(
            "email uniqueness",
            email_key(&t, "ada@example.com"),
            "lowercased email",
        ),
        same(
            "order header",
            order_key(&t, &order),
            "the order's header and its user's summary",
        ),
        row(
            "order line item",
            order_key(&t, &order),
            order_line_sk(&t, &order, &id("line-2")),
            "",
        ),
        row(
            "order summary",
            user_key(&t, &id("u-1")),
            order_key(&t, &order),
            "(see order header)",
        ),
        row(
            "order date index",
            order_date_pk(&t, "2026-11-05", &order),
            order_month_sk(&t, "2026-11", 3),
            "a month's orders on one shard, by date then id",
        ),
        same(
            "transfer code",
            transfer_key(&t, "0123456789abcdef0123456789abcdef"),
            "`expiresAt`: now + 900 s",
        ),
        same(
            "integration token",
            integration_key(&t, &id("github")),
            "`expiresAt`",
        ),
        row(
            "usage counter",
            usage_counter_pk(&t, 3),
            usage_counter_sk(&t, "2026-11-21", "get-product", 3),
            "one day's count of a route, on one of 8 shards",
        ),
        row(
            "quota window",
            quota_window_pk(&t, 2),
            quota_window_sk(&t, 1_795_240_800, 2),
            "one second's window, on one shard (TTL 60 s)",
        ),
        same(
            "idempotency record",
            idempotency_record_key(&t, "create-order", "order-2026-11-22_a"),
            "TTL 24 h",
        ),
        same("import record", import_key(&t, &id("0f3c")), "TTL 14 days"),
        row(
            "import item marker",
            import_key(&t, &id("0f3c")),
            import_item_sk(&t, &id("0f3c"), 7),
            "one per item, written once (`outcome`)",
        ),
        row(
            "import copy marker",
            import_key(&t, &id("0f3c")),
            import_copy_sk(&t, &id("0f3c"), "9d1e5c0a7b3f2e41", 1),
            "a deferred or held message's copy on the queue, sent once per generation",
        ),
        same(
            "import sealing key",
            import_sealing_key(&t),
            "seals a keyless tenant's import messages (`key`; online keying seals it under the data key: `retiredKey`); holds `openImports` (≤ 200); offboarding deletes it",
        ),
        same(
            "deletion tombstone",
            deletion_key(&t, PRODUCT.kind, &id("p-1")),
            "products and employees; imports accepted before the delete check it",
        ),
        same(
            "erasure record",
            erasure_key(&t, USER.kind, &id("u-1")),
            "a user erased (and each of its orders): a restore never brings them back; kept until offboarding",
        ),
        same(
            "lifecycle lane",
            lane_key(&t, "offboarding", 7),
            "one part of an operation's walk, with its checkpoint, alone in its partition; deleted when the operation ends",
        ),
        row(
            "offboarding report",
            offboarding_reports_pk(&t),
            offboarding_report_sk(&t, "2026-11-24T10:00:00.000Z"),
            "the platform's partition: no request names `_platform`",
        ),
        row(
            "lifecycle driver's list",
            lifecycle_drive_pk(),
            lifecycle_drive_sk(&t),
            "one entry per re-sharding, move, restore or offboarding in progress",
        ),
        row(
            "copy for the driver to delete",
            copies_to_delete_pk(),
            copy_to_delete_sk("pooltable-dev-restore-acme-1764000000000"),
            "a point-in-time copy an aborted restore may leave; deleted with its table",
        ),
        row(
            "control plane's requests",
            control_requests_pk(),
            control_request_sk("onboarding#8f1c2b7e"),
            "one entry per SaaS Builder Toolkit request, answered once (15 days)",
        ),
        row(
            "imports' deadline list",
            import_due_shard_pk(1),
            import_due_sk(1_764_000_000_000, &t, &id("0f3c")),
            "the driver closes each import once due",
        ),
        row(
            "catalog entry (GSI2)",
            catalog_shard_key(&t, 11),
            "(the item's `PK`)".to_owned(),
            "`catalog` of every item in an id-named partition",
        ),
    ]
}

/// The table as Markdown.
pub fn key_table_markdown() -> String {
    let mut out = String::from("| item | PK | SK | serves / note |\n|---|---|---|---|\n");
    for r in key_table() {
        let code = |v: &str| {
            if v.starts_with('(') {
                v.to_owned()
            } else {
                format!("`{v}`")
            }
        };
        let sk = if r.sk == r.pk {
            "same".to_owned()
        } else {
            code(&r.sk)
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.item,
            code(&r.pk),
            sk,
            r.serves
        ));
    }
    out
}
