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

        /// The size of each route's handler future (with its state's), by route: what the tests'
        /// dispatch future holds for the largest of them.
        pub fn handler_future_sizes() -> Vec<(&'static str, usize)> {
            vec![$(($bin, future_size(|app, req| async move {
                $krate::$module::handle(app, $(&crate::state::$state().await,)? req).await
            })),)*]
        }
    };
}

/// The size of the future `handler` returns, read from its type: nothing is built or polled.
fn future_size<Fut: std::future::Future>(_handler: impl Fn(&'static App, Request) -> Fut) -> usize {
    std::mem::size_of::<Fut>()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What the dispatch future may weigh. A test polls it on its own thread's stack
    /// (`RUST_MIN_STACK`, 8 MiB in scripts/test.sh), and a debug build's poll frames grow with the
    /// futures they build: at 82 KB (the own-table walk carried inline) the logs test, which calls
    /// every route, overflowed that stack; boxed, it weighs 35 KB.
    const DISPATCH_FUTURE_BOUND: usize = 48 * 1024;

    #[test]
    fn the_dispatch_future_stays_well_under_what_overflowed_the_test_stack() {
        // GIVEN every route's handler future, largest first
        let mut sizes = handler_future_sizes();
        sizes.sort_by_key(|(_, size)| std::cmp::Reverse(*size));
        // WHEN the dispatch future is weighed
        let dispatch_size = future_size(|app, req| dispatch(app, "get-tenant", req));
        // THEN it is under the bound; over it, box the largest await inside the heaviest handlers
        assert!(
            dispatch_size <= DISPATCH_FUTURE_BOUND,
            "the dispatch future weighs {dispatch_size} bytes, over {DISPATCH_FUTURE_BOUND}: \
             `Box::pin` a large sub-future in the heaviest handlers ({:?})",
            &sizes[..5]
        );
        assert!(sizes.iter().all(|(_, size)| *size <= dispatch_size));
    }
}
