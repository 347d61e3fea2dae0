//! A moving tenant's single-item writes meet relocation transactions on the same items (a pull's or
//! the backfill's), and DynamoDB refuses a write to an item a transaction holds with
//! `TransactionConflictException`, which the SDK's own classifiers do not retry. Here it is retried
//! like a transient error: the transaction ends within milliseconds.

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::{
    delete_item::DeleteItemError, get_item::GetItemError, put_item::PutItemError,
    query::QueryError, update_item::UpdateItemError,
};
use aws_smithy_runtime_api::client::interceptors::context::InterceptorContext;
use aws_smithy_runtime_api::client::retries::classifiers::{ClassifyRetry, RetryAction};

/// Retries `TransactionConflictException` on the single-item operations.
#[derive(Debug, Clone, Copy, Default)]
pub struct RetryConflicts;

const CONFLICT: &str = "TransactionConflictException";

impl ClassifyRetry for RetryConflicts {
    fn classify_retry(&self, ctx: &InterceptorContext) -> RetryAction {
        let Some(Err(error)) = ctx.output_or_error() else {
            return RetryAction::NoActionIndicated;
        };
        let Some(error) = error.as_operation_error() else {
            return RetryAction::NoActionIndicated;
        };
        macro_rules! code_of {
            ($($t:ty),+) => {{
                let mut code = None;
                $(
                    if let Some(e) = error.downcast_ref::<$t>() {
                        code = e.code();
                    }
                )+
                code
            }};
        }
        match code_of!(
            PutItemError,
            UpdateItemError,
            DeleteItemError,
            GetItemError,
            QueryError
        ) {
            Some(CONFLICT) => RetryAction::transient_error(),
            _ => RetryAction::NoActionIndicated,
        }
    }

    fn name(&self) -> &'static str {
        "RetryTransactionConflicts"
    }
}
