//! Issue 56: an own table is changed and deleted only on its tenant's operator session, and only
//! while its `tenant` tag names that tenant. Three layers, each judged alone: the tenant-operator
//! role's policy (template.yaml, with the IAM evaluator), the operator session's policy
//! (`scoped_session_policy`), and the table manager's guard (`check_own_table`). (Taking a table
//! an operator made: tagged for its tenant, or refused when tagged for another, is
//! `shared::store::tenancy::placement`'s unit test: DynamoDB Local has no tagging.)

use std::collections::BTreeMap;

use aws_sdk_dynamodb::operation::delete_table::DeleteTableInput;
use aws_sdk_dynamodb::operation::get_item::GetItemInput;
use aws_smithy_runtime_api::client::interceptors::context::Input;
use integration::iam::{is_allowed, AuthzRequest};
use integration::template::{
    tenant_operator_role_policy, tenant_role_policy, DEV_ARNS, DEV_TABLE_ARN,
};
use serde_json::Value;
use shared::identity::ids::TenantId;
use shared::isolation::guard::check_own_table;
use shared::isolation::policy::{
    scoped_session_policy, Scope, TableLocation, TenantTables, OWN_TABLE_ACTIONS,
};

const POOL: &str = DEV_TABLE_ARN;

/// `action` on table `table` tagged `tenant = tagged` (untagged: `None`), by a session of `tenant`.
fn request(action: &str, table: &str, tagged: Option<&str>, tenant: &str) -> AuthzRequest {
    AuthzRequest {
        action: action.into(),
        resource: table.into(),
        principal_tags: [("TenantId".to_string(), tenant.to_string())].into(),
        resource_tags: tagged
            .map(|t| ("tenant".to_string(), t.to_string()))
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        ..AuthzRequest::default()
    }
}

#[test]
fn an_own_table_is_changed_and_deleted_only_by_its_tenants_operator_session_while_tagged_for_it() {
    // GIVEN the tenant-operator role's and the tenant-access role's policies as deployed, and the
    // session policy of acme's operator session
    let operator_role = tenant_operator_role_policy(&DEV_ARNS);
    let tenant_role = tenant_role_policy(&DEV_ARNS);
    let location = TableLocation::from_role_arn(
        "arn:aws:iam::123456789012:role/pooltable-dev-tenant-access",
        "us-east-1",
        "pooltable-dev",
    )
    .unwrap();
    let acme = TenantId::parse("acme").unwrap();
    let pooled = TenantTables::pooled("pooltable-dev");
    let operator_session: Value = serde_json::from_str(
        &scoped_session_policy(&acme, &location, &pooled, Scope::Operator).unwrap(),
    )
    .unwrap();
    let tenant_session: Value = serde_json::from_str(
        &scoped_session_policy(&acme, &location, &pooled, Scope::Tenant).unwrap(),
    )
    .unwrap();
    let own = format!("{POOL}-tenant-acme");
    let other = format!("{POOL}-tenant-globex");
    for action in OWN_TABLE_ACTIONS {
        // THEN acme's operator session changes and deletes acme's table while it is tagged acme
        let mine = request(action, &own, Some("acme"), "acme");
        assert!(is_allowed(&operator_role, &mine), "{action}");
        assert!(is_allowed(&operator_session, &mine), "{action}");
        // AND the role refuses it untagged or tagged for another tenant
        for tag in [None, Some("globex")] {
            let r = request(action, &own, tag, "acme");
            assert!(!is_allowed(&operator_role, &r), "{action} tagged {tag:?}");
        }
        // AND another tenant's table, even tagged acme, and the pool, are refused by both layers
        for table in [other.as_str(), POOL] {
            let r = request(action, table, Some("acme"), "acme");
            assert!(!is_allowed(&operator_role, &r), "{action} {table}");
            assert!(!is_allowed(&operator_session, &r), "{action} {table}");
        }
        // AND a tenant route's session, and the tenant-access role, never reach a table itself
        assert!(!is_allowed(&tenant_session, &mine), "{action}");
        assert!(!is_allowed(&tenant_role, &mine), "{action}");
    }
    // AND the table manager's guard lets through a table operation on acme's table only
    let own_name = "pooltable-dev-tenant-acme";
    let delete = |table: &str| {
        Input::erase(
            DeleteTableInput::builder()
                .table_name(table)
                .build()
                .unwrap(),
        )
    };
    assert!(check_own_table(&acme, own_name, &delete(own_name)).is_ok());
    assert!(check_own_table(&acme, own_name, &delete("pooltable-dev-tenant-globex")).is_err());
    assert!(check_own_table(&acme, own_name, &delete("pooltable-dev")).is_err());
    let read = Input::erase(
        GetItemInput::builder()
            .table_name(own_name)
            .build()
            .unwrap(),
    );
    assert!(check_own_table(&acme, own_name, &read).is_err());
}
