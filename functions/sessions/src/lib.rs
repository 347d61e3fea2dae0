//! The session store: AWS's session-management schema, tenant-scoped, on one table and the inverted
//! `GSI1`. One module per access pattern; each binary in `src/bin` serves one of them.
//!
//! Their keys are built in `shared::identity::keys`; the key table (generated from it) is in
//! `docs/key-scheme.md`.

pub mod model;
pub mod store;
// @generated begin: `pooltable gen` writes the route modules from routes.yaml
pub mod create_session;
pub mod expire_session;
pub mod get_child_sessions_by_session_id;
pub mod get_last_login_time_by_customer_id;
pub mod get_session_by_child_session_id;
pub mod get_session_by_session_id;
pub mod get_session_id_by_customer_id;
pub mod get_sessions_by_customer_id;
// @generated end
