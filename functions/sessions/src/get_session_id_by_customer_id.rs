//! getSessionIdByCustomerId: `GET /customers/{customerId}/sessions/{sessionId}` → 200 or 404.
//!
//! One Query on GSI1 with both keys: partition = the customer (`SK`), sort = the session (`PK`).
//! It answers "does this customer own this live session?".

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::identity::keys::{customer_sk, session_pk, GSI1};
use shared::service::http::{json_response, path_entity_id, path_session_id};
use shared::store::client::query::first_live;
use shared::{ApiError, App};

use crate::model::session_from_item;

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = app.caller(&req)?;
    let customer = path_entity_id(&req, "customerId")?;
    let id = path_session_id(&req, "sessionId")?;
    let db = app.db(&caller.tenant).await?;
    let t = &caller.tenant;
    let query = db
        .query()
        .index_name(GSI1)
        .key_condition_expression("SK = :customer AND PK = :session")
        .expression_attribute_values(":customer", AttributeValue::S(customer_sk(t, &customer)))
        .expression_attribute_values(":session", AttributeValue::S(session_pk(t, &id)));
    let item = first_live(query, app.clock.now_seconds())
        .await?
        .ok_or_else(|| ApiError::NotFound("No such session for this customer.".into()))?;
    Ok(json_response(StatusCode::OK, &session_from_item(item)?))
}
