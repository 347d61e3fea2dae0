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

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::keys::{control_request_sk, control_requests_pk, EXPIRES_AT, PK, SK};
use crate::store::client::error::{written_unless_condition_failed, StoreError};
use crate::store::client::query::{string_attr, u64_attr, Item};
use crate::store::client::scoped::TenantDb;

/// How long an entry is kept: a control plane's redelivery or retry comes within minutes.
pub const KEPT_SECONDS: u64 = 7 * 24 * 3600;

const CLAIMED_AT_MS: &str = "claimedAtMs";
const FIRST_CLAIMED_AT_MS: &str = "firstClaimedAtMs";
const REPLY: &str = "reply";
const STATE: &str = "state";
const ANSWERED: &str = "answered";
const EVENTS: &str = "answeredEvents";
const REQUEST_TENANT: &str = "requestTenantId";

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

/// An UpdateItem of the entry of `key`; what it changes, and on what condition, is the caller's.
fn entry_update(platform_db: &TenantDb, key: &str) -> UpdateItemFluentBuilder {
    platform_db.update_at(control_requests_pk(), control_request_sk(key))
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

/// An UpdateItem of `request`'s entry that adds its event to the events answered
/// (`ADD #events :event` in the caller's expression).
fn adding_event(platform_db: &TenantDb, request: Request<'_>) -> UpdateItemFluentBuilder {
    entry_update(platform_db, request.key)
        .expression_attribute_names("#events", EVENTS)
        .expression_attribute_values(":event", AttributeValue::Ss(vec![request.event_id.into()]))
}

async fn read(platform_db: &TenantDb, key: &str) -> Result<Option<Item>, StoreError> {
    Ok(platform_db
        .get_at(control_requests_pk(), control_request_sk(key))
        .consistent_read(true)
        .send()
        .await
        .map_err(StoreError::from_sdk)?
        .item)
}

/// An answered request asked again: by the same event (a redelivery: nothing), or by another, which
/// gets the reply once (the event is recorded with the answer's condition).
async fn answered_before(
    platform_db: &TenantDb,
    request: Request<'_>,
    entry: &Item,
) -> Result<Claim, StoreError> {
    let Some(reply) = string_attr(entry, REPLY) else {
        return Ok(Claim::Duplicate);
    };
    let out = adding_event(platform_db, request)
        .update_expression("ADD #events :event")
        .condition_expression("NOT contains(#events, :id)")
        .expression_attribute_values(":id", AttributeValue::S(request.event_id.into()))
        .send()
        .await;
    Ok(match written_unless_condition_failed(out)? {
        true => Claim::AnsweredForAnother { reply },
        false => Claim::Duplicate,
    })
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
pub async fn mark_answered(platform_db: &TenantDb, request: Request<'_>) -> Result<(), StoreError> {
    adding_event(platform_db, request)
        .update_expression("SET #state = :answered ADD #events :event")
        .condition_expression("attribute_exists(PK)")
        .expression_attribute_names("#state", STATE)
        .expression_attribute_values(":answered", AttributeValue::S(ANSWERED.into()))
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(())
}
