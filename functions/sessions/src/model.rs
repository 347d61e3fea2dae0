//! Session items as stored, and sessions as the API returns them.

use serde::{Deserialize, Serialize};
use shared::identity::clock::rfc3339;
use shared::identity::ids::{EntityId, SessionId};
use shared::store::client::query::Item;

/// A child is created inside its parent's transaction, which holds at most 100 items; with the root
/// that leaves 99, so expiring a session is always one transaction.
pub const MAX_CHILDREN: u32 = 99;

pub const KIND_SESSION: &str = shared::identity::entities::SESSION.stored_as;
pub const KIND_CHILD: &str = shared::identity::entities::CHILD_SESSION.stored_as;

/// The stored form of a root or child session. `PK`/`SK` follow `shared::identity::keys`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    pub kind: String,
    pub tenant_id: String,
    pub session_id: String,
    pub customer_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    pub last_login_time: String,
    /// Epoch seconds; the TTL attribute.
    pub expires_at: u64,
    /// Root sessions only: how many children exist (bounded by [`MAX_CHILDREN`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_count: Option<u32>,
}

/// A session as the API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub session_id: String,
    pub customer_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    pub last_login_time: String,
    pub expires_at: String,
}

impl From<SessionItem> for Session {
    fn from(i: SessionItem) -> Self {
        Self {
            session_id: i.session_id,
            customer_id: i.customer_id,
            parent_session_id: i.parent_session_id,
            state: i.state,
            last_login_time: i.last_login_time,
            expires_at: rfc3339(i.expires_at * 1000),
        }
    }
}

/// Converts a stored item; an item that does not parse is a data error, not the caller's.
pub fn session_from_item(item: Item) -> Result<Session, shared::ApiError> {
    serde_dynamo::from_item::<_, SessionItem>(item)
        .map(Session::from)
        .map_err(|e| shared::ApiError::Internal(format!("stored session does not parse: {e}")))
}

/// Request body of `POST /sessions`. Unknown fields are refused, so a typo is not silently dropped.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateSessionInput {
    pub customer_id: EntityId,
    #[serde(default)]
    pub parent_session_id: Option<SessionId>,
    #[serde(default)]
    pub state: Option<SessionState>,
}

/// Free-form session state, at most 4 KB.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct SessionState(pub String);

impl<'de> Deserialize<'de> for SessionState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.len() > 4096 {
            return Err(serde::de::Error::custom("state must be at most 4096 bytes"));
        }
        Ok(Self(s))
    }
}

/// A customer's sessions on GSI1 (partition = the customer), newest first: session ids are UUIDv7
/// from the clock, so GSI1's sort key (the session's `PK`) orders them by time.
pub fn customer_sessions_query(
    db: &shared::store::client::scoped::TenantDb,
    t: &shared::identity::ids::TenantId,
    customer: &EntityId,
) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
    db.query()
        .index_name(shared::identity::keys::GSI1)
        .key_condition_expression("SK = :customer")
        .expression_attribute_values(
            ":customer",
            aws_sdk_dynamodb::types::AttributeValue::S(shared::identity::keys::customer_sk(
                t, customer,
            )),
        )
        .scan_index_forward(false)
}

/// 200 with `{items, nextCursor}` for a page of sessions of `route`.
pub fn session_page_response(
    keys: &shared::identity::cursor::CursorKeys,
    t: &shared::identity::ids::TenantId,
    route: &str,
    page: shared::store::client::query::Page,
) -> Result<lambda_http::Response<lambda_http::Body>, shared::ApiError> {
    let next_cursor = page
        .next
        .map(|k| shared::identity::cursor::encode(keys, t, route, &k));
    let cursor = shared::service::http::PageCursor {
        keys,
        tenant: t,
        route,
    };
    shared::service::http::page_response(page.items, next_cursor, session_from_item, cursor)
}

/// A session's root item: `PK` = the session, `SK` begins with the tenant's customer prefix (the
/// root's `SK` holds its customer, so it cannot be a GetItem).
pub fn root_session_query(
    db: &shared::store::client::scoped::TenantDb,
    t: &shared::identity::ids::TenantId,
    session: &SessionId,
) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
    use aws_sdk_dynamodb::types::AttributeValue::S;
    use shared::identity::keys::{customer_sk_prefix, session_pk};
    db.query()
        .key_condition_expression("PK = :pk AND begins_with(SK, :root)")
        .expression_attribute_values(":pk", S(session_pk(t, session)))
        .expression_attribute_values(":root", S(customer_sk_prefix(t)))
}
