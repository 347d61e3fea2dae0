//! deleteProduct: `DELETE /products/{productId}` → 204 or 404. One transaction: the conditional
//! Delete and the product's tombstone, so an import accepted before the delete never brings it back.
//! A 404 writes the tombstone too (with a check that no copy exists): the delete of a product whose
//! import was accepted but has not landed yet wins over that import.

use lambda_http::{Body, Request, Response};
use shared::identity::keys::kind;
use shared::service::http::no_content;
use shared::service::sharded::ItemRequest;
use shared::store::imports::Tombstone;
use shared::store::tenancy::layout;
use shared::{ApiError, App};

use crate::product_key;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let product = ItemRequest::read(app, &req, "productId", |_| Ok(()), product_key).await?;
    let (db, t, keys) = (&product.db, &product.db.tenant, &product.keys);
    let gone = Tombstone::of(db, kind::PRODUCT, &product.id).put(app.clock.now_millis())?;
    let deleted = layout::delete_along(db, product.layout, keys, vec![gone]).await?;
    app.read_cache.forget(t, &keys.write);
    if !deleted {
        return Err(ApiError::NotFound("No such product.".into()));
    }
    Ok(no_content())
}
