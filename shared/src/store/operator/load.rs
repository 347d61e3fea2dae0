//! Loading items into a table whole (`pooltable import`): BatchWriteItem, 25 at a time; unprocessed
//! items are sent again with backoff. An item that exists is replaced.

use std::time::Duration;

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};

use crate::store::client::error::StoreError;
use crate::store::client::query::Item;

/// BatchWriteItem's limit.
const BATCH: usize = 25;
/// Sends of one batch's unprocessed items before the load gives up.
const ATTEMPTS: u32 = 8;

/// Puts every item of `items` into `table` (no two with one key: BatchWriteItem refuses a batch
/// that holds a key twice).
pub async fn put_all(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    items: &[Item],
) -> Result<(), StoreError> {
    for chunk in items.chunks(BATCH) {
        let mut pending: Vec<WriteRequest> = chunk
            .iter()
            .map(|item| {
                let put = PutRequest::builder().set_item(Some(item.clone())).build()?;
                Ok(WriteRequest::builder().put_request(put).build())
            })
            .collect::<Result<_, StoreError>>()?;
        let mut attempt = 0;
        while !pending.is_empty() {
            attempt += 1;
            if attempt > ATTEMPTS {
                return Err(StoreError::Unavailable(format!(
                    "{} items still unprocessed after {ATTEMPTS} attempts",
                    pending.len()
                )));
            }
            let out = client
                .batch_write_item()
                .request_items(table, pending)
                .send()
                .await
                .map_err(StoreError::from_sdk)?;
            pending = out
                .unprocessed_items
                .and_then(|mut u| u.remove(table))
                .unwrap_or_default();
            if !pending.is_empty() {
                tokio::time::sleep(Duration::from_millis(50 << attempt.min(6))).await;
            }
        }
    }
    Ok(())
}
