//! What a request touches in the target table, read from its typed input before it is serialized,
//! and handed to the HTTP layer as an extension of each attempt's request.

use std::sync::Arc;

use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::operation::{
    batch_get_item::BatchGetItemInput, batch_write_item::BatchWriteItemInput,
    delete_item::DeleteItemInput, get_item::GetItemInput, put_item::PutItemInput,
    query::QueryInput, transact_get_items::TransactGetItemsInput,
    transact_write_items::TransactWriteItemsInput, update_item::UpdateItemInput,
};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextMut, Input,
};

use crate::identity::keys::ItemKey;
use crate::store::client::query::Item;

/// What one request touches in the target table.
#[derive(Debug, Clone, PartialEq)]
pub enum Touch {
    /// Items by key.
    Keys(Vec<ItemKey>),
    /// A Query, of the table or of an index.
    Query(Box<QueryInput>),
}

impl aws_smithy_types::config_bag::Storable for Touch {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

/// The interceptor of a moving tenant's client: what each request touches in `target`.
#[derive(Debug, Clone)]
pub struct Touches {
    target: Arc<str>,
}

impl Touches {
    pub fn new(target: Arc<str>) -> Self {
        Self { target }
    }

    /// What `input` touches in the target; `None` for a request that names no item of it.
    pub fn of(&self, input: &Input) -> Option<Touch> {
        let target = &*self.target;
        let mut keys = Vec::new();
        let mut add = |table: Option<&str>, item: Option<&Item>| {
            if table == Some(target) {
                keys.extend(item.and_then(ItemKey::from_key));
            }
        };
        if let Some(i) = input.downcast_ref::<QueryInput>() {
            if i.table_name() != Some(target) {
                return None;
            }
            return Some(Touch::Query(Box::new(i.clone())));
        } else if let Some(i) = input.downcast_ref::<GetItemInput>() {
            add(i.table_name(), i.key());
        } else if let Some(i) = input.downcast_ref::<PutItemInput>() {
            add(i.table_name(), i.item());
        } else if let Some(i) = input.downcast_ref::<UpdateItemInput>() {
            add(i.table_name(), i.key());
        } else if let Some(i) = input.downcast_ref::<DeleteItemInput>() {
            add(i.table_name(), i.key());
        } else if let Some(i) = input.downcast_ref::<TransactWriteItemsInput>() {
            for t in i.transact_items() {
                if let Some(x) = t.put() {
                    add(Some(x.table_name()), Some(x.item()));
                }
                if let Some(x) = t.update() {
                    add(Some(x.table_name()), Some(x.key()));
                }
                if let Some(x) = t.delete() {
                    add(Some(x.table_name()), Some(x.key()));
                }
                if let Some(x) = t.condition_check() {
                    add(Some(x.table_name()), Some(x.key()));
                }
            }
        } else if let Some(i) = input.downcast_ref::<TransactGetItemsInput>() {
            for g in i.transact_items().iter().filter_map(|t| t.get()) {
                add(Some(g.table_name()), Some(g.key()));
            }
        } else if let Some(i) = input.downcast_ref::<BatchGetItemInput>() {
            for (table, ask) in i.request_items().into_iter().flatten() {
                for key in ask.keys() {
                    add(Some(table), Some(key));
                }
            }
        } else if let Some(i) = input.downcast_ref::<BatchWriteItemInput>() {
            for (table, writes) in i.request_items().into_iter().flatten() {
                for w in writes {
                    add(Some(table), w.put_request().map(|p| p.item()));
                    add(Some(table), w.delete_request().map(|d| d.key()));
                }
            }
        }
        (!keys.is_empty()).then_some(Touch::Keys(keys))
    }
}

impl Intercept for Touches {
    fn name(&self) -> &'static str {
        "PullTouches"
    }

    fn read_before_serialization(
        &self,
        ctx: &BeforeSerializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(touch) = self.of(ctx.input()) {
            cfg.interceptor_state().store_put(touch);
        }
        Ok(())
    }

    fn modify_before_transmit(
        &self,
        ctx: &mut BeforeTransmitInterceptorContextMut<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(touch) = cfg.load::<Touch>() {
            ctx.request_mut().add_extension(touch.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::keys::{PK, SK};
    use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};

    fn key(pk: &str, sk: &str) -> Item {
        Item::from([
            (PK.to_owned(), AttributeValue::S(pk.to_owned())),
            (SK.to_owned(), AttributeValue::S(sk.to_owned())),
        ])
    }

    #[test]
    fn a_request_touches_what_it_names_in_the_target_only() {
        let touches = Touches::new(Arc::from("own"));
        // GIVEN a transaction with one item in the target and one in the pool
        let put = |table: &str, pk: &str| {
            TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(table)
                        .set_item(Some(key(pk, "S")))
                        .build()
                        .unwrap(),
                )
                .build()
        };
        let tx = TransactWriteItemsInput::builder()
            .transact_items(put("own", "TENANT#a#X"))
            .transact_items(put("pool", "TENANT#a#TENANT"))
            .build()
            .unwrap();
        // WHEN its touches are read
        // THEN only the target's item is named
        assert_eq!(
            touches.of(&Input::erase(tx)),
            Some(Touch::Keys(vec![ItemKey {
                pk: "TENANT#a#X".into(),
                sk: "S".into()
            }]))
        );
        // AND a Query touches its window
        let query = |index: Option<&str>| {
            QueryInput::builder()
                .table_name("own")
                .set_index_name(index.map(str::to_owned))
                .key_condition_expression("#p = :pk AND begins_with(SK, :s)")
                .expression_attribute_names("#p", if index.is_some() { "GSI1PK" } else { "PK" })
                .expression_attribute_values(":pk", AttributeValue::S("TENANT#a#P".into()))
                .build()
                .unwrap()
        };
        assert_eq!(
            touches.of(&Input::erase(query(None))),
            Some(Touch::Query(Box::new(query(None))))
        );
        // AND a request of another table touches nothing
        let get = GetItemInput::builder()
            .table_name("pool")
            .set_key(Some(key("TENANT#a#X", "S")))
            .build()
            .unwrap();
        assert_eq!(touches.of(&Input::erase(get)), None);
    }
}
