//! The control plane's requests (SaaS Builder Toolkit events), each answered once.
//!
//! EventBridge delivers an event at least once, and a control plane may put the same request again;
//! the answer (a reply event, not a DynamoDB write) cannot commit with anything here. So a request is
//! claimed first, in the platform's partition (`TENANT#_platform#CONTROL#<request>`); its reply is
//! held in the claim before it is sent, and the claim is marked answered once it has been. A second
//! delivery finds it answered and does nothing; one that finds it claimed waits for its holder
//! ([`Claim::Busy`]) until the hold ends, then takes it over and sends the held reply, or acts
//! itself when the holder stopped before it had one. Entries expire after [`KEPT_SECONDS`].

use aws_sdk_dynamodb::types::AttributeValue;

use crate::identity::keys::{control_request_sk, control_requests_pk, PK, SK};
use crate::store::client::error::{written_unless_condition_failed, StoreError};
use crate::store::client::query::{string_attr, u64_attr};
use crate::store::client::scoped::TenantDb;

/// How long an entry is kept: a control plane's redelivery or retry comes within minutes.
pub const KEPT_SECONDS: u64 = 7 * 24 * 3600;

const CLAIMED_AT_MS: &str = "claimedAtMs";
const REPLY: &str = "reply";
const STATE: &str = "state";
const ANSWERED: &str = "answered";

/// What a delivery may do with its request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Its to answer: claimed at `claimed_at_ms`, with the reply an earlier holder held (none: act).
    Mine {
        claimed_at_ms: u64,
        held_reply: Option<String>,
        taken_over: bool,
    },
    /// Answered already: nothing to do.
    Answered,
    /// Another delivery holds it, for up to `hold_ms` from its claim.
    Busy,
}

/// Claims `request` at `now_ms` (`platform_db`: the platform partition's client); a claim older than
/// `hold_ms` whose request is unanswered is taken over.
pub async fn claim(
    platform_db: &TenantDb,
    request: &str,
    now_ms: u64,
    hold_ms: u64,
) -> Result<Claim, StoreError> {
    let put = platform_db
        .client
        .put_item()
        .table_name(&*platform_db.table)
        .item(PK, AttributeValue::S(control_requests_pk()))
        .item(SK, AttributeValue::S(control_request_sk(request)))
        .item("kind", AttributeValue::S("CONTROL_REQUEST".into()))
        .item(
            "tenantId",
            AttributeValue::S(platform_db.tenant.to_string()),
        )
        .item(STATE, AttributeValue::S("claimed".into()))
        .item(CLAIMED_AT_MS, AttributeValue::N(now_ms.to_string()))
        .item(
            "expiresAt",
            AttributeValue::N((now_ms / 1000 + KEPT_SECONDS).to_string()),
        )
        .condition_expression("attribute_not_exists(PK)")
        .send()
        .await;
    if written_unless_condition_failed(put)? {
        return Ok(Claim::Mine {
            claimed_at_ms: now_ms,
            held_reply: None,
            taken_over: false,
        });
    }
    let entry = platform_db
        .client
        .get_item()
        .table_name(&*platform_db.table)
        .key(PK, AttributeValue::S(control_requests_pk()))
        .key(SK, AttributeValue::S(control_request_sk(request)))
        .consistent_read(true)
        .send()
        .await
        .map_err(StoreError::from_sdk)?
        .item;
    let Some(entry) = entry else {
        // Expired and deleted between the two calls: a request this old is answered.
        return Ok(Claim::Answered);
    };
    if string_attr(&entry, STATE).as_deref() == Some(ANSWERED) {
        return Ok(Claim::Answered);
    }
    let held_since = u64_attr(&entry, CLAIMED_AT_MS).unwrap_or(0);
    if now_ms < held_since.saturating_add(hold_ms) {
        return Ok(Claim::Busy);
    }
    let take = platform_db
        .client
        .update_item()
        .table_name(&*platform_db.table)
        .key(PK, AttributeValue::S(control_requests_pk()))
        .key(SK, AttributeValue::S(control_request_sk(request)))
        .update_expression("SET #at = :now")
        .condition_expression("#at = :held AND #state <> :answered")
        .expression_attribute_names("#at", CLAIMED_AT_MS)
        .expression_attribute_names("#state", STATE)
        .expression_attribute_values(":now", AttributeValue::N(now_ms.to_string()))
        .expression_attribute_values(":held", AttributeValue::N(held_since.to_string()))
        .expression_attribute_values(":answered", AttributeValue::S(ANSWERED.into()))
        .send()
        .await;
    if !written_unless_condition_failed(take)? {
        return Ok(Claim::Busy);
    }
    Ok(Claim::Mine {
        claimed_at_ms: now_ms,
        held_reply: string_attr(&entry, REPLY),
        taken_over: true,
    })
}

/// Holds `reply` in `request`'s claim (made at `claimed_at_ms`) before it is sent, so that a
/// delivery taking the claim over sends the same reply. `false`: the claim was taken over.
pub async fn hold_reply(
    platform_db: &TenantDb,
    request: &str,
    claimed_at_ms: u64,
    reply: &str,
) -> Result<bool, StoreError> {
    let out = platform_db
        .client
        .update_item()
        .table_name(&*platform_db.table)
        .key(PK, AttributeValue::S(control_requests_pk()))
        .key(SK, AttributeValue::S(control_request_sk(request)))
        .update_expression("SET #reply = :reply")
        .condition_expression("#at = :mine")
        .expression_attribute_names("#reply", REPLY)
        .expression_attribute_names("#at", CLAIMED_AT_MS)
        .expression_attribute_values(":reply", AttributeValue::S(reply.to_owned()))
        .expression_attribute_values(":mine", AttributeValue::N(claimed_at_ms.to_string()))
        .send()
        .await;
    written_unless_condition_failed(out)
}

/// Marks `request` answered: no later delivery sends its reply again.
pub async fn mark_answered(platform_db: &TenantDb, request: &str) -> Result<(), StoreError> {
    platform_db
        .client
        .update_item()
        .table_name(&*platform_db.table)
        .key(PK, AttributeValue::S(control_requests_pk()))
        .key(SK, AttributeValue::S(control_request_sk(request)))
        .update_expression("SET #state = :answered")
        .condition_expression("attribute_exists(PK)")
        .expression_attribute_names("#state", STATE)
        .expression_attribute_values(":answered", AttributeValue::S(ANSWERED.into()))
        .send()
        .await
        .map_err(StoreError::from_sdk)?;
    Ok(())
}
