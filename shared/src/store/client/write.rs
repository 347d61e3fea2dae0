//! Writes, typed: a [`Write`] is one item's put, update, delete or condition check on a tenant's
//! table, with its condition. It is sent alone ([`Write::send`]) or becomes one action of a
//! transaction ([`Write::action`], sent by [`TenantDb::transact_items`]). Its expressions are built
//! from [`crate::store::client::expr`] values, so no caller writes an expression string.

use std::sync::Arc;

use aws_sdk_dynamodb::types::{
    ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};

use crate::identity::cursor::Key;
use crate::store::client::error::StoreError;
use crate::store::client::expr::{Condition, Expression, Update};
use crate::store::client::query::Item;
use crate::store::client::scoped::TenantDb;
use crate::store::client::transact::TransactError;

/// A single write's error: a failed condition as the refusal of action 0, with the item as it was
/// when asked for; any other as the store's.
macro_rules! refusal {
    ($err:expr, $module:ident :: $kind:ident) => {
        match $err.as_service_error() {
            Some(aws_sdk_dynamodb::operation::$module::$kind::ConditionalCheckFailedException(
                c,
            )) => TransactError::ConditionFailed {
                index: 0,
                item: c.item().cloned(),
            },
            _ => StoreError::from_sdk($err).into(),
        }
    };
}

/// One item's write on a tenant's table.
#[derive(Debug, Clone)]
pub struct Write {
    table: Arc<str>,
    op: Op,
    condition: Option<Condition>,
    old_on_failure: bool,
}

#[derive(Debug, Clone)]
enum Op {
    Put(Item),
    Update(Key, Update),
    Delete(Key),
    Check(Key),
}

impl TenantDb {
    /// A put of `item`, whole, replacing any item at its key unless a condition says otherwise.
    pub fn put_item(&self, item: Item) -> Write {
        self.write(Op::Put(item))
    }

    /// An update of the item at `key`.
    pub fn update_item(&self, key: Key, update: impl Into<Update>) -> Write {
        self.write(Op::Update(key, update.into()))
    }

    /// A delete of the item at `key`.
    pub fn delete_item(&self, key: Key) -> Write {
        self.write(Op::Delete(key))
    }

    /// A transaction's check that the item at `key` meets `condition`; it writes nothing.
    pub fn check_item(&self, key: Key, condition: Condition) -> Write {
        self.write(Op::Check(key)).when(condition)
    }

    fn write(&self, op: Op) -> Write {
        Write {
            table: self.table.clone(),
            op,
            condition: None,
            old_on_failure: false,
        }
    }
}

impl Write {
    /// Only when `condition` holds (and every condition given before).
    pub fn when(mut self, condition: Condition) -> Self {
        self.condition = Some(match self.condition.take() {
            Some(before) => before.and(condition),
            None => condition,
        });
        self
    }

    /// When its condition fails, the item as it was comes back with the refusal.
    pub fn old_on_failure(mut self) -> Self {
        self.old_on_failure = true;
        self
    }

    fn expression(&mut self) -> Expression {
        let mut expression = Expression::builder();
        if let Some(condition) = self.condition.take() {
            expression = expression.with_condition(condition);
        }
        if let Op::Update(_, update) = &self.op {
            expression = expression.with_update(update.clone());
        }
        expression.build()
    }

    /// This write as one action of a transaction.
    pub fn action(mut self) -> Result<TransactWriteItem, StoreError> {
        let expression = self.expression();
        let on_failure = self
            .old_on_failure
            .then_some(ReturnValuesOnConditionCheckFailure::AllOld);
        let table = self.table.to_string();
        let action = TransactWriteItem::builder();
        let action = match self.op {
            Op::Put(item) => action.put(
                expression
                    .to_put_builder()
                    .table_name(table)
                    .set_item(Some(item))
                    .set_return_values_on_condition_check_failure(on_failure)
                    .build()?,
            ),
            Op::Update(key, _) => action.update(
                expression
                    .to_update_builder()
                    .table_name(table)
                    .set_key(Some(key))
                    .set_return_values_on_condition_check_failure(on_failure)
                    .build()?,
            ),
            Op::Delete(key) => action.delete(
                expression
                    .to_delete_builder()
                    .table_name(table)
                    .set_key(Some(key))
                    .set_return_values_on_condition_check_failure(on_failure)
                    .build()?,
            ),
            Op::Check(key) => action.condition_check(
                expression
                    .to_condition_check_builder()
                    .table_name(table)
                    .set_key(Some(key))
                    .set_return_values_on_condition_check_failure(on_failure)
                    .build()?,
            ),
        };
        Ok(action.build())
    }

    /// Sends this write alone on `db`: an update answers the item as it now is, a put or a delete
    /// the item it replaced or removed. A failed condition is the refusal of action 0
    /// ([`TransactError::ConditionFailed`]), with the item as it was when asked for.
    pub async fn send(mut self, db: &TenantDb) -> Result<Option<Item>, TransactError> {
        let expression = self.expression();
        let on_failure = self
            .old_on_failure
            .then_some(ReturnValuesOnConditionCheckFailure::AllOld);
        let table = &*self.table;
        match self.op {
            Op::Put(item) => expression
                .to_put_item_fluent_builder(db.client.put_item())
                .table_name(table)
                .set_item(Some(item))
                .return_values(ReturnValue::AllOld)
                .set_return_values_on_condition_check_failure(on_failure)
                .send()
                .await
                .map(|out| out.attributes)
                .map_err(|e| refusal!(e, put_item::PutItemError)),
            Op::Update(key, _) => expression
                .to_update_item_fluent_builder(db.client.update_item())
                .table_name(table)
                .set_key(Some(key))
                .return_values(ReturnValue::AllNew)
                .set_return_values_on_condition_check_failure(on_failure)
                .send()
                .await
                .map(|out| out.attributes)
                .map_err(|e| refusal!(e, update_item::UpdateItemError)),
            Op::Delete(key) => expression
                .to_delete_item_fluent_builder(db.client.delete_item())
                .table_name(table)
                .set_key(Some(key))
                .return_values(ReturnValue::AllOld)
                .set_return_values_on_condition_check_failure(on_failure)
                .send()
                .await
                .map(|out| out.attributes)
                .map_err(|e| refusal!(e, delete_item::DeleteItemError)),
            Op::Check(_) => Err(StoreError::Internal(
                "a condition check is a transaction's action, never sent alone".into(),
            )
            .into()),
        }
    }
}
