//! createSession: `POST /sessions` `{customerId, parentSessionId?, state?}` → 201 with the session.
//!
//! A root session is one conditional PutItem that never overwrites. A child session is a consistent
//! GetItem of the parent (so the child's `expiresAt` is capped at the parent's: a child never
//! outlives its parent), then one TransactWriteItems: the child item, plus an update of the parent
//! that is also its existence check (parent present, unexpired, same customer, under the child
//! limit) and counts the child.
//!
//! With an `Idempotency-Key` (`shared::service::idempotent`), a root session is one
//! TransactWriteItems (the session and the key's record) and a child's transaction carries the record
//! as a third action.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use shared::identity::clock::rfc3339;
use shared::identity::ids::SessionId;
use shared::identity::ids::TenantId;
use shared::identity::keys::{child_sk, customer_sk, session_pk};
use shared::service::http::{json_body, json_response};
use shared::service::idempotent::{self, Recorder};
use shared::store::client::query::{string_attr, u64_attr};
use shared::store::client::scoped::TenantDb;
use shared::store::client::transact::TransactError;
use shared::{ApiError, App};

use crate::model::{
    CreateSessionInput, Session, SessionItem, KIND_CHILD, KIND_SESSION, MAX_CHILDREN,
};
use crate::store::{self, ChildNotAdded};

pub const ROUTE: &str = "create-session";

pub async fn handle(app: &App, req: Request) -> Result<Response<Body>, ApiError> {
    let (input, db) = app
        .tenant_request(&req, json_body::<CreateSessionInput>)
        .await?;
    let t = &db.tenant;
    let now = app.clock.now_seconds();
    idempotent::run(&req, &db, t, ROUTE, now, |recorder| {
        create(app, &db, t, input, recorder)
    })
    .await
}

/// Creates the session; with a recorder, its answer is recorded in the same transaction.
async fn create(
    app: &App,
    db: &TenantDb,
    t: &TenantId,
    input: CreateSessionInput,
    recorder: Option<Recorder<'_>>,
) -> Result<Response<Body>, ApiError> {
    let now_ms = app.clock.now_millis();
    let now_s = now_ms / 1000;
    let id = SessionId::new_at(now_ms);
    let expires_at = now_s + app.settings.session_ttl_seconds;

    let mut item = SessionItem {
        pk: session_pk(t, &id),
        sk: customer_sk(t, &input.customer_id),
        kind: KIND_SESSION.into(),
        tenant_id: t.to_string(),
        session_id: id.to_string(),
        customer_id: input.customer_id.to_string(),
        parent_session_id: None,
        state: input.state.map(|s| s.0),
        last_login_time: rfc3339(now_ms),
        expires_at,
        child_count: Some(0),
    };

    match input.parent_session_id {
        None => {
            // A UUIDv7 collision is astronomically unlikely, and never an overwrite.
            if !store::put_root(db, &item, recorder.as_ref()).await? {
                return Err(ApiError::Conflict(
                    "A session with this id already exists.".into(),
                ));
            }
        }
        Some(parent) => {
            let parent_expires = store::live_parent_expiry(db, &parent, &input.customer_id, now_s)
                .await?
                .ok_or_else(|| {
                    ApiError::NotFound("The parent session does not exist or has expired.".into())
                })?;
            item.expires_at = item.expires_at.min(parent_expires);
            item.pk = session_pk(t, &parent);
            item.sk = child_sk(t, &id);
            item.kind = KIND_CHILD.into();
            item.parent_session_id = Some(parent.to_string());
            item.child_count = None;
            store::put_child(
                db,
                &item,
                &parent,
                &input.customer_id,
                now_s,
                recorder.as_ref(),
            )
            .await
            .map_err(|e| match e {
                ChildNotAdded::Refused(e) => child_failure(e, now_s),
                ChildNotAdded::Api(e) => e,
            })?;
        }
    }
    Ok(json_response(StatusCode::CREATED, &Session::from(item)))
}

/// Why a child's transaction did not commit. The parent's key includes the customer, so a parent of
/// another customer, like a missing one, is simply not found.
fn child_failure(err: TransactError, now_s: u64) -> ApiError {
    match err {
        TransactError::ConditionFailed { index: 1, item } => {
            let old = item.as_ref();
            let live = old.is_some_and(|i| u64_attr(i, "expiresAt").is_some_and(|e| e > now_s));
            if !live || old.and_then(|i| string_attr(i, "PK")).is_none() {
                return ApiError::NotFound(
                    "The parent session does not exist or has expired.".into(),
                );
            }
            ApiError::Conflict(format!(
                "The parent session already has {MAX_CHILDREN} child sessions."
            ))
        }
        TransactError::ConditionFailed { index: 0, .. } => {
            ApiError::Conflict("A session with this id already exists.".into())
        }
        other => other.into(),
    }
}
