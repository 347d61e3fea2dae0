//! Users, their orders, one-time transfer codes and integration tokens.
//!
//! Their keys are built in `shared::identity::keys` (table: `docs/key-scheme.md`, generated).
//!
//! A user's item collection holds the profile and one summary per order. In descending SK order the
//! profile (`…#USER#…`) sorts before the summaries (`…#ORDER#…`), so one Query with `Limit` 11 reads
//! the profile and its 10 newest orders (newest by orderId: the default ids are UUIDv7, time-ordered).
//!
//! Every key is built from validated values (`EntityId`, [`Email`], [`TransferCode`], [`Date`],
//! [`Month`]), none of which can carry `#`.
//!
//! The rooms: [`values`] (the validated values, and the keys of the two that name an item: an
//! [`Email`]'s uniqueness item, a [`TransferCode`]), [`model`] (the
//! views and their items), [`store`] (every read and write the routes do), [`error`] (what the writes
//! refuse), and one module per route, which parses the request, calls [`store`] and shapes the answer.

// @generated begin: `pooltable gen` writes the route modules from routes.yaml
pub mod create_order;
pub mod create_transfer_code;
pub mod erase_tenant_user;
pub mod erase_user;
pub mod find_user_by_email;
pub mod get_integration_token;
pub mod get_order;
pub mod get_tenant_usage;
pub mod get_usage;
pub mod get_user;
pub mod list_tenant_orders;
pub mod put_integration_token;
pub mod put_user;
pub mod redeem_transfer_code;
// @generated end

pub mod erasure;
pub mod error;
pub mod model;
pub mod store;
pub mod values;

pub use error::Error;
pub use model::{LineItem, Order, OrderSummary, User};
pub use shared::service::http::{PageBody, Text};
pub use shared::store::client::items::{item_with_keys, view_from_item};
pub use values::{date_range, Date, Email, Month, TransferCode};
