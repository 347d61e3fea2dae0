//! Whether a message of the batch is written: its signature, its age, its tenant (as it is now)
//! and its items, opened with the tenant's import key.

use aws_lambda_events::event::sqs::SqsMessage;
use shared::identity::ids::TenantId;
use shared::store::imports::{opening, sealing_key, Opening, StoredKey, RETENTION_SECONDS};
use shared::store::tenancy::tenants::TenantStatus;
use shared::{ApiError, App};

use crate::{
    open_items, verify, ImportMessage, MessageItem, SIGNATURE_ATTRIBUTE, TENANT_ATTRIBUTE,
};

/// Whether a message is written: only when its signature verifies, it is younger than its
/// markers, and its tenant is the one that sent it.
pub(super) enum Accepted {
    Yes(TenantId, ImportMessage, Vec<MessageItem>),
    /// Refused for good, with an alarm: deleted, and nothing written.
    Dropped,
    /// To be delivered again (and so, in the end, moved to the dead-letter queue).
    Again,
    /// Its tenant is being restored, or its key refuses (disabled, revoked): held back on the
    /// queue until the restore ends or the key is usable again, never counted as a delivery.
    Held(TenantId, ImportMessage),
}

pub(super) async fn accepted(app: &App, keys: &mut SealingKeys, message: &SqsMessage) -> Accepted {
    let message_id = message.message_id.as_deref().unwrap_or("-");
    let Some((tenant, raw)) = signed(app, message) else {
        // Never deleted at once: it may be signed with a key this container does not know yet (a
        // rotation that reached the producer first). Delivered again, it is written once a
        // consumer knows the key; otherwise it ends in the dead-letter queue, never written.
        tracing::error!(
            alarm = "forged_import_message",
            message_id,
            "an import message whose signature does not verify (forged, or a key this consumer does not know yet): not written, delivered again"
        );
        app.emit_event(
            &[("ForgedImportMessages", 1.0)],
            &[("messageId", message_id)],
        );
        return Accepted::Again;
    };
    let Ok(body) = serde_json::from_str::<ImportMessage>(raw) else {
        // Signed by us, yet unreadable (a format this version does not know): kept for a person.
        tracing::error!(tenant = %tenant, message_id, "an import message signed by POST /imports does not parse");
        return Accepted::Again;
    };
    // The same arithmetic as the markers' expiry (`issuedAt` seconds + retention), so a message is
    // never written in a second where its import's markers already count as expired.
    if app.clock.now_seconds() >= body.issued_at / 1000 + RETENTION_SECONDS {
        return dropped(app, &tenant, &body, EXPIRED);
    }
    // The message names the tenant record it was sent for (its createdAt). A cached record (or
    // absence) that differs may be stale, a tenant of this id offboarded and onboarded again within
    // the cache's 30 s: dropping is for good, so it is decided on a consistent read.
    let current = match app.directory.record(&tenant).await {
        Ok(Some(record)) if record.created_at == body.tenant_since => Ok(Some(record)),
        Ok(_) => app.directory.record_now(&tenant).await,
        Err(e) => Err(e),
    };
    match current {
        Ok(Some(record)) if record.created_at == body.tenant_since => {
            match record.status {
                TenantStatus::Restoring => Accepted::Held(tenant, body),
                // Offboarding is one way: the tenant's items are being deleted (and its keys
                // shredded), and no request of it is served, so its message is dropped as a
                // former tenant's rather than cycled to the dead-letter queue.
                TenantStatus::Offboarding => dropped(app, &tenant, &body, FORMER_TENANT),
                TenantStatus::Active | TenantStatus::Suspended => {
                    unsealed(app, keys, tenant, body).await
                }
            }
        }
        Ok(_) => dropped(app, &tenant, &body, FORMER_TENANT),
        Err(e) => {
            tracing::warn!(tenant = %tenant, error = %e, "the tenant record is unavailable; the message will be delivered again");
            Accepted::Again
        }
    }
}

/// Why a signed message is dropped for good: its alarm, its `reason` in the metric, and what the
/// log line says.
struct DropReason {
    alarm: &'static str,
    reason: &'static str,
    says: &'static str,
}

const EXPIRED: DropReason = DropReason {
    alarm: "expired_import_message",
    reason: "expired",
    says: "dropped an import message older than its markers (a replay)",
};
const FORMER_TENANT: DropReason = DropReason {
    alarm: "import_for_a_former_tenant",
    reason: "formerTenant",
    says:
        "dropped an import message of a tenant offboarded, or being offboarded, since it was sent",
};

/// Drops a signed message for good: an alarm line, and a count by reason (the
/// `DroppedImportMessages` metric).
fn dropped(app: &App, tenant: &TenantId, body: &ImportMessage, why: DropReason) -> Accepted {
    tracing::error!(
        alarm = why.alarm,
        tenant = %tenant,
        import_id = %body.import_id,
        "{}",
        why.says
    );
    app.emit_event(
        &[("DroppedImportMessages", 1.0)],
        &[("tenant_id", tenant.as_str()), ("reason", why.reason)],
    );
    Accepted::Dropped
}

/// The message's tenant and body, when its signature verifies.
fn signed<'a>(app: &App, message: &'a SqsMessage) -> Option<(TenantId, &'a str)> {
    let attribute = |name| {
        message
            .message_attributes
            .get(name)?
            .string_value
            .as_deref()
    };
    let tenant = TenantId::parse(attribute(TENANT_ATTRIBUTE)?).ok()?;
    let body = message.body.as_deref()?;
    verify(
        &*app.cursor_keys().ok()?,
        &tenant,
        body,
        attribute(SIGNATURE_ATTRIBUTE)?,
    )
    .then_some((tenant, body))
}

/// The message's items, opened with the tenant's import key: derived from the version of its data
/// key the message names, or its stored key. Only offboarding destroys those (crypto-shredding),
/// and an offboarding tenant's message never comes here: for a tenant that is not offboarding, no
/// key means this container's view is behind (a key made, or a version met, since it read it). The
/// view is let go and the message delivered again, never dropped. A key that does not open a
/// message it signed is kept for a person, like any signed message this version cannot read.
async fn unsealed(
    app: &App,
    keys: &mut SealingKeys,
    tenant: TenantId,
    body: ImportMessage,
) -> Accepted {
    let known = match keys.get(&tenant) {
        Some(known) => Ok(known.clone()),
        None => {
            let read = async {
                let db = app.db(&tenant).await?;
                let stored = sealing_key(&db, &tenant).await?;
                Ok::<_, ApiError>(TenantSealing {
                    key: db.key.clone(),
                    stored,
                })
            };
            let read = read.await;
            if let Ok(known) = &read {
                keys.insert(tenant.clone(), known.clone());
            }
            read
        }
    };
    let known = match known {
        Ok(known) => known,
        // The tenant's key refuses (asked again: a 403 may also be a suspension, whose messages go
        // on to the dead-letter queue): its lifecycle operations pause likewise. Held, not
        // delivered again: five deliveries would send it to the dead-letter queue, and its items
        // would fail for a key enabled again an hour later.
        Err(ApiError::Forbidden(_))
            if matches!(
                app.refuse_revoked(&tenant).await,
                Err(ApiError::Forbidden(_))
            ) =>
        {
            tracing::info!(tenant = %tenant, import_id = %body.import_id, "the tenant's key refuses: its import message is held back");
            return Accepted::Held(tenant, body);
        }
        Err(e) => {
            tracing::warn!(tenant = %tenant, error = %e, "the tenant's import key is unavailable; the message will be delivered again");
            return Accepted::Again;
        }
    };
    match opening(
        known.key.as_deref(),
        known.stored.as_ref(),
        body.key_version,
    ) {
        Opening::Key(key) => match open_items(&key, &tenant, &body.import_id, &body.sealed_items) {
            Some(items) => Accepted::Yes(tenant, body, items),
            None => {
                tracing::error!(tenant = %tenant, import_id = %body.import_id, "the tenant's import key does not open a message it signed");
                Accepted::Again
            }
        },
        Opening::Unopenable => {
            tracing::error!(tenant = %tenant, import_id = %body.import_id, "the tenant's retired import key does not open under its data key");
            Accepted::Again
        }
        Opening::Destroyed | Opening::NotYet => {
            app.meet_keys_again(std::slice::from_ref(&tenant));
            tracing::warn!(tenant = %tenant, import_id = %body.import_id, key_version = ?body.key_version, "an import message sealed under a key this container's view of the tenant does not hold yet; delivered again");
            Accepted::Again
        }
    }
}

/// A tenant's import keys as one batch reads them: its data key (every version this container
/// knows) and its stored import key.
#[derive(Clone)]
pub(super) struct TenantSealing {
    key: Option<std::sync::Arc<shared::isolation::vault::TenantKey>>,
    stored: Option<StoredKey>,
}

/// Each tenant's import keys, read once per batch (a consistent read: gone once offboarding
/// destroyed them).
pub(super) type SealingKeys = std::collections::HashMap<TenantId, TenantSealing>;
