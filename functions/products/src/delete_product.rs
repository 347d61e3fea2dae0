//! deleteProduct: `DELETE /products/{productId}` → 204 or 404. One transaction: the conditional
//! Delete and the product's tombstone, so an import accepted before the delete never brings it back.
//! A 404 writes the tombstone too (with a check that no copy exists): the delete of a product whose
//! import was accepted but has not landed yet wins over that import.

use lambda_http::{Body, Request, Response};
use shared::identity::keys::kind;
use shared::service::http::{no_content, path_entity_id};
use shared::store::imports::tombstone;
use shared::store::tenancy::layout::{self, Keys};
use shared::{ApiError, App};

use crate::product_key;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let id = path_entity_id(&req, "productId")?;
    let db = app.db(&caller.tenant).await?;
    let layout = app.directory.layout(&db).await?;
    let keys = Keys::of(layout, |n| product_key(&caller.tenant, &id, n));
    let gone = tombstone(
        &db,
        &caller.tenant,
        kind::PRODUCT,
        &id,
        app.clock.now_millis(),
    )?;
    let deleted = layout::delete_along(&db, layout, &keys, vec![gone]).await?;
    app.read_cache.forget(&caller.tenant, &keys.write);
    if !deleted {
        return Err(ApiError::NotFound("No such product.".into()));
    }
    Ok(no_content())
}
