//! A tenant's own table (`<pool>-tenant-<tenant>`): its name, and what an operator path's session
//! of that tenant may do to it. Table management of an own table goes through the tenant's
//! operator session, so IAM binds it to the tenant: the tenant-operator role allows these actions
//! on `<pool>-tenant-${aws:PrincipalTag/TenantId}` only when the table's `tenant` tag is that
//! tenant, and the session policy names the one table.

use super::{AnyStatement, TableLocation};
use crate::identity::ids::TenantId;

/// The infix of every own table: `<pool><OWN_TABLE_INFIX><tenant id>`.
pub const OWN_TABLE_INFIX: &str = "-tenant-";

/// What an operator's session may do to its tenant's own table: change it (deletion protection,
/// time to live, point-in-time recovery) and delete it. Made and described with the function's own
/// credentials (which cannot reach its items).
pub const OWN_TABLE_ACTIONS: [&str; 4] = [
    "dynamodb:UpdateTable",
    "dynamodb:DeleteTable",
    "dynamodb:UpdateTimeToLive",
    "dynamodb:UpdateContinuousBackups",
];

/// The own table of `tenant` beside `pool`; `None` when the name would be over DynamoDB's 255
/// characters (a pool name over 183 characters leaves no room for every tenant id).
pub fn own_table_name(pool: &str, tenant: &TenantId) -> Option<String> {
    let name = format!("{pool}{OWN_TABLE_INFIX}{tenant}");
    (name.len() <= 255).then_some(name)
}

/// An operator session's statement on its tenant's own table (`pool` locates it).
pub(super) fn own_table_statement(pool: &TableLocation, tenant: &TenantId) -> Option<AnyStatement> {
    let own = own_table_name(&pool.table_name, tenant)?;
    Some(AnyStatement::Table(super::TableStatement {
        sid: "OwnTableManagement",
        effect: "Allow",
        action: OWN_TABLE_ACTIONS.to_vec(),
        resource: vec![pool.of_table(&own).table_arn()],
    }))
}
