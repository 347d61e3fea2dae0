//! putProduct: `PUT /products/{productId}` with a JSON object (at most 64 KB) → 201 created or 200
//! replaced. One PutItem on the product's computed shard (while the tenant is re-sharded, see
//! `shared::store::tenancy::layout`).

use lambda_http::{Body, Request, Response};
use shared::identity::clock::rfc3339;
use shared::service::http::{json_body, path_entity_id, put_response};
use shared::store::tenancy::layout::Put;
use shared::{ApiError, App};

use crate::{store_product, ProductView, ProductWrite};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let parse = |req: &Request| {
        let id = path_entity_id(req, "productId")?;
        let document: serde_json::Value = json_body(req)?;
        crate::check_product(&document, "document")?;
        Ok((id, document))
    };
    let ((id, document), db) = app.tenant_request(&req, parse).await?;
    let layout = app.directory.layout(&db).await?;
    let now_ms = app.clock.now_millis();
    let write = ProductWrite::now(&id, &document, now_ms);
    let (keys, put) = store_product(&db, layout, write).await?;
    app.read_cache.forget(&db.tenant, &keys.write);
    let replaced = matches!(
        put,
        Put::Written {
            replaced: Some(true)
        }
    );
    let view = ProductView {
        product_id: id.to_string(),
        document,
        updated_at: rfc3339(now_ms),
    };
    Ok(put_response(replaced, &view))
}
