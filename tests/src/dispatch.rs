//! Calls the handler of route `bin`, as its function's `main` does: the one way the tests call a
//! handler (`Client::call` and `Client::send` send through it; a test that wraps the handler's
//! future itself, in a request's meter or the runtime's `respond`, calls [`dispatch`]).
//!
//! `pooltable gen` writes the rows of `dispatch!` below from routes.yaml, one per route.

use lambda_http::{Body, Request, Response};
use shared::{ApiError, App};

/// A row `"bin" => krate::module` calls `krate::module::handle(app, req)`; a row ending `with name`
/// passes the handler's state too, as `crate::state::name()` builds it.
macro_rules! dispatch {
    ($($bin:literal => $krate:ident::$module:ident $(with $state:ident)?,)*) => {
        pub async fn dispatch(
            app: &App,
            bin: &str,
            req: Request,
        ) -> Result<Response<Body>, ApiError> {
            match bin {
                $($bin => {
                    $krate::$module::handle(app, $(&crate::state::$state().await,)? req).await
                })*
                other => panic!("{other} is not a route in routes.yaml"),
            }
        }
    };
}

dispatch! {
    // @generated begin: `pooltable gen` writes a row per route from routes.yaml
    "onboard-tenant" => tenants::onboard_tenant,
    "get-tenant" => tenants::get_tenant,
    "update-tenant" => tenants::update_tenant with lanes,
    "export-tenant" => tenants::export_tenant,
    "offboard-tenant" => tenants::offboard_tenant with lanes,
    "restore-tenant" => tenants::restore_tenant with lanes,
    "put-product" => products::put_product,
    "get-product" => products::get_product,
    "query-tenant-products" => products::query_tenant_products,
    "delete-product" => products::delete_product,
    "put-department" => hr::put_department,
    "put-employee" => hr::put_employee,
    "get-employee" => hr::get_employee,
    "get-department" => hr::get_department,
    "list-employees" => hr::list_employees,
    "list-departments" => hr::list_departments,
    "list-department-employees" => hr::list_department_employees,
    "delete-employee" => hr::delete_employee,
    "put-user" => users::put_user,
    "get-user" => users::get_user,
    "find-user-by-email" => users::find_user_by_email,
    "create-order" => users::create_order,
    "get-order" => users::get_order,
    "list-tenant-orders" => users::list_tenant_orders,
    "create-transfer-code" => users::create_transfer_code,
    "redeem-transfer-code" => users::redeem_transfer_code,
    "put-integration-token" => users::put_integration_token,
    "get-integration-token" => users::get_integration_token,
    "erase-user" => users::erase_user,
    "erase-tenant-user" => users::erase_tenant_user,
    "create-import" => imports::create_import with import_queue,
    "get-import" => imports::get_import,
    "get-usage" => users::get_usage,
    "get-tenant-usage" => users::get_tenant_usage,
    "create-session" => sessions::create_session,
    "get-session-by-session-id" => sessions::get_session_by_session_id,
    "expire-session" => sessions::expire_session,
    "get-child-sessions-by-session-id" => sessions::get_child_sessions_by_session_id,
    "get-session-by-child-session-id" => sessions::get_session_by_child_session_id,
    "get-last-login-time-by-customer-id" => sessions::get_last_login_time_by_customer_id,
    "get-session-id-by-customer-id" => sessions::get_session_id_by_customer_id,
    "get-sessions-by-customer-id" => sessions::get_sessions_by_customer_id,
    // @generated end
}
