//! The narrowed sessions of the platform's partition ([`PlatformAccess`]).

use super::{
    scoped_session_policy, AnyStatement, PolicyError, Scope, Statement, TableLocation, TenantTables,
};
use crate::identity::ids::TenantId;
use crate::identity::keys::tenant_prefix;

/// The read actions of [`super::TENANT_ACTIONS`]: what a read-only session of the platform's partition
/// holds of it ([`PlatformAccess::Read`]).
pub const READ_ACTIONS: [&str; 3] = [
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:ConditionCheckItem",
];

/// The session tag a narrowed session of the platform's partition carries (its value:
/// [`PlatformAccess::tag`]). The tenant-access role's trust policy demands it of the functions
/// whose roles it narrows, and the role's own policy denies what the value rules out, so the
/// narrowing holds even without the session policy.
pub const PLATFORM_ACCESS_TAG_KEY: &str = "PlatformAccess";

/// What a function may do in the platform's partition (`_platform`), set per function by
/// `PLATFORM_SESSION_ACCESS` (template.yaml) and held by the tenant-access role's trust policy,
/// which demands the matching [`PLATFORM_ACCESS_TAG_KEY`] tag of each function role:
/// - [`PlatformAccess::All`]: every key (offboarding, the lifecycle driver, the control plane);
/// - [`PlatformAccess::Usage`]: only adding to the platform's usage counters, which every function
///   does when a request pulls items out of a move's source (the pull is the platform's cost);
/// - [`PlatformAccess::Read`]: reads of every key, and the usage counters (the usage reader);
/// - [`PlatformAccess::ImportsDue`]: the imports' deadline list, and the usage counters
///   (`create-import`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PlatformAccess {
    #[default]
    All,
    Usage,
    Read,
    ImportsDue,
}

impl PlatformAccess {
    /// The [`PLATFORM_ACCESS_TAG_KEY`] session tag's value; `None` for [`PlatformAccess::All`].
    pub fn tag(self) -> Option<&'static str> {
        match self {
            Self::All => None,
            Self::Usage => Some("usage"),
            Self::Read => Some("read"),
            Self::ImportsDue => Some("imports-due"),
        }
    }

    /// From `PLATFORM_SESSION_ACCESS`: `all` (or unset: local stacks, where no IAM is evaluated),
    /// `usage`, `read` or `imports-due`.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "" | "all" => Some(Self::All),
            "usage" => Some(Self::Usage),
            "read" => Some(Self::Read),
            "imports-due" => Some(Self::ImportsDue),
            _ => None,
        }
    }
}

/// One statement of a narrowed session of the platform's partition: `actions` on the keys starting
/// with `keys`, and, when `attributes` is given, touching no attribute outside it. The session
/// policy says it to IAM ([`platform_session_policy`]) and the in-process guard checks the same
/// (`isolation::guard`), so the two cannot drift apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NarrowedStatement {
    pub sid: &'static str,
    pub actions: Vec<&'static str>,
    /// The prefix of every partition key reached.
    pub keys: String,
    /// `dynamodb:Attributes`: the only attributes a request may name (the table's and its indexes'
    /// key attributes among them, as IAM requires).
    pub attributes: Option<Vec<&'static str>>,
    /// `dynamodb:ReturnValues`: the only `ReturnValues` a request may ask for, when it asks (IAM's
    /// `StringEqualsIfExists`: a request that does not ask returns nothing). The guard also
    /// refuses `ReturnValuesOnConditionCheckFailure` here, which IAM has no key for.
    pub return_values: Option<Vec<&'static str>>,
}

impl PlatformAccess {
    /// What a session narrowed to this access may do, statement by statement; `None` for
    /// [`PlatformAccess::All`] (the whole partition, under a tenant's rule).
    pub fn statements(self) -> Option<Vec<NarrowedStatement>> {
        use crate::identity::keys::{
            import_due_pk_prefix, usage_counter_pk_prefix, CATALOG, IMPORT_DUE_LISTING, PK, SK,
        };
        let platform = TenantId::platform();
        let usage = NarrowedStatement {
            sid: "PlatformUsageCounters",
            actions: vec!["dynamodb:UpdateItem"],
            keys: usage_counter_pk_prefix(&platform),
            attributes: None,
            return_values: None,
        };
        Some(match self {
            Self::All => return None,
            Self::Usage => vec![usage],
            Self::Read => vec![
                NarrowedStatement {
                    sid: "PlatformReads",
                    actions: READ_ACTIONS.to_vec(),
                    keys: tenant_prefix(&platform),
                    attributes: None,
                    return_values: None,
                },
                usage,
            ],
            // `create-import` lists an import (an upsert of the listing's attributes) and, when
            // the open imports' bound refuses it, unlists it: never anything else on the list. Above
            // all never the lifecycle driver's note of an import's close, which the pool's stream
            // carries as its `importFinished` (`store::lifecycle::driving::note_import_finished`).
            // It reads nothing back: an entry names another tenant's import and its counts.
            Self::ImportsDue => vec![
                NarrowedStatement {
                    sid: "ImportsDeadlineList",
                    actions: vec!["dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                    keys: import_due_pk_prefix(),
                    attributes: Some(
                        [PK, SK, CATALOG]
                            .into_iter()
                            .chain(IMPORT_DUE_LISTING)
                            .collect(),
                    ),
                    return_values: Some(vec!["NONE"]),
                },
                usage,
            ],
        })
    }
}

/// The session policy of a session of the platform's partition narrowed to `access` (pooled: the
/// partition has no own table): one statement per kind of access, each on its keys only
/// ([`PlatformAccess::statements`]).
pub fn platform_session_policy(
    pool: &TableLocation,
    access: PlatformAccess,
) -> Result<String, PolicyError> {
    let Some(statements) = access.statements() else {
        let platform = TenantId::platform();
        return scoped_session_policy(
            &platform,
            pool,
            &TenantTables::pooled(&pool.table_name),
            Scope::Tenant,
        );
    };
    let statement = statements
        .into_iter()
        .map(|s| {
            let mut condition = super::leading_keys_like(vec![format!("{}*", s.keys)]);
            condition.for_all_values_string_equals =
                s.attributes.map(super::StringEqualsKeys::attributes);
            condition.string_equals_if_exists = s
                .return_values
                .map(|return_values| super::ReturnValuesKey { return_values });
            AnyStatement::Allow(Statement {
                sid: s.sid,
                effect: "Allow",
                action: s.actions,
                resource: vec![pool.table_arn(), pool.indexes_arn()],
                condition,
            })
        })
        .collect();
    super::packed(statement)
}
