//! The one idempotency layer: `Idempotency-Key` on the routes that create something (create-session,
//! create-order, create-transfer-code, redeem-transfer-code, onboard-tenant).
//!
//! - No header: the route runs as it always does.
//! - A header that is not 1–128 characters of `[A-Za-z0-9_-]`, or sent more than once: 400
//!   (`Idempotency-Key`).
//! - A live record for the key, made by the same request (method, route, path parameters, body):
//!   its status, body and documented headers (`Location`) are answered again, and nothing runs. Made by a different request: 422.
//!   A request of a user (a `userId` path parameter, or the recorded answer's) erased since, or
//!   being erased, is answered 404, never its recorded answer: that repeats the erased user's data (an order, a
//!   transfer code, a redeemed code's user).
//! - Otherwise the route runs, and writes the record (its answer) as the last action of the same
//!   transaction as its effect. Of concurrent duplicates exactly one commits; the others' records
//!   fail their condition, and they answer what the winner recorded.

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Request, RequestExt, Response};

use crate::identity::ids::{EntityId, IdempotencyKey, TenantId};
use crate::service::error::ApiError;
use crate::store::client::scoped::TenantDb;
use crate::store::erasures::user_present;
use crate::store::idempotency::{fingerprint, record_key, Answer, Idempotency, Recorded};

pub const HEADER: &str = "Idempotency-Key";

/// The request's `Idempotency-Key`, if it sent one (400 when it is malformed, or sent twice).
pub fn key_of(req: &Request) -> Result<Option<IdempotencyKey>, ApiError> {
    let mut values = req.headers().get_all(HEADER).iter();
    let Some(raw) = values.next() else {
        return Ok(None);
    };
    // A REST API passes a repeated header as two values, an HTTP API as one joined with commas:
    // either way it is refused the same, never its first key taken as if sent alone.
    if values.next().is_some() || raw.as_bytes().contains(&b',') {
        return Err(ApiError::bad_request(
            HEADER,
            "Idempotency-Key must be sent once",
        ));
    }
    let raw = raw.to_str().map_err(|_| {
        ApiError::bad_request(
            HEADER,
            "Idempotency-Key must be 1 to 128 of A-Z a-z 0-9 _ -",
        )
    })?;
    IdempotencyKey::parse(raw)
        .map(Some)
        .map_err(|e| ApiError::bad_request(HEADER, format!("Idempotency-Key {e}")))
}

/// What a keyed route hands its effect: the key's record, to add as its transaction's last action.
pub struct Recorder<'a>(Idempotency<'a>);

impl Recorder<'_> {
    /// The transaction action recording that the route answers `status` with `body` (JSON).
    pub fn record(
        &self,
        status: StatusCode,
        body: &impl serde::Serialize,
    ) -> Result<aws_sdk_dynamodb::types::TransactWriteItem, ApiError> {
        self.record_with_headers(status, body, &[])
    }

    /// [`Recorder::record`], with the headers the route's contract documents for the answer
    /// (`Location`): a replay carries them too.
    pub fn record_with_headers(
        &self,
        status: StatusCode,
        body: &impl serde::Serialize,
        headers: &[(header::HeaderName, &str)],
    ) -> Result<aws_sdk_dynamodb::types::TransactWriteItem, ApiError> {
        let body = serde_json::to_string(body)
            .map_err(|e| ApiError::Internal(format!("serialize answer: {e}")))?;
        Ok(self.0.record(&Answer {
            status: status.as_u16(),
            body,
            headers: headers
                .iter()
                .map(|(name, value)| (name.as_str().to_owned(), (*value).to_owned()))
                .collect(),
        })?)
    }

    /// Whether an answer is recorded for the key now: a concurrent duplicate committed its effect
    /// and record first. The effect then fails (any error), and the layer answers that record, as
    /// for a duplicate whose record lost.
    pub async fn answered_meanwhile(&self) -> Result<bool, ApiError> {
        Ok(!matches!(self.0.recorded().await?, Recorded::Nothing))
    }
}

/// Puts `item` where no item holds its key: `Ok(false)` when another item does. Without a recorder,
/// one conditional PutItem that recognises its own retried write; with one, a TransactWriteItems of
/// the same Put and the key's record (answering `status` with `body`).
pub async fn put_new(
    db: &TenantDb,
    item: crate::store::client::query::Item,
    recorder: Option<&Recorder<'_>>,
    status: StatusCode,
    body: &impl serde::Serialize,
) -> Result<bool, ApiError> {
    let Some(recorder) = recorder else {
        return Ok(crate::store::client::query::put_if_absent(db, item).await?);
    };
    let put = db
        .put_item(item)
        .when(crate::store::client::expr::absent())
        .action()?;
    let record = recorder.record(status, body)?;
    match db.transact_items(vec![put, record]).await {
        Ok(()) => Ok(true),
        Err(e) if e.failed_at(0) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// [`replay`], unless the request or its answer names a user (`userId`: a path parameter, or the
/// answer's own, as a redeemed transfer code's) that is no longer there or is being erased (its
/// profile gone, or fenced): 404, as the route answers then. An erased user's recorded answers stay
/// until they expire (they are not found from the user), sealed under a keyed tenant's key, and are
/// never answered again.
async fn replay_unless_erased(
    db: &TenantDb,
    path: &[(&str, &str)],
    answer: Answer,
) -> Result<Response<Body>, ApiError> {
    if let Some(user) = user_named(path, &answer) {
        if !user_present(db, &user).await? {
            return Err(ApiError::NotFound("No such user.".into()));
        }
    }
    replay(answer)
}

/// The user a keyed request names in its path (`userId`), else the one its recorded answer names
/// (a top-level `userId` of its JSON body).
fn user_named(path: &[(&str, &str)], answer: &Answer) -> Option<EntityId> {
    let id = match path.iter().find(|(name, _)| *name == "userId") {
        Some((_, id)) => (*id).to_owned(),
        None => serde_json::from_str::<serde_json::Value>(&answer.body)
            .ok()?
            .get("userId")?
            .as_str()?
            .to_owned(),
    };
    EntityId::parse(&id).ok()
}

fn replay(answer: Answer) -> Result<Response<Body>, ApiError> {
    let mut response = Response::builder()
        .status(answer.status)
        .header(header::CONTENT_TYPE, "application/json")
        .header("Idempotent-Replayed", "true");
    for (name, value) in &answer.headers {
        response = response.header(name.as_str(), value.as_str());
    }
    response
        .body(Body::Text(answer.body))
        .map_err(|e| ApiError::Internal(format!("build replay: {e}")))
}

fn reused() -> ApiError {
    ApiError::Unprocessable(
        "This Idempotency-Key was used for a different request in the last 24 hours.".into(),
    )
}

/// Runs `effect` under `req`'s `Idempotency-Key` (if any), for `tenant`'s `route`. `db` is the
/// client the effect writes with (the record lives under its tenant's prefix). `effect` gets a
/// [`Recorder`] when a key was sent, and must then add `recorder.record(...)` as the last action of
/// the transaction that makes its effect.
pub async fn run<'a, F, Fut>(
    req: &Request,
    db: &'a TenantDb,
    tenant: &TenantId,
    route: &str,
    now_seconds: u64,
    effect: F,
) -> Result<Response<Body>, ApiError>
where
    F: FnOnce(Option<Recorder<'a>>) -> Fut,
    Fut: std::future::Future<Output = Result<Response<Body>, ApiError>>,
{
    let Some(key) = key_of(req)? else {
        return effect(None).await;
    };
    let path: Vec<(String, String)> = req
        .path_parameters_ref()
        .map(|p| {
            let mut all: Vec<(String, String)> = p
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            all.sort();
            all
        })
        .unwrap_or_default();
    let path: Vec<(&str, &str)> = path.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let body: &[u8] = match req.body() {
        Body::Text(t) => t.as_bytes(),
        Body::Binary(b) => b,
        _ => b"",
    };
    let idempotency = Idempotency {
        db,
        pk: record_key(tenant, route, &key),
        fingerprint: fingerprint(req.method().as_str(), route, &path, body),
        now_seconds,
    };
    match idempotency.recorded().await? {
        Recorded::Same(answer) => return replay_unless_erased(db, &path, answer).await,
        Recorded::Different => return Err(reused()),
        Recorded::Nothing => {}
    }
    let check = Idempotency {
        db,
        pk: idempotency.pk.clone(),
        fingerprint: idempotency.fingerprint.clone(),
        now_seconds,
    };
    match effect(Some(Recorder(idempotency))).await {
        Ok(response) => Ok(response),
        // It failed: perhaps because a concurrent duplicate committed first, and our record lost.
        Err(err) => match check.recorded().await? {
            Recorded::Same(answer) => replay_unless_erased(db, &path, answer).await,
            Recorded::Different => Err(reused()),
            Recorded::Nothing => Err(err),
        },
    }
}
