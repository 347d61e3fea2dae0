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
#[serde_with::skip_serializing_none]
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
    #[serde(default)]
    pub parent_session_id: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    pub last_login_time: String,
    /// Epoch seconds; the TTL attribute.
    pub expires_at: u64,
    /// Root sessions only: how many children exist (bounded by [`MAX_CHILDREN`]).
    #[serde(default)]
    pub child_count: Option<u32>,
}

/// A session as the API returns it.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub session_id: String,
    pub customer_id: String,
    pub parent_session_id: Option<String>,
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
