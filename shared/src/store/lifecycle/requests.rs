//! The control plane's requests (SaaS Builder Toolkit events), each answered once.
//!
//! EventBridge delivers an event at least once, and a control plane may put the same request again;
//! the answer (a reply event, not a DynamoDB write) cannot commit with anything here. So a request is
//! claimed first, in the platform's partition (`identity::keys::control_request_sk`), naming its
//! tenant; its reply is held in the claim before it is sent, and the claim is marked answered once it
//! has been, with the event that asked. A redelivery of that event finds it answered and does
//! nothing; another event asking the same request (the control plane putting it again) gets the held
//! reply again, once. A delivery that finds the request claimed waits for its holder
//! ([`Claim::Busy`]) until the hold ends, then takes it over: it sends the held reply, or acts itself
//! when the holder stopped before it had one. Entries expire after [`KEPT_SECONDS`].
//!
//! An answered entry remembers the last [`REMEMBERED_EVENTS`] events that asked it (a list, trimmed
//! as it grows), so a control plane putting a request again and again never grows its entry toward
//! DynamoDB's 400 KB: a redelivery of an event older than those gets the held reply once more.
//!
//! A request refused for a reason that passes (the tenant is being moved, re-sharded or restored)
//! is not answered: it is deferred ([`defer`]), its event kept in the platform's partition under its
//! tenant and its claim released, and acted on again when the tenant's operation ends
//! ([`deferred_of`]).

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::keys::{control_request_sk, control_requests_pk, EXPIRES_AT, PK, SK};
use crate::store::client::error::{written_unless_condition_failed, StoreError};
use crate::store::client::expr::key;
use crate::store::client::query::{string_attr, u64_attr, Item};
use crate::store::client::scoped::TenantDb;

/// How long an entry is kept: a control plane's redelivery or retry comes within minutes, and an
/// event an operator sends again from the control plane's dead-letter queue within its 14 days'
/// retention (`ControlPlaneDeadLetterQueue`), so a day longer: a redriven event finds its entry
/// (answered: nothing is done again), where after 7 days an onboarding was refused as existing, or
/// an old suspension set again.
pub const KEPT_SECONDS: u64 = 15 * 24 * 3600;

const CLAIMED_AT_MS: &str = "claimedAtMs";
const FIRST_CLAIMED_AT_MS: &str = "firstClaimedAtMs";
const REPLY: &str = "reply";
const STATE: &str = "state";
const ANSWERED: &str = "answered";
const EVENTS: &str = "answeredEvents";
/// How many times the entry's events were changed: the condition of the next change.
const EVENTS_VERSION: &str = "answeredEventsVersion";
const REQUEST_TENANT: &str = "requestTenantId";
/// A deferred request's event, as it was delivered (JSON).
const EVENT: &str = "event";
/// When a deferred request was claimed before it was deferred (epoch ms).
const DEFERRED_AT_MS: &str = "deferredAtMs";
/// The sort-key segment of the deferred requests (`deferred#<tenant>#<request>`); no request's key
/// starts with it (a request's key starts with its kind).
const DEFERRED: &str = "deferred#";

/// The most events an answered request remembers, newest last.
pub const REMEMBERED_EVENTS: usize = 64;

/// One request, as an event asks it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The request's key: its kind and the control plane's id of it.
    pub key: &'a str,
    /// The event that asks it.
    pub event_id: &'a str,
    /// The tenant it names (as written in the event).
    pub tenant: &'a str,
}

/// What a delivery may do with its request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Its to answer: claimed at `claimed_at_ms` (first at `first_claimed_at_ms`), with the reply
    /// an earlier holder held (none: act).
    Mine {
        claimed_at_ms: u64,
        first_claimed_at_ms: u64,
        held_reply: Option<String>,
        taken_over: bool,
    },
    /// Answered already, for another event: its reply, to send again.
    AnsweredForAnother { reply: String },
    /// Answered already for this event: nothing to do.
    Duplicate,
    /// Another delivery holds it, for up to the hold from its claim.
    Busy,
    /// The request's key names another tenant than this event does.
    OtherTenant,
}

/// Claims `request` at `now_ms` (`platform_db`: the platform partition's client); a claim older than
/// `hold_ms` whose request is unanswered is taken over.
pub async fn claim(
    platform_db: &TenantDb,
    request: Request<'_>,
    now_ms: u64,
    hold_ms: u64,
) -> Result<Claim, StoreError> {
    let put = platform_db
        .client
        .put_item()
        .table_name(&*platform_db.table)
        .item(PK, AttributeValue::S(control_requests_pk()))
        .item(SK, AttributeValue::S(control_request_sk(request.key)))
        .item("kind", AttributeValue::S("CONTROL_REQUEST".into()))
        .item(
            "tenantId",
            AttributeValue::S(platform_db.tenant.to_string()),
        )
        .item(REQUEST_TENANT, AttributeValue::S(request.tenant.to_owned()))
        .item(STATE, AttributeValue::S("claimed".into()))
        .item(CLAIMED_AT_MS, AttributeValue::N(now_ms.to_string()))
        .item(FIRST_CLAIMED_AT_MS, AttributeValue::N(now_ms.to_string()))
        .item(
            EXPIRES_AT,
            AttributeValue::N((now_ms / 1000 + KEPT_SECONDS).to_string()),
        )
        .condition_expression("attribute_not_exists(PK)")
        .send()
        .await;
    if written_unless_condition_failed(put)? {
        return Ok(Claim::Mine {
            claimed_at_ms: now_ms,
            first_claimed_at_ms: now_ms,
            held_reply: None,
            taken_over: false,
        });
    }
    let Some(entry) = read(platform_db, request.key).await? else {
        // Expired and deleted between the two calls: a request this old was answered.
        return Ok(Claim::Duplicate);
    };
    if string_attr(&entry, REQUEST_TENANT).as_deref() != Some(request.tenant) {
        return Ok(Claim::OtherTenant);
    }
    if string_attr(&entry, STATE).as_deref() == Some(ANSWERED) {
        return answered_before(platform_db, request, &entry).await;
    }
    let held_since = u64_attr(&entry, CLAIMED_AT_MS).unwrap_or(0);
    if now_ms < held_since.saturating_add(hold_ms) {
        return Ok(Claim::Busy);
    }
    let condition = "#at = :held AND #state <> :answered";
    let take = claim_update(platform_db, request.key, condition, (":held", held_since))
        .update_expression("SET #at = :now")
        .expression_attribute_names("#state", STATE)
        .expression_attribute_values(":now", AttributeValue::N(now_ms.to_string()))
        .expression_attribute_values(":answered", AttributeValue::S(ANSWERED.into()))
        .send()
        .await;
    if !written_unless_condition_failed(take)? {
        return Ok(Claim::Busy);
    }
    Ok(Claim::Mine {
        claimed_at_ms: now_ms,
        first_claimed_at_ms: u64_attr(&entry, FIRST_CLAIMED_AT_MS).unwrap_or(held_since),
        held_reply: string_attr(&entry, REPLY),
        taken_over: true,
    })
}

/// Whether request `key` is claimed and not answered yet (a delivery is acting on it, or stopped
/// before its answer and will be taken over).
pub async fn is_open(platform_db: &TenantDb, key: &str) -> Result<bool, StoreError> {
    Ok(read(platform_db, key)
        .await?
        .is_some_and(|entry| string_attr(&entry, STATE).as_deref() != Some(ANSWERED)))
}

/// Whether request `key` was ever claimed for `tenant` (answered, deferred or being acted on): an
/// entry kept for [`KEPT_SECONDS`] after its claim.
pub async fn claimed_for(
    platform_db: &TenantDb,
    key: &str,
    tenant: &str,
) -> Result<bool, StoreError> {
    Ok(read(platform_db, key)
        .await?
        .is_some_and(|entry| string_attr(&entry, REQUEST_TENANT).as_deref() == Some(tenant)))
}

/// The reply held in request `key`'s entry, when it has one (answered, or being answered).
pub async fn held_reply(platform_db: &TenantDb, key: &str) -> Result<Option<String>, StoreError> {
    Ok(read(platform_db, key)
        .await?
        .and_then(|entry| string_attr(&entry, REPLY)))
}

/// An UpdateItem of the entry of `key`; what it changes, and on what condition, is the caller's.
fn entry_update(platform_db: &TenantDb, key: &str) -> UpdateItemFluentBuilder {
    platform_db.sdk_update_at(control_requests_pk(), control_request_sk(key))
}

/// An UpdateItem of the entry of `key` on `condition`, which compares the claim's time (`#at`) with
/// `claim`: a placeholder and the time it stands for.
fn claim_update(
    platform_db: &TenantDb,
    key: &str,
    condition: &str,
    (placeholder, claimed_at_ms): (&str, u64),
) -> UpdateItemFluentBuilder {
    entry_update(platform_db, key)
        .condition_expression(condition)
        .expression_attribute_names("#at", CLAIMED_AT_MS)
        .expression_attribute_values(placeholder, AttributeValue::N(claimed_at_ms.to_string()))
}

async fn read(platform_db: &TenantDb, key: &str) -> Result<Option<Item>, StoreError> {
    Ok(platform_db
        .sdk_get_at(control_requests_pk(), control_request_sk(key))
        .consistent_read(true)
        .send()
        .await
        .map_err(StoreError::from_sdk)?
        .item)
}

/// The events an entry remembers, oldest first (a list; an entry written before the list was
/// bounded holds a string set).
fn remembered(entry: &Item) -> Vec<String> {
    match entry.get(EVENTS) {
        Some(AttributeValue::L(events)) => events
            .iter()
            .filter_map(|e| e.as_s().ok().cloned())
            .collect(),
        Some(AttributeValue::Ss(events)) => events.clone(),
        _ => Vec::new(),
    }
}

/// An answered request asked again: by the same event (a redelivery: nothing), or by another, which
/// gets the reply once. The event joins the last [`REMEMBERED_EVENTS`] in one conditional write
/// (on the version read); a concurrent change is read again.
async fn answered_before(
    platform_db: &TenantDb,
    request: Request<'_>,
    entry: &Item,
) -> Result<Claim, StoreError> {
    let Some(reply) = string_attr(entry, REPLY) else {
        return Ok(Claim::Duplicate);
    };
    let mut entry = entry.clone();
    for _ in 0..3 {
        let mut events = remembered(&entry);
        if events.iter().any(|e| e == request.event_id) {
            return Ok(Claim::Duplicate);
        }
        events.push(request.event_id.to_owned());
        let keep_from = events.len().saturating_sub(REMEMBERED_EVENTS);
        let events = events[keep_from..]
            .iter()
            .map(|e| AttributeValue::S(e.clone()))
            .collect();
        let version = u64_attr(&entry, EVENTS_VERSION).unwrap_or(0);
        // (never an UpdateItem that would make the entry again, had it expired meanwhile)
        let condition = match version {
            0 => "attribute_exists(PK) AND attribute_not_exists(#version)",
            _ => "#version = :seen",
        };
        let mut update = entry_update(platform_db, request.key)
            .update_expression("SET #events = :events, #version = :next")
            .condition_expression(condition)
            .expression_attribute_names("#events", EVENTS)
            .expression_attribute_names("#version", EVENTS_VERSION)
            .expression_attribute_values(":events", AttributeValue::L(events))
            .expression_attribute_values(":next", AttributeValue::N((version + 1).to_string()));
        if version > 0 {
            update =
                update.expression_attribute_values(":seen", AttributeValue::N(version.to_string()));
        }
        if written_unless_condition_failed(update.send().await)? {
            return Ok(Claim::AnsweredForAnother { reply });
        }
        match read(platform_db, request.key).await? {
            Some(now) => entry = now,
            None => return Ok(Claim::Duplicate),
        }
    }
    // Three other deliveries changed it meanwhile: this one is retried.
    Ok(Claim::Busy)
}

/// Holds `reply` in the claim of `key` (made at `claimed_at_ms`) before it is sent, so that a
/// delivery taking the claim over sends the same reply. `false`: the claim was taken over.
pub async fn hold_reply(
    platform_db: &TenantDb,
    key: &str,
    claimed_at_ms: u64,
    reply: &str,
) -> Result<bool, StoreError> {
    let out = claim_update(platform_db, key, "#at = :mine", (":mine", claimed_at_ms))
        .update_expression("SET #reply = :reply")
        .expression_attribute_names("#reply", REPLY)
        .expression_attribute_values(":reply", AttributeValue::S(reply.to_owned()))
        .send()
        .await;
    written_unless_condition_failed(out)
}

/// Marks `request` answered, for its event: no redelivery of that event sends the reply again.
/// Its event starts the list of events remembered (a claim is answered once; a takeover's answer
/// is the same reply, and its event replaces the list).
pub async fn mark_answered(platform_db: &TenantDb, request: Request<'_>) -> Result<(), StoreError> {
    entry_update(platform_db, request.key)
        .update_expression(
            "SET #state = :answered, #events = :events, #version = if_not_exists(#version, :zero) + :one",
        )
        .condition_expression("attribute_exists(PK)")
        .expression_attribute_names("#state", STATE)
        .expression_attribute_names("#events", EVENTS)
        .expression_attribute_names("#version", EVENTS_VERSION)
        .expression_attribute_values(":answered", AttributeValue::S(ANSWERED.into()))
        .expression_attribute_values(
            ":events",
            AttributeValue::L(vec![AttributeValue::S(request.event_id.into())]),
        )
        .expression_attribute_values(":zero", AttributeValue::N("0".into()))
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(())
}

/// One request deferred until its tenant's operation ends: its key and its event (JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferred {
    pub key: String,
    pub event: String,
    /// When the request was claimed before it was deferred (epoch ms; 0 for one deferred by a
    /// version that did not note it): the order requests of one tenant arrived in.
    pub deferred_at_ms: u64,
}

/// Defers `request`, claimed at `claimed_at_ms` by this delivery: its `event` is kept under its
/// tenant ([`deferred_of`] finds it) and its claim released, so that acting on it again (when the
/// tenant's operation ends, or when the control plane puts it again) starts afresh. `false`: the
/// claim was taken over meanwhile, and its holder answers.
pub async fn defer(
    platform_db: &TenantDb,
    request: Request<'_>,
    claimed_at_ms: u64,
    event: &str,
) -> Result<bool, StoreError> {
    // An update, not a Put: a request deferred again (a redelivery, a retried invocation) keeps the
    // time it was first deferred, so requests deferred together are acted on in the order they came.
    let set = |name: &str, value: AttributeValue| (name.to_owned(), value);
    let fields = [
        set("kind", AttributeValue::S("CONTROL_DEFERRED".into())),
        set(
            "tenantId",
            AttributeValue::S(platform_db.tenant.to_string()),
        ),
        set(REQUEST_TENANT, AttributeValue::S(request.tenant.to_owned())),
        set(EVENT, AttributeValue::S(event.to_owned())),
        set(
            EXPIRES_AT,
            AttributeValue::N((claimed_at_ms / 1000 + KEPT_SECONDS).to_string()),
        ),
    ];
    let mut update = platform_db
        .sdk_update_at(
            control_requests_pk(),
            control_request_sk(&deferred_key(request.tenant, request.key)),
        )
        .expression_attribute_names("#first", DEFERRED_AT_MS)
        .expression_attribute_values(":first", AttributeValue::N(claimed_at_ms.to_string()));
    let mut sets = vec!["#first = if_not_exists(#first, :first)".to_owned()];
    for (i, (name, value)) in fields.into_iter().enumerate() {
        sets.push(format!("#f{i} = :f{i}"));
        update = update
            .expression_attribute_names(format!("#f{i}"), name)
            .expression_attribute_values(format!(":f{i}"), value);
    }
    update
        .update_expression(format!("SET {}", sets.join(", ")))
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    let release = platform_db
        .sdk_delete_at(control_requests_pk(), control_request_sk(request.key))
        .condition_expression("#at = :mine AND #state <> :answered")
        .expression_attribute_names("#at", CLAIMED_AT_MS)
        .expression_attribute_names("#state", STATE)
        .expression_attribute_values(":mine", AttributeValue::N(claimed_at_ms.to_string()))
        .expression_attribute_values(":answered", AttributeValue::S(ANSWERED.into()))
        .send()
        .await;
    written_unless_condition_failed(release)
}

/// The requests deferred for `tenant` (as its events named it), in the order they were deferred.
pub async fn deferred_of(
    platform_db: &TenantDb,
    tenant: &str,
) -> Result<Vec<Deferred>, StoreError> {
    let prefix = control_request_sk(&deferred_key(tenant, ""));
    let items = platform_db
        .query(
            key(PK)
                .equal(control_requests_pk())
                .and(key(SK).begins_with(prefix.as_str())),
        )
        .consistent()
        .all()
        .await?;
    let mut deferred: Vec<Deferred> = items
        .iter()
        .filter_map(|item| {
            let key = string_attr(item, SK)?.strip_prefix(&prefix)?.to_owned();
            Some(Deferred {
                key,
                event: string_attr(item, EVENT)?,
                deferred_at_ms: u64_attr(item, DEFERRED_AT_MS).unwrap_or(0),
            })
        })
        .collect();
    // A suspension and a resumption deferred behind one operation are acted on as they came.
    deferred.sort_by_key(|d| d.deferred_at_ms);
    Ok(deferred)
}

/// Drops `tenant`'s deferred request `key`, once it was acted on.
pub async fn undefer(platform_db: &TenantDb, tenant: &str, key: &str) -> Result<(), StoreError> {
    platform_db
        .sdk_delete_at(
            control_requests_pk(),
            control_request_sk(&deferred_key(tenant, key)),
        )
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(())
}

fn deferred_key(tenant: &str, key: &str) -> String {
    format!("{DEFERRED}{tenant}#{key}")
}
