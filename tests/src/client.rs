//! One method per route of routes.yaml on [`Client`](crate::api::Client): its path
//! parameters in order, then its body (`impl Into<Option<Value>>`: a JSON value, or `None` to send
//! none) when its sample has one. The caller, query, headers and admission are set on the client.
//!
//! `pooltable gen` writes the rows of `methods!` below from routes.yaml, one per route.

use futures::future::BoxFuture;
use serde_json::Value;

use crate::api::Client;
use crate::Resp;

/// A row `"bin" => name(arg = "param", …)` writes `Client::name(&self, arg: &str, …)`, which calls
/// route `bin` with each argument as its path parameter; `with body` adds the body argument.
macro_rules! methods {
    (@body) => { None };
    (@body $body:ident) => { $body.into() };
    ($(
        $(#[$doc:meta])*
        $bin:literal => $name:ident($($arg:ident = $param:literal),*) $(with $body:ident)?;
    )*) => {
        impl<'a> Client<'a> {
            $(
                $(#[$doc])*
                pub fn $name(
                    &self $(, $arg: &str)* $(, $body: impl Into<Option<Value>>)?
                ) -> BoxFuture<'a, Resp> {
                    let path: &[(&str, &str)] = &[$(($param, $arg)),*];
                    self.call($bin, path, methods!(@body $($body)?))
                }
            )*
        }
    };
}

methods! {
    // @generated begin: `pooltable gen` writes a row per route from routes.yaml
    /// `POST /tenants` (an operator).
    "onboard-tenant" => onboard_tenant() with body;
    /// `GET /tenants/{tenantId}` (a tenant or an operator).
    "get-tenant" => get_tenant(tenant_id = "tenantId");
    /// `PATCH /tenants/{tenantId}` (an operator).
    "update-tenant" => update_tenant(tenant_id = "tenantId") with body;
    /// `GET /tenants/{tenantId}/export` (an operator).
    "export-tenant" => export_tenant(tenant_id = "tenantId");
    /// `DELETE /tenants/{tenantId}` (an operator).
    "offboard-tenant" => offboard_tenant(tenant_id = "tenantId");
    /// `POST /tenants/{tenantId}/restore` (an operator).
    "restore-tenant" => restore_tenant(tenant_id = "tenantId") with body;
    /// `PUT /products/{productId}` (a tenant).
    "put-product" => put_product(product_id = "productId") with body;
    /// `GET /products/{productId}` (a tenant).
    "get-product" => get_product(product_id = "productId");
    /// `GET /products` (a tenant).
    "query-tenant-products" => query_tenant_products();
    /// `DELETE /products/{productId}` (a tenant).
    "delete-product" => delete_product(product_id = "productId");
    /// `PUT /departments/{departmentId}` (a tenant).
    "put-department" => put_department(department_id = "departmentId") with body;
    /// `PUT /employees/{employeeId}` (a tenant).
    "put-employee" => put_employee(employee_id = "employeeId") with body;
    /// `GET /employees/{employeeId}` (a tenant).
    "get-employee" => get_employee(employee_id = "employeeId");
    /// `GET /departments/{departmentId}` (a tenant).
    "get-department" => get_department(department_id = "departmentId");
    /// `GET /employees` (a tenant).
    "list-employees" => list_employees();
    /// `GET /departments` (a tenant).
    "list-departments" => list_departments();
    /// `GET /departments/{departmentId}/employees` (a tenant).
    "list-department-employees" => list_department_employees(department_id = "departmentId");
    /// `DELETE /employees/{employeeId}` (a tenant).
    "delete-employee" => delete_employee(employee_id = "employeeId");
    /// `PUT /users/{userId}` (a tenant).
    "put-user" => put_user(user_id = "userId") with body;
    /// `GET /users/{userId}` (a tenant).
    "get-user" => get_user(user_id = "userId");
    /// `GET /users` (a tenant).
    "find-user-by-email" => find_user_by_email();
    /// `POST /users/{userId}/orders` (a tenant).
    "create-order" => create_order(user_id = "userId") with body;
    /// `GET /orders/{orderId}` (a tenant).
    "get-order" => get_order(order_id = "orderId");
    /// `GET /orders` (a tenant).
    "list-tenant-orders" => list_tenant_orders();
    /// `POST /users/{userId}/transfer-code` (a tenant).
    "create-transfer-code" => create_transfer_code(user_id = "userId");
    /// `POST /transfer-codes/{code}/redeem` (a tenant).
    "redeem-transfer-code" => redeem_transfer_code(code = "code");
    /// `PUT /integrations/{service}/token` (a tenant).
    "put-integration-token" => put_integration_token(service = "service") with body;
    /// `GET /integrations/{service}/token` (a tenant).
    "get-integration-token" => get_integration_token(service = "service");
    /// `DELETE /users/{userId}` (a tenant).
    "erase-user" => erase_user(user_id = "userId");
    /// `DELETE /tenants/{tenantId}/users/{userId}` (an operator).
    "erase-tenant-user" => erase_tenant_user(tenant_id = "tenantId", user_id = "userId");
    /// `POST /imports` (a tenant).
    "create-import" => create_import() with body;
    /// `GET /imports/{importId}` (a tenant).
    "get-import" => get_import(import_id = "importId");
    /// `GET /usage` (a tenant).
    "get-usage" => get_usage();
    /// `GET /tenants/{tenantId}/usage` (an operator).
    "get-tenant-usage" => get_tenant_usage(tenant_id = "tenantId");
    /// `POST /sessions` (a tenant).
    "create-session" => create_session() with body;
    /// `GET /sessions/{sessionId}` (a tenant).
    "get-session-by-session-id" => get_session_by_session_id(session_id = "sessionId");
    /// `DELETE /sessions/{sessionId}` (a tenant).
    "expire-session" => expire_session(session_id = "sessionId");
    /// `GET /sessions/{sessionId}/children` (a tenant).
    "get-child-sessions-by-session-id" => get_child_sessions_by_session_id(session_id = "sessionId");
    /// `GET /child-sessions/{childSessionId}/parent` (a tenant).
    "get-session-by-child-session-id" => get_session_by_child_session_id(child_session_id = "childSessionId");
    /// `GET /customers/{customerId}/last-login` (a tenant).
    "get-last-login-time-by-customer-id" => get_last_login_time_by_customer_id(customer_id = "customerId");
    /// `GET /customers/{customerId}/sessions/{sessionId}` (a tenant).
    "get-session-id-by-customer-id" => get_session_id_by_customer_id(customer_id = "customerId", session_id = "sessionId");
    /// `GET /customers/{customerId}/sessions` (a tenant).
    "get-sessions-by-customer-id" => get_sessions_by_customer_id(customer_id = "customerId");
    // @generated end
}
