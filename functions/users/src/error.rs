//! What this crate's writes can refuse, and the answer each refusal gets.

use shared::store::client::error::StoreError;
use shared::store::client::transact::TransactError;
use shared::ApiError;
use thiserror::Error;

/// A write [`crate::store`] refused, or the store's own error.
#[derive(Debug, Error)]
pub enum Error {
    /// The user the write needs has no profile (404).
    #[error("no such user")]
    NoSuchUser,
    /// Another order holds the orderId (409).
    #[error("an order with this orderId already exists")]
    OrderExists,
    /// The orderId the client chose was an erased order's: it is not used again (409).
    #[error("the order was erased")]
    OrderErased,
    /// Another user of the tenant holds the email (409).
    #[error("the email belongs to another user of the tenant")]
    EmailTaken,
    /// The profile or its email kept changing under the write (409).
    #[error("the user or the email changed concurrently")]
    UserChanged,
    /// The user was erased: its id is not used again (409).
    #[error("the user was erased")]
    UserErased,
    /// A new transfer code's item could not be written (409; a code is 122 random bits).
    #[error("the transfer code could not be stored")]
    CodeNotStored,
    /// The code is unknown, used or expired (404).
    #[error("no redeemable transfer code")]
    CodeNotRedeemable,
    /// A transaction failed a condition this crate does not name, or the store failed.
    #[error(transparent)]
    Transact(#[from] TransactError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<Error> for ApiError {
    fn from(err: Error) -> Self {
        match err {
            Error::NoSuchUser => ApiError::NotFound("No such user.".into()),
            Error::OrderExists => {
                ApiError::Conflict("An order with this orderId already exists.".into())
            }
            Error::OrderErased => ApiError::Conflict(
                "This orderId was an erased order's, and is not used again: choose another.".into(),
            ),
            Error::EmailTaken => ApiError::Conflict(
                "This email already belongs to another user of the tenant.".into(),
            ),
            Error::UserChanged => {
                ApiError::Conflict("The user or the email changed concurrently; retry.".into())
            }
            Error::UserErased => {
                ApiError::Conflict("This user was erased; its id is not used again.".into())
            }
            Error::CodeNotStored => {
                ApiError::Conflict("The transfer code could not be stored; retry.".into())
            }
            Error::CodeNotRedeemable => {
                ApiError::NotFound("No such transfer code, or it was used or has expired.".into())
            }
            Error::Transact(e) => e.into(),
            Error::Store(e) => e.into(),
        }
    }
}

/// A bug or an unexpected answer, for the log only.
pub(crate) fn internal(e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(e.to_string())
}
