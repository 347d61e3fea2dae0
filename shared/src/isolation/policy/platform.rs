//! The narrowed sessions of the platform's partition ([`PlatformAccess`]).

use super::{
    scoped_session_policy, AnyStatement, PolicyError, Scope, Statement, TableLocation,
    TenantTables, TENANT_ACTIONS,
};
use crate::identity::ids::TenantId;
use crate::identity::keys::tenant_prefix;

/// The read actions of [`TENANT_ACTIONS`]: what a read-only session of the platform's partition
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

/// The session policy of a session of the platform's partition narrowed to `access` (pooled: the
/// partition has no own table): one statement per kind of access, each on its keys only.
pub fn platform_session_policy(
    pool: &TableLocation,
    access: PlatformAccess,
) -> Result<String, PolicyError> {
    use crate::identity::keys::{import_due_pk_prefix, usage_counter_pk_prefix};
    let platform = TenantId::platform();
    let usage = (
        "PlatformUsageCounters",
        vec!["dynamodb:UpdateItem"],
        usage_counter_pk_prefix(&platform),
    );
    let statements = match access {
        PlatformAccess::All => {
            return scoped_session_policy(
                &platform,
                pool,
                &TenantTables::pooled(&pool.table_name),
                Scope::Tenant,
            )
        }
        PlatformAccess::Usage => vec![usage],
        PlatformAccess::Read => vec![
            (
                "PlatformReads",
                READ_ACTIONS.to_vec(),
                tenant_prefix(&platform),
            ),
            usage,
        ],
        PlatformAccess::ImportsDue => vec![
            (
                "ImportsDeadlineList",
                TENANT_ACTIONS.to_vec(),
                import_due_pk_prefix(),
            ),
            usage,
        ],
    };
    let statement = statements
        .into_iter()
        .map(|(sid, action, keys)| {
            AnyStatement::Allow(Statement {
                sid,
                effect: "Allow",
                action,
                resource: vec![pool.table_arn(), pool.indexes_arn()],
                condition: super::leading_keys_like(vec![format!("{keys}*")]),
            })
        })
        .collect();
    super::packed(statement)
}
