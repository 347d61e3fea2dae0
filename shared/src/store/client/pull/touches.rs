//! What a request of a moving tenant touches, read from its typed input before it is serialized,
//! and, attempt by attempt, where it goes: a client made before writes moved names the source, and
//! from `writesMoveAt` on each of its attempts is sent to the target instead (its tables renamed in
//! the body before it is signed) and pulls first, like a client made after. So which table an
//! attempt writes is decided when it is sent, not when its request was admitted: a request that
//! straddles `writesMoveAt` never writes the source after a pull has emptied it of the item.

use std::sync::Arc;

use aws_sdk_dynamodb::operation::{
    batch_get_item::BatchGetItemInput, batch_write_item::BatchWriteItemInput,
    delete_item::DeleteItemInput, get_item::GetItemInput, put_item::PutItemInput,
    query::QueryInput, transact_get_items::TransactGetItemsInput,
    transact_write_items::TransactWriteItemsInput, update_item::UpdateItemInput,
};
use aws_smithy_runtime_api::client::interceptors::context::Input;
use aws_smithy_types::body::SdkBody;
use serde_json::Value;

use crate::identity::clock::Clock;
use crate::identity::keys::{ItemKey, PK};
use crate::store::client::hooks::{
    Bag, HookResult, InputMut, InputRef, Intercept, Parts, RequestMut,
};
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

/// The interceptor of a moving tenant's client.
#[derive(Clone, Debug)]
pub struct Touches {
    /// The table this client's requests name for the tenant's items: the source (a client made
    /// before writes moved) or the target.
    named: Arc<str>,
    sight: MoveSight,
}

/// The tables and times of one move, as a client sees them.
#[derive(Clone, Debug)]
pub struct MoveSight {
    pub source: Arc<str>,
    pub target: Arc<str>,
    /// Epoch seconds: from then on every attempt goes to the target.
    pub writes_move_at: u64,
    /// The tenant's record stays in the pool whatever moves: never renamed, never pulled.
    pub record_key: String,
    pub clock: Arc<dyn Clock>,
}

impl Touches {
    /// The interceptor of a client whose requests name `named` (the source or the target).
    pub fn new(named: Arc<str>, sight: MoveSight) -> Self {
        Self { named, sight }
    }

    fn is_record(&self, item: Option<&Item>) -> bool {
        item.and_then(|i| i.get(PK))
            .and_then(|v| v.as_s().ok())
            .is_some_and(|pk| *pk == self.sight.record_key)
    }

    /// What `input` touches of the tenant's items in the table this client names; `None` for a
    /// request that touches none (its record, another table, or a relocation: a request that names
    /// an item of the source while the client names the target is a pull or the backfill itself).
    pub fn of(&self, input: &Input) -> Option<Touch> {
        let named = &*self.named;
        let mut keys = Vec::new();
        let mut relocation = false;
        let mut add = |table: Option<&str>, item: Option<&Item>| {
            if self.is_record(item) {
                return;
            }
            if table == Some(named) {
                keys.extend(item.and_then(ItemKey::from_key));
            }
            relocation |= table == Some(&*self.sight.source) && named != &*self.sight.source;
        };
        if let Some(i) = input.downcast_ref::<QueryInput>() {
            return (i.table_name() == Some(named)).then(|| Touch::Query(Box::new(i.clone())));
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
        (!keys.is_empty() && !relocation).then_some(Touch::Keys(keys))
    }

    /// Whether an attempt sent now goes to the target (and pulls first).
    fn moved_now(&self) -> bool {
        self.named == self.sight.target
            || self.sight.clock.now_seconds() >= self.sight.writes_move_at
    }

    /// Renames the source to the target in a serialized request's body: its `TableName`, and each
    /// transaction item's, except where the item is the tenant's record. `Ok(true)` when renamed.
    fn retarget(&self, body: &mut Value) -> bool {
        let mut renamed = false;
        let mut one = |op: &mut Value| {
            let names_source =
                op.get("TableName").and_then(Value::as_str) == Some(&*self.sight.source);
            let pk = op
                .get("Key")
                .or_else(|| op.get("Item"))
                .and_then(|k| k.get(PK))
                .and_then(|v| v.get("S"))
                .and_then(Value::as_str);
            if names_source && pk != Some(self.sight.record_key.as_str()) {
                op["TableName"] = Value::String(self.sight.target.to_string());
                renamed = true;
            }
        };
        one(body);
        if let Some(items) = body.get_mut("TransactItems").and_then(Value::as_array_mut) {
            for item in items {
                for action in ["Put", "Update", "Delete", "ConditionCheck", "Get"] {
                    if let Some(op) = item.get_mut(action) {
                        one(op);
                    }
                }
            }
        }
        renamed
    }
}

impl Intercept for Touches {
    fn name(&self) -> &'static str {
        "PullTouches"
    }

    fn read_before_serialization(&self, ctx: InputRef, _: &Parts, cfg: &mut Bag) -> HookResult {
        if let Some(touch) = self.of(ctx.input()) {
            cfg.interceptor_state().store_put(touch);
        }
        Ok(())
    }

    /// Reads of the table are consistent while a move runs: a read just after a pull (its own, or
    /// another request's) must see the item where the pull put it.
    fn modify_before_serialization(&self, ctx: InputMut, _: &Parts, _: &mut Bag) -> HookResult {
        let input = ctx.input_mut();
        if let Some(i) = input.downcast_mut::<GetItemInput>() {
            i.consistent_read = Some(true);
        } else if let Some(i) = input.downcast_mut::<QueryInput>() {
            if i.index_name.is_none() {
                i.consistent_read = Some(true);
            }
        }
        Ok(())
    }

    fn modify_before_signing(&self, ctx: RequestMut, _: &Parts, cfg: &mut Bag) -> HookResult {
        if !self.moved_now() {
            return Ok(());
        }
        let request = ctx.request_mut();
        if self.named != self.sight.target {
            let Some(bytes) = request.body().bytes() else {
                return Err("a moving tenant's request has no body to send to the target".into());
            };
            let mut body: Value = serde_json::from_slice(bytes)?;
            if self.retarget(&mut body) {
                let bytes = serde_json::to_vec(&body)?;
                request
                    .headers_mut()
                    .insert("content-length", bytes.len().to_string());
                *request.body_mut() = SdkBody::from(bytes);
            }
        }
        if let Some(touch) = cfg.load::<Touch>() {
            request.add_extension(touch.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::ids::TenantId;
    use crate::identity::keys::{raw_key, tenant_record_key, SK};
    use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
    use serde_json::json;

    #[derive(Debug)]
    struct At(u64);

    impl Clock for At {
        fn now_millis(&self) -> u64 {
            self.0 * 1000
        }
    }

    fn record() -> String {
        tenant_record_key(&TenantId::parse("a").unwrap())
    }

    fn x() -> String {
        raw_key("a", "X")
    }

    /// A client of tenant `a` moving from `pool` into `own`, naming `named`, at `now`.
    fn touches(named: &str, now: u64) -> Touches {
        Touches::new(
            Arc::from(named),
            MoveSight {
                source: Arc::from("pool"),
                target: Arc::from("own"),
                writes_move_at: 100,
                record_key: record(),
                clock: Arc::new(At(now)),
            },
        )
    }

    fn key(pk: &str, sk: &str) -> Item {
        Item::from([
            (PK.to_owned(), AttributeValue::S(pk.to_owned())),
            (SK.to_owned(), AttributeValue::S(sk.to_owned())),
        ])
    }

    fn put(table: &str, pk: &str) -> TransactWriteItem {
        TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name(table)
                    .set_item(Some(key(pk, "S")))
                    .build()
                    .unwrap(),
            )
            .build()
    }

    #[test]
    fn a_request_touches_what_it_names_in_its_table_never_the_record_nor_a_relocation() {
        // GIVEN a client naming the target, and a transaction with an item there and the record
        let touches = touches("own", 100);
        let tx = TransactWriteItemsInput::builder()
            .transact_items(put("own", &x()))
            .transact_items(put("pool", &record()))
            .build()
            .unwrap();
        // WHEN its touches are read THEN only the item is named
        assert_eq!(
            touches.of(&Input::erase(tx)),
            Some(Touch::Keys(vec![ItemKey {
                pk: x(),
                sk: "S".into()
            }]))
        );
        // AND a relocation (a put in the target, a delete in the source) touches nothing
        let delete = TransactWriteItem::builder()
            .delete(
                Delete::builder()
                    .table_name("pool")
                    .set_key(Some(key(&x(), "S")))
                    .build()
                    .unwrap(),
            )
            .build();
        let relocation = TransactWriteItemsInput::builder()
            .transact_items(put("own", &x()))
            .transact_items(delete)
            .build()
            .unwrap();
        assert_eq!(touches.of(&Input::erase(relocation)), None);
        // AND a Query touches its window, a read of another table nothing
        let query = QueryInput::builder()
            .table_name("own")
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(raw_key("a", "P")))
            .build()
            .unwrap();
        assert_eq!(
            touches.of(&Input::erase(query.clone())),
            Some(Touch::Query(Box::new(query)))
        );
        let get = GetItemInput::builder()
            .table_name("another")
            .set_key(Some(key(&x(), "S")))
            .build()
            .unwrap();
        assert_eq!(touches.of(&Input::erase(get)), None);
    }

    #[test]
    fn a_client_made_before_writes_moved_sends_each_attempt_from_then_on_to_the_target() {
        // GIVEN clients naming the source, before and at writesMoveAt, and one naming the target
        assert!(!touches("pool", 99).moved_now());
        assert!(touches("pool", 100).moved_now());
        assert!(touches("own", 0).moved_now());
        // WHEN a transaction's body naming the source is renamed
        let (x, record) = (x(), record());
        let mut body = json!({"TransactItems": [
            {"Put": {"TableName": "pool", "Item": {"PK": {"S": x}, "SK": {"S": "S"}}}},
            {"Update": {"TableName": "pool", "Key": {"PK": {"S": record}, "SK": {"S": record}}}},
        ]});
        assert!(touches("pool", 100).retarget(&mut body));
        // THEN its item goes to the target, its record stays in the pool
        assert_eq!(body["TransactItems"][0]["Put"]["TableName"], "own");
        assert_eq!(body["TransactItems"][1]["Update"]["TableName"], "pool");
        // AND a Query is renamed, a read of the record is not
        let mut query = json!({"TableName": "pool", "KeyConditionExpression": "PK = :pk"});
        assert!(touches("pool", 100).retarget(&mut query));
        assert_eq!(query["TableName"], "own");
        let mut record =
            json!({"TableName": "pool", "Key": {"PK": {"S": record}, "SK": {"S": record}}});
        assert!(!touches("pool", 100).retarget(&mut record));
        assert_eq!(record["TableName"], "pool");
    }
}
