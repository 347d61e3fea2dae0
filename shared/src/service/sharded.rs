//! The handler bodies every write-sharded kind shares (products, employees, departments): read one
//! item by its id on its computed shard, and list a page over all shards, in whichever layout the
//! tenant's items are (a re-sharding moves them). A kind supplies its key function and its view;
//! the routes differ only in those.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde::Serialize;

use crate::identity::clock::rfc3339;
use crate::identity::cursor::Key;
use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{CATALOG, GSI1, PK, SK};

use crate::service::app::App;
use crate::service::error::ApiError;
use crate::service::http::{json_body, json_response, path_entity_id};
use crate::store::client::items::view_from_item;
use crate::store::client::query::{u64_attr, Item};
use crate::store::client::scoped::TenantDb;

use crate::store::tenancy::layout::{self, Keys, Layout, UPDATED_AT_MS};

mod list;

pub use list::{list_page, Frontier};

/// One item of a write-sharded kind as a request names it, read in the order every such route
/// answers ([`App::tenant_request`]: the path's id `param`, then what `parse` takes from the request,
/// then the caller's scoped client), with the tenant's layout and the item's keys in it.
pub struct ItemRequest<P> {
    pub id: EntityId,
    pub input: P,
    pub db: TenantDb,
    pub layout: Layout,
    pub keys: Keys,
}

impl<P> ItemRequest<P> {
    /// The item of the path's `param`, at `key(tenant, id, shards)`.
    pub async fn read(
        app: &App,
        req: &Request,
        param: &str,
        parse: impl FnOnce(&Request) -> Result<P, ApiError>,
        key: impl Fn(&TenantId, &EntityId, u32) -> Key,
    ) -> Result<Self, ApiError> {
        let parse = |req: &Request| Ok((path_entity_id(req, param)?, parse(req)?));
        let ((id, input), db) = app.tenant_request(req, parse).await?;
        let layout = app.directory.layout(&db).await?;
        let keys = Keys::of(layout, |n| key(&db.tenant, &id, n));
        Ok(Self {
            id,
            input,
            db,
            layout,
            keys,
        })
    }
}

/// `GET /<kind>/{param}`: 200 with the item's view, or 404 with `not_found`. One GetItem (two at
/// once while the tenant is being re-sharded: [`crate::store::tenancy::layout`]), or none when the
/// container's read cache holds the item ([`crate::store::tenancy::read_cache`], off by default).
pub async fn get_by_id<V: Serialize>(
    app: &App,
    req: &Request,
    param: &str,
    key: impl Fn(&TenantId, &EntityId, u32) -> Key,
    view: impl Fn(Item) -> Result<V, ApiError>,
    not_found: &str,
) -> Result<Response<Body>, ApiError> {
    let ItemRequest {
        db, layout, keys, ..
    } = ItemRequest::read(app, req, param, |_| Ok(()), key).await?;
    let t = &db.tenant;
    let now = app.clock.now_millis();
    if let Some(item) = app.read_cache.get(t, &keys.write, now) {
        return Ok(json_response(StatusCode::OK, &view(item)?));
    }
    let item = layout::get(&db, layout, &keys)
        .await?
        .ok_or_else(|| ApiError::NotFound(not_found.to_owned()))?;
    app.read_cache.put(t, &keys.write, &item, now);
    Ok(json_response(StatusCode::OK, &view(item)?))
}

/// The attributes of a stored item that are no field of its view: its keys and bookkeeping.
const BOOKKEEPING: [&str; 7] = [PK, SK, GSI1, CATALOG, "kind", "tenantId", UPDATED_AT_MS];

/// An item as a route answers it when it has no view type of its own (a route `pooltable new route`
/// scaffolded): its attributes as JSON, without keys and bookkeeping.
pub fn stored_view(mut item: Item) -> Result<serde_json::Value, ApiError> {
    item.retain(|name, _| !BOOKKEEPING.contains(&name.as_str()));
    Ok(view_from_item(item)?)
}

/// Reads of an item that [`set_fields`] makes before its write is refused as a conflict (409).
const SET_ATTEMPTS: usize = 4;

/// `PUT /<kind>/{param}/…` `{field: value, …}`: sets the body's fields on the item, keeping its
/// other attributes; 200 with [`stored_view`], or 404 when there is no item. A consistent read of
/// the item wherever the layout has it ([`layout::locate`]), then its write through the layout
/// ([`layout::put_along`]: the new shard while the tenant is being re-sharded, the copy at the
/// other key deleted in the same transaction), on condition that nothing wrote it since the read
/// (its `updatedAtMs`); otherwise it reads again, up to [`SET_ATTEMPTS`] times, then 409. In a stable
/// layout: one consistent GetItem and one TransactWriteItems. A delete between the read and the
/// write is not seen: the item is written back.
pub async fn set_fields(
    app: &App,
    req: &Request,
    param: &str,
    key: impl Fn(&TenantId, &EntityId, u32) -> Key,
    not_found: &str,
) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| settable_fields(req, param);
    let ItemRequest {
        input: fields,
        db,
        layout,
        keys,
        ..
    } = ItemRequest::read(app, req, param, parse, key).await?;
    let t = &db.tenant;
    for _ in 0..SET_ATTEMPTS {
        let (_, mut item) = layout::locate(&db, layout, &keys)
            .await?
            .ok_or_else(|| ApiError::NotFound(not_found.to_owned()))?;
        let read_at = u64_attr(&item, UPDATED_AT_MS).unwrap_or(0);
        let now = app.clock.now_millis();
        item.retain(|name, _| name != PK && name != SK);
        item.extend(fields.clone());
        item.insert("updatedAt".into(), AttributeValue::S(rfc3339(now)));
        item.insert(UPDATED_AT_MS.into(), AttributeValue::N(now.to_string()));
        let written =
            layout::put_along(&db, layout, &keys, item.clone(), Vec::new(), Some(read_at)).await?;
        match written {
            layout::Put::Written { .. } => {
                app.read_cache.forget(t, &keys.write);
                return Ok(json_response(StatusCode::OK, &stored_view(item)?));
            }
            // Written since it was read: read it again.
            layout::Put::Superseded => continue,
            layout::Put::Refused { .. } => {
                return Err(ApiError::Internal(
                    "a write with nothing along was refused".into(),
                ))
            }
        }
    }
    Err(ApiError::Conflict(
        "The item changed while it was being written; retry.".into(),
    ))
}

/// The body of a [`set_fields`] request as attributes: 400 when it sets what the store keeps (keys,
/// bookkeeping, the id `param`, `updatedAt`) or what DynamoDB cannot store.
fn settable_fields(req: &Request, param: &str) -> Result<Item, ApiError> {
    let body: serde_json::Map<String, serde_json::Value> = json_body(req)?;
    if let Some(name) = body
        .keys()
        .find(|k| BOOKKEEPING.contains(&k.as_str()) || *k == param || *k == "updatedAt")
    {
        return Err(ApiError::bad_request(
            name,
            format!("{name} is kept by the store, not set by a request"),
        ));
    }
    serde_dynamo::to_item(&body)
        .map_err(|e| ApiError::bad_request("body", format!("not storable: {e}")))
}
