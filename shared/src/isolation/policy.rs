//! The inline session policy passed to STS AssumeRole for one tenant. Built with serde, never by
//! string replacement: the tenant id is already validated, and serde escapes whatever JSON needs.
//!
//! The effective permissions of the tenant's credentials are the intersection of the tenant-access
//! role's policy and this one, so even a bug in the function cannot reach past the tenant's prefix.

use std::sync::Arc;

use serde::Serialize;
use thiserror::Error;

use crate::identity::ids::TenantId;
use crate::identity::keys::{
    quota_window_pk_prefix, tenant_prefix, tenant_record_key, usage_counter_pk_prefix,
};

/// The item-level actions the functions use. Never Scan, never PartiQL (`ExecuteStatement`, …), and
/// no batch operations (no code path sends one with tenant credentials).
pub const TENANT_ACTIONS: [&str; 6] = [
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:Query",
    "dynamodb:ConditionCheckItem",
];

/// The session tag every tenant session carries, naming its tenant. The tenant-access role's own
/// policy (template.yaml) allows item actions only where `dynamodb:LeadingKeys` is
/// `TENANT#${aws:PrincipalTag/TenantId}#*`, and its trust policy refuses an AssumeRole without it, so
/// the role is bound to one tenant per session even when no session policy is sent. A tenant id
/// (`[A-Za-z0-9_-]{1,64}`) is always a valid tag value (STS: `[\p{L}\p{Z}\p{N}_.:/=+\-@]{0,256}`).
pub const TENANT_TAG_KEY: &str = "TenantId";

/// What a tenant in its own table may do to its record in the pool: read it, change it, write it at
/// onboarding and delete it at offboarding, and check it in a transaction. Never a Query.
pub const RECORD_ACTIONS: [&str; 5] = [
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
];

/// The writes no tenant session may send to its own record (`TENANT#<t>#TENANT`): the record holds
/// the tenant's status, tier, limits and placement, so only an operator's or the platform's session
/// ([`Scope::Operator`]) changes it. Reads and condition checks of it stay allowed.
pub const RECORD_WRITE_ACTIONS: [&str; 3] = [
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
];

/// Whose session a tenant's credentials are: a tenant route's ([`Scope::Tenant`], which may not write
/// the tenant's record), a read-only route's ([`Scope::Reader`]), or an operator path's
/// ([`Scope::Operator`]: onboarding, a tier or status change, a re-sharding, a move, a restore, an
/// offboarding), which assumes the tenant-operator role that no tenant route's function may assume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Tenant,
    /// A route whose declared requests are reads (routes.yaml): its session reads the tenant's
    /// items and writes only its metering counters (quota windows, usage counters: every request
    /// adds to them). While its tenant moves between placements, the session also holds the item
    /// writes the pull makes under every request (`store::client::pull`), on the puller's client
    /// only: the route's own client is refused every other write by the guard.
    Reader,
    Operator,
}

/// The writes a reader's session sends: adding to its metering counters.
pub const METERING_ACTIONS: [&str; 1] = ["dynamodb:UpdateItem"];

/// STS refuses a packed session policy above 2,048 characters.
pub const MAX_POLICY_CHARS: usize = 2048;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyError {
    #[error("the session policy is {0} characters, over STS's limit of {MAX_POLICY_CHARS}")]
    TooLarge(usize),
    #[error("TENANT_ROLE_ARN is not an IAM role ARN (arn:<partition>:iam::<account>:role/<name>)")]
    BadRoleArn,
}

/// Where the table lives. The table ARN is derived, not configured, so it cannot disagree with
/// `TABLE_NAME`: partition and account come from the tenant role's ARN, region from `AWS_REGION`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableLocation {
    pub partition: String,
    pub region: String,
    pub account: String,
    pub table_name: String,
}

impl TableLocation {
    pub fn from_role_arn(
        role_arn: &str,
        region: &str,
        table_name: &str,
    ) -> Result<Self, PolicyError> {
        let parts: Vec<&str> = role_arn.splitn(6, ':').collect();
        match parts.as_slice() {
            ["arn", partition, "iam", "", account, resource]
                if !partition.is_empty()
                    && account.len() == 12
                    && account.bytes().all(|b| b.is_ascii_digit())
                    && resource.starts_with("role/") =>
            {
                Ok(Self {
                    partition: (*partition).to_owned(),
                    region: region.to_owned(),
                    account: (*account).to_owned(),
                    table_name: table_name.to_owned(),
                })
            }
            _ => Err(PolicyError::BadRoleArn),
        }
    }

    pub fn table_arn(&self) -> String {
        format!(
            "arn:{}:dynamodb:{}:{}:table/{}",
            self.partition, self.region, self.account, self.table_name
        )
    }

    pub fn indexes_arn(&self) -> String {
        format!("{}/index/*", self.table_arn())
    }

    /// The table `table_name` in the same partition, region and account.
    pub fn of_table(&self, table_name: &str) -> Self {
        Self {
            table_name: table_name.to_owned(),
            ..self.clone()
        }
    }
}

/// The tables one tenant's credentials reach: the table of its items (the pool, or its own table)
/// and the pool, which keeps its record whatever its placement (the directory every container reads),
/// and, while its items move between the two, the other one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TenantTables {
    pub items: Arc<str>,
    pub record: Arc<str>,
    /// While a move between placements runs: the other items table.
    pub moving: Option<Moving>,
}

/// The other items table of a move between placements (`store::lifecycle::moving`), as one
/// container sees it at one time: what its credentials and guard allow besides `items`, and
/// whether items are pulled from it before `items` is touched.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Moving {
    pub other: Arc<str>,
    /// Writes have moved to `items`: every item is pulled out of `other` before a request
    /// touches it (`store::client::pull`). Before that, `other` is the target, still empty.
    pub pull: bool,
    /// Epoch seconds from which every attempt writes the target (the move's `writesMoveAt`).
    pub writes_move_at: u64,
    /// Epoch seconds from which no request can still write `other` (the move's `movesStartAt`);
    /// also the move's identity, so no two moves share a cached client.
    pub settled_at: u64,
}

impl TenantTables {
    /// A pooled tenant: its items and its record in the pool.
    pub fn pooled(pool: &str) -> Self {
        let pool: Arc<str> = Arc::from(pool);
        Self {
            items: pool.clone(),
            record: pool,
            moving: None,
        }
    }

    /// A tenant in its own table `items`; its record stays in `pool`.
    pub fn own(items: &str, pool: &str) -> Self {
        Self {
            items: Arc::from(items),
            record: Arc::from(pool),
            moving: None,
        }
    }

    /// These tables while a move runs: `moving.other` is reachable besides.
    pub fn with_move(self, moving: Moving) -> Self {
        Self {
            moving: Some(moving),
            ..self
        }
    }

    pub fn is_pooled(&self) -> bool {
        self.items == self.record
    }

    /// The items tables: `items`, and the move's other table while one runs.
    pub fn item_tables(&self) -> impl Iterator<Item = &Arc<str>> {
        std::iter::once(&self.items).chain(self.moving.as_ref().map(|m| &m.other))
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct PolicyDocument {
    version: &'static str,
    statement: Vec<AnyStatement>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Statement {
    sid: &'static str,
    effect: &'static str,
    action: Vec<&'static str>,
    resource: Vec<String>,
    condition: Condition,
}

/// The tenant session's refusal of writes to its record: `Resource: "*"` (a Deny may be broad, and
/// the policy stays under STS's size limit whatever the tables' names).
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct DenyStatement {
    sid: &'static str,
    effect: &'static str,
    action: Vec<&'static str>,
    resource: &'static str,
    condition: AnyLeadingKey,
}

#[derive(Serialize)]
struct AnyLeadingKey {
    #[serde(rename = "ForAnyValue:StringEquals")]
    for_any_value_string_equals: LeadingKeys<Vec<String>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum AnyStatement {
    Allow(Statement),
    Deny(DenyStatement),
    Table(TableStatement),
}

/// A statement on a table itself (no item keys): an operator session's on its tenant's own table.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct TableStatement {
    sid: &'static str,
    effect: &'static str,
    action: Vec<&'static str>,
    resource: Vec<String>,
}

#[derive(Serialize)]
struct Condition {
    #[serde(
        rename = "ForAllValues:StringLike",
        skip_serializing_if = "Option::is_none"
    )]
    for_all_values_string_like: Option<LeadingKeys<Vec<String>>>,
    #[serde(
        rename = "ForAllValues:StringEquals",
        skip_serializing_if = "Option::is_none"
    )]
    for_all_values_string_equals: Option<StringEqualsKeys>,
    #[serde(
        rename = "StringEqualsIfExists",
        skip_serializing_if = "Option::is_none"
    )]
    string_equals_if_exists: Option<ReturnValuesKey>,
    /// `ForAllValues` is vacuously true on an empty set: `Null = false` demands the key is present.
    #[serde(rename = "Null")]
    null: LeadingKeys<&'static str>,
}

/// The only `ReturnValues` a request may ask for (a `StringEqualsIfExists`).
#[derive(Serialize)]
struct ReturnValuesKey {
    #[serde(rename = "dynamodb:ReturnValues")]
    return_values: Vec<&'static str>,
}

/// The keys of a `ForAllValues:StringEquals`: exact leading keys, or the only attributes a request
/// may name.
#[derive(Serialize, Default)]
struct StringEqualsKeys {
    #[serde(
        rename = "dynamodb:LeadingKeys",
        skip_serializing_if = "Option::is_none"
    )]
    leading_keys: Option<Vec<String>>,
    #[serde(
        rename = "dynamodb:Attributes",
        skip_serializing_if = "Option::is_none"
    )]
    attributes: Option<Vec<&'static str>>,
}

impl StringEqualsKeys {
    fn attributes(names: Vec<&'static str>) -> Self {
        Self {
            attributes: Some(names),
            ..Self::default()
        }
    }
}

#[derive(Serialize)]
struct LeadingKeys<T> {
    #[serde(rename = "dynamodb:LeadingKeys")]
    leading_keys: T,
}

/// The session policy for a pooled `tenant` of the pool at `table`, as the compact JSON string sent
/// to STS.
pub fn session_policy(tenant: &TenantId, table: &TableLocation) -> Result<String, PolicyError> {
    session_policy_for(tenant, table, &TenantTables::pooled(&table.table_name))
}

/// The session policy of a tenant route for `tenant` placed in `tables` (`pool` locates the tables:
/// partition, region, account): its keys in its items' table and that table's indexes, and, when
/// that is its own table, its record's partition of the pool and nothing else of it (no index, no
/// Query); never a write of its record.
pub fn session_policy_for(
    tenant: &TenantId,
    pool: &TableLocation,
    tables: &TenantTables,
) -> Result<String, PolicyError> {
    scoped_session_policy(tenant, pool, tables, Scope::Tenant)
}

/// [`session_policy_for`] of a session in `scope`: an operator's may also write the record.
pub fn scoped_session_policy(
    tenant: &TenantId,
    pool: &TableLocation,
    tables: &TenantTables,
    scope: Scope,
) -> Result<String, PolicyError> {
    let resource: Vec<String> = tables
        .item_tables()
        .map(|t| pool.of_table(t))
        .flat_map(|t| [t.table_arn(), t.indexes_arn()])
        .collect();
    // A reader's session reads, and writes its counters (below); while its tenant moves, the pull's
    // writes are its too.
    let reads_only = scope == Scope::Reader && tables.moving.is_none();
    let mut statement = vec![AnyStatement::Allow(Statement {
        sid: "TenantItemsOnly",
        effect: "Allow",
        action: match reads_only {
            true => READ_ACTIONS.to_vec(),
            false => TENANT_ACTIONS.to_vec(),
        },
        resource,
        condition: leading_keys_like(vec![format!("{}*", tenant_prefix(tenant))]),
    })];
    if reads_only {
        statement.push(AnyStatement::Allow(Statement {
            sid: "MeteringCounters",
            effect: "Allow",
            action: METERING_ACTIONS.to_vec(),
            // The items table's, never an index's: a counter is written where its tenant's items are.
            resource: vec![pool.of_table(&tables.items).table_arn()],
            condition: leading_keys_like(vec![
                format!("{}*", usage_counter_pk_prefix(tenant)),
                format!("{}*", quota_window_pk_prefix(tenant)),
            ]),
        }));
    }
    if !tables.item_tables().any(|t| *t == tables.record) {
        statement.push(AnyStatement::Allow(Statement {
            sid: "TenantRecordOnly",
            effect: "Allow",
            // A reader's: the record's reads only (GetItem, and its check in a transaction).
            action: match reads_only {
                true => vec![RECORD_ACTIONS[0], RECORD_ACTIONS[4]],
                false => RECORD_ACTIONS.to_vec(),
            },
            resource: vec![pool.of_table(&tables.record).table_arn()],
            condition: leading_key_equals(tenant_record_key(tenant)),
        }));
    }
    if scope == Scope::Operator {
        statement.extend(own_tables::own_table_statement(pool, tenant));
    }
    if scope != Scope::Operator {
        statement.push(AnyStatement::Deny(DenyStatement {
            sid: "NoRecordWrites",
            effect: "Deny",
            action: RECORD_WRITE_ACTIONS.to_vec(),
            resource: "*",
            condition: AnyLeadingKey {
                for_any_value_string_equals: LeadingKeys {
                    leading_keys: vec![tenant_record_key(tenant)],
                },
            },
        }));
    }
    match packed(statement) {
        // A reader's names more than a tenant route's. Past STS's limit (only a pool named past
        // about 80 characters, with a 64-character tenant id in its own table: the template's pool
        // is `pooltable-<Stage>`, at most 25) it goes as a tenant route's, and the guard alone holds
        // the route's client to reads.
        Err(PolicyError::TooLarge(chars)) if reads_only => {
            tracing::warn!(tenant = %tenant, chars, "a reader's session policy is past STS's limit: sent as a tenant route's");
            scoped_session_policy(tenant, pool, tables, Scope::Tenant)
        }
        other => other,
    }
}

/// A condition that every leading key of a request is like one of `patterns`, and that it names one.
fn leading_keys_like(patterns: Vec<String>) -> Condition {
    Condition {
        for_all_values_string_like: Some(LeadingKeys {
            leading_keys: patterns,
        }),
        for_all_values_string_equals: None,
        string_equals_if_exists: None,
        null: LeadingKeys {
            leading_keys: "false",
        },
    }
}

/// A condition that every leading key of a request is exactly `key`, and that it names one.
fn leading_key_equals(key: String) -> Condition {
    Condition {
        for_all_values_string_like: None,
        for_all_values_string_equals: Some(StringEqualsKeys {
            leading_keys: Some(vec![key]),
            ..StringEqualsKeys::default()
        }),
        string_equals_if_exists: None,
        null: LeadingKeys {
            leading_keys: "false",
        },
    }
}

/// The policy of `statement`, as the compact JSON string sent to STS; refused over STS's limit.
fn packed(statement: Vec<AnyStatement>) -> Result<String, PolicyError> {
    let doc = PolicyDocument {
        version: "2012-10-17",
        statement,
    };
    // Serializing plain structs of strings cannot fail.
    let json = serde_json::to_string(&doc).unwrap_or_default();
    if json.len() > MAX_POLICY_CHARS {
        return Err(PolicyError::TooLarge(json.len()));
    }
    Ok(json)
}

mod own_tables;
mod platform;
pub use own_tables::{own_table_name, OWN_TABLE_ACTIONS, OWN_TABLE_INFIX};
pub use platform::{
    platform_session_policy, NarrowedStatement, PlatformAccess, PLATFORM_ACCESS_TAG_KEY,
    READ_ACTIONS,
};

#[cfg(test)]
mod tests;
