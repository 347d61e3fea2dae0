//! putProduct: `PUT /products/{productId}` with a JSON object (at most 64 KB) → 201 created or 200
//! replaced. One PutItem on the product's computed shard (while the tenant is re-sharded, see
//! `shared::store::layout`).

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::{Body, Request, Response};
use shared::identity::clock::rfc3339;
use shared::service::http::{json_body, path_entity_id, put_response};
use shared::store::layout::{self, Keys};
use shared::{ApiError, App};

use crate::{product_key, ProductView};

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let id = path_entity_id(&req, "productId")?;
    let document: serde_json::Value = json_body(&req)?;
    if !document.is_object() {
        return Err(ApiError::BadRequest {
            detail: "The product document must be a JSON object.".into(),
            field: None,
        });
    }
    crate::check_document(&document, "document", 0)?;
    let db = app.db(&caller.tenant).await?;
    let layout = app.directory.layout(&db).await?;
    let updated_at = rfc3339(app.clock.now_millis());
    let doc_av = serde_dynamo::to_attribute_value(&document)
        .map_err(|e| ApiError::Internal(format!("convert document: {e}")))?;
    let keys = Keys::of(layout, |n| product_key(&caller.tenant, &id, n));
    let fields = shared::store::query::Item::from([
        ("kind".to_owned(), AttributeValue::S("PRODUCT".into())),
        (
            "tenantId".to_owned(),
            AttributeValue::S(caller.tenant.to_string()),
        ),
        ("productId".to_owned(), AttributeValue::S(id.to_string())),
        ("document".to_owned(), doc_av),
        (
            "updatedAt".to_owned(),
            AttributeValue::S(updated_at.clone()),
        ),
    ]);
    let replaced = layout::put(&db, layout, &keys, fields).await?;
    app.read_cache.forget(&caller.tenant, &keys.write);
    let view = ProductView {
        product_id: id.to_string(),
        document,
        updated_at,
    };
    Ok(put_response(replaced, &view))
}
