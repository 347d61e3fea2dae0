//! The route's entry in routes.yaml, as `pooltable new route` appends it.

use shared::identity::keys::TENANT_SEGMENT;

use super::{NewRoute, Shape};

/// The entry of `new` in crate `krate`, its sample naming the entity `sample_id`: the requests the
/// scaffolded handler sends as its doc, and for a write the `TODO`s a human fills.
pub(super) fn route_entry(new: &NewRoute, krate: &str, sample_id: &str) -> String {
    let (space, kind) = new.space_and_kind();
    let (id, name) = (new.id(), new.name());
    let status = if new.shape == Shape::Delete { 204 } else { 200 };
    let mut s = format!(
        "- bin: {bin}\n  crate: {krate}\n  route: {method} {path}\n  caller: {caller}\n  status: {status}\n  sample:\n",
        bin = new.bin,
        method = new.method,
        path = new.path,
        caller = if new.operator { "operator" } else { "tenant" },
    );
    match new.shape {
        Shape::List => s.push_str("    query: {limit: '25'}\n"),
        _ => s.push_str(&format!("    path: {{{id}: {sample_id}}}\n")),
    }
    if new.shape == Shape::Set {
        s.push_str(&format!(
            "    body: '{{\"{}\": \"sample-1\"}}'\n",
            new.sample_field()
        ));
    }
    let as_scaffolded = match new.shape {
        Shape::Set => Some(("{write: TransactWriteItems}", "none that tests/tests/all/transactions.rs counts (its transaction is layout::put_along's, as put-product's): delete the line")),
        Shape::Delete => Some(("{write: TransactWriteItems, again: 404}", "none that tests/tests/all/transactions.rs counts (its transaction is layout::delete_along's, as delete-product's): delete the line")),
        Shape::Get | Shape::List => None,
    };
    if let Some((lost, transaction)) = as_scaffolded {
        s.push_str(&format!(
            "  # TODO (pooltable new route): decide what a retry of a lost answer does (lost_success) and the\n  \
             # route's transaction (transaction), for the handler as it now is; until both are filled,\n  \
             # `pooltable gen --check` and every test that reads routes.yaml refuse the table, naming this route.\n  \
             # As scaffolded: lost_success {lost}; transaction {transaction}.\n  \
             lost_success: {{write: TODO}}\n  transaction: TODO\n"
        ));
    }
    let (about, keys, requests) = match new.shape {
        Shape::Get => (
            String::new(),
            format!("GetItem `PK = {TENANT_SEGMENT}t#{space}#<shard>`, `SK = {TENANT_SEGMENT}t#{kind}#<{id}>` (both shards at once while re-sharded)"),
            "{GetItem: 1, note: 're-sharding: 2 GetItem at once'}".to_owned(),
        ),
        Shape::List => (
            String::new(),
            format!("per {space} shard: `begins_with(SK, {TENANT_SEGMENT}t#{kind}#)`, concurrently, Limit ≈ 2 × limit / N"),
            "{Query: 1 per shard, note: 'per page (+1 per shard that runs dry)'}".to_owned(),
        ),
        Shape::Set => (
            format!("`{{{}, …}}` ", new.sample_field()),
            format!("consistent GetItem of the {name}, then TransactWriteItems: Put of its attributes with the body''s fields, on condition that its `updatedAtMs` is the one read (while re-sharded on its new shard, with a Delete of the old copy)"),
            "{GetItem: 1, TransactWriteItems: 1, note: '404: the GetItem only; re-sharding: consistent GetItems of both keys, then the transaction'}".to_owned(),
        ),
        Shape::Delete => (
            String::new(),
            format!("TransactWriteItems: Delete `attribute_exists(PK)` + Put tombstone `{TENANT_SEGMENT}t#DELETED#{kind}#<{id}>`; when nothing is there (404): ConditionCheck absent + Put tombstone"),
            "{TransactWriteItems: 1, note: '404: 2 TransactWriteItems'}".to_owned(),
        ),
    };
    s.push_str(&format!(
        "  doc:\n    about: '{about}(scaffolded by pooltable new route --entity {name}: say what it does)'\n    index: table\n    keys: '{keys}'\n    requests: {requests}\n",
    ));
    s
}
