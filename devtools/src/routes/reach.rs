//! What a function's role holds, declared in routes.yaml (`reaches`, `platform`): `pooltable gen`
//! writes each function's role from it (`generate::roles`), and tests/tests/all/roles.rs evaluates
//! every role against it.

use std::collections::BTreeSet;

use serde::Deserialize;

/// What a function reaches besides what every function holds (its log lines and traces). Each is
/// one managed policy of template.in.yaml, `<Reach in PascalCase>Policy` ([`Reach::policy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reach {
    /// Tenants' sessions (the tenant-access role), the signing keys and tenant records' reads:
    /// every route has it.
    TenantSessions,
    /// The offboarding reports of an operator's tenant id (`App::refusal`): every route has it.
    OffboardingReports,
    /// The operator paths' sessions (the tenant-operator role: a tenant's record written).
    OperatorSessions,
    /// Tenants' keys (`shared::store::keys`): made at onboarding (or keying) and rotated, destroyed
    /// at offboarding.
    TenantKeys,
    /// Tenants' keys destroyed only (their rows deleted): what an offboarding's end needs, never
    /// a key made.
    TenantKeysShredding,
    /// Own tables (`<pool>-tenant-*`): made, described, tagged once.
    OwnTables,
    /// Own tables described only (there or not, active or not): what a move back to the pool or an
    /// offboarding needs before the tenant's operator session deletes one, never a table made.
    OwnTablesReading,
    /// Restore copies (`<pool>-restore-*`) and the pool's point-in-time restore.
    RestoreTables,
    /// Restore copies read (GetItem, Query), described and dropped only: what a restore's lanes and
    /// its end need, never a point-in-time restore started (nor its copy's writes, which only the
    /// restore's own making needs).
    RestoreTablesReading,
    /// Sending to the import queue.
    ImportQueueSend,
    /// Receiving, deleting and re-sending the import queue's messages.
    ImportQueueConsume,
    /// Sending an operation's lanes to the lane queue.
    LaneQueueSend,
    /// Receiving and deleting the lane queue's messages, and sending a lane's next turn.
    LaneQueueConsume,
    /// The control plane's bus (replies, with the application plane's source) and dead letters.
    ControlPlaneBus,
    /// The table's stream, the lifecycle bus and the publisher's dead letters.
    TableStream,
}

impl Reach {
    /// The managed policy of template.in.yaml that grants it.
    pub fn policy(self) -> String {
        format!("{}Policy", pascal_case(self.name()))
    }

    /// Its name in routes.yaml.
    pub fn name(self) -> &'static str {
        match self {
            Reach::TenantSessions => "tenant-sessions",
            Reach::OffboardingReports => "offboarding-reports",
            Reach::OperatorSessions => "operator-sessions",
            Reach::TenantKeys => "tenant-keys",
            Reach::TenantKeysShredding => "tenant-keys-shredding",
            Reach::OwnTables => "own-tables",
            Reach::OwnTablesReading => "own-tables-reading",
            Reach::RestoreTables => "restore-tables",
            Reach::RestoreTablesReading => "restore-tables-reading",
            Reach::ImportQueueSend => "import-queue-send",
            Reach::ImportQueueConsume => "import-queue-consume",
            Reach::LaneQueueSend => "lane-queue-send",
            Reach::LaneQueueConsume => "lane-queue-consume",
            Reach::ControlPlaneBus => "control-plane-bus",
            Reach::TableStream => "table-stream",
        }
    }

    /// Whether the role's calls make tables under the table's key (CreateTable, a restore): the
    /// key's grants (`TableKeyGrantsPolicy`, with TableKmsKeyArn).
    pub fn makes_tables(self) -> bool {
        matches!(self, Reach::OwnTables | Reach::RestoreTables)
    }

    /// Whether the role's calls read or write table data (the key's use, `TableKeyUsePolicy`).
    pub fn reads_table_data(self) -> bool {
        matches!(
            self,
            Reach::TenantSessions | Reach::TableStream | Reach::RestoreTablesReading
        ) || self.makes_tables()
    }
}

/// Which sessions of the platform's partition (`_platform`) a function with tenant sessions takes:
/// its role's `PlatformSessions` tag, which the tenant-access role's trust policy holds its sessions
/// to, and its `PLATFORM_SESSION_ACCESS` (shared::isolation::policy::PlatformAccess).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlatformSessions {
    /// Adding to the platform's usage counters only: every function's, unless it names another.
    #[default]
    Usage,
    /// Reads, and the usage counters (the usage reader).
    Read,
    /// The imports' deadline list, and the usage counters (the import producer).
    ImportsDue,
    /// Every key (the functions that act as the platform).
    All,
}

impl PlatformSessions {
    pub fn as_str(self) -> &'static str {
        match self {
            PlatformSessions::Usage => "usage",
            PlatformSessions::Read => "read",
            PlatformSessions::ImportsDue => "imports-due",
            PlatformSessions::All => "all",
        }
    }
}

/// `own-tables` → `OwnTables`.
pub fn pascal_case(kebab: &str) -> String {
    kebab
        .split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// A route's reaches: what it declares, and what every route has (tenant sessions, offboarding
/// reports).
pub fn with_route_defaults(declared: &[Reach], is_route: bool) -> BTreeSet<Reach> {
    let mut all: BTreeSet<Reach> = declared.iter().copied().collect();
    if is_route {
        all.extend([Reach::TenantSessions, Reach::OffboardingReports]);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reach_names_its_policy() {
        assert_eq!(Reach::OwnTables.policy(), "OwnTablesPolicy");
        assert_eq!(Reach::ImportQueueSend.policy(), "ImportQueueSendPolicy");
        assert_eq!(Reach::TenantSessions.policy(), "TenantSessionsPolicy");
    }
}
